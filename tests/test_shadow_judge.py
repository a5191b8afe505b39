"""scheduler.shadow.judge: the verdicts on the default profile's real plugins, and the sweep's cost."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from scheduler.core.cache import Cache
from scheduler.core.explain import Comparison
from scheduler.shadow.judge import DIFFERENT, PLACEABLE, SAME, UNSCHEDULABLE, Judge, decide
from tests.core.test_explain import default_profile
from tests.core.util import node, pinfo, pod


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def setup() -> tuple[Judge, Cache, CollectorRegistry, Clock]:
    cache = Cache()
    cache.add_node(node("small", cpu="2"))
    cache.add_node(node("big", cpu="8"))
    registry, clock = CollectorRegistry(), Clock()
    prof = default_profile(cache)
    return Judge(cache, {prof.name: prof}, registry, monotonic=clock), cache, registry, clock


def left_unschedulable(name: str, cpu: str) -> dict:
    p = pod(name, cpu=cpu)
    p["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/2 nodes are available",
        }
    ]
    return p


def judged(registry: CollectorRegistry) -> float:
    return registry.get_sample_value("dynamic_scheduler_shadow_decision_cpu_seconds_count") or 0.0


def test_each_verdict_for_a_bind():
    j, _, registry, _ = setup()
    assert j.bound(pinfo("a", cpu="1"), "big").verdict == SAME
    d = j.bound(pinfo("b", cpu="1"), "small")
    assert d.verdict == DIFFERENT and d.ours_node == "big" and d.plugin
    d = j.bound(pinfo("c", cpu="4"), "small")
    assert (d.verdict, d.plugin, d.reason) == (
        DIFFERENT,
        "NodeResourcesFit",
        "ours refuses small: Insufficient cpu",
    )
    assert j.bound(pinfo("d", cpu="64"), "big").verdict == UNSCHEDULABLE
    assert j.report()["agreement"] == 0.25
    assert (
        registry.get_sample_value(
            "dynamic_scheduler_shadow_decisions_total",
            {"profile": "default-scheduler", "verdict": "different"},
        )
        == 2
    )


def test_the_sweep_judges_a_pod_ours_cannot_place_either_once_a_minute():
    j, _, registry, clock = setup()
    stuck, fits = left_unschedulable("stuck", "64"), left_unschedulable("fits", "1")
    assert [d.verdict for d in j.sweep_pending([stuck, fits])] == [PLACEABLE]
    assert judged(registry) == 2
    for _ in range(5):  # sweeps every 10 s: neither is judged again
        clock.now += j.settings.sweep_every
        assert j.sweep_pending([stuck, fits]) == []
    assert judged(registry) == 2
    clock.now += j.settings.relook_every
    assert j.sweep_pending([stuck, fits]) == []
    assert judged(registry) == 3  # the stuck one again; the placeable one was reported once
    j.forget(stuck["metadata"]["uid"])  # bound or deleted meanwhile: judged afresh if it comes back
    assert j.sweep_pending([stuck]) == [] and judged(registry) == 4


def test_a_decision_made_with_a_filter_relaxed_says_so() -> None:
    relaxed = Comparison(["b"], 80, 80, None, None, relaxed=("Dynamic",))
    assert decide(relaxed, "b")[0] == SAME
    assert decide(relaxed, "b")[5] == "best total 80 (no node passed every filter: Dynamic relaxed)"
    plain = Comparison(["b"], 80, 80, None, None)
    assert decide(plain, "b")[5] == "best total 80"
