"""Ours with crane-scheduler's own configuration on kind, fed as crane-scheduler-controller feeds it.

The configuration is crane's (tests/data/crane-scheduler/scheduler-config.yaml: v1beta2,
``Dynamic`` at filter and score, weight 3, no Prometheus), under the name its Helm chart
gives it (``crane-scheduler``), beside kube-scheduler; only the policy's path points at a
copy of crane's policy here, and, as the chart's Deployment does, ``--leader-elect=false``.
The test writes the node annotations crane-scheduler-controller would write, and the
scheduler must keep pods off the node they say is hot.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml
from kubernetes import client

from e2e.events import bound_by
from e2e.localscheduler import LocalScheduler, local_scheduler
from e2e.nodes import cluster_nodes
from e2e.pods import pod_body, wait_bound

pytestmark = pytest.mark.cluster

CRANE = Path(__file__).resolve().parents[1] / "tests" / "data" / "crane-scheduler"
NAME = "crane-scheduler"
METRICS = (
    "cpu_usage_avg_5m",
    "cpu_usage_max_avg_1h",
    "cpu_usage_max_avg_1d",
    "mem_usage_avg_5m",
    "mem_usage_max_avg_1h",
    "mem_usage_max_avg_1d",
)


def crane_now() -> str:
    """crane's utils.GetLocalTime(): local time in $TZ (default Asia/Shanghai), a literal Z."""
    zone = ZoneInfo(os.environ.get("TZ") or "Asia/Shanghai")
    return datetime.now(zone).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def crane_config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("crane")
    shutil.copy(CRANE / "policy.yaml", workdir / "policy.yaml")
    config = yaml.safe_load((CRANE / "scheduler-config.yaml").read_text())
    (profile,) = config["profiles"]
    profile["schedulerName"] = NAME
    (dynamic,) = profile["pluginConfig"]
    dynamic["args"]["policyConfigPath"] = str(workdir / "policy.yaml")
    return config


@pytest.fixture(scope="module")
def sched(kind_cluster: Any, crane_config: dict[str, Any]) -> Iterator[LocalScheduler]:
    with local_scheduler(NAME, crane_config, str(kind_cluster.kubeconfig_path), "--leader-elect=false") as s:
        s.wait_ready()
        yield s


@pytest.fixture
def annotate(core: client.CoreV1Api) -> Iterator[Any]:
    touched: set[str] = set()

    def write(node: str, load: float, hot: int = 0) -> None:
        """crane-scheduler-controller's annotations: every metric at ``load``, and the hot value."""
        stamp = crane_now()
        annotations = {m: f"{load:.5f},{stamp}" for m in METRICS}
        annotations["node_hot_value"] = f"{hot},{stamp}"
        core.patch_node(node, {"metadata": {"annotations": annotations}})
        touched.add(node)

    yield write
    for node in touched:
        core.patch_node(node, {"metadata": {"annotations": dict.fromkeys((*METRICS, "node_hot_value"))}})


def test_pods_stay_off_the_node_crane_says_is_loaded(
    sched: LocalScheduler, core: client.CoreV1Api, namespace: str, test_image: str, annotate: Any
) -> None:
    hot, cool = cluster_nodes(core).workers
    annotate(hot, 0.9)  # above the policy's 0.65 and 0.75
    annotate(cool, 0.2)
    for i in range(4):
        core.create_namespaced_pod(namespace, pod_body(f"p{i}", test_image, scheduler_name=NAME))
    placed = {f"p{i}": wait_bound(core, namespace, f"p{i}", 60)["spec"]["nodeName"] for i in range(4)}
    assert set(placed.values()) == {cool}, placed
    controller, instance, _ = bound_by(core, namespace, "p0", 60)
    assert controller == NAME, (controller, instance)


def test_a_node_crane_counts_as_hot_scores_lower(
    sched: LocalScheduler, core: client.CoreV1Api, namespace: str, test_image: str, annotate: Any
) -> None:
    busy, hot = cluster_nodes(core).workers
    # both under the limits: busy scores (1-0.4)·100 = 60 for load, hot 80 minus 10 per hot
    # value point: 20 with 6 points, 40 below busy (120 with Dynamic's weight 3)
    annotate(busy, 0.4)
    annotate(hot, 0.2, hot=6)
    core.create_namespaced_pod(namespace, pod_body("p", test_image, scheduler_name=NAME))
    assert wait_bound(core, namespace, "p", 60)["spec"]["nodeName"] == busy
