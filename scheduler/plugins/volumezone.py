"""VolumeZone: a pod whose bound PersistentVolumes carry zone or region labels goes only to
nodes in those zones and regions.

As kube-scheduler's (``volumezone.VolumeZone``): PreFilter reads each
``persistentVolumeClaim`` volume of the pod (generic ephemeral volumes are not
looked at, as upstream), its claim and the claim's PV, and collects the PV's
topology labels: ``topology.kubernetes.io/zone`` and ``/region`` and their
deprecated ``failure-domain.beta.kubernetes.io`` forms. A label's value may list
several zones, ``__``-separated (``LabelZonesToSet``); a value that does not
parse is ignored. A claim not bound yet is VolumeBinding's business when its
class binds on first consumer (skipped here); otherwise it is an error the pod
cannot get past (the claim, PV or class missing, no class, no binding mode).

Filter: a node with none of the four labels passes (``hasAnyNodeConstraint``);
otherwise, for every PV label, the node's value under the same key, else under
its GA form, must be one of the PV's values, or the node is rejected with
"node(s) had no available volume zone".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from scheduler.core.framework import SKIP, CycleState, Snapshot, Status, unresolvable
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.volumebinding.volumes import claim_class, spec

ERR_REASON_CONFLICT = "node(s) had no available volume zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
GA_LABEL = {BETA_ZONE: ZONE, BETA_REGION: REGION}
MULTI_ZONE_DELIMITER = "__"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
_STATE_KEY = "VolumeZone"
_REJECTED = unresolvable(ERR_REASON_CONFLICT)


@dataclass(frozen=True, slots=True)
class PVTopology:
    pv: str
    key: str
    values: frozenset[str]


def label_zones(value: str) -> frozenset[str] | None:
    """``LabelZonesToSet``: the ``__``-separated zones, trimmed; None if one is empty."""
    zones = [z.strip() for z in value.split(MULTI_ZONE_DELIMITER)]
    return None if any(not z for z in zones) else frozenset(zones)


def pv_topologies(pv: dict[str, Any]) -> list[PVTopology]:
    labels = (pv.get("metadata") or {}).get("labels") or {}
    name = (pv.get("metadata") or {}).get("name", "")
    out = []
    for key in TOPOLOGY_LABELS:
        if key in labels:
            zones = label_zones(labels[key])
            if zones is not None:
                out.append(PVTopology(name, key, zones))
    return out


class VolumeZone:
    name: ClassVar[str] = "VolumeZone"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        self.handle = handle

    def _get(self, resource: str, key: str) -> dict[str, Any] | None:
        return self.handle.store(resource).get(key)

    def pod_topologies(self, pod: PodInfo) -> list[PVTopology] | Status:
        """``getPVbyPod``: the topologies of the pod's bound PVs, or why the pod cannot pass."""
        out: list[PVTopology] = []
        for volume in pod.spec.get("volumes") or ():
            claim = volume.get("persistentVolumeClaim")
            if claim is None:
                continue
            name = claim.get("claimName") or ""
            if not name:
                return unresolvable("PersistentVolumeClaim had no name")
            pvc = self._get("persistentvolumeclaims", f"{pod.namespace}/{name}")
            if pvc is None:
                return unresolvable(f'persistentvolumeclaim "{name}" not found')
            pv_name = spec(pvc).get("volumeName") or ""
            if not pv_name:
                class_name = claim_class(pvc)
                if not class_name:
                    return unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
                klass = self._get("storageclasses", class_name)
                if klass is None:
                    return unresolvable(f'storageclass.storage.k8s.io "{class_name}" not found')
                mode = klass.get("volumeBindingMode")
                if not mode:
                    return unresolvable(f'VolumeBindingMode not set for StorageClass "{class_name}"')
                if mode == WAIT_FOR_FIRST_CONSUMER:
                    continue  # VolumeBinding picks a node, and the zone with it
                return unresolvable("PersistentVolume had no name")
            pv = self._get("persistentvolumes", pv_name)
            if pv is None:
                return unresolvable(f'persistentvolume "{pv_name}" not found')
            out.extend(pv_topologies(pv))
        return out

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        topologies = self.pod_topologies(pod)
        if isinstance(topologies, Status):
            return topologies
        if not topologies:
            return SKIP
        state[_STATE_KEY] = topologies
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not pod.spec.get("volumes"):
            return None
        topologies = state.get(_STATE_KEY)
        if topologies is None:  # PreFilter disabled
            topologies = self.pod_topologies(pod)
            if isinstance(topologies, Status):
                return topologies
        labels = node.labels
        if not any(k in labels for k in TOPOLOGY_LABELS):
            return None
        for t in topologies:
            value = labels.get(t.key)
            if value is None:
                value = labels.get(GA_LABEL.get(t.key, t.key))
            if value is None or value not in t.values:
                return _REJECTED
        return None
