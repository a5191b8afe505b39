"""The Dynamic plugin's estimate of pods its samples cannot show yet (``plugins.dynamic.estimate``).

The expected fractions are worked out by hand from the module doc's formula."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from scheduler.config.pluginargs import DynamicEstimatorArgs
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.dynamic.estimate import PLACED, Estimator, metric_resource, placed_at

from ..builders import make_pod, node_info

CRANE_METRICS = ("cpu_usage_avg_5m", "cpu_usage_max_avg_1h", "mem_usage_avg_5m", "mem_usage_max_avg_1d")
T = 1_800_000_000.0
"""A sample time (epoch seconds, whole, so API timestamps can express it)."""


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scheduled_pod(name: str, at: float, **kwargs: Any) -> PodInfo:
    """A pod the API server bound at ``at``: the PodScheduled condition it then carries."""
    pod = make_pod(name, uid=name, **kwargs)
    pod["status"] = {
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(at)}]
    }
    return PodInfo.from_pod(pod)


def container(request: dict[str, str] | None = None, limit: dict[str, str] | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if request:
        res["requests"] = request
    if limit:
        res["limits"] = limit
    return {"name": "c", "image": "x", "resources": res}


@pytest.fixture
def est() -> Estimator:
    return Estimator(DynamicEstimatorArgs(), CRANE_METRICS)


def estimate(est: Estimator, **kwargs: Any) -> tuple[int, int]:
    return est.pod_estimate(PodInfo.from_pod(make_pod("p", **kwargs)))


def test_a_pods_estimate_is_its_requests_times_the_factors_capped_by_limits(est: Estimator) -> None:
    # 1 cpu · 85% and 1Gi · 70%
    assert estimate(est, containers=[container({"cpu": "1", "memory": "1Gi"})]) == (850, int(0.7 * 2**30))
    # capped by the limit: 1 cpu · 85% > 800m
    assert estimate(est, containers=[container({"cpu": "1"}, {"cpu": "800m"})])[0] == 800
    # a limit far above the request does not raise the estimate
    assert estimate(est, containers=[container({"cpu": "1"}, {"cpu": "8"})])[0] == 850
    # containers add up; a sidecar runs beside them, a classic init container does not
    sidecar = {**container({"cpu": "200m"}), "restartPolicy": "Always"}
    init = container({"cpu": "4"})
    assert (
        estimate(
            est,
            containers=[container({"cpu": "1"}), container({"cpu": "1"})],
            init_containers=[sidecar, init],
        )[0]
        == 1700 + 170
    )


def test_a_pod_without_requests_gets_the_defaults_and_the_args_change_them() -> None:
    default = Estimator(DynamicEstimatorArgs(), CRANE_METRICS)
    assert estimate(default) == (250, 200 * 2**20)
    own = Estimator(
        DynamicEstimatorArgs(default_cpu="1", default_memory="1Gi", cpu_scaling_factor=50), CRANE_METRICS
    )
    assert estimate(own) == (1000, 2**30)
    assert estimate(own, containers=[container({"cpu": "2"})])[0] == 1000


def test_pod_level_resources_replace_the_containers_sum(est: Estimator) -> None:
    pod = make_pod("p", containers=[container({"cpu": "1"})])
    pod["spec"]["resources"] = {"requests": {"cpu": "4"}, "limits": {"cpu": "3"}}
    assert est.pod_estimate(PodInfo.from_pod(pod))[0] == 3000


def test_metrics_map_to_resources_by_name_unless_the_args_say() -> None:
    assert metric_resource("cpu_usage_avg_5m", {}) == "cpu"
    assert metric_resource("node:CPU_utilisation", {}) == "cpu"
    assert metric_resource("mem_usage_max_avg_1d", {}) == "memory"
    assert metric_resource("load1", {}) is None
    assert metric_resource("load1", {"load1": "cpu"}) == "cpu"
    assert metric_resource("cpu_usage_avg_5m", {"cpu_usage_avg_5m": "memory"}) == "memory"


def test_when_a_pod_was_placed_reserve_time_then_condition_then_start_then_creation() -> None:
    pod = scheduled_pod("p", T)
    assert placed_at(pod) == T
    pod.memo[PLACED] = T + 0.25
    assert placed_at(pod) == T + 0.25
    started = make_pod("s", creation_timestamp=rfc3339(T - 100))
    assert placed_at(PodInfo.from_pod(started)) == T - 100
    started["status"] = {"startTime": rfc3339(T - 50)}
    assert placed_at(PodInfo.from_pod(started)) == T - 50


def test_unseen_load_ramps_down_over_the_window_after_the_lag(est: Estimator) -> None:
    # 4 cpu; each pod requests 1 cpu -> 850m, 21.25% of the node
    one = 850 / 4000
    seen_until = T - 60  # default lag 1m; window 5m

    def unseen(*placed: float, metric: str = "cpu_usage_avg_5m") -> float:
        pods = [scheduled_pod(f"p{i}", at, cpu="1") for i, at in enumerate(placed)]
        node = node_info("n", cpu="4", memory="8Gi", pods=pods)
        recent = est.recent(node, T - 60 - 300)
        return est.unseen(node, recent, metric, T)

    assert unseen(T) == pytest.approx(one)  # after the sample
    assert unseen(seen_until + 1) == pytest.approx(one)  # inside the lag: not in the data yet
    assert unseen(seen_until - 150) == pytest.approx(one / 2)  # half the window
    assert unseen(seen_until - 240) == pytest.approx(one / 5)
    assert unseen(seen_until - 300) == 0.0
    assert unseen(seen_until - 3600) == 0.0
    assert unseen(T, seen_until - 150, seen_until - 900) == pytest.approx(one * 1.5)
    # memory: 1 cpu pods request no memory -> the 200Mi default · 1 of 8Gi
    assert unseen(T, metric="mem_usage_avg_5m") == pytest.approx(200 / (8 * 1024))
    assert unseen(T, metric="load1") == 0.0


def test_a_metric_with_a_window_of_its_own_takes_a_pod_in_over_that_window() -> None:
    args = DynamicEstimatorArgs(metric_windows={"cpu_usage_active": 60.0})
    est = Estimator(args, ("cpu_usage_active", *CRANE_METRICS))
    assert est.window == 300.0  # the longest: how far back the recent pods are looked for
    one = 850 / 4000
    seen_until = T - 60
    pods = [scheduled_pod("p", seen_until - 30, cpu="1")]
    node = node_info("n", cpu="4", memory="8Gi", pods=pods)
    recent = est.recent(node, T - 60 - est.window)
    assert est.unseen(node, recent, "cpu_usage_active", T) == pytest.approx(one / 2)  # half of 1m
    assert est.unseen(node, recent, "cpu_usage_avg_5m", T) == pytest.approx(one * 0.9)  # a tenth of 5m
    old = node_info("n", cpu="4", memory="8Gi", pods=[scheduled_pod("p", seen_until - 60, cpu="1")])
    recent = est.recent(old, T - 60 - est.window)
    assert est.unseen(old, recent, "cpu_usage_active", T) == 0.0
    assert est.unseen(old, recent, "cpu_usage_avg_5m", T) == pytest.approx(one * 0.8)


def test_the_recent_pods_follow_the_node_and_an_older_sample(est: Estimator) -> None:
    node = node_info("n", pods=[scheduled_pod("old", T - 1000, cpu="1")])
    assert est.recent(node, T - 360).placed == ()
    node.add_pod(scheduled_pod("new", T - 10, cpu="1"))  # a change clears the node's memo
    assert est.recent(node, T - 360).placed == (T - 10,)
    assert est.recent(node, T - 2000).placed == (T - 1000, T - 10)
    node.remove_pod("new")
    assert est.recent(node, T - 2000).placed == (T - 1000,)
