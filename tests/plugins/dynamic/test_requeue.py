"""Pods Dynamic rejected get another try when the load data changes (scheduler/plugins/dynamic/requeue.py).

The rules on their own (``LoadRequeuer.step`` with a clock the test moves),
then the plugin's thread over a real source and a local Prometheus API."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from scheduler.config.pluginargs import DynamicArgs
from scheduler.core.framework import CycleState
from scheduler.plugins.dynamic.plugin import Dynamic, build_source
from scheduler.plugins.dynamic.policy import load_policy
from scheduler.plugins.dynamic.requeue import REFRESHED, STALE, LoadRequeuer
from scheduler.polling import poll

from ..builders import FakeHandle, node_info, pod_info
from .clocks import ManualClock
from .promapi import FakePrometheus


class Gen:
    def __init__(self) -> None:
        self.value = 1

    def __call__(self) -> int:
        return self.value


def requeuer(moved: list[str], gen: Gen, expiries: list[float], clock: ManualClock) -> LoadRequeuer:
    return LoadRequeuer(moved.append, gen, lambda: expiries, clock=clock, max_wait=0.01)


def test_new_data_moves_the_rejected_pods() -> None:
    moved: list[str] = []
    gen = Gen()
    r = requeuer(moved, gen, [], ManualClock())
    assert r.step(1) == 1 and moved == []
    gen.value = 2
    assert r.step(1) == 2
    assert moved == [REFRESHED]


def test_a_rejection_going_stale_moves_the_pods_once() -> None:
    moved: list[str] = []
    clock = ManualClock(100.0)
    expiries = [110.0, 130.0]
    r = requeuer(moved, Gen(), expiries, clock)
    r.step(1)
    assert moved == []  # nothing stale yet
    clock.advance(15)
    r.step(1)
    assert moved == [STALE]
    r.step(1)
    assert moved == [STALE]  # 110 is handled; 130 is still ahead
    clock.advance(20)
    r.step(1)
    assert moved == [STALE, STALE]


class MovingHandle(FakeHandle):
    def __init__(self) -> None:
        super().__init__()
        self.moved: list[tuple[str, frozenset[str]]] = []

    def move_pods(self, event: str, plugins: frozenset[str]) -> None:
        self.moved.append((event, plugins))


def test_the_plugin_moves_its_rejects_on_a_refresh_and_when_they_go_stale(
    fake_prom: FakePrometheus, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: scheduler.policy.crane.io/v1alpha1\nkind: DynamicSchedulerPolicy\nspec:\n"
        "  syncPolicy: [{name: cpu, period: 1s}]\n"
        "  predicate: [{name: cpu, maxLimitPecent: 0.65}]\n"
    )
    args = DynamicArgs(prome_addr=fake_prom.url, policy_config_path=str(policy), stale_grace=0.0)
    source = build_source(load_policy(str(policy)), args, registry=CollectorRegistry())
    handle = MovingHandle()
    plugin = Dynamic(args, handle, source=source)
    try:
        fake_prom.set("cpu", ({"instance": "node-a"}, "0.9"))
        assert source.refresh("cpu")
        poll(lambda: handle.moved, 10, "the first refresh's move")
        assert handle.moved == [(REFRESHED, frozenset({"Dynamic"}))]
        assert plugin.filter(CycleState(), pod_info("p"), node_info("node-a")) is not None  # rejected
        # No refresh follows: within the 1 s period (grace 0) the value goes stale.
        poll(lambda: len(handle.moved) > 1, 10, "the stale value's move")
        assert handle.moved[1] == (STALE, frozenset({"Dynamic"}))
        assert plugin.filter(CycleState(), pod_info("p"), node_info("node-a")) is None  # passes: no data
    finally:
        plugin.stop()
