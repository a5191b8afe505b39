"""Preemption with ours as the cluster's scheduler (the lease method deployed).

One worker gets an extended resource with room for two pods (as upstream's
preemption tests do, so the kubelet's own CPU and memory don't matter), two
low-priority pods fill it, and a high-priority pod that needs all of it
arrives: ours must nominate it to that worker, mark both victims
``DisruptionTarget`` and delete them, and bind it there once they are gone.
The victims carry a finalizer, so the test sees them terminating (and the
preemptor waiting for them) before it lets them go.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from e2e.events import assert_bound_by, instance_pod, wait_event
from e2e.kube import is_ready, wait_admitted, wait_pod
from e2e.measure import record
from e2e.nodes import cluster_nodes
from e2e.pods import condition, is_bound, pod_body, wait_bound
from e2e.schedulers import our_pod_names, wait_ours_scheduling
from scheduler.cluster.client import api_request

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

SLOT = "e2e.dynamic-scheduler.io/slot"
FINALIZER = "e2e.dynamic-scheduler.io/hold"


@pytest.fixture
def ours(core: client.CoreV1Api, namespace: str, test_image: str, ours_is_the_scheduler: str) -> set[str]:
    wait_ours_scheduling(core, namespace, test_image)
    return our_pod_names(core)


def _node_status_patch(core: client.CoreV1Api, node: str, body: Any, content_type: str) -> None:
    api_request(
        core.api_client, "PATCH", f"/api/v1/nodes/{node}/status", body=body, content_type=content_type
    )


@pytest.fixture
def slots(core: client.CoreV1Api) -> Iterator[str]:
    """Two slots of an extended resource on the first worker, in its capacity and allocatable
    (e2enode.AddExtendedResource); the kubelet keeps what it does not manage."""
    worker = cluster_nodes(core).workers[0]
    both = {"capacity": {SLOT: "2"}, "allocatable": {SLOT: "2"}}
    _node_status_patch(core, worker, {"status": both}, "application/strategic-merge-patch+json")
    try:
        yield worker
    finally:
        key = SLOT.replace("/", "~1")
        remove = [{"op": "remove", "path": f"/status/{part}/{key}"} for part in ("capacity", "allocatable")]
        _node_status_patch(core, worker, remove, "application/json-patch+json")


@pytest.fixture
def priorities(api: client.ApiClient, core: client.CoreV1Api) -> Iterator[dict[str, str]]:
    sched = client.SchedulingV1Api(api)
    suffix = uuid.uuid4().hex[:6]
    names = {"low": f"e2e-low-{suffix}", "high": f"e2e-high-{suffix}"}
    for key, value in (("low", 10), ("high", 1000)):
        sched.create_priority_class({"metadata": {"name": names[key]}, "value": value})
    try:
        for name in names.values():
            probe = pod_body("priority-class-probe", "probe")
            probe["spec"]["priorityClassName"] = name
            wait_admitted(core, "default", probe)
        yield names
    finally:
        for name in names.values():
            sched.delete_priority_class(name)


def slot_pod(name: str, image: str, priority_class: str, slots: int, **kw: Any) -> dict[str, Any]:
    pod = pod_body(name, image, limits={SLOT: str(slots)}, **kw)
    pod["spec"]["priorityClassName"] = priority_class
    return pod


def test_a_high_priority_pod_evicts_the_low_ones_and_is_bound_there(
    core: client.CoreV1Api,
    namespace: str,
    test_image: str,
    ours: set[str],
    slots: str,
    priorities: dict[str, str],
) -> None:
    worker = slots
    victims = ["low-1", "low-2"]
    for name in victims:
        pod = slot_pod(name, test_image, priorities["low"], 1)
        pod["metadata"]["finalizers"] = [FINALIZER]
        core.create_namespaced_pod(namespace, pod)
    try:
        for name in victims:
            assert wait_bound(core, namespace, name, 60)["spec"]["nodeName"] == worker
            wait_pod(core, namespace, name, is_ready, "Ready", 120)

        t0 = time.monotonic()
        core.create_namespaced_pod(namespace, slot_pod("high", test_image, priorities["high"], 2))
        for name in victims:
            gone = wait_pod(
                core,
                namespace,
                name,
                lambda p: bool(p["metadata"].get("deletionTimestamp")),
                "being deleted",
                60,
            )
            cond = condition(gone, "DisruptionTarget")
            assert cond is not None and (cond["status"], cond["reason"]) == ("True", "PreemptionByScheduler")
        evicted = time.monotonic() - t0
        high = wait_pod(
            core,
            namespace,
            "high",
            lambda p: (p.get("status") or {}).get("nominatedNodeName") == worker,
            f"nominated to {worker}",
            30,
        )
        assert not is_bound(high)  # the victims are still there (their finalizer holds them)
        ev = wait_event(
            core, namespace, "high", "FailedScheduling", 30, match=lambda e: "preemption:" in e["message"]
        )
        assert ev["message"].endswith(
            f"preemption: found a potential placement for pod on node {worker}, preempting 2 victims"
        ), ev["message"]
        assert instance_pod(ev.get("reportingInstance") or "") in ours
        for name in victims:
            ev = wait_event(core, namespace, name, "Preempted", 30)
            assert ev["message"].startswith("Preempted by pod ") and ev["message"].endswith(
                f" on node {worker}"
            )
    finally:
        for name in victims:
            try:
                core.patch_namespaced_pod(name, namespace, {"metadata": {"finalizers": None}})
            except client.ApiException as e:
                if e.status != 404:
                    raise
    t1 = time.monotonic()
    bound = wait_bound(core, namespace, "high", 90)
    assert bound["spec"]["nodeName"] == worker
    assert_bound_by(core, namespace, "high", ours, 90)
    wait_pod(core, namespace, "high", is_ready, "Ready", 120)
    record("preemption", "created_to_victims_deleting_s", evicted)
    record("preemption", "victims_gone_to_bound_s", time.monotonic() - t1)
