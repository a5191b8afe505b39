"""The volume plugins on kind, with ours as the cluster's scheduler (the lease method deployed).

- **An attach limit reached**: worker A's CSINode gets a driver with room for one
  volume (the kubelet keeps drivers it did not register); two PVs of that driver,
  each bound to a claim. A pod of the first claim is bound to A; a pod of the
  second, kept to A, is refused with "node(s) exceed max volume count". The
  driver does not exist, so the first pod never starts: only placement is checked.
- **A ReadWriteOncePod claim in use**: a hostPath PV and its claim with that
  access mode; the first pod runs, the second is refused on every node with
  kube-scheduler's reason, and is bound once the first is deleted.

Claims are bound statically (the PV's ``claimRef``, the claim's ``volumeName``):
kind's PV controller completes the binding, no provisioner involved.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.events import wait_event
from e2e.kube import is_ready, wait_pod
from e2e.nodes import cluster_nodes
from e2e.pods import is_bound, list_pods_raw, pod_body, wait_bound
from e2e.schedulers import wait_ours_scheduling
from scheduler.polling import poll

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

DRIVER = "attach-limit.e2e.dynamic-scheduler.io"
MAX_VOLUMES = "node(s) exceed max volume count"
RWOP_CONFLICT = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"


@pytest.fixture
def ours(core: client.CoreV1Api, namespace: str, test_image: str, ours_is_the_scheduler: str) -> None:
    wait_ours_scheduling(core, namespace, test_image)


@pytest.fixture
def pvs(core: client.CoreV1Api) -> Iterator[list[str]]:
    """Names of the PVs a test creates; deleted after."""
    made: list[str] = []
    yield made
    for name in made:
        core.delete_persistent_volume(name)


def bound_claim(
    core: client.CoreV1Api, ns: str, pvs: list[str], claim: str, source: dict[str, Any], modes: list[str]
) -> str:
    pv = f"{ns}-{claim}"
    core.create_persistent_volume(
        {
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": modes,
                "storageClassName": "",
                "claimRef": {"namespace": ns, "name": claim},
                **source,
            },
        }
    )
    pvs.append(pv)
    core.create_namespaced_persistent_volume_claim(
        ns,
        {
            "metadata": {"name": claim},
            "spec": {
                "accessModes": modes,
                "resources": {"requests": {"storage": "1Gi"}},
                "storageClassName": "",
                "volumeName": pv,
            },
        },
    )
    poll(
        lambda: (core.read_namespaced_persistent_volume_claim(claim, ns).status.phase == "Bound") or None,
        60,
        f"claim {ns}/{claim} bound",
        interval=0.5,
        retry_on=(ApiException,),
    )
    return claim


def pod_with(name: str, image: str, claim: str, **kw: Any) -> dict[str, Any]:
    body = pod_body(name, image, **kw)
    body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    body["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return body


def failed_message(core: client.CoreV1Api, ns: str, pod: str) -> str:
    return wait_event(core, ns, pod, "FailedScheduling", 60)["message"]


@pytest.fixture
def limited_worker(api: client.ApiClient, core: client.CoreV1Api) -> Iterator[str]:
    """Worker A, whose CSINode lists DRIVER with an attach limit of 1; taken out after."""
    storage = client.StorageV1Api(api)
    node = cluster_nodes(core).workers[0]
    # Raw JSON: the client's model refuses a CSINode without drivers (kind's have none).
    drivers = (
        json.loads(storage.read_csi_node(node, _preload_content=False).data)["spec"].get("drivers") or []
    )

    def set_drivers(ds: list[dict[str, Any]]) -> None:  # a merge patch replaces the list whole
        storage.patch_csi_node(
            node,
            {"spec": {"drivers": ds}},
            _content_type="application/merge-patch+json",
            _preload_content=False,
        )

    set_drivers([*drivers, {"name": DRIVER, "nodeID": node, "allocatable": {"count": 1}}])
    try:
        yield node
    finally:
        set_drivers(drivers)


def test_a_node_at_its_attach_limit_takes_no_further_volume(
    core: client.CoreV1Api, namespace: str, test_image: str, ours: None, pvs: list[str], limited_worker: str
) -> None:
    suffix = uuid.uuid4().hex[:6]
    claims = [
        bound_claim(
            core,
            namespace,
            pvs,
            f"vol-{i}",
            {"csi": {"driver": DRIVER, "volumeHandle": f"handle-{suffix}-{i}"}},
            ["ReadWriteOnce"],
        )
        for i in (1, 2)
    ]
    on_a = {"kubernetes.io/hostname": limited_worker}
    core.create_namespaced_pod(namespace, pod_with("first", test_image, claims[0], node_selector=on_a))
    assert wait_bound(core, namespace, "first", 60)["spec"]["nodeName"] == limited_worker
    core.create_namespaced_pod(namespace, pod_with("second", test_image, claims[1], node_selector=on_a))
    message = failed_message(core, namespace, "second")
    assert f"1 {MAX_VOLUMES}" in message, message
    assert not is_bound(list_pods_raw(core, namespace, field_selector="metadata.name=second")[0])


def test_a_read_write_once_pod_claim_serves_one_pod_at_a_time(
    core: client.CoreV1Api, namespace: str, test_image: str, ours: None, pvs: list[str]
) -> None:
    path = f"/tmp/e2e-rwop-{uuid.uuid4().hex[:6]}"
    claim = bound_claim(
        core,
        namespace,
        pvs,
        "solo",
        {"hostPath": {"path": path, "type": "DirectoryOrCreate"}},
        ["ReadWriteOncePod"],
    )
    core.create_namespaced_pod(namespace, pod_with("first", test_image, claim))
    wait_pod(core, namespace, "first", is_ready, "Ready (the claim mounted)", 120)
    core.create_namespaced_pod(namespace, pod_with("second", test_image, claim))
    message = failed_message(core, namespace, "second")
    assert f"2 {RWOP_CONFLICT}" in message, message  # both workers; the control plane is tainted
    core.delete_namespaced_pod("first", namespace, grace_period_seconds=0)
    wait_bound(core, namespace, "second", 120)
