"""Which updates give an unschedulable pod another try, against the private API server.

A pod that fits no node (a nodeSelector nobody matches) is tried once and
parked. Our own ``PodScheduled`` condition, and any other status-only update,
must not bring it back (kube-scheduler: ``PodSchedulingPropertiesChange``
finds no scheduling property changed); a label change must.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes.client import ApiClient

from scheduler.cluster.client import api_request
from scheduler.polling import poll
from tests.apiserver import ControlPlane
from tests.cluster.util import create_pod, kept_to_nodes_config, scheduler_running

pytestmark = pytest.mark.apiserver


def attempts(app, profile: str) -> float:
    value = app.metrics.registry.get_sample_value(
        "scheduler_schedule_attempts_total", {"result": "unschedulable", "profile": profile}
    )
    return value or 0.0


def patch(admin: ApiClient, path: str, body: dict) -> None:
    api_request(admin, "PATCH", path, body=body, content_type="application/merge-patch+json")


def test_status_only_updates_do_not_requeue_and_a_label_does(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path
) -> None:
    label = f"r{uuid.uuid4().hex[:6]}"
    profile = f"requeue-{label}"
    config = kept_to_nodes_config(apiserver, profile, "requeue-test", label)
    pod_path = f"/api/v1/namespaces/{namespace}/pods/p"
    with scheduler_running(config, tmp_path) as app:
        created = create_pod(admin, namespace, "p", profile)
        uid = created["metadata"]["uid"]

        def parked_with_condition() -> bool:
            pod = api_request(admin, "GET", pod_path)
            conditions = (pod.get("status") or {}).get("conditions") or []
            return app.queue.where(uid) == "unschedulable" and any(
                c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions
            )

        poll(parked_with_condition, 20, "the pod tried, parked, and its PodScheduled condition written")
        patch(
            admin,
            pod_path + "/status",
            {"status": {"conditions": [{"type": "example.com/Checked", "status": "True"}]}},
        )
        patch(admin, pod_path, {"metadata": {"annotations": {"sentinel": "1"}}})  # not a property either

        def queued_annotation() -> str:
            qp = app.queue._pods.get(uid)  # the queue's copy: every update before it was handled
            return ((qp.pod.pod["metadata"].get("annotations") or {}).get("sentinel", "")) if qp else ""

        poll(queued_annotation, 20, "the updates handled by the queue")
        assert app.queue.where(uid) == "unschedulable"
        assert attempts(app, profile) == 1

        patch(admin, pod_path, {"metadata": {"labels": {"app": "web"}}})
        poll(lambda: attempts(app, profile) >= 2, 20, "a second attempt after the label change")
