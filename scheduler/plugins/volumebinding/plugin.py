"""VolumeBinding: place pods where their PersistentVolumeClaims can be (or are) bound.

kube-scheduler's VolumeBinding (``pkg/scheduler/framework/plugins/volumebinding``):

* PreFilter reads the pod's claims (``persistentVolumeClaim.claimName``, and
  ``<pod>-<volume>`` for generic ephemeral volumes). A missing, lost or
  terminating claim makes the pod unresolvable; so does a claim that is not
  bound while its StorageClass binds ``Immediate`` ("pod has unbound immediate
  PersistentVolumeClaims": the PV controller binds those, not the scheduler).
  Pods without claims skip the plugin.
* Filter, per node: a bound claim's PV must allow the node by its node
  affinity; an unbound ``WaitForFirstConsumer`` claim needs an available PV of
  its class that fits (size, access modes, volume mode, selector, node
  affinity; the smallest wins) or a class that can provision there (a
  provisioner, and ``allowedTopologies`` admitting the node) with room for it:
  when the class's provisioner is a CSIDriver with ``storageCapacity: true``,
  a CSIStorageCapacity of the class whose ``nodeTopology`` selects the node
  must offer at least the claim's request (its ``maximumVolumeSize``, else its
  ``capacity``; ``hasEnoughCapacity``), else "did not have enough free
  storage". A claim already annotated with ``volume.kubernetes.io/selected-node``
  only fits that node.
* Score (StorageCapacityScoring, on by default in v1.37): how much of the
  storage the claims would take on the node, through the ``shape`` arg (by
  default 0 % scores 100, 100 % scores 0): the PVs matched to the claims
  (requests over their capacity, per class), else the CSIStorageCapacity found
  with room for each claim to provision; the mean over the classes.
* Reserve records the choice for the node and "assumes" it, so that the next
  cycles see the PV as taken and the claim as headed for that node before the
  informers catch up; Unreserve forgets it.
* PreBind (binding thread) writes the choice: the PV's ``claimRef`` for a
  static match, the ``selected-node`` annotation for provisioning; then waits
  until every claim is bound (``bindTimeoutSeconds``, default 600).

Not implemented: in-tree to CSI translation of a PV's topology.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from scheduler.config.pluginargs import VolumeBindingArgs
from scheduler.core.framework import SKIP, Code, CycleState, Handle, Snapshot, Status, error, unresolvable
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.logs import V, kv
from scheduler.plugins.nodeselector import NodeSelector
from scheduler.plugins.volumebinding.api import bind_pod_volumes, store_reader
from scheduler.plugins.volumebinding.volumes import (
    ANN_SELECTED_NODE,
    WAIT_FOR_FIRST_CONSUMER,
    Obj,
    annotations_of,
    bind_volume_to_claim,
    can_provision,
    capacity_bytes,
    capacity_score,
    claim_class,
    enough_capacity,
    find_matching_volume,
    fully_bound,
    key,
    meta,
    node_affinity,
    quantity_bytes,
    requested_bytes,
    spec,
    volume_class,
    with_selected_node,
)

logger = logging.getLogger(__name__)

NAME = "VolumeBinding"
ERR_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
ERR_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"

_KEY = NAME
_CLAIMS_MEMO = NAME + "/claims"


class PodVolumes:
    """What binding the pod's unbound claims on one node takes."""

    __slots__ = ("static", "dynamic", "capacities")

    def __init__(
        self,
        static: list[tuple[Obj, Obj, bool]],
        dynamic: list[Obj],
        capacities: list[Obj | None] | None = None,
    ) -> None:
        self.static = static
        """(PV, claim, whether the PV must be written) for each claim matched to an existing PV."""
        self.dynamic = dynamic
        """The claims to provision on the node."""
        self.capacities = capacities or [None] * len(dynamic)
        """For each claim to provision, the CSIStorageCapacity found with room for it (None:
        its class asks for no capacity check)."""


class _State:
    __slots__ = (
        "bound",
        "bound_pvs",
        "unbound",
        "pvs_by_class",
        "classes",
        "capacities",
        "by_node",
        "affinities",
        "chosen",
        "node_name",
        "node_labels",
        "all_bound",
    )

    def __init__(
        self,
        bound: list[Obj],
        bound_pvs: dict[str, Obj | None],
        unbound: list[Obj],
        pvs_by_class: dict[str, list[Obj]],
        classes: dict[str, Obj],
        capacities: dict[str, list[Obj]] | None = None,
    ) -> None:
        self.bound = bound
        self.bound_pvs = bound_pvs
        """claim key -> its PV (None: the PV does not exist)."""
        self.unbound = unbound
        """Unbound WaitForFirstConsumer claims, smallest request first."""
        self.pvs_by_class = pvs_by_class
        self.classes = classes
        self.capacities = capacities or {}
        """Class name -> its CSIStorageCapacity objects, for the classes whose provisioner
        asks for capacity checks (a class not here provisions without one)."""
        self.by_node: dict[str, PodVolumes] = {}
        self.affinities: dict[str, NodeSelector | None] = {}
        self.chosen: PodVolumes | None = None
        self.node_name = ""
        self.node_labels: dict[str, str] = {}
        self.all_bound = not unbound

    def fits(self, pv: Mapping[str, Any], labels: Mapping[str, str], node_name: str) -> bool:
        """The PV's node affinity admits the node (compiled once per cycle)."""
        name = meta(pv).get("name", "")
        if name in self.affinities:
            selector = self.affinities[name]
        else:
            selector = self.affinities[name] = node_affinity(pv)
        return selector is None or selector.matches(labels, node_name)


def pod_claims(pod: PodInfo) -> tuple[tuple[str, bool], ...]:
    """The pod's claim names, each with whether it comes from a generic ephemeral volume."""
    claims = pod.memo.get(_CLAIMS_MEMO)
    if claims is None:
        out: dict[str, bool] = {}
        for v in pod.spec.get("volumes") or ():
            if v.get("persistentVolumeClaim") is not None:
                out.setdefault(v["persistentVolumeClaim"].get("claimName") or "", False)
            elif v.get("ephemeral") is not None:
                out.setdefault(f"{pod.name}-{v.get('name', '')}", True)  # ephemeral.VolumeClaimName
        claims = pod.memo[_CLAIMS_MEMO] = tuple(out.items())
    return claims


def _controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    return any(o.get("controller") and o.get("uid") == uid for o in meta(obj).get("ownerReferences") or ())


def _rv(obj: Mapping[str, Any] | None) -> str:
    return meta(obj or {}).get("resourceVersion") or ""


class VolumeBinding:
    name = NAME
    poll_interval = 1.0
    """Seconds between two checks of the claims' binding in PreBind (kube-scheduler's is 1 s)."""

    def __init__(self, args: Any = None, handle: Handle | None = None) -> None:
        self.handle = handle
        self.bind_timeout = float(getattr(args, "bind_timeout_seconds", 600))
        shape = getattr(args, "shape", None) or VolumeBindingArgs().shape
        # The shape's scores are 0..10 (MaxCustomPriorityScore), the node's 0..100.
        self._score = capacity_score([(p.utilization, p.score * 10) for p in shape])
        self._lock = threading.Lock()
        # Assumed objects, by store key: (resourceVersion of the object they were made from, object).
        self._assumed_pvs: dict[str, tuple[str, Obj]] = {}
        self._assumed_pvcs: dict[str, tuple[str, Obj]] = {}
        self._stopping = threading.Event()

    # --- the stores, with this plugin's assumptions on top ----------------------------

    def _store(self, resource: str) -> Any:
        return self.handle.store(resource) if self.handle is not None else None

    def _get(self, resource: str, k: str) -> Obj | None:
        store = self._store(resource)
        return store.get(k) if store is not None else None

    def _latest(self, assumed: dict[str, tuple[str, Obj]], k: str, stored: Obj | None) -> Obj | None:
        """The assumed object until the store holds a newer version than the one it was made from."""
        with self._lock:
            entry = assumed.get(k)
            if entry is None:
                return stored
            if stored is None or _rv(stored) != entry[0]:
                del assumed[k]
                return stored
            return entry[1]

    def _volumes_of_classes(self, classes: set[str]) -> dict[str, list[Obj]]:
        store = self._store("persistentvolumes")
        out: dict[str, list[Obj]] = {}
        for pv in store.list() if store is not None else ():
            c = volume_class(pv)
            if c in classes:
                latest = self._latest(self._assumed_pvs, key(pv), pv)
                if latest is not None:
                    out.setdefault(c, []).append(latest)
        return out

    # --- PreFilter ------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        claims = pod_claims(pod)
        if not claims:
            return SKIP
        ns = pod.namespace
        found: list[Obj] = []
        for name, ephemeral in claims:
            k = f"{ns}/{name}"
            pvc = self._latest(self._assumed_pvcs, k, self._get("persistentvolumeclaims", k))
            if pvc is None:
                if ephemeral:
                    return unresolvable(
                        f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                    )
                return unresolvable(f'persistentvolumeclaim "{name}" not found')
            if (pvc.get("status") or {}).get("phase") == "Lost":
                return unresolvable(
                    f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                    f'"{spec(pvc).get("volumeName", "")}"'
                )
            if meta(pvc).get("deletionTimestamp"):
                return unresolvable(f'persistentvolumeclaim "{name}" is being deleted')
            if ephemeral and not _controlled_by(pvc, pod.uid):
                return unresolvable(
                    f"PVC {ns}/{name} was not created for pod {ns}/{pod.name} (pod is not owner)"
                )
            found.append(pvc)

        bound: list[Obj] = []
        unbound: list[Obj] = []
        classes: dict[str, Obj] = {}
        immediate = False
        for pvc in found:
            if fully_bound(pvc):
                bound.append(pvc)
                continue
            cname = claim_class(pvc)
            klass = self._get("storageclasses", cname) if cname else None
            if klass is not None:
                classes[cname] = klass
            # A claim naming a volume the PV controller has not bound yet counts as immediate.
            if (
                klass is not None
                and klass.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER
                and not spec(pvc).get("volumeName")
            ):
                unbound.append(pvc)
            else:
                immediate = True
        if immediate:
            return unresolvable(ERR_UNBOUND_IMMEDIATE)

        bound_pvs = {}
        for pvc in bound:
            pv_name = spec(pvc)["volumeName"]
            bound_pvs[key(pvc)] = self._latest(
                self._assumed_pvs, pv_name, self._get("persistentvolumes", pv_name)
            )
        unbound.sort(key=requested_bytes)
        pvs_by_class = self._volumes_of_classes({claim_class(p) for p in unbound}) if unbound else {}
        capacities = self._capacities({claim_class(p) for p in unbound}, classes) if unbound else {}
        state[_KEY] = _State(bound, bound_pvs, unbound, pvs_by_class, classes, capacities)
        return None

    def _capacities(self, class_names: set[str], classes: dict[str, Obj]) -> dict[str, list[Obj]]:
        """The CSIStorageCapacity objects of each class whose provisioner is a CSIDriver that
        asks for capacity checks (``storageCapacity: true``); other classes are left out."""
        checked = set()
        for name in class_names:
            provisioner = (classes.get(name) or {}).get("provisioner") or ""
            driver = self._get("csidrivers", provisioner) if provisioner else None
            if driver is not None and spec(driver).get("storageCapacity") is True:
                checked.add(name)
        if not checked:
            return {}
        out: dict[str, list[Obj]] = {name: [] for name in checked}
        store = self._store("csistoragecapacities")
        for capacity in store.list() if store is not None else ():
            name = capacity.get("storageClassName")
            if name in out:
                out[name].append(capacity)
        return out

    # --- Filter ---------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        s: _State | None = state.get(_KEY)
        if s is None:
            return None
        labels, name = node.labels, node.name
        bound_ok = pvs_found = True
        for pvc in s.bound:
            pv = s.bound_pvs.get(key(pvc))
            if pv is None:
                pvs_found = False
                break
            if not s.fits(pv, labels, name):
                bound_ok = False
                break

        unbound_ok = True
        static: list[tuple[Obj, Obj, bool]] = []
        dynamic: list[Obj] = []
        to_match: list[Obj] = []
        to_provision: list[Obj] = []
        for pvc in s.unbound:
            selected = annotations_of(pvc).get(ANN_SELECTED_NODE)
            if selected is None:
                to_match.append(pvc)
            elif selected == name:
                to_provision.append(pvc)
            else:  # being provisioned for another node
                unbound_ok = False
                to_match = to_provision = []
                break
        if to_match:
            taken: set[str] = set()
            for pvc in to_match:
                candidates = s.pvs_by_class.get(claim_class(pvc), ())
                pv = find_matching_volume(pvc, candidates, lambda v: s.fits(v, labels, name), taken)
                if pv is None:
                    unbound_ok = False
                    to_provision.append(pvc)
                    continue
                taken.add(meta(pv)["name"])
                assumed = bind_volume_to_claim(pv, pvc)
                static.append((assumed or pv, pvc, assumed is not None))
        enough_space = True
        found_capacities: list[Obj | None] = []
        if to_provision:
            unbound_ok = True  # provisioning decides for the claims no PV took
            for pvc in to_provision:
                klass = s.classes.get(claim_class(pvc))
                if klass is None:
                    return error(f'failed to find storage class "{claim_class(pvc)}"')
                if not can_provision(klass, labels):
                    logger.log(
                        V(4),
                        "Node cannot provision for claim",
                        extra=kv(node=name, pvc=key(pvc), storageClass=claim_class(pvc)),
                    )
                    unbound_ok = False
                    break
                capacities = s.capacities.get(claim_class(pvc))
                found = None
                if capacities is not None:
                    enough_space, found = enough_capacity(pvc, capacities, labels)
                    if not enough_space:
                        logger.log(
                            V(5),
                            "Node has no accessible CSIStorageCapacity with enough capacity for claim",
                            extra=kv(node=name, pvc=key(pvc), storageClass=claim_class(pvc)),
                        )
                        break
                dynamic.append(pvc)
                found_capacities.append(found)

        reasons = []
        if not bound_ok:
            reasons.append(ERR_NODE_CONFLICT)
        if not unbound_ok:
            reasons.append(ERR_BIND_CONFLICT)
        if not enough_space:
            reasons.append(ERR_NOT_ENOUGH_SPACE)
        if not pvs_found:
            reasons.append(ERR_PV_NOT_EXIST)
        if reasons:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, tuple(reasons))
        s.by_node[name] = PodVolumes(static, dynamic, found_capacities)
        return None

    # --- PreScore / Score (StorageCapacityScoring) ---------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        """Skip the pods with nothing to bind: kube-scheduler scores every node 0 for them."""
        s: _State | None = state.get(_KEY)
        return None if s is not None and s.unbound else SKIP

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        """How little of the storage the pod's claims would take on the node, through the
        shape: the PVs matched to its claims, else the CSIStorageCapacity that has room for
        each claim to provision (``VolumeBinding.Score``)."""
        s: _State | None = state.get(_KEY)
        vols = s.by_node.get(node.name) if s is not None else None
        if vols is None:
            return 0
        classes: dict[str, tuple[int, int]] = {}
        if vols.static:
            for pv, pvc, _ in vols.static:
                requested, capacity = classes.get(volume_class(pv), (0, 0))
                classes[volume_class(pv)] = (requested + requested_bytes(pvc), capacity + capacity_bytes(pv))
        else:
            for pvc, found in zip(vols.dynamic, vols.capacities, strict=True):
                if found is None:
                    continue
                # The capacity is the pool's, once for the class (not one per claim).
                requested, _ = classes.get(claim_class(pvc), (0, 0))
                classes[claim_class(pvc)] = (
                    requested + requested_bytes(pvc),
                    quantity_bytes(found.get("capacity")),
                )
        return self._score(classes)

    # --- Reserve / Unreserve ------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        s: _State | None = state.get(_KEY)
        if s is None:
            return None
        vols = s.by_node.get(node_name)
        if vols is None or s.all_bound:
            s.all_bound = True
            return None
        chosen = PodVolumes([], [])
        with self._lock:
            for pv, pvc, changed in vols.static:
                if changed:
                    self._assumed_pvs[key(pv)] = (_rv(pv), pv)
                chosen.static.append((pv, pvc, changed))
            for pvc in vols.dynamic:
                assumed = with_selected_node(pvc, node_name)
                self._assumed_pvcs[key(pvc)] = (_rv(pvc), assumed)
                chosen.dynamic.append(assumed)
        s.chosen = chosen
        s.node_name = node_name
        ni = self.handle.snapshot.get(node_name) if self.handle is not None else None
        s.node_labels = dict(ni.labels) if ni is not None else {}
        logger.log(
            V(5),
            "Assumed pod volumes",
            extra=kv(
                pod=pod.key,
                node=node_name,
                static=[key(pv) for pv, _, _ in chosen.static],
                provision=[key(p) for p in chosen.dynamic],
            ),
        )
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        s: _State | None = state.get(_KEY)
        if s is None or s.chosen is None:
            return
        with self._lock:
            for pv, _, _ in s.chosen.static:
                entry = self._assumed_pvs.get(key(pv))
                if entry is not None and entry[1] is pv:
                    del self._assumed_pvs[key(pv)]
            for pvc in s.chosen.dynamic:
                entry = self._assumed_pvcs.get(key(pvc))
                if entry is not None and entry[1] is pvc:
                    del self._assumed_pvcs[key(pvc)]
        s.chosen = None

    # --- PreBind (binding thread) -------------------------------------------------------

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        s: _State | None = state.get(_KEY)
        if s is None or s.all_bound:
            return None
        if s.chosen is None or s.node_name != node_name:
            return error(f'no pod volumes found for node "{node_name}"')
        api_client = self.handle.api_client if self.handle is not None else None
        return bind_pod_volumes(
            api_client,
            pod,
            node_name,
            s.node_labels,
            s.chosen,
            timeout=self.bind_timeout,
            interval=self.poll_interval,
            stopping=self._stopping,
            reader=store_reader(self.handle),
        )

    def stop(self) -> None:
        """Stop waiting for volumes (PreBind fails at once)."""
        self._stopping.set()
