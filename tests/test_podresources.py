"""``/metrics/resources``' collector: which pods, which labels, which units.

Its series against kube-scheduler's own, from the same pods, are in
``tests/cluster/test_endpoints.py``."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.serving.podresources import pod_resources_registry, unit


def pod(
    name: str, node: str = "", phase: str = "Running", priority: int | None = None, **resources: Any
) -> dict:
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "containers": [{"name": "c", "resources": resources}],
    }
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": {"namespace": "ns", "name": name}, "spec": spec, "status": {"phase": phase}}


def samples(pods: list[dict]) -> dict[tuple[str, str, str], tuple[dict[str, str], float]]:
    text = generate_latest(pod_resources_registry(lambda: pods)).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, s.labels["pod"], s.labels["resource"])] = (s.labels, s.value)
    return out


def test_each_non_zero_request_and_limit_is_a_series_with_the_pods_labels() -> None:
    got = samples(
        [pod("a", node="n1", priority=7, requests={"cpu": "250m", "memory": "0"}, limits={"memory": "1Gi"})]
    )
    assert set(got) == {
        ("kube_pod_resource_request", "a", "cpu"),
        ("kube_pod_resource_limit", "a", "memory"),
    }
    labels, value = got[("kube_pod_resource_request", "a", "cpu")]
    assert value == 0.25
    assert labels == {
        "namespace": "ns",
        "pod": "a",
        "node": "n1",
        "scheduler": "default-scheduler",
        "priority": "7",
        "resource": "cpu",
        "unit": "cores",
    }
    assert got[("kube_pod_resource_limit", "a", "memory")] == (
        {**labels, "resource": "memory", "unit": "bytes"},
        float(2**30),
    )


def test_a_finished_pod_on_a_node_is_left_out_but_not_an_unbound_one() -> None:
    got = samples(
        [
            pod("done", node="n1", phase="Succeeded", requests={"cpu": "1"}),
            pod("failed", node="n1", phase="Failed", requests={"cpu": "1"}),
            pod("odd", phase="Failed", requests={"cpu": "1"}),
            pod("waiting", phase="Pending", requests={"cpu": "1"}),
        ]
    )
    assert {p for _, p, _ in got} == {"odd", "waiting"}
    labels, _ = got[("kube_pod_resource_request", "waiting", "cpu")]
    assert (labels["node"], labels["priority"]) == ("", "")


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        ("cpu", "cores"),
        ("memory", "bytes"),
        ("ephemeral-storage", "bytes"),
        ("storage", "bytes"),
        ("hugepages-1Gi", "bytes"),
        ("attachable-volumes-aws-ebs", "integer"),
        ("nvidia.com/gpu", ""),
    ],
)
def test_units_are_kube_schedulers(resource: str, expected: str) -> None:
    assert unit(resource) == expected
