"""scheduler.core.filtering: the node-static filters' verdicts kept per node, and when they are not.

Every test runs the default profile's real plugins over a real cache, and checks what a
cycle finds feasible: a kept verdict must never outlive the Node it was taken on, nor serve
a pod that asks something else, nor another profile configured otherwise.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.cluster.store import ObjectStore
from scheduler.config.loading import build_config
from scheduler.core.cache import Cache
from scheduler.core.filtering import node_static_signature
from scheduler.core.framework import CycleState
from scheduler.core.nominator import Nominator
from scheduler.core.podinfo import PodInfo
from scheduler.core.profile import Profile
from scheduler.profiles import Handle, build_profile, resources_needed
from tests.cluster.util import only_nodes_labelled
from tests.core.util import node, pinfo

TAINT = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}


def profiles(cache: Cache, *plugin_configs: list[dict[str, Any]]) -> list[Profile]:
    """One profile per entry of ``plugin_configs``, each with that pluginConfig, on ``cache``."""
    cfg = build_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {"schedulerName": f"p{i}", "pluginConfig": pc} for i, pc in enumerate(plugin_configs)
            ],
        }
    )
    stores = {plural: ObjectStore() for plural in resources_needed(cfg)}
    return [
        build_profile(cfg, p, Handle(cache, stores, None, p.scheduler_name, None), Nominator())
        for p in cfg.profiles
    ]


def feasible(prof: Profile, pod: PodInfo, cache: Cache) -> set[str]:
    """The nodes a cycle's search finds feasible for ``pod`` (PreFilter, then the filters over
    every node: there are fewer than 100)."""
    state = CycleState()
    nodes = cache.list()
    skip, _ = prof.run_pre_filter(state, pod, cache, len(nodes))
    state.skip_filter = frozenset(skip)
    found = prof.filtering.find_feasible(state, pod, nodes, len(nodes), {}, skip, {})
    return {ni.name for ni in found}


def test_a_pod_like_the_last_gets_the_same_verdicts() -> None:
    cache = Cache()
    cache.add_node(node("free"))
    cache.add_node(node("tainted", taints=[TAINT]))
    (prof,) = profiles(cache, [])
    first, second = pinfo("a"), pinfo("b")
    assert node_static_signature(first) == node_static_signature(second)
    assert feasible(prof, first, cache) == {"free"}
    assert feasible(prof, second, cache) == {"free"}


def test_a_change_of_the_node_drops_its_kept_verdict() -> None:
    cache = Cache()
    cache.add_node(node("free"))
    cache.add_node(node("tainted", taints=[TAINT]))
    (prof,) = profiles(cache, [])
    assert feasible(prof, pinfo("a"), cache) == {"free"}
    cache.update_node(node("tainted"))  # the taint is gone
    assert feasible(prof, pinfo("b"), cache) == {"free", "tainted"}
    cache.update_node(node("free", labels={"x": "y"}, unschedulable=True))
    assert feasible(prof, pinfo("c"), cache) == {"tainted"}


def test_a_pod_that_asks_otherwise_is_judged_afresh() -> None:
    cache = Cache()
    cache.add_node(node("free", labels={"zone": "a"}))
    cache.add_node(node("tainted", labels={"zone": "b"}, taints=[TAINT]))
    (prof,) = profiles(cache, [])
    assert feasible(prof, pinfo("plain"), cache) == {"free"}
    assert feasible(prof, pinfo("tolerant", tolerations=[TOLERATION]), cache) == {"free", "tainted"}
    assert feasible(prof, pinfo("picky", nodeSelector={"zone": "b"}, tolerations=[TOLERATION]), cache) == {
        "tainted"
    }
    assert feasible(prof, pinfo("named", nodeName="free"), cache) == {"free"}


def test_profiles_configured_apart_keep_verdicts_apart() -> None:
    cache = Cache()
    cache.add_node(node("kept", labels={"pool": "mine", "zone": "a"}))
    cache.add_node(node("other", labels={"zone": "a"}))
    kept, everything = profiles(cache, [only_nodes_labelled("pool", "mine")], [])
    # A selector, so that NodeAffinity runs in both profiles: only their args differ.
    in_a = {"nodeSelector": {"zone": "a"}}
    assert feasible(kept, pinfo("a", **in_a), cache) == {"kept"}
    assert feasible(everything, pinfo("b", **in_a), cache) == {"kept", "other"}
    assert feasible(kept, pinfo("c", **in_a), cache) == {"kept"}


# --- nodes with nominated pods --------------------------------------------------------------

NODE_KINDS = st.sampled_from(["free", "full", "tainted", "tainted-full", "small"])


def _node_of(kind: str, name: str) -> dict[str, Any]:
    taints = [TAINT] if kind.startswith("tainted") else []
    return node(name, cpu="1" if kind == "small" else "4", memory="8Gi", taints=taints)


@settings(max_examples=60, deadline=None)
@given(
    kinds=st.lists(NODE_KINDS, min_size=1, max_size=8),
    nominated=st.lists(
        st.tuples(st.integers(0, 7), st.sampled_from(["1", "2", "3"]), st.integers(-5, 5)), max_size=6
    ),
    tolerates=st.booleans(),
)
def test_with_nominated_pods_each_node_is_judged_as_one_by_one(
    kinds: list[str], nominated: list[tuple[int, str, int]], tolerates: bool
) -> None:
    """The search (node-static verdicts kept per node, nominated nodes after them) finds the
    nodes, and gives each rejected node the status, that RunFilterPluginsWithNominatedPods
    gives running every filter node by node: with the nominated pods counted, then without."""
    cache = Cache()
    for i, kind in enumerate(kinds):
        cache.add_node(_node_of(kind, f"n{i}"))
        if kind.endswith("full"):
            cache.add_pod(pinfo(f"b{i}", cpu="3500m", memory="1Gi", node=f"n{i}", tolerations=[TOLERATION]))
    (prof,) = profiles(cache, [])
    pod = pinfo(
        "p", cpu="1", memory="1Gi", priority=0, **({"tolerations": [TOLERATION]} if tolerates else {})
    )
    by_node: dict[str, list[PodInfo]] = {}
    for j, (i, cpu, priority) in enumerate(nominated):
        if i < len(kinds):
            other = pinfo(f"nom{j}", cpu=cpu, memory="1Gi", priority=priority)
            prof.nominator.nominate(other, f"n{i}")
            by_node.setdefault(f"n{i}", []).append(other)
    # Warm the kept verdicts with a first search, as a busy scheduler has them.
    for _ in range(2):
        state = CycleState()
        nodes = cache.list()
        skip, _ = prof.run_pre_filter(state, pod, cache, len(nodes))
        state.skip_filter = frozenset(skip)
        statuses: dict[str, tuple[str, Any]] = {}
        found = prof.filtering.find_feasible(
            state, pod, nodes, len(nodes), statuses, skip, prof.filtering.nominated_for(pod)
        )
    every = prof.filtering.filters_for(state.skip_filter)
    expected: dict[str, tuple[str, Any] | None] = {}
    for ni in nodes:
        mine = tuple(p for p in by_node.get(ni.name, ()) if p.priority >= pod.priority)
        expected[ni.name] = prof.filtering.filter_node(state, pod, ni, every, mine)
    assert {ni.name for ni in found} == {n for n, f in expected.items() if f is None}
    got = {n: (plugin, st_.code, st_.reasons) for n, (plugin, st_) in statuses.items()}
    want = {n: (f[0], f[1].code, f[1].reasons) for n, f in expected.items() if f is not None}
    assert got == want
