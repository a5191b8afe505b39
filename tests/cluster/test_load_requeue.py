"""A pod that Dynamic refused is tried again on the next load refresh, against the private API
server: no cluster event happens, and the queue's 5-minute flush is far away.

The load comes from a local server speaking Prometheus's query API
(tests/plugins/dynamic/promapi.py), queried every second.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes.client import ApiClient

from scheduler.cluster.client import api_request
from scheduler.polling import poll
from tests.apiserver import ControlPlane
from tests.cluster.util import (
    bound_node,
    create_pod,
    dynamic_config,
    failed_note,
    make_node,
    scheduler_running,
)
from tests.plugins.dynamic.promapi import FakePrometheus

pytestmark = pytest.mark.apiserver


def test_a_load_refresh_brings_a_refused_pod_back(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path, fake_prom: FakePrometheus
) -> None:
    label = f"q{uuid.uuid4().hex[:6]}"
    node = make_node(admin, f"{label}-n", {"load-test": label})["metadata"]["name"]
    fake_prom.set("cpu_usage_avg_5m", ({"instance": node}, "0.9"))
    profile, config = dynamic_config(apiserver, label, fake_prom, tmp_path)
    try:
        with scheduler_running(config, tmp_path) as app:
            create_pod(admin, namespace, "p", profile)
            uid = api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/pods/p")["metadata"]["uid"]
            poll(lambda: app.queue.where(uid) == "unschedulable", 20, "p refused for the load")
            fake_prom.set("cpu_usage_avg_5m", ({"instance": node}, "0.3"))
            assert bound_node(admin, namespace, "p", timeout=20) == node
    finally:
        api_request(admin, "DELETE", f"/api/v1/nodes/{node}")


def test_relaxed_a_pod_goes_to_the_least_loaded_node_over_the_limit_and_says_so(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path, fake_prom: FakePrometheus
) -> None:
    label = f"r{uuid.uuid4().hex[:6]}"
    nodes = [make_node(admin, f"{label}-{i}", {"load-test": label})["metadata"]["name"] for i in (1, 2)]
    fake_prom.set("cpu_usage_avg_5m", ({"instance": nodes[0]}, "0.9"), ({"instance": nodes[1]}, "0.8"))
    profile, config = dynamic_config(apiserver, label, fake_prom, tmp_path, relaxWhenNothingFits=True)
    try:
        with scheduler_running(config, tmp_path):
            create_pod(admin, namespace, "p", profile)
            assert bound_node(admin, namespace, "p", timeout=20) == nodes[1]  # the score still counts
            event = poll(
                lambda: event_of(admin, namespace, "p", "FilterRelaxed"), 20, "the FilterRelaxed event"
            )
            assert event["type"] == "Warning"
            # The shared API server holds other tests' nodes too: they count in "0/N nodes".
            note = str(event["note"])
            assert note.startswith(
                f"Assigned {namespace}/p to {nodes[1]} with the Dynamic filter relaxed, as no node passed "
                "every filter: 0/"
            ), note
            assert "2 node(s) had cpu_usage_avg_5m above 0.65" in note, note
            assert failed_note(admin, namespace, "p") == ""
    finally:
        for n in nodes:
            api_request(admin, "DELETE", f"/api/v1/nodes/{n}")


def event_of(admin: ApiClient, namespace: str, pod: str, reason: str) -> dict[str, object] | None:
    items = api_request(admin, "GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
    return next((e for e in items if e["reason"] == reason and e["regarding"]["name"] == pod), None)
