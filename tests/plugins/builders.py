"""Builders for API-shaped pods and nodes, and the PodInfo/NodeInfo/snapshot made from them.

Every builder returns the plain dicts the API server would send, so code under
test sees exactly what it sees in production. Keyword arguments cover the
fields the scheduler reads; anything else can be patched into the dict.

    pod = pod_info("web", cpu="500m", memory="1Gi", labels={"app": "web"})
    node = node_info("n1", cpu="4", memory="8Gi", pods=[pod_info("other", cpu="1")])
    snap = FakeSnapshot([node])
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from scheduler.core.framework import Snapshot
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo

_uids = itertools.count(1)


def container(
    name: str = "c",
    *,
    cpu: str | None = None,
    memory: str | None = None,
    requests: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
    ports: Iterable[Mapping[str, Any]] = (),
    restart_policy: str | None = None,
    image: str = "registry.k8s.io/pause:3.10",
) -> dict[str, Any]:
    """A container; ``cpu``/``memory`` are shorthands for requests."""
    reqs = dict(requests or {})
    if cpu is not None:
        reqs["cpu"] = cpu
    if memory is not None:
        reqs["memory"] = memory
    c: dict[str, Any] = {"name": name, "image": image}
    resources: dict[str, Any] = {}
    if reqs:
        resources["requests"] = reqs
    if limits:
        resources["limits"] = dict(limits)
    if resources:
        c["resources"] = resources
    if ports:
        c["ports"] = [dict(p) for p in ports]
    if restart_policy:
        c["restartPolicy"] = restart_policy
    return c


def host_port(
    port: int, protocol: str | None = None, ip: str | None = None, container_port: int | None = None
) -> dict[str, Any]:
    """A ``ContainerPort`` with a host port (protocol and IP left unset unless given)."""
    p: dict[str, Any] = {"containerPort": container_port or port, "hostPort": port}
    if protocol:
        p["protocol"] = protocol
    if ip:
        p["hostIP"] = ip
    return p


def taint(key: str, value: str | None = None, effect: str = "NoSchedule") -> dict[str, Any]:
    t: dict[str, Any] = {"key": key, "effect": effect}
    if value is not None:
        t["value"] = value
    return t


def toleration(
    key: str | None = None, value: str | None = None, effect: str | None = None, operator: str | None = None
) -> dict[str, Any]:
    """A toleration with only the given fields set (as a user would write it)."""
    t: dict[str, Any] = {}
    for k, v in (("key", key), ("operator", operator), ("value", value), ("effect", effect)):
        if v is not None:
            t[k] = v
    return t


def node_selector_requirement(key: str, operator: str, *values: str) -> dict[str, Any]:
    r: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        r["values"] = list(values)
    return r


def node_selector_term(*exprs: dict[str, Any], fields: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    """A ``v1.NodeSelectorTerm`` of these ``matchExpressions`` and ``matchFields``."""
    t: dict[str, Any] = {}
    if exprs:
        t["matchExpressions"] = list(exprs)
    if fields:
        t["matchFields"] = list(fields)
    return t


def make_pod(
    name: str = "pod",
    namespace: str = "default",
    *,
    cpu: str | None = None,
    memory: str | None = None,
    requests: Mapping[str, Any] | None = None,
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    host_ports: Iterable[Mapping[str, Any]] = (),
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_name: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
    tolerations: Iterable[Mapping[str, Any]] | None = None,
    topology_spread_constraints: list[dict[str, Any]] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    overhead: Mapping[str, Any] | None = None,
    priority: int | None = None,
    preemption_policy: str | None = None,
    scheduler_name: str | None = None,
    scheduling_gates: Iterable[str] = (),
    owner_kind: str | None = None,
    uid: str | None = None,
    creation_timestamp: str = "2026-01-01T00:00:00Z",
    phase: str = "Pending",
) -> dict[str, Any]:
    """A pod as the API server returns it.

    Without ``containers`` the pod has one container carrying ``cpu``,
    ``memory``, ``requests`` and ``host_ports``.
    """
    if containers is None:
        containers = [container(cpu=cpu, memory=memory, requests=requests, ports=host_ports)]
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{next(_uids)}",
        "creationTimestamp": creation_timestamp,
    }
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner_kind:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner_kind,
                "name": f"{name}-owner",
                "uid": f"owner-{name}",
                "controller": True,
            }
        ]
    spec: dict[str, Any] = {"containers": containers}
    if init_containers:
        spec["initContainers"] = init_containers
    for key, value in (
        ("nodeName", node_name),
        ("nodeSelector", node_selector),
        ("affinity", affinity),
        ("topologySpreadConstraints", topology_spread_constraints),
        ("volumes", volumes),
        ("overhead", overhead),
        ("priority", priority),
        ("preemptionPolicy", preemption_policy),
        ("schedulerName", scheduler_name),
    ):
        if value is not None:
            spec[key] = dict(value) if isinstance(value, Mapping) else value
    if tolerations is not None:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if scheduling_gates:
        spec["schedulingGates"] = [{"name": g} for g in scheduling_gates]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def pod_info(name: str = "pod", namespace: str = "default", **kwargs: Any) -> PodInfo:
    """``PodInfo.from_pod(make_pod(...))``."""
    return PodInfo.from_pod(make_pod(name, namespace, **kwargs))


def make_node(
    name: str = "node",
    *,
    cpu: str | None = "4",
    memory: str | None = "8Gi",
    pods: int | str | None = 110,
    ephemeral_storage: str | None = None,
    extended: Mapping[str, Any] | None = None,
    allocatable: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, Any]] | None = None,
    unschedulable: bool = False,
    internal_ip: str | None = None,
) -> dict[str, Any]:
    """A node. ``allocatable`` replaces the resource shorthands entirely when given.

    The hostname label is set to the node name unless ``labels`` sets it.
    """
    if allocatable is None:
        alloc: dict[str, Any] = {}
        for key, value in (
            ("cpu", cpu),
            ("memory", memory),
            ("pods", pods),
            ("ephemeral-storage", ephemeral_storage),
        ):
            if value is not None:
                alloc[key] = str(value)
        alloc.update({k: str(v) for k, v in (extended or {}).items()})
    else:
        alloc = {k: str(v) for k, v in allocatable.items()}
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"node-{name}",
        "labels": {"kubernetes.io/hostname": name, **(labels or {})},
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    status: dict[str, Any] = {"allocatable": alloc, "capacity": dict(alloc)}
    if internal_ip:
        status["addresses"] = [{"type": "InternalIP", "address": internal_ip}]
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


def node_info(
    name: str = "node", *, pods: Iterable[PodInfo | dict[str, Any]] = (), **kwargs: Any
) -> NodeInfo:
    """A NodeInfo of ``make_node(name, **kwargs)`` with ``pods`` placed on it.

    ``pods`` may be PodInfos or pod dicts; their ``nodeName`` is set to the node.
    """
    ni = NodeInfo(name, make_node(name, **kwargs))
    for p in pods:
        pod = p.pod if isinstance(p, PodInfo) else p
        pod["spec"]["nodeName"] = name
        ni.add_pod(PodInfo.from_pod(pod))
    return ni


class FakeSnapshot:
    """An in-memory :class:`scheduler.core.framework.Snapshot` over NodeInfos."""

    def __init__(self, nodes: Iterable[NodeInfo] = ()) -> None:
        self._nodes = {n.name: n for n in nodes}

    def list(self) -> list[NodeInfo]:
        return list(self._nodes.values())

    def get(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    def have_pods_with_affinity(self) -> list[NodeInfo]:
        return [n for n in self._nodes.values() if n.pods_with_affinity]

    def have_pods_with_required_anti_affinity(self) -> list[NodeInfo]:
        return [n for n in self._nodes.values() if n.pods_with_required_anti_affinity]

    def image_num_nodes(self, image: str) -> int:
        return sum(image in n.images for n in self._nodes.values())

    def is_pvc_used_by_pods(self, key: str) -> bool:
        return any(key in p.pvc_keys() for n in self._nodes.values() for p in n.pods.values())


class FakeStore:
    """An informer store over a list of objects, keyed ``namespace/name`` or ``name``."""

    def __init__(self, objects: Iterable[dict[str, Any]] = ()) -> None:
        self._objs: dict[str, dict[str, Any]] = {}
        for o in objects:
            meta = o["metadata"]
            key = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
            self._objs[key] = o

    def get(self, key: str) -> dict[str, Any] | None:
        return self._objs.get(key)

    def list(self) -> list[dict[str, Any]]:
        return list(self._objs.values())

    def __len__(self) -> int:
        return len(self._objs)


class FakeHandle:
    """A :class:`scheduler.core.framework.Handle` for unit tests (no API client)."""

    def __init__(
        self,
        snapshot: Snapshot | None = None,
        stores: Mapping[str, Iterable[dict[str, Any]]] | None = None,
        scheduler_name: str = "default-scheduler",
    ) -> None:
        self._snapshot: Snapshot = snapshot or FakeSnapshot()
        self._stores = {k: FakeStore(v) for k, v in (stores or {}).items()}
        self._scheduler_name = scheduler_name
        self.events: list[tuple[str, str]] = []

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def store(self, resource: str) -> FakeStore:
        return self._stores.setdefault(resource, FakeStore())

    @property
    def api_client(self) -> None:
        return None

    @property
    def scheduler_name(self) -> str:
        return self._scheduler_name

    def event(self, regarding: dict[str, Any], type_: str, reason: str, action: str, note: str) -> None:
        self.events.append((reason, note))


# ---------------------------------------------------------------------------
# Running a plugin the way a profile does


def run_filter(
    plugin: Any, pod: PodInfo, nodes: Iterable[NodeInfo], snapshot: FakeSnapshot | None = None
) -> dict[str, Any]:
    """PreFilter, then Filter on each node: node name -> Status or None (fits).

    A PreFilter SKIP means every node fits; a PreFilterResult rejects the nodes
    it leaves out with the string ``"excluded by PreFilterResult"``; a PreFilter
    rejection is returned for every node.

    A plugin with ``filter_nodes`` is run that way too, in a cycle of its
    own, and must give the same results as ``filter`` node by node.
    """
    from scheduler.core.framework import Code, CycleState, PreFilterResult

    nodes = list(nodes)

    def cycle(batch: bool) -> dict[str, Any]:
        state = CycleState()
        allowed = None
        if hasattr(plugin, "pre_filter"):
            res = plugin.pre_filter(state, pod, snapshot or FakeSnapshot(nodes))
            if isinstance(res, PreFilterResult):
                allowed = res.node_names
            elif res is not None and res.code == Code.SKIP:
                return dict.fromkeys((n.name for n in nodes), None)
            elif res is not None:
                return dict.fromkeys((n.name for n in nodes), res)
        out: dict[str, Any] = {
            n.name: "excluded by PreFilterResult"
            for n in nodes
            if allowed is not None and n.name not in allowed
        }
        candidates = [n for n in nodes if n.name not in out]
        if batch:
            results = plugin.filter_nodes(state, pod, candidates)
            assert results is None or len(results) == len(candidates), "one result per node"
            assert results is None or any(results), "None, not a list of None, when all nodes pass"
            out.update(zip((n.name for n in candidates), results or [None] * len(candidates), strict=True))
        else:
            out.update((n.name, plugin.filter(state, pod, n)) for n in candidates)
        return {n.name: out[n.name] for n in nodes}

    one_by_one = cycle(batch=False)
    if hasattr(plugin, "filter_nodes"):
        assert cycle(batch=True) == one_by_one, "filter_nodes disagrees with filter"
    return one_by_one


def run_score(plugin: Any, pod: PodInfo, nodes: Iterable[NodeInfo]) -> dict[str, int] | None:
    """PreScore, Score on each node, then NormalizeScore: node name -> score.

    None when PreScore skips the plugin for this pod. A plugin with
    ``score_nodes`` is run that way too (normalized by
    ``normalize_score_list`` if it has one) and must give the same scores.
    """
    from scheduler.core.framework import Code, CycleState
    from scheduler.core.profile import score_nodes_of

    nodes = list(nodes)

    def cycle(batch: bool) -> dict[str, int] | None:
        state = CycleState()
        if hasattr(plugin, "pre_score"):
            st = plugin.pre_score(state, pod, nodes)
            if st is not None:
                if st.code == Code.SKIP:
                    return None
                raise AssertionError(f"PreScore failed: {st}")
        if batch:  # as the profile does it
            listed = list(score_nodes_of(plugin)(state, pod, nodes))
            if hasattr(plugin, "normalize_score_list"):
                plugin.normalize_score_list(state, pod, listed)
                return dict(zip((n.name for n in nodes), listed, strict=True))
            scores = dict(zip((n.name for n in nodes), listed, strict=True))
        else:
            scores = {n.name: plugin.score(state, pod, n) for n in nodes}
        if hasattr(plugin, "normalize_scores"):
            plugin.normalize_scores(state, pod, scores)
        return scores

    one_by_one = cycle(batch=False)
    if hasattr(plugin, "score_nodes") or hasattr(plugin, "normalize_score_list"):
        assert cycle(batch=True) == one_by_one, "score_nodes or normalize_score_list disagrees"
    return one_by_one
