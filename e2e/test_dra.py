"""Dynamic resource allocation on kind, with ours as the cluster's scheduler (the lease method).

The test publishes a ResourceSlice with one device on worker A, as a DRA driver's kubelet
plugin would, and a DeviceClass of that driver. Pods take a claim each from a
ResourceClaimTemplate, which kind's resourceclaim controller turns into claims:

- the first pod is bound to worker A, its claim allocated that device and reserved for it;
- the second stays Pending with kube-scheduler's words, the device being taken;
- once the first pod is deleted, the controller deletes its claim, and the second is bound
  with the device.

No driver runs, so the pods never start: only scheduling is checked (as upstream's
"control plane" DRA specs do).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from e2e.events import wait_event
from e2e.nodes import cluster_nodes
from e2e.pods import pod_body, wait_bound
from e2e.schedulers import wait_ours_scheduling
from scheduler.cluster.client import api_request
from scheduler.polling import poll

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

DRA = "/apis/resource.k8s.io/v1"


@pytest.fixture
def ours(core: client.CoreV1Api, namespace: str, test_image: str, ours_is_the_scheduler: str) -> None:
    wait_ours_scheduling(core, namespace, test_image)


@pytest.fixture
def one_device(api: client.ApiClient, core: client.CoreV1Api) -> Iterator[tuple[str, str]]:
    """A DeviceClass, and a slice of its driver with one device on worker A; (class, worker A)."""
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    driver = f"{name}.dynamic-scheduler.io"
    worker = cluster_nodes(core).workers[0]
    api_request(
        api,
        "POST",
        f"{DRA}/deviceclasses",
        body={
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        },
    )
    api_request(
        api,
        "POST",
        f"{DRA}/resourceslices",
        body={
            "metadata": {"name": name},
            "spec": {
                "driver": driver,
                "nodeName": worker,
                "pool": {"name": worker, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "dev-0", "attributes": {"model": {"string": "e2e"}}}],
            },
        },
    )
    try:
        yield name, worker
    finally:
        api_request(api, "DELETE", f"{DRA}/resourceslices/{name}")
        api_request(api, "DELETE", f"{DRA}/deviceclasses/{name}")


def pod_with_claim(name: str, image: str) -> dict[str, Any]:
    body = pod_body(name, image)
    body["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimTemplateName": "one-device"}]
    body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "dev"}]
    return body


def claim_of(api: client.ApiClient, ns: str, pod: str) -> dict[str, Any]:
    """The claim the resourceclaim controller made for the pod, once the pod's status names it."""

    def named() -> str:
        p = api_request(api, "GET", f"/api/v1/namespaces/{ns}/pods/{pod}")
        statuses = (p.get("status") or {}).get("resourceClaimStatuses") or ()
        return next((s.get("resourceClaimName") or "" for s in statuses), "")

    claim = poll(named, 60, f"the claim of {ns}/{pod}", interval=0.2)
    return api_request(api, "GET", f"{DRA}/namespaces/{ns}/resourceclaims/{claim}")


def test_a_pod_gets_the_device_and_the_next_waits_for_it(
    api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    test_image: str,
    ours: None,
    one_device: tuple[str, str],
) -> None:
    device_class, worker = one_device
    api_request(
        api,
        "POST",
        f"{DRA}/namespaces/{namespace}/resourceclaimtemplates",
        body={
            "metadata": {"name": "one-device"},
            "spec": {
                "spec": {
                    "devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": device_class}}]}
                }
            },
        },
    )
    core.create_namespaced_pod(namespace, pod_with_claim("first", test_image))
    first = wait_bound(core, namespace, "first", 60)
    assert first["spec"]["nodeName"] == worker
    claim = claim_of(api, namespace, "first")
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["pool"], r["device"]) for r in results] == [(worker, "dev-0")]
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [first["metadata"]["uid"]]

    core.create_namespaced_pod(namespace, pod_with_claim("second", test_image))
    message = wait_event(core, namespace, "second", "FailedScheduling", 60)["message"]
    # worker A's device is taken, worker B has none; the control plane is tainted
    assert "2 cannot allocate all claims" in message, message

    core.delete_namespaced_pod("first", namespace, grace_period_seconds=0)
    second = wait_bound(core, namespace, "second", 120)
    assert second["spec"]["nodeName"] == worker
    results = claim_of(api, namespace, "second")["status"]["allocation"]["devices"]["results"]
    assert [r["device"] for r in results] == ["dev-0"]
