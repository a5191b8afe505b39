"""NodeVolumeLimits against the private API server: a node at its CSI attach limit takes no
pod with another volume of that driver, until the limit is raised."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes.client import ApiClient

from scheduler.cluster.client import api_request
from scheduler.plugins.nodevolumelimits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED
from scheduler.polling import poll
from tests.apiserver import ControlPlane
from tests.cluster.util import (
    bound_claim,
    bound_node,
    create_pod,
    failed_note,
    kept_to_nodes_config,
    make_node,
    scheduler_running,
)

pytestmark = pytest.mark.apiserver

DRIVER = "attach.csi.example.com"


def csinode(admin: ApiClient, node: str, count: int, *, create: bool = False) -> None:
    body = {
        "metadata": {"name": node},
        "spec": {"drivers": [{"name": DRIVER, "nodeID": node, "allocatable": {"count": count}}]},
    }
    if create:
        api_request(admin, "POST", "/apis/storage.k8s.io/v1/csinodes", body=body)
    else:
        current = api_request(admin, "GET", f"/apis/storage.k8s.io/v1/csinodes/{node}")
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        api_request(admin, "PUT", f"/apis/storage.k8s.io/v1/csinodes/{node}", body=body)


def test_a_node_at_its_attach_limit(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path
) -> None:
    label = f"l{uuid.uuid4().hex[:6]}"
    node = make_node(admin, f"{label}-n", {"limit-test": label})["metadata"]["name"]
    csinode(admin, node, 1, create=True)
    claims = [
        bound_claim(
            admin,
            namespace,
            f"{label}-pv{i}",
            f"data{i}",
            source={"csi": {"driver": DRIVER, "volumeHandle": f"vol-{label}-{i}"}},
        )
        for i in (1, 2)
    ]
    profile = f"limits-{label}"

    def volume(claim: str) -> list[dict]:
        return [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]

    try:
        with scheduler_running(kept_to_nodes_config(apiserver, profile, "limit-test", label), tmp_path):
            create_pod(admin, namespace, "first", profile, volumes=volume(claims[0]))
            assert bound_node(admin, namespace, "first") == node
            create_pod(admin, namespace, "second", profile, volumes=volume(claims[1]))
            note = poll(lambda: failed_note(admin, namespace, "second"), 20, "second refused")
            assert f"1 {ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED}" in note
            # The volume already attached there counts once: a pod sharing it still fits.
            create_pod(admin, namespace, "sharing", profile, volumes=volume(claims[0]))
            assert bound_node(admin, namespace, "sharing") == node
            csinode(admin, node, 2)  # the CSINode change brings "second" back
            assert bound_node(admin, namespace, "second") == node
    finally:
        api_request(admin, "DELETE", f"/apis/storage.k8s.io/v1/csinodes/{node}")
        api_request(admin, "DELETE", f"/api/v1/nodes/{node}")
        for i in (1, 2):
            api_request(admin, "DELETE", f"/api/v1/persistentvolumes/{label}-pv{i}")
