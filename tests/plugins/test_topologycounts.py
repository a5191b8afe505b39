"""The counting shared by InterPodAffinity and PodTopologySpread: per-node memos and the running
sums kept across cycles. The plugins must decide exactly as a full recount would."""

from __future__ import annotations

import random
from typing import Any

from scheduler.core.cache import Cache
from scheduler.core.framework import CycleState
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.interpodaffinity.plugin import InterPodAffinity
from scheduler.plugins.podtopologyspread.plugin import PodTopologySpread
from scheduler.plugins.topologycounts import NodeSums, memo_entries
from tests.plugins.builders import FakeHandle, FakeSnapshot, make_node, make_pod

# --- NodeSums ------------------------------------------------------------------------


def nodes_with(*pod_counts: int) -> list[NodeInfo]:
    nodes = [
        NodeInfo(f"n{i}", make_node(f"n{i}", labels={"zone": f"z{i % 2}"})) for i in range(len(pod_counts))
    ]
    for ni, n in zip(nodes, pod_counts, strict=True):
        for j in range(n):
            ni.add_pod(PodInfo.from_pod(make_pod(f"{ni.name}-{j}", labels={"app": "a"}, node_name=ni.name)))
    return nodes


class Counter:
    """parts_of for the sums: one (zone, pods) part per node, counting the nodes it computes."""

    def __init__(self) -> None:
        self.computed: list[str] = []

    def __call__(self, nodes: list[NodeInfo]) -> list[Any]:
        def compute(ni: NodeInfo) -> Any:
            self.computed.append(ni.name)
            return (("zone", ni.labels["zone"], len(ni.pods)),)

        return memo_entries(nodes, "test", 1, compute)


def test_sums_recount_only_changed_nodes() -> None:
    nodes = nodes_with(1, 2, 0, 3)
    sums, parts = NodeSums(), Counter()
    sums.refresh(nodes, parts)
    assert sums.group("zone") == {"z0": 1, "z1": 5} and sorted(parts.computed) == ["n0", "n1", "n2", "n3"]

    parts.computed.clear()
    sums.refresh(nodes, parts)
    assert parts.computed == []

    nodes[2].add_pod(PodInfo.from_pod(make_pod("late", labels={"app": "a"}, node_name="n2")))
    sums.refresh(nodes, parts)
    assert parts.computed == ["n2"] and sums.group("zone") == {"z0": 2, "z1": 5}

    # A new node list (a node came or went) is recounted in full.
    parts.computed.clear()
    sums.refresh(nodes[:3], parts)
    assert sums.group("zone") == {"z0": 2, "z1": 2}


def test_sums_recount_a_new_list_even_of_the_same_length() -> None:
    a, b = nodes_with(1, 1)
    sums, parts = NodeSums(), Counter()
    sums.refresh([a, b], parts)
    replacement = NodeInfo("n9", make_node("n9", labels={"zone": "z9"}))
    replacement.add_pod(PodInfo.from_pod(make_pod("r", labels={"app": "a"}, node_name="n9")))
    assert replacement.generation == b.generation  # generations alone cannot tell the nodes apart
    sums.refresh([a, replacement], parts)
    assert sums.group("zone") == {"z0": 1, "z9": 1}


def test_sums_keep_empty_domains_until_no_node_names_them() -> None:
    nodes = nodes_with(0, 1)
    sums = NodeSums()
    sums.refresh(nodes, Counter())
    assert sums.group("zone") == {"z0": 0, "z1": 1}  # z0 exists, with no pods

    def without_z0(ns: list[NodeInfo]) -> list[Any]:
        return [() if ni.name == "n0" else (("zone", ni.labels["zone"], len(ni.pods)),) for ni in ns]

    nodes[0].add_pod(PodInfo.from_pod(make_pod("x", node_name="n0")))  # n0 changes and now names nothing
    sums.refresh(nodes, without_z0)
    assert sums.group("zone") == {"z1": 1}


# --- the plugins: incremental counts against a full recount -------------------------------


def stable_cache(n: int) -> Cache:
    """The scheduler's cache: its node list is the same object until a node is added or removed."""
    cache = Cache()
    for i in range(n):
        cache.add_node(
            make_node(f"n{i}", labels={"topology.kubernetes.io/zone": f"z{i % 3}", "rack": f"r{i % 4}"})
        )
    return cache


APPS = ["web", "db", "cache"]
SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    },
    {
        "maxSkew": 1,
        "topologyKey": "rack",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "web"}},
    },
]
AFFINITY = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "rack"}
        ],
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 10,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "topology.kubernetes.io/zone",
                },
            }
        ],
    }
}


def outcome(plugin: Any, pod: PodInfo, snapshot: Any) -> Any:
    state = CycleState()
    st = plugin.pre_filter(state, pod, snapshot)
    nodes = snapshot.list()
    filtered = {n.name: plugin.filter(state, pod, n) for n in nodes} if st is None else st
    feasible = [n for n in nodes if st is not None or filtered[n.name] is None]
    scored: Any = None
    if len(feasible) > 1:
        scored = plugin.pre_score(state, pod, feasible)
        if scored is None:
            scored = {n.name: plugin.score(state, pod, n) for n in feasible}
            plugin.normalize_scores(state, pod, scored)
    return filtered, scored


def test_incremental_counts_agree_with_a_full_recount() -> None:
    rng = random.Random(7)
    cache = stable_cache(12)
    handle = FakeHandle(cache)
    long_lived = [PodTopologySpread(None, handle), InterPodAffinity(None, handle)]
    placed: list[PodInfo] = []
    incoming = [
        PodInfo.from_pod(make_pod("in-spread", labels={"app": "web"}, topology_spread_constraints=SPREAD)),
        PodInfo.from_pod(make_pod("in-affine", labels={"app": "web"}, affinity=AFFINITY)),
        PodInfo.from_pod(make_pod("in-default", labels={"app": "web"}, owner_kind="ReplicaSet")),
    ]
    for step in range(60):
        if placed and rng.random() < 0.3:
            cache.remove_pod(placed.pop(rng.randrange(len(placed))).uid)
        else:
            app = rng.choice(APPS)
            pod = make_pod(
                f"p{step}",
                labels={"app": app},
                node_name=f"n{rng.randrange(12)}",
                affinity=AFFINITY if app == "web" and rng.random() < 0.5 else None,
            )
            pi = PodInfo.from_pod(pod)
            cache.add_pod(pi)
            placed.append(pi)
        fresh_snapshot = FakeSnapshot(cache.list())  # a new list every call: always a full recount
        fresh_handle = FakeHandle(fresh_snapshot)
        fresh = [PodTopologySpread(None, fresh_handle), InterPodAffinity(None, fresh_handle)]
        for pod in incoming:
            for kept, new in zip(long_lived, fresh, strict=True):
                assert outcome(kept, pod, cache) == outcome(new, pod, fresh_snapshot), (
                    step,
                    pod.name,
                    kept.name,
                )
