"""DefaultPreemption with the real filter plugins, in-process (the cache is the snapshot).

Each case builds nodes and pods, runs a scheduling cycle that fails, then the
profile's PostFilter, and checks the node and the victims it chose. What the
API server sees (conditions, deletes, the nominated node) is tested against a
real one in tests/test_preemption.py.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.core.cache import Cache
from scheduler.core.filtering import FitError
from scheduler.core.framework import Code, CycleState
from scheduler.core.podinfo import PodInfo
from scheduler.core.preemption import Preemption
from scheduler.core.profile import Profile
from scheduler.plugins.defaultpreemption import (
    NEVER,
    NO_VICTIMS,
    TERMINATING,
    DefaultPreemption,
    pdb_violations,
)
from scheduler.plugins.interpodaffinity.plugin import InterPodAffinity
from scheduler.plugins.noderesources.fit import NodeResourcesFit
from scheduler.plugins.podtopologyspread.plugin import PodTopologySpread
from scheduler.plugins.tainttoleration import TaintToleration
from tests.plugins.builders import FakeStore, make_node, make_pod, taint

FOO = "example.com/foo"


class Handle:
    def __init__(self, cache: Cache, pods: FakeStore, pdbs: FakeStore) -> None:
        self.snapshot = cache
        self._stores = {
            "pods": pods,
            "poddisruptionbudgets": pdbs,
            "namespaces": FakeStore(),
            "deviceclasses": FakeStore(),
        }
        self.framework: Any = None
        self.api_client = None
        self.scheduler_name = "default-scheduler"

    def store(self, resource: str) -> FakeStore:
        return self._stores[resource]


class Env:
    """A profile of TaintToleration, NodeResourcesFit, PodTopologySpread, InterPodAffinity and
    DefaultPreemption over an in-memory cache."""

    def __init__(self, *, min_absolute: int = 100) -> None:
        self.cache = Cache()
        self.pods = FakeStore()
        self.pdbs = FakeStore()
        self.handle = Handle(self.cache, self.pods, self.pdbs)

        class Args:
            min_candidate_nodes_percentage = 10
            min_candidate_nodes_absolute = min_absolute

        self.preemption = DefaultPreemption(Args(), self.handle, rng=random.Random(1))
        plugins = [
            TaintToleration(None, self.handle),
            NodeResourcesFit(None, self.handle),
            PodTopologySpread(type("A", (), {"defaulting_type": "List"})(), self.handle),
            InterPodAffinity(None, self.handle),
            self.preemption,
        ]
        names = [p.name for p in plugins[:4]]
        self.profile = Profile(
            "default-scheduler",
            plugins,
            pre_filters=names,
            filters=names,
            post_filters=["DefaultPreemption"],
        )
        self.handle.framework = self.profile

    def node(self, name: str, foo: int = 4, **kw: Any) -> None:
        self.cache.add_node(make_node(name, extended={FOO: foo}, **kw))

    def bound(self, name: str, node: str, foo: int = 1, priority: int = 0, **kw: Any) -> PodInfo:
        pod = make_pod(name, requests={FOO: foo}, node_name=node, priority=priority, **kw)
        pod["status"]["phase"] = "Running"
        pi = PodInfo.from_pod(pod)
        self.cache.add_pod(pi)
        self.pods._objs[pi.key] = pod
        return pi

    def pending(self, name: str, foo: int = 1, priority: int = 0, **kw: Any) -> PodInfo:
        pod = make_pod(name, requests={FOO: foo}, priority=priority, **kw)
        self.pods._objs[f"default/{name}"] = pod
        return PodInfo.from_pod(pod)

    def pdb(self, name: str, labels: dict[str, str], allowed: int, disrupted: tuple[str, ...] = ()) -> None:
        self.pdbs._objs[f"default/{name}"] = {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed, "disruptedPods": dict.fromkeys(disrupted, "x")},
        }

    def preempt(self, pod: PodInfo) -> tuple[Any, Any, FitError]:
        state = CycleState()
        with pytest.raises(FitError) as e:
            self.profile.schedule(state, pod, self.cache)
        result, st = self.profile.run_post_filter(state, pod, e.value, self.cache)
        return result, st, e.value


def victims(result: Any) -> list[str]:
    assert isinstance(result.preemption, Preemption)
    return [v.name for v in result.preemption.victims]


def test_evicts_the_fewest_lowest_priority_pods_that_make_room() -> None:
    env = Env()
    env.node("n1")
    env.bound("a", "n1", foo=2, priority=10)
    env.bound("b", "n1", foo=1, priority=5)
    env.bound("c", "n1", foo=1, priority=1)
    result, st, _ = env.preempt(env.pending("p", foo=2, priority=100))
    assert st.code == Code.SUCCESS, st
    assert result.nominated_node == "n1"
    # Removing all three fits; "a" (most important) is given back first and still fits,
    # then "b"; "c" alone cannot stay.
    assert victims(result) == ["b", "c"]
    assert st.message() == "preemption: found a potential placement for pod on node n1, preempting 2 victims"


def test_prefers_the_node_whose_victims_have_the_lowest_priority() -> None:
    env = Env()
    env.node("n1", foo=2)
    env.node("n2", foo=2)
    env.bound("mid", "n1", foo=2, priority=50)
    env.bound("low", "n2", foo=2, priority=1)
    result, st, _ = env.preempt(env.pending("p", foo=2, priority=100))
    assert st.code == Code.SUCCESS
    assert result.nominated_node == "n2" and victims(result) == ["low"]


def test_only_lower_priority_pods_are_victims() -> None:
    env = Env()
    env.node("n1", foo=1)
    env.bound("same", "n1", foo=1, priority=100)
    result, st, fit = env.preempt(env.pending("p", foo=1, priority=100))
    assert result.nominated_node == "" and result.preemption is None
    assert st.code == Code.UNSCHEDULABLE
    assert st.message() == f"preemption: 0/1 nodes are available: 1 {NO_VICTIMS}."
    fit.post_filter_message = st.message()
    assert fit.message() == (
        f"0/1 nodes are available: 1 Insufficient {FOO}. preemption: 0/1 nodes are available: 1 {NO_VICTIMS}."
    )


def test_unresolvable_nodes_are_not_candidates() -> None:
    env = Env()
    env.node("tainted", foo=1, taints=[taint("dedicated", "x")])
    env.node("full", foo=1)
    env.bound("low-t", "tainted", foo=1, priority=1)
    env.bound("low-f", "full", foo=1, priority=1)
    result, st, _ = env.preempt(env.pending("p", foo=1, priority=100))
    assert result.nominated_node == "full" and victims(result) == ["low-f"]


def test_no_candidate_message_counts_the_unhelpful_nodes() -> None:
    env = Env()
    env.node("tainted", foo=1, taints=[taint("dedicated", "x")])
    env.node("full", foo=1)
    env.bound("peer", "full", foo=1, priority=100)
    result, st, _ = env.preempt(env.pending("p", foo=1, priority=100))
    assert result.nominated_node == ""
    assert st.message() == (
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )


def test_preemption_policy_never() -> None:
    env = Env()
    env.node("n1", foo=1)
    env.bound("low", "n1", foo=1, priority=1)
    result, st, _ = env.preempt(env.pending("p", foo=1, priority=100, preemption_policy="Never"))
    assert result is None  # no nomination change either
    assert st.code == Code.UNSCHEDULABLE and st.message() == f"preemption: {NEVER}"


def test_waits_while_its_victims_terminate_on_the_nominated_node() -> None:
    env = Env()
    env.node("n1", foo=1)
    env.node("n2", foo=1)
    victim = env.bound("victim", "n1", foo=1, priority=1)
    env.bound("other", "n2", foo=1, priority=1)
    # the victim of an earlier preemption, still terminating
    raw = victim.pod
    raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    raw["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    ]
    env.cache.update_pod(PodInfo.from_pod(raw))
    p = env.pending("p", foo=1, priority=100)
    env.profile.nominator.nominate(p, "n1")
    result, st, _ = env.preempt(p)
    assert result is None and st.message() == f"preemption: {TERMINATING}"
    # A pod being deleted for another reason does not hold it back.
    raw["status"]["conditions"] = []
    env.cache.update_pod(PodInfo.from_pod(raw))
    result, st, _ = env.preempt(p)
    assert st.code == Code.SUCCESS


def test_pdb_violating_victims_are_avoided_and_counted() -> None:
    env = Env()
    env.node("n1", foo=1)
    env.node("n2", foo=1)
    env.bound("guarded", "n1", foo=1, priority=1, labels={"app": "db"})
    env.bound("free", "n2", foo=1, priority=5)
    env.pdb("db", {"app": "db"}, allowed=0)
    result, st, _ = env.preempt(env.pending("p", foo=1, priority=100))
    # n1's victim has the lower priority, but evicting it violates the PDB.
    assert result.nominated_node == "n2" and victims(result) == ["free"]
    assert result.preemption.pdb_violations == 0


def test_pdb_violations_when_there_is_no_other_way() -> None:
    env = Env()
    env.node("n1", foo=2)
    env.bound("g1", "n1", foo=1, priority=1, labels={"app": "db"})
    env.bound("g2", "n1", foo=1, priority=2, labels={"app": "db"})
    env.pdb("db", {"app": "db"}, allowed=1)
    result, st, _ = env.preempt(env.pending("p", foo=2, priority=100))
    assert sorted(victims(result)) == ["g1", "g2"]
    # g2 (more important) spends the one allowed disruption; g1 violates.
    assert result.preemption.pdb_violations == 1


def test_pdb_violation_rules() -> None:
    def pod(name: str, **labels: str) -> PodInfo:
        return PodInfo.from_pod(make_pod(name, labels=labels or None))

    pdbs = [
        {
            "metadata": {"name": "a", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}},
            "status": {"disruptionsAllowed": 1, "disruptedPods": {"a2": "t"}},
        },
        {  # an empty selector selects nothing here
            "metadata": {"name": "all", "namespace": "default"},
            "spec": {"selector": {}},
            "status": {"disruptionsAllowed": 0},
        },
        {
            "metadata": {"name": "other-ns", "namespace": "elsewhere"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}},
            "status": {"disruptionsAllowed": 0},
        },
    ]
    a1, a2, a3, b, bare = (
        pod("a1", app="a"),
        pod("a2", app="a"),
        pod("a3", app="a"),
        pod("b", app="b"),
        pod("x"),
    )
    violating, ok = pdb_violations([a1, a2, a3, b, bare], pdbs)
    # a1 spends the allowed disruption, a2 is already disrupted, a3 violates.
    assert [v.name for v in violating] == ["a3"]
    assert [v.name for v in ok] == ["a1", "a2", "b", "x"]


def spread_env() -> tuple[Env, PodInfo]:
    """Upstream e2e "PodTopologySpread Preemption validates proper pods are preempted": a
    high-priority pod on zone a, three low ones on zone b, and a pod that must keep the
    zones within a skew of 1."""
    env = Env()
    env.node("a", foo=10, labels={"zone": "a"})
    env.node("b", foo=10, labels={"zone": "b"})
    env.bound("high", "a", foo=9, priority=1000, labels={"e2e": ""})
    for i in range(3):
        env.bound(f"low-{i}", "b", foo=3, priority=1, labels={"e2e": ""})
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchExpressions": [{"key": "e2e", "operator": "Exists"}]},
        }
    ]
    pod = env.pending("medium", foo=3, priority=100, labels={"e2e": ""}, topology_spread_constraints=spread)
    return env, pod


def test_topology_spread_needs_a_second_victim() -> None:
    # One low pod would free enough of the resource, but b would then count 3 against a's 1.
    env, pod = spread_env()
    result, st, _ = env.preempt(pod)
    assert st.code == Code.SUCCESS, st
    assert result.nominated_node == "b"
    assert len(victims(result)) == 2


def test_what_if_runs_leave_the_cache_and_shared_counts_alone() -> None:
    env, pod = spread_env()
    before = env.cache.dump()
    gens = [ni.generation for ni in env.cache.list()]
    env.preempt(pod)
    assert env.cache.dump() == before and [ni.generation for ni in env.cache.list()] == gens
    # The next cycle of the same shape reads the running sums PreFilter keeps: unchanged.
    state = CycleState()
    with pytest.raises(FitError):
        env.profile.schedule(state, pod, env.cache)
    assert state["PodTopologySpread/filter"].counts[0] == {"a": 1, "b": 3}


def test_nominated_pods_keep_their_room() -> None:
    env = Env()
    env.node("n1", foo=2)
    env.bound("running", "n1", foo=1, priority=1)
    high = env.pending("high", foo=1, priority=100)
    env.profile.nominator.nominate(high, "n1")
    # A lower-priority pod does not fit next to the nominated one...
    low = env.pending("low", foo=1, priority=50)
    with pytest.raises(FitError):
        env.profile.schedule(CycleState(), low, env.cache)
    # ...a higher-priority pod may take the room (it is not for it to yield).
    higher = env.pending("higher", foo=1, priority=500)
    assert env.profile.schedule(CycleState(), higher, env.cache).node == "n1"
    # and the nominated pod itself fits (its own nomination does not count against it)
    assert env.profile.schedule(CycleState(), high, env.cache).node == "n1"


def test_lower_priority_nominations_are_handed_over() -> None:
    env = Env()
    env.node("n1", foo=1)
    env.bound("victim", "n1", foo=1, priority=1)
    mid = env.pending("mid", foo=1, priority=50)
    env.profile.nominator.nominate(mid, "n1")
    result, st, _ = env.preempt(env.pending("p", foo=1, priority=100))
    assert result.nominated_node == "n1"
    assert [p.name for p in result.preemption.clear_nominations] == ["mid"]


def test_nominated_pod_counts_in_anti_affinity() -> None:
    # The pass with nominated pods: InterPodAffinity's add_pod counts the nominated pod, so
    # the incoming pod's anti-affinity to it keeps it off that node.
    env = Env()
    env.node("n1", foo=4)
    lonely = env.pending("lonely", priority=100, labels={"app": "lonely"})
    env.profile.nominator.nominate(lonely, "n1")
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "lonely"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    web = env.pending("web", priority=100, affinity=anti)
    with pytest.raises(FitError) as e:
        env.profile.schedule(CycleState(), web, env.cache)
    assert e.value.message() == "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."
    env.profile.nominator.delete(lonely.uid)
    assert env.profile.schedule(CycleState(), web, env.cache).node == "n1"


def test_the_nominated_node_is_tried_first() -> None:
    env = Env()
    for i in range(5):
        env.node(f"n{i}", foo=4)
    p = env.pending("p", priority=10)
    env.profile.nominator.nominate(p, "n3")
    result = env.profile.schedule(CycleState(), p, env.cache)
    assert (result.node, result.evaluated) == ("n3", 1)
