"""bench.soak against the API server: a node turn drains and deletes only the oldest node, the
pod churn creates and deletes pods on time, and the Scheduled events are counted per pod and by
who wrote them, whether listed at the start or watched after."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from kubernetes.client import ApiClient
from kubernetes.client.rest import ApiException

from bench import kwok
from bench.soak import churn
from bench.soak.binds import ScheduledEvents
from scheduler.cluster.client import api_request
from scheduler.polling import poll

pytestmark = pytest.mark.apiserver


@pytest.fixture
def soak_ns(admin: ApiClient) -> str:
    try:
        api_request(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": churn.NAMESPACE}})
    except ApiException as e:
        if e.status != 409:
            raise
    return churn.NAMESPACE


def names(admin: ApiClient, path: str, **query: str) -> set[str]:
    items = api_request(admin, "GET", path, query=list(query.items()))["items"]
    return {i["metadata"]["name"] for i in items}


def test_a_node_turn_adds_one_and_drains_and_deletes_the_oldest(admin: ApiClient, soak_ns: str) -> None:
    first = 70_000 + uuid.uuid4().int % 10_000  # apart from other tests' kwok nodes
    for i in (first, first + 1):
        api_request(admin, "POST", "/api/v1/nodes", body=kwok.node_body(i))
    turns = churn.NodeTurns(admin, 2)
    turns.live, turns.next = [first, first + 1], first + 2
    old, kept = kwok.node_name(first), kwok.node_name(first + 1)
    for n, node in enumerate((old, old, kept)):
        pod = churn.soak_pod(f"turn-{first}-{n}", random.Random(n))
        pod["spec"]["nodeName"] = node
        api_request(admin, "POST", f"/api/v1/namespaces/{soak_ns}/pods", body=pod)
    seen_before: list[str] = []
    added, removed, drained = turns.turn(before_add=seen_before.append)
    assert (added, removed, drained) == (kwok.node_name(first + 2), old, 2)
    assert seen_before == [added]
    nodes = names(admin, "/api/v1/nodes")
    assert added in nodes and kept in nodes and old not in nodes
    assert turns.names() == [kept, added]
    left = names(admin, f"/api/v1/namespaces/{soak_ns}/pods")
    assert f"turn-{first}-2" in left and not left & {f"turn-{first}-0", f"turn-{first}-1"}
    api_request(admin, "DELETE", f"/api/v1/namespaces/{soak_ns}/pods/turn-{first}-2")
    for n in (kept, added):
        api_request(admin, "DELETE", f"/api/v1/nodes/{n}")


def test_the_pod_churn_creates_at_its_rate_and_deletes_after_the_lifetime(
    admin: ApiClient, soak_ns: str
) -> None:
    pods = churn.PodChurn(admin, rate=20.0, life=(0.5, 1.0), seed=7)
    pods.start()
    try:
        poll(lambda: pods.stats.deleted >= 10, 30, "ten soak pods deleted after their lifetime", 0.2)
    finally:
        stats = pods.stop()
    assert stats.create_failed == 0 and stats.delete_failed == 0
    assert stats.created >= stats.deleted >= 10
    left = names(admin, f"/api/v1/namespaces/{soak_ns}/pods", labelSelector="app=bench-soak")
    assert len(left) <= stats.created - stats.deleted  # the deleted ones are gone
    for name in left:
        churn.delete_pod(admin, name)


def event(name: str, pod_uid: str, instance: str, count: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": churn.NAMESPACE, "uid": pod_uid},
        "reason": "Scheduled",
        "type": "Normal",
        "message": "Successfully assigned",
        "count": count,
        "reportingComponent": "default-scheduler",
        "reportingInstance": instance,
        "source": {"component": "default-scheduler"},
    }


def test_scheduled_events_are_counted_per_pod_listed_and_watched(admin: ApiClient, soak_ns: str) -> None:
    tag = uuid.uuid4().hex[:8]
    path = f"/api/v1/namespaces/{soak_ns}/events"
    api_request(admin, "POST", path, body=event(f"a-{tag}", f"pod-a-{tag}", "default-scheduler-ds-1"))
    watcher = ScheduledEvents(admin, soak_ns, {"kind-control-plane"})
    watcher.start()
    try:
        api_request(
            admin,
            "POST",
            path,
            body=event(f"b-{tag}", f"pod-b-{tag}", "default-scheduler-kind-control-plane"),
        )
        api_request(admin, "POST", path, body=event(f"c-{tag}", f"pod-c-{tag}", "default-scheduler-ds-2"))
        api_request(
            admin, "POST", path, body=event(f"c2-{tag}", f"pod-c-{tag}", "default-scheduler-ds-2", count=2)
        )
        other = event(f"d-{tag}", f"pod-d-{tag}", "default-scheduler-ds-1")
        other["reason"] = "FailedScheduling"
        api_request(admin, "POST", path, body=other)

        def mine() -> dict[str, int]:
            return {k: v for k, v in watcher.per_pod().items() if k.endswith(tag)}

        want = {f"pod-a-{tag}": 1, f"pod-b-{tag}": 1, f"pod-c-{tag}": 3}
        poll(lambda: mine() == want, 20, "the events counted", 0.2)
        assert {k for k in watcher.by_kube_scheduler() if k.endswith(tag)} == {f"pod-b-{tag}"}
    finally:
        watcher.stop()
    assert watcher.errors == 0
