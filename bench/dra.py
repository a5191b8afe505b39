"""The ``dra`` workload's devices, after scheduler_perf's SchedulingWithResourceClaimTemplate.

Every kwok node publishes one ResourceSlice of :data:`DEVICES_PER_NODE` devices
of the bench's driver (as a DRA driver's kubelet plugin would), a DeviceClass
selects them, and each contender's namespace has a ResourceClaimTemplate of one
device. Each measured pod names the template: kind's resourceclaim controller
creates its claim, and the scheduler allocates a device to it before the bind.
Between runs the pods' claims are deleted and waited for, so that every run
starts with all devices free.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from bench import kwok
from scheduler.cluster.client import api_request
from scheduler.cluster.retry import call_with_retries
from scheduler.polling import poll

logger = logging.getLogger(__name__)

DRA = "/apis/resource.k8s.io/v1"
DRIVER = "bench.dynamic-scheduler.io"
DEVICE_CLASS = "bench-device"
TEMPLATE = "bench-device"
CLAIM = "device"
"""The pods' name for their claim (``spec.resourceClaims[].name``)."""
DEVICES_PER_NODE = 8


def slice_name(node: str) -> str:
    return f"{node}-{DRIVER}"


def slice_body(node: str) -> dict[str, Any]:
    """The node's ResourceSlice: one pool named after the node, DEVICES_PER_NODE devices."""
    devices = [
        {"name": f"device-{i}", "attributes": {"index": {"int": i}, "model": {"string": "bench"}}}
        for i in range(DEVICES_PER_NODE)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(node), "labels": {kwok.LABEL: "true"}},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _create(api: ApiClient, path: str, body: dict[str, Any], what: str) -> None:
    """POST with retries; already there is fine."""
    try:
        call_with_retries(
            lambda: api_request(api, "POST", path, body=body, timeout=(5, 30)),
            what=what,
            attempts=8,
            max_seconds=120,
        )
    except ApiException as e:
        if e.status != 409:
            raise


def ensure_devices(api: ApiClient, nodes: int, *, workers: int = 32) -> None:
    """The DeviceClass and a ResourceSlice on each of the first ``nodes`` kwok nodes."""
    _create(
        api,
        f"{DRA}/deviceclasses",
        {
            "metadata": {"name": DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
        "create deviceclass",
    )
    names = [kwok.node_name(i) for i in range(nodes)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(
            pool.map(
                lambda n: _create(api, f"{DRA}/resourceslices", slice_body(n), "create resourceslice"), names
            )
        )


def ensure_template(api: ApiClient, namespace: str) -> None:
    body = {
        "metadata": {"name": TEMPLATE},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "device", "exactly": {"deviceClassName": DEVICE_CLASS}}]}
            }
        },
    }
    _create(api, f"{DRA}/namespaces/{namespace}/resourceclaimtemplates", body, "create resourceclaimtemplate")


def with_claim(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod, asking for one device through the template."""
    pod["spec"]["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": TEMPLATE}]
    for c in pod["spec"]["containers"]:
        c.setdefault("resources", {})["claims"] = [{"name": CLAIM}]
    return pod


def clear_claims(
    api: ApiClient, namespace: str, *, timeout: float = 600, progress: Callable[[str], None] | None = None
) -> int:
    """Delete the namespace's claims (their pods are gone) and wait until they are: the
    resourceclaim controller drops the finalizer once a claim is no longer reserved.
    Returns how many there were."""
    path = f"{DRA}/namespaces/{namespace}/resourceclaims"
    count = len(api_request(api, "GET", path)["items"])
    if not count:
        return 0
    api_request(api, "DELETE", path)

    def gone() -> bool:
        left = len(api_request(api, "GET", path)["items"])
        if progress is not None:
            progress(f"waiting for {left}/{count} ResourceClaims of {namespace} to go")
        return left == 0

    poll(gone, timeout, f"the ResourceClaims of {namespace} deleted", interval=1.0)
    return count


PROBE = "resourceclaim-controller-probe"


def wait_for_controller(
    api: ApiClient, namespace: str, *, timeout: float = 600, progress: Callable[[str], None] | None = None
) -> float:
    """Wait until kind's resourceclaim controller has caught up, and return how long that took.

    The controller is limited to 20 requests/s and still works through what the last run left
    (its pods and claims deleted) well after the claims are gone: a run started then would
    time the controller, not the contender. A pod that no scheduler picks, naming the template,
    gets its claim once the work queued before it is done; then it and its claim go."""
    started = time.monotonic()
    pods = f"/api/v1/namespaces/{namespace}/pods"
    probe = with_claim(
        {
            "metadata": {"name": PROBE},
            "spec": {
                "schedulerName": "bench-nobody",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        }
    )
    api_request(api, "POST", pods, body=probe)

    def claim_made() -> bool:
        pod = api_request(api, "GET", f"{pods}/{PROBE}")
        if progress is not None:
            progress(
                f"waiting for the resourceclaim controller to catch up ({time.monotonic() - started:.0f}s)"
            )
        return bool((pod.get("status") or {}).get("resourceClaimStatuses"))

    try:
        poll(claim_made, timeout, "the resourceclaim controller to make the probe pod's claim", interval=0.5)
    finally:
        api_request(api, "DELETE", f"{pods}/{PROBE}", query=[("gracePeriodSeconds", "0")])
        poll(lambda: not _exists(api, f"{pods}/{PROBE}"), timeout, "the probe pod deleted", interval=0.5)
    clear_claims(api, namespace, timeout=timeout, progress=progress)
    return time.monotonic() - started


def _exists(api: ApiClient, path: str) -> bool:
    try:
        api_request(api, "GET", path)
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def delete_devices(api: ApiClient) -> int:
    """Delete the bench's ResourceSlices and DeviceClass; how many slices there were."""
    path = f"{DRA}/resourceslices"
    selector = f"spec.driver={DRIVER}"
    count = len(api_request(api, "GET", path, query=[("fieldSelector", selector)])["items"])
    if count:
        api_request(api, "DELETE", path, query=[("fieldSelector", selector)])
    try:
        api_request(api, "DELETE", f"{DRA}/deviceclasses/{DEVICE_CLASS}")
    except ApiException as e:
        if e.status != 404:
            raise
    return count
