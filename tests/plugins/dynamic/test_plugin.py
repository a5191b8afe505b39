"""The Dynamic plugin: crane's filter and score formulas, missing and stale data, hot value.

Load data comes from a local server speaking Prometheus's API through the real
source; expectations are computed from crane's formulas in the test."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from scheduler.config.errors import ConfigError
from scheduler.config.pluginargs import DynamicArgs, DynamicEstimatorArgs
from scheduler.core.cache import Cache
from scheduler.core.framework import Code, CycleState, Status
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.dynamic.plugin import NO_FRESH_DATA, Dynamic, build_source
from scheduler.plugins.dynamic.policy import DynamicPolicy, load_policy

from ..builders import FakeHandle, FakeSnapshot, make_node, node_info, pod_info, run_filter, run_score
from .clocks import ManualClock
from .promapi import FakePrometheus

CRANE_DEFAULT = Path(__file__).parents[2] / "data" / "crane-scheduler" / "policy.yaml"
EVAL_TIME = 1_000_000.0


class Cluster:
    """A Dynamic plugin over a fake Prometheus, with clocks the test moves."""

    def __init__(self, prom: FakePrometheus, policy_path: Path, **args: Any) -> None:
        self.prom = prom
        self.clock = ManualClock(EVAL_TIME)
        self.hot_clock = ManualClock(0.0)
        self.args = DynamicArgs(prome_addr=prom.url, policy_config_path=str(policy_path), **args)
        self.policy: DynamicPolicy = load_policy(str(policy_path))
        self.source = build_source(self.policy, self.args, registry=CollectorRegistry(), clock=self.clock)
        self.plugin = Dynamic(
            self.args, FakeHandle(), source=self.source, clock=self.clock, hot_clock=self.hot_clock
        )
        prom.eval_time = EVAL_TIME

    def load(self, usage: Mapping[str, Mapping[str, float]]) -> None:
        """usage: node label value -> metric -> fraction; then refresh every metric."""
        metrics = {m for per_node in usage.values() for m in per_node} | set(self.source.metrics)
        for m in metrics:
            self.prom.set(
                m,
                *[({"instance": node}, repr(v)) for node, per in usage.items() if m in per for v in [per[m]]],
            )
        assert self.source.refresh_all()


@pytest.fixture
def crane(fake_prom: FakePrometheus) -> Cluster:
    return Cluster(fake_prom, CRANE_DEFAULT)


def write_policy(tmp_path: Path, spec: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text("apiVersion: scheduler.policy.crane.io/v1alpha1\nkind: DynamicSchedulerPolicy\n" + spec)
    return path


def crane_reasons(policy: DynamicPolicy, usage: Mapping[str, float]) -> tuple[str, ...]:
    """crane's predicate: usage > maxLimitPecent rejects; a limit of 0 is off; missing passes."""
    return tuple(
        f"node(s) had {p.name} above {p.max_limit_percent:g}"
        for p in policy.predicate
        if p.max_limit_percent and p.name in usage and usage[p.name] > p.max_limit_percent
    )


def crane_load_score(policy: DynamicPolicy, usage: Mapping[str, float]) -> int:
    """crane's priority with every metric present: Σ (1-u)·w·100 / Σ w, truncated."""
    total = sum((1 - usage[p.name]) * p.weight * 100 for p in policy.priority)
    return int(total / sum(p.weight for p in policy.priority) + 1e-9)


def everything(value: float) -> dict[str, float]:
    return {
        m: value
        for m in (
            "cpu_usage_avg_5m",
            "cpu_usage_max_avg_1h",
            "cpu_usage_max_avg_1d",
            "mem_usage_avg_5m",
            "mem_usage_max_avg_1h",
            "mem_usage_max_avg_1d",
        )
    }


USAGE = {
    "node-a": everything(0.1),
    "node-b": {**everything(0.3), "cpu_usage_avg_5m": 0.66},
    "node-c": {**everything(0.5), "cpu_usage_avg_5m": 0.7, "mem_usage_max_avg_1h": 0.8},
    "node-d": {**everything(0.2), "cpu_usage_avg_5m": 0.65, "cpu_usage_max_avg_1h": 0.75},  # at the limits
    "node-e": {
        "cpu_usage_avg_5m": 0.3,
        "cpu_usage_max_avg_1h": 0.5,
        "cpu_usage_max_avg_1d": 0.4,
        "mem_usage_avg_5m": 0.6,
        "mem_usage_max_avg_1h": 0.7,
        "mem_usage_max_avg_1d": 0.2,
    },
}


def nodes(*names: str) -> list[Any]:
    return [node_info(n) for n in names]


def test_filter_rejects_each_metric_above_its_limit_with_aggregatable_reasons(crane: Cluster) -> None:
    crane.load(USAGE)
    got = run_filter(crane.plugin, pod_info("web"), nodes(*USAGE))
    for name, usage in USAGE.items():
        reasons = crane_reasons(crane.policy, usage)
        assert got[name] == (Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons) if reasons else None), name
    # spelled out for the two rejected nodes
    assert got["node-b"].reasons == ("node(s) had cpu_usage_avg_5m above 0.65",)
    assert got["node-c"].reasons == (
        "node(s) had cpu_usage_avg_5m above 0.65",
        "node(s) had mem_usage_max_avg_1h above 0.75",
    )


def test_daemonset_pods_skip_the_filter(crane: Cluster) -> None:
    crane.load(USAGE)
    got = run_filter(crane.plugin, pod_info("agent", owner_kind="DaemonSet"), nodes(*USAGE))
    assert got == dict.fromkeys(USAGE)
    assert (
        run_filter(crane.plugin, pod_info("rs", owner_kind="ReplicaSet"), nodes("node-b"))["node-b"]
        is not None
    )


def test_score_is_cranes_weighted_free_capacity(crane: Cluster) -> None:
    crane.load(USAGE)
    got = run_score(crane.plugin, pod_info("web"), nodes(*USAGE))
    assert got == {name: crane_load_score(crane.policy, usage) for name, usage in USAGE.items()}
    # by hand for node-e: weights sum to 2.0; 0.2·0.7+0.3·0.5+0.5·0.6+0.2·0.4+0.3·0.3+0.5·0.8 = 1.16
    assert got is not None and got["node-e"] == 58
    assert got["node-a"] == 90


def test_hot_value_lowers_the_score_at_once_and_is_clamped(crane: Cluster) -> None:
    crane.load({"node-a": everything(0.1), "node-c": everything(0.85)})
    plugin, state = crane.plugin, CycleState()
    for i in range(5):
        plugin.reserve(state, pod_info(f"p{i}", uid=f"p{i}"), "node-a")
    # crane's default rules: floor(5/5) + floor(5/2) = 3 -> minus 30
    assert run_score(plugin, pod_info("web"), nodes("node-a")) == {"node-a": 90 - 30}
    plugin.unreserve(state, pod_info("p0", uid="p0"), "node-a")
    assert run_score(plugin, pod_info("web"), nodes("node-a")) == {"node-a": 90 - 10 * (4 // 5 + 4 // 2)}
    plugin.post_bind(state, pod_info("p1", uid="p1"), "node-a")  # already counted
    assert run_score(plugin, pod_info("web"), nodes("node-a")) == {"node-a": 70}

    for i in range(4):
        plugin.reserve(state, pod_info(f"q{i}", uid=f"q{i}"), "node-c")
    # 15 - 10·(4//5 + 4//2) = -5, clamped
    assert run_score(plugin, pod_info("web"), nodes("node-c")) == {"node-c": 0}
    crane.hot_clock.advance(61)  # out of the 1m window, still in the 5m one
    assert run_score(plugin, pod_info("web"), nodes("node-a", "node-c")) == {
        "node-a": 90 - 10 * (4 // 5),
        "node-c": 15 - 10 * (4 // 5),
    }
    # without PreScore (a profile that runs Score alone) the value is read per node
    assert plugin.score(CycleState(), pod_info("web"), node_info("node-a")) == 90


def test_missing_priority_metric_scores_as_the_cluster_median(crane: Cluster) -> None:
    usage = {
        "node-a": everything(0.2),
        "node-b": everything(0.4),
        "node-c": everything(0.9),
        "node-new": {m: v for m, v in everything(0.1).items() if m != "mem_usage_max_avg_1d"},
    }
    crane.load(usage)
    got = run_score(crane.plugin, pod_info("web"), nodes(*usage))
    # mem_usage_max_avg_1d over a, b, c: 0.2 0.4 0.9 -> median 0.4
    assert got is not None
    assert got["node-new"] == crane_load_score(
        crane.policy, {**usage["node-new"], "mem_usage_max_avg_1d": 0.4}
    )
    # crane would count the term as 0: Σ w(1-u)·100 without it, over all of Σ w
    crane_penalised = int(
        sum((1 - 0.1) * p.weight * 100 for p in crane.policy.priority if p.name != "mem_usage_max_avg_1d")
        / 2.0
    )
    assert got["node-new"] > crane_penalised


def test_with_no_data_at_all_every_node_is_neutral_and_passes(fake_prom: FakePrometheus) -> None:
    cluster = Cluster(fake_prom, CRANE_DEFAULT)
    cluster.load({})
    assert run_filter(cluster.plugin, pod_info("web"), nodes("node-a", "node-b")) == {
        "node-a": None,
        "node-b": None,
    }
    assert run_score(cluster.plugin, pod_info("web"), nodes("node-a")) == {"node-a": 50}


def test_prometheus_unreachable_from_the_start_never_fails_scheduling(tmp_path: Path) -> None:
    args = DynamicArgs(
        prome_addr="http://127.0.0.1:9", policy_config_path=str(CRANE_DEFAULT), query_timeout=0.5
    )
    plugin = Dynamic(args, FakeHandle(), registry=CollectorRegistry())
    try:
        assert run_filter(plugin, pod_info("web"), nodes("node-a")) == {"node-a": None}
        assert run_score(plugin, pod_info("web"), nodes("node-a")) == {"node-a": 50}
    finally:
        started = time.monotonic()
        plugin.stop()
        assert time.monotonic() - started < 2.5


def test_fail_closed_rejects_nodes_without_fresh_predicate_data(fake_prom: FakePrometheus) -> None:
    cluster = Cluster(fake_prom, CRANE_DEFAULT, missing_data_policy="FailClosed")
    cluster.load(
        {
            "node-a": everything(0.1),
            "node-b": {
                m: v for m, v in everything(0.1).items() if m != "mem_usage_max_avg_1h"
            },  # a predicate
            "node-c": {
                m: v for m, v in everything(0.1).items() if m != "cpu_usage_max_avg_1d"
            },  # priority only
            "node-d": {**everything(0.1), "cpu_usage_avg_5m": 0.9, "mem_usage_avg_5m": 0.1},
        }
    )
    got = run_filter(cluster.plugin, pod_info("web"), nodes("node-a", "node-b", "node-c", "node-d", "node-x"))
    assert got["node-a"] is None
    assert got["node-b"] == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_FRESH_DATA,))
    assert got["node-c"] is None
    assert got["node-d"].reasons == ("node(s) had cpu_usage_avg_5m above 0.65",)
    assert got["node-x"].reasons == (NO_FRESH_DATA,)
    assert run_filter(cluster.plugin, pod_info("ds", owner_kind="DaemonSet"), nodes("node-x")) == {
        "node-x": None
    }
    # A relaxed pass (no node passed every filter) waives the limits, not the missing data.
    relaxed = CycleState()
    relaxed.relaxed = True
    web = pod_info("web")
    got = {n.name: cluster.plugin.filter(relaxed, web, n) for n in nodes("node-b", "node-d", "node-x")}
    assert got == {"node-b": got["node-x"], "node-d": None, "node-x": got["node-x"]}
    assert got["node-x"] is not None and got["node-x"].reasons == (NO_FRESH_DATA,)
    assert not cluster.plugin.relaxable  # relaxWhenNothingFits: off unless configured, as crane
    assert Cluster(fake_prom, CRANE_DEFAULT, relax_when_nothing_fits=True).plugin.relaxable


def test_a_limit_of_zero_disables_the_check_even_when_failing_closed(
    tmp_path: Path, fake_prom: FakePrometheus
) -> None:
    path = write_policy(
        tmp_path,
        """\
spec:
  syncPolicy: [{name: cpu, period: 1m}, {name: mem, period: 1m}]
  predicate: [{name: cpu, maxLimitPecent: 0}, {name: mem, maxLimitPecent: 0.5}]
""",
    )
    cluster = Cluster(fake_prom, path, missing_data_policy="FailClosed")
    cluster.load({"node-a": {"cpu": 1.0, "mem": 0.2}, "node-b": {"mem": 0.2}})
    assert run_filter(cluster.plugin, pod_info("web"), nodes("node-a", "node-b")) == {
        "node-a": None,
        "node-b": None,
    }


@pytest.mark.parametrize("mode", ["FailOpen", "FailClosed"])
def test_values_older_than_period_plus_grace_count_as_missing(fake_prom: FakePrometheus, mode: str) -> None:
    cluster = Cluster(fake_prom, CRANE_DEFAULT, stale_grace=300.0, missing_data_policy=mode)
    cluster.load({"node-b": {**everything(0.3), "cpu_usage_avg_5m": 0.9}})
    limit = 180.0 + 300.0  # cpu_usage_avg_5m: period 3m + stale_grace
    plugin, node = cluster.plugin, node_info("node-b")

    cluster.clock.advance(limit)
    assert run_filter(plugin, pod_info("web"), [node])["node-b"].reasons == (
        "node(s) had cpu_usage_avg_5m above 0.65",
    )
    cluster.clock.advance(0.001)  # same data, no refresh: only time has passed
    expected = None if mode == "FailOpen" else Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_FRESH_DATA,))
    assert run_filter(plugin, pod_info("web"), [node])["node-b"] == expected

    # the 1h metrics (period 15m) are still fresh; the 5m ones score neutral (no fresh series anywhere)
    fresh = {
        m: 0.3
        for m in (
            "cpu_usage_max_avg_1h",
            "cpu_usage_max_avg_1d",
            "mem_usage_max_avg_1h",
            "mem_usage_max_avg_1d",
        )
    }
    neutral = {"cpu_usage_avg_5m": 0.5, "mem_usage_avg_5m": 0.5}
    assert run_score(plugin, pod_info("web"), [node]) == {
        "node-b": crane_load_score(cluster.policy, {**fresh, **neutral})
    }

    cluster.prom.eval_time = cluster.clock.now
    assert cluster.source.refresh_all()  # Prometheus answers again
    assert run_filter(plugin, pod_info("web"), [node])["node-b"].reasons == (
        "node(s) had cpu_usage_avg_5m above 0.65",
    )


def test_nodes_match_by_internal_ip_and_follow_node_updates(crane: Cluster) -> None:
    crane.load({"10.0.0.5:9100": {**everything(0.1), "cpu_usage_avg_5m": 0.9}, "10.0.0.6": everything(0.1)})
    node = node_info("node-x", internal_ip="10.0.0.5")
    assert run_filter(crane.plugin, pod_info("web"), [node])["node-x"] is not None
    moved = node_info("node-x", internal_ip="10.0.0.6")  # the same node, a new Node object
    assert run_filter(crane.plugin, pod_info("web"), [moved])["node-x"] is None


def test_a_refresh_replaces_the_cached_verdicts(crane: Cluster) -> None:
    crane.load({"node-a": everything(0.1)})
    node = node_info("node-a")
    assert run_filter(crane.plugin, pod_info("web"), [node])["node-a"] is None
    crane.load({"node-a": everything(0.7)})
    assert run_filter(crane.plugin, pod_info("web"), [node])["node-a"] is not None
    assert run_score(crane.plugin, pod_info("web"), [node]) == {
        "node-a": crane_load_score(crane.policy, everything(0.7))
    }


def test_without_priorities_the_load_part_is_full_and_hot_value_still_counts(
    tmp_path: Path, fake_prom: FakePrometheus
) -> None:
    path = write_policy(
        tmp_path,
        """\
spec:
  syncPolicy: [{name: cpu, period: 1m}]
  predicate: [{name: cpu, maxLimitPecent: 0.8}]
  hotValue: [{timeRange: 1m, count: 1}]
""",
    )
    cluster = Cluster(fake_prom, path)
    cluster.load({"node-a": {"cpu": 0.7}, "node-b": {"cpu": 0.1}})
    cluster.plugin.reserve(CycleState(), pod_info("p", uid="p"), "node-b")
    assert run_score(cluster.plugin, pod_info("web"), nodes("node-a", "node-b")) == {
        "node-a": 100,
        "node-b": 90,
    }


def test_bad_policy_or_args_fail_the_constructor(tmp_path: Path) -> None:
    # no args at all: crane's defaults, whose policy file is not here
    with pytest.raises(ConfigError, match="/etc/kubernetes/dynamic-scheduler-policy.yaml: cannot read"):
        Dynamic(None, FakeHandle(), registry=CollectorRegistry())
    with pytest.raises(ConfigError) as caught:
        Dynamic(
            DynamicArgs(prome_addr="http://p:9090", policy_config_path=str(tmp_path / "missing.yaml")),
            FakeHandle(),
            registry=CollectorRegistry(),
        )
    assert caught.value.file == str(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="FailClosed"):
        Dynamic(
            DynamicArgs(
                prome_addr="http://p:9090", policy_config_path=str(CRANE_DEFAULT), missing_data_policy="Maybe"
            ),  # type: ignore[arg-type]
            FakeHandle(),
            registry=CollectorRegistry(),
        )


@pytest.fixture
def started_plugin(fake_prom: FakePrometheus) -> Iterator[Dynamic]:
    for m, v in everything(0.9).items():
        fake_prom.set(m, ({"instance": "node-a"}, repr(v)))
    plugin = Dynamic(
        DynamicArgs(prome_addr=fake_prom.url, policy_config_path=str(CRANE_DEFAULT)),
        FakeHandle(),
        registry=CollectorRegistry(),
    )
    yield plugin
    plugin.stop()


def test_the_plugin_fetches_in_the_background_and_stops_promptly(started_plugin: Dynamic) -> None:
    deadline = time.monotonic() + 10
    while (
        len(
            [
                m
                for m in started_plugin.source.metrics
                if started_plugin.source.view(m).lookup("node-a", "") is not None
            ]
        )
        < 6
    ):
        assert started_plugin.source.wait_refreshed(
            started_plugin.source.generation, timeout=max(0.0, deadline - time.monotonic())
        )
    assert run_filter(started_plugin, pod_info("web"), nodes("node-a"))["node-a"] is not None
    started = time.monotonic()
    started_plugin.stop()
    assert time.monotonic() - started < 1.0


def test_filter_and_score_cost_microseconds_per_node(crane: Cluster) -> None:
    usage = {f"node-{i}": everything((i % 90) / 100) for i in range(1000)}
    crane.load(usage)
    all_nodes = nodes(*usage)
    pod = pod_info("web")
    run_filter(crane.plugin, pod, all_nodes)  # first pass computes the per-node cache
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        run_filter(crane.plugin, pod, all_nodes)
        run_score(crane.plugin, pod, all_nodes)
        best = min(best, time.perf_counter() - started)
    per_node_us = best / len(all_nodes) * 1e6
    assert per_node_us < 20, f"{per_node_us:.1f} µs per node for filter + score"


def test_explain_node_shows_the_values_their_age_limits_and_the_hot_value(crane: Cluster) -> None:
    crane.load({"node-b": {**everything(0.3), "cpu_usage_avg_5m": 0.66}})
    plugin = crane.plugin
    crane.clock.advance(40)
    for i in range(2):  # bound by another scheduler, seen by shadow mode: 2 within a minute
        plugin.note_bound(f"p{i}", "node-b")
    got = plugin.explain_node(CycleState(), pod_info("p"), node_info("node-b"))
    cpu = got["metrics"]["cpu_usage_avg_5m"]
    assert cpu == {"percent": 66.0, "ageSeconds": 40.0, "limitPercent": 65.0}
    assert got["metrics"]["cpu_usage_max_avg_1d"] == {"percent": 30.0, "ageSeconds": 40.0}  # a priority only
    assert got["hotValue"] == 1  # crane's rules: floor(2/5) + floor(2/2)
    assert got["loadScore"] == crane_load_score(crane.policy, {**everything(0.3), "cpu_usage_avg_5m": 0.66})
    # A bind 70 s ago (explain rebuilds the hot value from PodScheduled times) is out of the 1m rule.
    plugin.note_bound("old", "node-c", ago=70)
    assert plugin.explain_node(CycleState(), pod_info("p"), node_info("node-c"))["hotValue"] == 0
    assert plugin.explain_node(CycleState(), pod_info("p"), node_info("node-c"))["metrics"][
        "cpu_usage_avg_5m"
    ] == {
        "missing": True,
        "limitPercent": 65.0,
    }
    crane.clock.advance(180 + 300)  # older than period + grace (stale_grace defaults to 5m)
    stale = plugin.explain_node(CycleState(), pod_info("p"), node_info("node-b"))["metrics"][
        "cpu_usage_avg_5m"
    ]
    assert stale["stale"] is True and stale["ageSeconds"] == 520.0


def test_metrics_show_each_nodes_usage_hot_value_and_rejection_as_the_plugin_sees_them(
    fake_prom: FakePrometheus,
) -> None:
    registry = CollectorRegistry()
    crane = Cluster(fake_prom, CRANE_DEFAULT)
    handle = FakeHandle(FakeSnapshot(nodes(*USAGE, "node-none")), scheduler_name="load-aware")
    plugin = Dynamic(
        crane.args,
        handle,
        source=crane.source,
        registry=registry,
        clock=crane.clock,
        hot_clock=crane.hot_clock,
    )
    crane.load(USAGE)
    for i in range(3):
        plugin.note_bound(f"p{i}", "node-a")
    rejected = run_filter(plugin, pod_info("web"), nodes(*USAGE))

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"profile": "load-aware", **labels})

    for node, usage in USAGE.items():
        for metric, value in usage.items():
            assert sample("dynamic_scheduler_node_usage", node=node, metric=metric) == value
        want_rejected = 0.0 if rejected[node] is None else 1.0
        assert sample("dynamic_scheduler_node_rejected", node=node) == want_rejected, node
    assert sample("dynamic_scheduler_node_usage", node="node-none", metric="cpu_usage_avg_5m") is None
    assert sample("dynamic_scheduler_node_rejected", node="node-none") == 0.0
    assert {n: sample("dynamic_scheduler_node_hot_value", node=n) for n in ("node-a", "node-b")} == {
        "node-a": float(plugin.hot.value("node-a")),
        "node-b": 0.0,
    }
    assert plugin.hot.value("node-a") > 0
    assert any(rejected.values()) and not all(rejected.values())


def placed_on(plugin: Dynamic, node: str, *pods: PodInfo, **node_kwargs: Any) -> Any:
    """A NodeInfo with ``pods`` reserved on it by ``plugin`` (as the scheduling loop does)."""
    ni = node_info(node, **node_kwargs)
    for p in pods:
        plugin.reserve(CycleState(), p, node)
        p.pod["spec"]["nodeName"] = node
        ni.add_pod(p)
    return ni


def queued(name: str) -> PodInfo:
    """A pod asking 1 cpu, created long before any sample: only Reserve's time makes it recent."""
    return pod_info(name, uid=name, cpu="1", creation_timestamp="1970-01-01T00:00:00Z")


def plus(usage: Mapping[str, float], cpu: float, memory: float) -> dict[str, float]:
    return {m: v + (cpu if m.startswith("cpu") else memory) for m, v in usage.items()}


def test_pods_placed_since_the_sample_count_at_their_estimate(crane: Cluster) -> None:
    crane.load({"node-a": everything(0.5), "node-b": everything(0.5)})
    plugin, web = crane.plugin, pod_info("web", cpu="1")
    assert run_filter(plugin, web, nodes("node-a"))["node-a"] is None
    a = placed_on(plugin, "node-a", queued("p0"), cpu="4", memory="8Gi")
    # 1 cpu · 85% of 4 cpu; no memory request: 200Mi of 8Gi
    usage = plus(everything(0.5), 0.85 / 4, 200 / 8192)
    assert run_filter(plugin, web, [a])["node-a"] == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, crane_reasons(crane.policy, usage)
    )
    assert crane_reasons(crane.policy, usage) == ("node(s) had cpu_usage_avg_5m above 0.65",)
    scores = run_score(plugin, web, [a, node_info("node-b")])
    assert scores == {"node-a": crane_load_score(crane.policy, usage), "node-b": 50}
    assert scores is not None and scores["node-a"] < scores["node-b"]
    explained = plugin.explain_node(CycleState(), web, a)["metrics"]["cpu_usage_avg_5m"]
    assert explained["percent"] == 50.0 and explained["unseenPercent"] == 21.25

    # The next sample, 60 s (lag) + 150 s (half the 5m window) after the placement, holds half.
    crane.clock.advance(210)
    crane.prom.eval_time = crane.clock.now
    crane.load({"node-a": everything(0.5), "node-b": everything(0.5)})
    half = plus(everything(0.5), 0.85 / 8, 200 / 16384)
    assert run_score(plugin, web, [a]) == {"node-a": crane_load_score(crane.policy, half)}
    assert run_filter(plugin, web, [a])["node-a"] is None  # 0.60625 <= 0.65

    # A pod placed by another scheduler counts from its PodScheduled time: not at all when the
    # sample holds it in full, in full when it came after the sample.
    def bound_by_another(name: str, when: str) -> PodInfo:
        pod = pod_info(name, uid=name, cpu="1", node_name="node-a").pod
        pod["status"] = {
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": when}]
        }
        return PodInfo.from_pod(pod)

    a.add_pod(bound_by_another("long-ago", "1970-01-02T00:00:00Z"))
    assert run_score(plugin, web, [a]) == {"node-a": crane_load_score(crane.policy, half)}
    a.add_pod(bound_by_another("just-now", "1970-01-12T13:51:40Z"))  # 1_000_300: after the sample
    both = plus(half, 0.85 / 4, 200 / 8192)
    assert run_filter(plugin, web, [a])["node-a"] is not None
    assert run_score(plugin, web, [a]) == {"node-a": crane_load_score(crane.policy, both)}


def test_without_the_estimator_the_verdicts_and_scores_are_cranes(fake_prom: FakePrometheus) -> None:
    crane = Cluster(fake_prom, CRANE_DEFAULT, estimator=DynamicEstimatorArgs(enabled=False))
    crane.load({"node-a": everything(0.5)})
    web = pod_info("web", cpu="1")
    a = placed_on(crane.plugin, "node-a", *(queued(f"p{i}") for i in range(3)))
    assert run_filter(crane.plugin, web, [a])["node-a"] is None
    # crane's default hot value rules: floor(3/5) + floor(3/2)
    assert run_score(crane.plugin, web, [a]) == {"node-a": 50 - 10}


def test_an_unreserved_pod_leaves_the_node_and_its_estimate(crane: Cluster) -> None:
    crane.load({"node-a": everything(0.5)})
    web = pod_info("web", cpu="1")
    p0 = queued("p0")
    a = placed_on(crane.plugin, "node-a", p0)
    assert run_filter(crane.plugin, web, [a])["node-a"] is not None
    crane.plugin.unreserve(CycleState(), p0, "node-a")
    a.remove_pod("p0")  # the loop forgets the assumed pod
    assert run_filter(crane.plugin, web, [a])["node-a"] is None


def test_the_usage_gauge_includes_the_estimate(fake_prom: FakePrometheus) -> None:
    registry = CollectorRegistry()
    crane = Cluster(fake_prom, CRANE_DEFAULT)
    a = placed_on(crane.plugin, "node-a", queued("p0"))  # reserved by the scheduling profile
    plugin = Dynamic(
        crane.args,
        FakeHandle(FakeSnapshot([a]), scheduler_name="p"),
        source=crane.source,
        registry=registry,
        clock=crane.clock,
        hot_clock=crane.hot_clock,
    )
    crane.load({"node-a": everything(0.5)})
    assert plugin.estimator is not None  # (and the collector holds the plugin weakly: keep it)
    labels = {"profile": "p", "node": "node-a"}
    got = registry.get_sample_value("dynamic_scheduler_node_usage", {**labels, "metric": "cpu_usage_avg_5m"})
    assert got == pytest.approx(0.5 + 0.85 / 4)
    assert registry.get_sample_value("dynamic_scheduler_node_rejected", labels) == 1.0


def test_a_scrape_walks_each_nodes_pods_while_the_informers_change_them(fake_prom: FakePrometheus) -> None:
    """/metrics computes the estimate of every node's recent pods on the scrape's thread, while
    the informers' threads add and remove pods in the scheduler's cache: a node's pods must not
    change under the walk (a scrape answered 500, "dictionary keys changed during iteration")."""
    registry = CollectorRegistry()
    crane = Cluster(fake_prom, CRANE_DEFAULT)
    cache = Cache()
    cache.add_node(make_node("node-a", cpu="1000"))

    def bound(i: int) -> PodInfo:  # created after the sample: each one is walked
        return pod_info(f"p{i}", uid=f"p{i}", cpu="100m", node_name="node-a")

    for i in range(2000):
        cache.add_pod(bound(i))
    plugin = Dynamic(
        crane.args,
        FakeHandle(cache, scheduler_name="p"),
        source=crane.source,
        registry=registry,
        clock=crane.clock,
        hot_clock=crane.hot_clock,
    )
    crane.load({"node-a": everything(0.5)})
    stop, turned = threading.Event(), [0]

    def informer() -> None:  # one pod goes, another comes: the same number of keys
        i = 2000
        while not stop.is_set():
            cache.remove_pod(f"p{i - 2000}")
            cache.add_pod(bound(i))
            i += 1
            turned[0] += 1

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over as often as it can be
    thread = threading.Thread(target=informer, daemon=True)
    thread.start()
    try:
        for _ in range(30):
            text = generate_latest(registry).decode()
            assert 'dynamic_scheduler_node_rejected{node="node-a",profile="p"}' in text
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(switch)
    assert turned[0] > 0 and plugin.estimator is not None  # pods came and went; each was estimated
