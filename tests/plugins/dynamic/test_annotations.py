"""The Dynamic plugin fed by crane-scheduler-controller's node annotations (no promeAddr).

The annotations are written as crane's controller writes them (its value format,
and its local time in Asia/Shanghai with a literal ``Z``); expectations follow
crane's stats.go: fresh until time + syncPolicy period + 5m, the hot value for 5m.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from prometheus_client import CollectorRegistry

from scheduler.config.pluginargs import DynamicArgs
from scheduler.core.cache import Cache
from scheduler.core.framework import Code
from scheduler.plugins.dynamic.annotations import parse_annotation
from scheduler.plugins.dynamic.plugin import Dynamic

from ..builders import make_node, pod_info, run_filter, run_score
from .clocks import ManualClock
from .promapi import FakePrometheus

CRANE_POLICY = Path(__file__).parents[2] / "data" / "crane-scheduler" / "policy.yaml"
SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC).timestamp()


def crane_time(epoch: float, zone: ZoneInfo = SHANGHAI) -> str:
    """utils.GetLocalTime(): local wall time in the zone, formatted with a literal Z."""
    return datetime.fromtimestamp(epoch, zone).strftime("%Y-%m-%dT%H:%M:%SZ")


def annotated(name: str, age: float = 60.0, hot: int | None = None, **usage: float) -> dict[str, Any]:
    """A Node with crane's annotations written ``age`` seconds before NOW."""
    stamp = crane_time(NOW - age)
    annotations = {metric: f"{value:.5f},{stamp}" for metric, value in usage.items()}
    if hot is not None:
        annotations["node_hot_value"] = f"{hot},{stamp}"
    return make_node(name, annotations=annotations)


class Env:
    def __init__(self, **args: Any) -> None:
        self.cache = Cache()
        self.clock = ManualClock(NOW)
        self.hot_clock = ManualClock(0.0)
        handle = type("H", (), {"snapshot": self.cache, "metrics_registry": CollectorRegistry()})()
        args.setdefault("policy_config_path", str(CRANE_POLICY))
        self.args = DynamicArgs(**args)
        self.plugin = Dynamic(self.args, handle, clock=self.clock, hot_clock=self.hot_clock)

    def nodes(self, *nodes: dict[str, Any]) -> list[Any]:
        for n in nodes:
            self.cache.add_node(n)
        return [self.cache.get(n["metadata"]["name"]) for n in nodes]


def test_the_time_is_the_controllers_local_time_not_utc() -> None:
    stamp = crane_time(NOW)
    assert stamp == "2026-12-01T17:00:00Z"  # 09:00 UTC in Shanghai, with crane's literal Z
    assert parse_annotation(f"0.30000,{stamp}", SHANGHAI) == (0.3, NOW)
    assert parse_annotation(f"0.30000,{stamp}", ZoneInfo("UTC")) == (0.3, NOW + 8 * 3600)


@pytest.mark.parametrize(
    "text",
    [
        "0.3",
        "0.3,2026-12-01T17:00:00Z,x",
        "0.3,abc",
        "0.3,2026",
        "0.3,2026-12-01 17:00:00",
        "x,2026-12-01T17:00:00Z",
    ]
    + ["-0.1,2026-12-01T17:00:00Z", "NaN,2026-12-01T17:00:00Z", "Inf,2026-12-01T17:00:00Z"],
)
def test_what_crane_would_not_read_is_no_data(text: str) -> None:
    assert parse_annotation(text, SHANGHAI) is None


def test_fresh_annotations_filter_and_score_as_crane() -> None:
    env = Env()
    busy = annotated("busy", cpu_usage_avg_5m=0.8, mem_usage_avg_5m=0.2)
    idle = annotated(
        "idle",
        cpu_usage_avg_5m=0.1,
        cpu_usage_max_avg_1h=0.2,
        cpu_usage_max_avg_1d=0.3,
        mem_usage_avg_5m=0.1,
        mem_usage_max_avg_1h=0.2,
        mem_usage_max_avg_1d=0.3,
    )
    ns = env.nodes(busy, idle)
    got = run_filter(env.plugin, pod_info("web"), ns)
    assert got["busy"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert got["busy"].reasons == ("node(s) had cpu_usage_avg_5m above 0.65",)
    assert got["idle"] is None
    # crane: Σ (1-u)·w·100 / Σ w = (0.9·0.2 + 0.8·0.3 + 0.7·0.5)·2·100 / 2 = 77
    assert run_score(env.plugin, pod_info("web"), [ns[1]]) == {"idle": 77}


def test_an_annotation_expires_at_its_time_plus_period_plus_5m() -> None:
    env = Env()
    # cpu_usage_avg_5m's syncPolicy period is 3m: fresh for 8 minutes after it was written
    nodes = env.nodes(annotated("n", age=0.0, cpu_usage_avg_5m=0.9))
    env.clock.now = NOW + 8 * 60 - 1
    assert run_filter(env.plugin, pod_info("web"), nodes)["n"] is not None
    env.clock.now = NOW + 8 * 60 + 1
    assert run_filter(env.plugin, pod_info("web"), nodes)["n"] is None  # expired: passes (FailOpen)


def test_the_hot_value_annotation_counts_for_5_minutes_and_the_larger_count_wins() -> None:
    env = Env()
    usage = dict(cpu_usage_avg_5m=0.1, mem_usage_avg_5m=0.1)
    ns = env.nodes(annotated("hot", hot=3, **usage), annotated("cool", **usage))
    scores = run_score(env.plugin, pod_info("web"), ns)
    assert scores is not None and scores["cool"] - scores["hot"] == 30  # 10 points per hot value
    # this scheduler's own binds: 5 on cool at once are 5/5 + 5/2 = 3 (crane's hotValue rules)
    for i in range(5):
        env.plugin.reserve(None, pod_info(f"p{i}"), "cool")  # type: ignore[arg-type]
    scores = run_score(env.plugin, pod_info("web"), ns)
    assert scores is not None and scores["cool"] == scores["hot"]  # 3 (ours) against 3 (crane's)
    env.clock.now = NOW - 60 + 5 * 60 + 1  # the hot annotation was written 60 s before NOW
    scores = run_score(env.plugin, pod_info("web"), ns)
    assert scores is not None and scores["hot"] - scores["cool"] == 30  # only our count is left


def test_fail_closed_rejects_a_node_without_annotations() -> None:
    env = Env(missing_data_policy="FailClosed")
    got = run_filter(env.plugin, pod_info("web"), env.nodes(make_node("bare")))
    assert got["bare"].reasons == ("node(s) had no fresh load data",)


def test_prometheus_first_annotations_as_fallback(fake_prom: FakePrometheus) -> None:
    env_args = dict(prome_addr=fake_prom.url, annotation_fallback=True)
    env = Env(**env_args)
    fake_prom.eval_time = NOW
    fake_prom.set("cpu_usage_avg_5m", ({"instance": "from-prom"}, "0.9"))
    assert env.plugin.source is not None and env.plugin.source.refresh_all()
    ns = env.nodes(
        annotated("from-prom", cpu_usage_avg_5m=0.1),  # Prometheus says 0.9: it wins
        annotated("from-annotation", cpu_usage_avg_5m=0.9),  # Prometheus has nothing: the annotation
    )
    got = run_filter(env.plugin, pod_info("web"), ns)
    assert got["from-prom"] is not None and got["from-annotation"] is not None
    env.plugin.stop()
    # without the fallback, annotations are not read at all
    plain = Env(prome_addr=fake_prom.url)
    assert plain.plugin.annotations is None
    plain.plugin.stop()


def test_a_time_ahead_of_ours_counts_from_when_it_was_read() -> None:
    # crane would keep a value stamped a day ahead fresh for a day and then some
    env = Env()
    nodes = env.nodes(annotated("n", age=-86400, cpu_usage_avg_5m=0.9))
    assert run_filter(env.plugin, pod_info("web"), nodes)["n"] is not None  # read at NOW: fresh
    env.clock.now = NOW + 8 * 60 + 1
    assert run_filter(env.plugin, pod_info("web"), nodes)["n"] is None  # 3m + 5m after it was read
