"""scheduler.core.explain: the verdicts of one cycle, on the default profile's real plugins."""

from __future__ import annotations

import random

from scheduler.cluster.store import ObjectStore
from scheduler.config import default_config
from scheduler.core.cache import Cache
from scheduler.core.explain import compare, explain
from scheduler.core.framework import CycleState, unresolvable
from scheduler.core.nominator import Nominator
from scheduler.core.podinfo import PodInfo
from scheduler.core.profile import Profile
from scheduler.explain.text import judge
from scheduler.profiles import Handle, build_profile, resources_needed
from tests.core.util import node, pinfo, pod


def default_profile(cache: Cache) -> Profile:
    cfg = default_config()
    prof = cfg.profiles[0]
    stores = {plural: ObjectStore() for plural in resources_needed(cfg)}
    return build_profile(cfg, prof, Handle(cache, stores, None, prof.scheduler_name, None), Nominator())


def cluster(*nodes: dict) -> Cache:
    c = Cache()
    for n in nodes:
        c.add_node(n)
    return c


def test_each_filter_verdict_on_each_node():
    c = cluster(
        node("small", cpu="1"),
        node("tainted", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
        node("cordoned", unschedulable=True),
        node("free"),
    )
    prof = default_profile(c)
    ex = explain(prof, pinfo("p", cpu="2"), c)

    assert [n.node for n in ex.nodes] == ["cordoned", "free", "small", "tainted"]
    by = {n.node: n for n in ex.nodes}
    assert by["small"].rejection.plugin == "NodeResourcesFit"
    assert "Insufficient cpu" in by["small"].rejection.message
    assert by["tainted"].rejection.plugin == "TaintToleration"
    assert by["cordoned"].rejection.plugin == "NodeUnschedulable"
    # Every filter ran, not only up to the first rejection: the cordoned node also lacks no cpu.
    fit = next(v for v in by["cordoned"].filters if v.plugin == "NodeResourcesFit")
    assert fit.code == "Success"
    assert ex.feasible == [by["free"]]
    assert ex.best == ["free"]
    assert by["small"].total is None and by["free"].total is not None


def test_scores_are_raw_normalized_and_weighted_and_add_up():
    c = cluster(node("a", cpu="4"), node("b", cpu="8"))
    c.add_pod(pinfo("busy", cpu="3", node="a"))
    prof = default_profile(c)
    ex = explain(prof, pinfo("p", cpu="1"), c)

    a, b = ex.node("a"), ex.node("b")
    assert ex.best == ["b"]
    weights = {p.name: w for p, w in prof.scores}
    for n in (a, b):
        assert sorted([s.plugin for s in n.scores] + ex.skipped_scores) == sorted(weights)
        for s in n.scores:
            assert s.weight == weights[s.plugin]
            assert s.weighted == s.normalized * s.weight
        assert n.total == sum(s.weighted for s in n.scores)
    fit_a, fit_b = a.score_of("NodeResourcesFit"), b.score_of("NodeResourcesFit")
    assert fit_b.raw > fit_a.raw  # LeastAllocated: more room on b
    plugin, lead = ex.deciding_plugin("b", "a")
    assert lead > 0 and plugin in weights


def test_totals_match_what_a_cycle_chooses():
    """The explanation's best nodes are the ones a real cycle picks from (ties at random)."""
    rng = random.Random(7)
    for trial in range(30):
        c = Cache()
        for i in range(6):
            c.add_node(node(f"n{i}", cpu=str(rng.choice([2, 4, 8])), memory=f"{rng.choice([4, 8, 16])}Gi"))
        for j in range(rng.randrange(8)):
            c.add_pod(pinfo(f"b{trial}-{j}", cpu="500m", memory="1Gi", node=f"n{rng.randrange(6)}"))
        prof = default_profile(c)
        pi = pinfo(f"p{trial}", cpu="1", memory="1Gi")
        ex = explain(prof, pi, c)
        chosen = prof.schedule(CycleState(), pi, c).node
        assert chosen in ex.best, (trial, chosen, ex.best)


def test_pre_filter_rejection_is_every_node():
    c = cluster(node("a"), node("b"))
    prof = default_profile(c)
    p = pod("p", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "missing"}}])
    ex = explain(prof, PodInfo.from_pod(p), c)
    assert len(ex.pre_filter) == 1 and ex.pre_filter[0].rejected
    assert all(n.rejection == ex.pre_filter[0] for n in ex.nodes)
    assert ex.best == []
    assert ex.message.startswith("0/2 nodes are available: ")
    assert '"missing" not found' in ex.message


def test_no_node_fits_gives_the_failed_scheduling_message():
    c = cluster(node("a", cpu="1"), node("b", cpu="1"))
    prof = default_profile(c)
    ex = explain(prof, pinfo("p", cpu="2"), c)
    assert ex.best == [] and ex.feasible == []
    assert ex.message == "0/2 nodes are available: 2 Insufficient cpu."
    d = ex.to_dict()
    assert d["message"] == ex.message
    assert [n["name"] for n in d["nodes"]] == ["a", "b"]
    assert d["nodes"][0]["filters"][0]["plugin"] == "NodeName"


def test_node_selector_narrowing_shows_in_pre_filter():
    c = cluster(node("a"), node("b"))
    prof = default_profile(c)
    p = pod(
        "ds",
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}
                    ]
                }
            }
        },
    )
    ex = explain(prof, PodInfo.from_pod(p), c)
    assert ex.best == ["b"]
    assert ex.node("a").rejection.plugin == "NodeAffinity"
    assert any(v.plugin == "NodeAffinity" and "only node(s) b" in v.message for v in ex.pre_filter)


def test_compare_concludes_what_explain_does():
    """Shadow mode's lean path: the same best nodes, totals, refusing filter and lead."""
    rng = random.Random(11)
    for trial in range(40):
        c = Cache()
        for i in range(8):
            taints = [{"key": "k", "value": "v", "effect": "NoSchedule"}] if rng.random() < 0.2 else None
            c.add_node(
                node(f"n{i}", cpu=str(rng.choice([1, 2, 4])), taints=taints, unschedulable=rng.random() < 0.1)
            )
        for j in range(rng.randrange(10)):
            c.add_pod(pinfo(f"b{trial}-{j}", cpu="500m", memory="1Gi", node=f"n{rng.randrange(8)}"))
        prof = default_profile(c)
        pi = pinfo(f"p{trial}", cpu=rng.choice(["100m", "1", "3"]))
        ex = explain(prof, pi, c)
        for other in ("n0", f"n{rng.randrange(8)}", "gone"):
            got = compare(prof, pi, c, other)
            assert got.best == ex.best, trial
            assert got.known == (other != "gone")
            if not ex.best:
                assert got.message == ex.message
                continue
            assert got.best_total == ex.node(ex.best[0]).total
            there = ex.node(other)
            assert got.total == (there.total if there is not None else None)
            assert got.rejection == (there.rejection if there is not None else None)
            if there is not None and there.feasible and other not in ex.best:
                assert got.lead is not None
                assert got.lead[1] == ex.deciding_plugin(ex.best[0], other)[1]


class OverLimit:
    """A relaxable filter (as Dynamic's limits) rejecting ``nodes`` unless the pass is relaxed."""

    name = "Load"
    relaxable = True

    def __init__(self, nodes: set[str]) -> None:
        self.nodes = nodes

    def filter(self, state, pod, ni):
        if ni.name in self.nodes and not state.relaxed:
            return unresolvable("node(s) had load above 0.65")
        return None


def test_a_relaxed_pass_is_explained_and_compared_as_a_cycle_runs_it():
    c = cluster(node("a", cpu="1"), node("b", cpu="4"), node("c", cpu="8"))
    base = default_profile(c)
    plugins = [OverLimit({"a", "b", "c"}), *base.plugins.values()]
    filters = ["Load", *(p.name for p in base.filters)]
    scores = [(p.name, w) for p, w in base.scores]
    prof = Profile(
        "p", plugins, filters=filters, pre_filters=[p.name for p in base.pre_filters], scores=scores
    )
    pi = pinfo("p", cpu="2")
    chosen = prof.schedule(CycleState(), pi, c)
    ex = explain(prof, pi, c)
    assert ex.relaxed == ["Load"] and ex.best == [chosen.node]
    assert (
        ex.unrelaxed_message
        == chosen.unrelaxed_message
        == "0/3 nodes are available: 3 node(s) had load above 0.65."
    )
    load = {n.node: n.filters[0] for n in ex.nodes}
    assert {v.code for v in load.values()} == {"Relaxed"}
    assert load["b"].message == "node(s) had load above 0.65"
    assert ex.node("a").rejection.plugin == "NodeResourcesFit"  # the pass still ran every other filter
    assert judge(ex, "").text.endswith(
        "No node passed every filter (0/3 nodes are available: 3 node(s) had load above 0.65.), "
        "so ours relaxed the Load filter."
    )
    got = compare(prof, pi, c, "a")
    assert (got.best, got.relaxed) == (ex.best, ("Load",))
    assert got.rejection.plugin == "NodeResourcesFit"
    # without the relaxable plugin's rejections, no relaxed pass
    prof.plugins["Load"].nodes = {"a"}
    assert explain(prof, pi, c).relaxed == [] and compare(prof, pi, c, "a").relaxed == ()
