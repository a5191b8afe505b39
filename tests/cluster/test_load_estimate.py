"""Pods placed since the last load sample count at an estimate of their usage, against the private
API server: pods this scheduler placed (from Reserve) and pods another scheduler bound (from the
``PodScheduled`` time the API server writes), until Prometheus shows them.

The load comes from a local server speaking Prometheus's query API
(tests/plugins/dynamic/promapi.py), queried every second; it keeps reporting the same usage,
as real metrics do for a while after a placement.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes.client import ApiClient

from scheduler.cluster.client import api_request
from scheduler.core.podinfo import PodInfo, parse_time
from scheduler.plugins.dynamic.estimate import placed_at
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


def test_placed_pods_count_until_the_metrics_show_them(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path, fake_prom: FakePrometheus
) -> None:
    label = f"e{uuid.uuid4().hex[:6]}"
    nodes = [make_node(admin, f"{label}-{i}", {"load-test": label})["metadata"]["name"] for i in (1, 2)]
    # 55% of 4 cpu; a pod asking 1 cpu counts as 850m, 21.25%: one more pod takes a node over 65%.
    fake_prom.set("cpu_usage_avg_5m", *(({"instance": n}, "0.55") for n in nodes))
    profile, config = dynamic_config(apiserver, label, fake_prom, tmp_path)
    try:
        with scheduler_running(config, tmp_path) as app:
            # Another scheduler binds a pod to the first node: the API server stamps PodScheduled.
            theirs = create_pod(admin, namespace, "theirs", "someone-else", cpu="1")
            api_request(
                admin,
                "POST",
                f"/api/v1/namespaces/{namespace}/pods/theirs/binding",
                body={"metadata": {"name": "theirs"}, "target": {"kind": "Node", "name": nodes[0]}},
            )
            uid = theirs["metadata"]["uid"]
            bound = api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/pods/theirs")
            scheduled = [c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled"]
            assert [c["status"] for c in scheduled] == ["True"]
            assert placed_at(PodInfo.from_pod(bound)) == parse_time(scheduled[0]["lastTransitionTime"])
            poll(lambda: app.cache.has_pod(uid), 20, "the bound pod in the cache")

            create_pod(admin, namespace, "first", profile, cpu="1")
            assert bound_node(admin, namespace, "first") == nodes[1]
            create_pod(admin, namespace, "second", profile, cpu="1")
            poll(lambda: failed_note(admin, namespace, "second"), 20, "second refused")
            assert "2 node(s) had cpu_usage_avg_5m above 0.65" in failed_note(admin, namespace, "second")

            # The metrics now show the pods (and the nodes are less loaded than thought).
            fake_prom.set("cpu_usage_avg_5m", *(({"instance": n}, "0.3") for n in nodes))
            assert bound_node(admin, namespace, "second") in nodes
    finally:
        for n in nodes:
            api_request(admin, "DELETE", f"/api/v1/nodes/{n}")
