"""crane-scheduler's data path against the private API server: its v1beta2 configuration (Dynamic
at filter and score, no promeAddr), node annotations written as crane-scheduler-controller writes
them, and the scheduler binding pods where they say the load is low, until they expire.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from kubernetes.client import ApiClient

from scheduler.cluster.client import api_request
from scheduler.polling import poll
from tests.apiserver import ControlPlane
from tests.cluster.util import only_nodes_labelled, scheduler_running

pytestmark = pytest.mark.apiserver

CRANE = Path(__file__).parents[1] / "data" / "crane-scheduler"
SHANGHAI = ZoneInfo("Asia/Shanghai")  # crane's default TZ, on the controller and on the scheduler


def crane_stamp(age: float) -> str:
    """utils.GetLocalTime() ``age`` seconds ago: Shanghai wall time with a literal Z."""
    return datetime.fromtimestamp(datetime.now().timestamp() - age, SHANGHAI).strftime("%Y-%m-%dT%H:%M:%SZ")


class Nodes:
    def __init__(self, admin: ApiClient, label: str) -> None:
        self.admin = admin
        self.label = label

    def create(self, name: str) -> str:
        full = f"{self.label}-{name}"
        api_request(
            self.admin,
            "POST",
            "/api/v1/nodes",
            body={
                "metadata": {"name": full, "labels": {"crane-test": self.label}},
                "status": {"capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
            },
        )
        return full

    def annotate(self, node: str, cpu: float, age: float = 30.0) -> None:
        """crane-scheduler-controller's patch of the 5-minute metrics (syncPolicy period 3m),
        written ``age`` seconds ago."""
        stamp = crane_stamp(age)
        annotations = {"cpu_usage_avg_5m": f"{cpu:.5f},{stamp}", "mem_usage_avg_5m": f"0.20000,{stamp}"}
        api_request(
            self.admin,
            "PATCH",
            f"/api/v1/nodes/{node}",
            body={"metadata": {"annotations": annotations}},
            content_type="application/merge-patch+json",
        )


@pytest.fixture
def crane_scheduler(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Any, Nodes, str]]:
    monkeypatch.delenv("TZ", raising=False)
    label = f"c{uuid.uuid4().hex[:6]}"
    shutil.copy(CRANE / "policy.yaml", tmp_path / "policy.yaml")
    # crane's deploy/scheduler/deployment.yaml configuration, with this test's kubeconfig, policy
    # path and profile name, kept to this test's nodes
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1beta2",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(apiserver.kubeconfig)},
        "profiles": [
            {
                "schedulerName": f"crane-{label}",
                "plugins": {
                    "filter": {"enabled": [{"name": "Dynamic"}]},
                    "score": {"enabled": [{"name": "Dynamic", "weight": 3}]},
                },
                "pluginConfig": [
                    {"name": "Dynamic", "args": {"policyConfigPath": str(tmp_path / "policy.yaml")}},
                    only_nodes_labelled("crane-test", label),
                ],
            }
        ],
    }
    nodes = Nodes(admin, label)
    try:
        with scheduler_running(config, tmp_path) as app:
            yield app, nodes, f"crane-{label}"
    finally:
        found = api_request(admin, "GET", "/api/v1/nodes", query=[("labelSelector", f"crane-test={label}")])
        for n in found["items"]:
            api_request(admin, "DELETE", f"/api/v1/nodes/{n['metadata']['name']}")


def pod(admin: ApiClient, namespace: str, name: str, scheduler: str) -> None:
    api_request(
        admin,
        "POST",
        f"/api/v1/namespaces/{namespace}/pods",
        body={
            "metadata": {"name": name},
            "spec": {
                "schedulerName": scheduler,
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        },
    )


def bound_to(admin: ApiClient, namespace: str, name: str) -> str:
    def node() -> str:
        p = api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        return p["spec"].get("nodeName") or ""

    return poll(node, 20, f"{name} bound")


def failed_with(admin: ApiClient, namespace: str, name: str, text: str) -> str:
    def note() -> str:
        items = api_request(admin, "GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
        return next(
            (
                e["note"]
                for e in items
                if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == name and text in e["note"]
            ),
            "",
        )

    return poll(note, 20, f"FailedScheduling of {name} saying {text!r}")


def test_annotations_steer_pods_until_they_expire(
    admin: ApiClient, namespace: str, crane_scheduler: tuple[Any, Nodes, str]
) -> None:
    app, nodes, scheduler = crane_scheduler
    hot, cool = nodes.create("hot"), nodes.create("cool")
    nodes.annotate(hot, 0.9)
    nodes.annotate(cool, 0.2)
    dynamic = app.scheduler.profiles[scheduler].plugins["Dynamic"]
    assert dynamic.source is None and dynamic.annotations is not None  # no promeAddr: annotations

    def cached(node: str) -> dict[str, str]:
        ni = app.cache.get(node)
        return ((ni.node if ni is not None else None) or {"metadata": {}})["metadata"].get(
            "annotations"
        ) or {}

    poll(lambda: cached(hot) and cached(cool), 10, "the annotations in the scheduler's cache")
    for i in range(3):
        pod(admin, namespace, f"p{i}", scheduler)
    assert {bound_to(admin, namespace, f"p{i}") for i in range(3)} == {cool}

    # both busy: nothing fits, and the reason is the load (once the scheduler has seen it: a pod
    # that came first would go to cool)
    nodes.annotate(cool, 0.9)
    poll(
        lambda: cached(cool).get("cpu_usage_avg_5m", "").startswith("0.90000"),
        10,
        "cool's new load in the scheduler's cache",
    )
    pod(admin, namespace, "waiting", scheduler)
    note = failed_with(admin, namespace, "waiting", "cpu_usage_avg_5m above 0.65")
    assert "2 node(s) had cpu_usage_avg_5m above 0.65" in note

    # hot's annotations written 7 minutes ago: cpu_usage_avg_5m's are fresh for 3m + 5m, still busy
    nodes.annotate(hot, 0.9, age=7 * 60)
    pod(admin, namespace, "still-waiting", scheduler)
    failed_with(admin, namespace, "still-waiting", "2 node(s) had cpu_usage_avg_5m above 0.65")

    # 9 minutes ago: expired, as crane's controller were gone; the node passes (FailOpen)
    nodes.annotate(hot, 0.9, age=9 * 60)
    assert bound_to(admin, namespace, "waiting") == hot
