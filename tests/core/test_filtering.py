"""scheduler.core.filtering: the node-static filters' verdicts kept per node, and when they are not.

Every test runs the default profile's real plugins over a real cache, and checks what a
cycle finds feasible: a kept verdict must never outlive the Node it was taken on, nor serve
a pod that asks something else, nor another profile configured otherwise.
"""

from __future__ import annotations

from typing import Any

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
