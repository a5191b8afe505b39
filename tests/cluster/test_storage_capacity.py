"""VolumeBinding's storage capacity check against the private API server, beside the real Go
kube-scheduler: a claim to be provisioned by a CSI driver that publishes its capacity
(``storageCapacity: true``) goes only where a CSIStorageCapacity has room for it.

No provisioner runs here: a placement shows as the claim's ``volume.kubernetes.io/selected-node``
annotation, which PreBind writes before it waits for the volume.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient

from scheduler.cluster.client import api_request
from scheduler.polling import poll
from tests.apiserver import ControlPlane
from tests.cluster.util import (
    create_pod,
    failed_note,
    kept_to_nodes_config,
    make_node,
    only_nodes_labelled,
    scheduler_running,
)

pytestmark = pytest.mark.apiserver

STORAGE = "/apis/storage.k8s.io/v1"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
NODE_KEY = "topology.test/node"


@pytest.fixture
def storage(admin: ApiClient) -> Iterator[dict[str, str]]:
    """Two nodes, a CSI driver that publishes capacity, and its WaitForFirstConsumer class."""
    label = f"c{uuid.uuid4().hex[:6]}"
    names = {
        "label": label,
        "n1": f"{label}-n1",
        "n2": f"{label}-n2",
        "driver": f"{label}.csi.test",
        "class": f"{label}-sc",
    }
    for n in ("n1", "n2"):
        make_node(admin, names[n], {"capacity-test": label, NODE_KEY: names[n]})
    api_request(
        admin,
        "POST",
        f"{STORAGE}/csidrivers",
        body={
            "metadata": {"name": names["driver"]},
            "spec": {"storageCapacity": True, "attachRequired": False},
        },
    )
    api_request(
        admin,
        "POST",
        f"{STORAGE}/storageclasses",
        body={
            "metadata": {"name": names["class"]},
            "provisioner": names["driver"],
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
    try:
        yield names
    finally:
        for n in ("n1", "n2"):
            api_request(admin, "DELETE", f"/api/v1/nodes/{names[n]}")
        api_request(admin, "DELETE", f"{STORAGE}/storageclasses/{names['class']}")
        api_request(admin, "DELETE", f"{STORAGE}/csidrivers/{names['driver']}")


def claim(admin: ApiClient, ns: str, name: str, cls: str, size: str) -> None:
    api_request(
        admin,
        "POST",
        f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
        body={
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": cls,
                "resources": {"requests": {"storage": size}},
            },
        },
    )


def capacity(admin: ApiClient, ns: str, name: str, cls: str, node: str, size: str) -> None:
    api_request(
        admin,
        "POST",
        f"{STORAGE}/namespaces/{ns}/csistoragecapacities",
        body={
            "metadata": {"name": name},
            "storageClassName": cls,
            "capacity": size,
            "nodeTopology": {"matchLabels": {NODE_KEY: node}},
        },
    )


def selected_node(admin: ApiClient, ns: str, name: str) -> str | None:
    pvc = api_request(admin, "GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}")
    return (pvc["metadata"].get("annotations") or {}).get(SELECTED_NODE)


def kube_scheduler(apiserver: ControlPlane, name: str, label: str) -> Any:
    """The pinned kube-scheduler, profile ``name``, kept to this test's nodes."""
    profile = {"schedulerName": name, "pluginConfig": [only_nodes_labelled("capacity-test", label)]}
    return apiserver.start_kube_scheduler({"leaderElection": {"leaderElect": False}, "profiles": [profile]})


def volumes(claim_name: str) -> list[dict[str, Any]]:
    return [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]


def test_a_claim_goes_where_a_capacity_has_room_and_waits_where_none_has(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, storage: dict[str, str], tmp_path: Path
) -> None:
    label, cls = storage["label"], storage["class"]
    capacity(admin, namespace, "small-n1", cls, storage["n1"], "1Gi")
    capacity(admin, namespace, "large-n2", cls, storage["n2"], "5Gi")
    for c, size in (("fits-n2", "2Gi"), ("too-big", "10Gi"), ("theirs-too-big", "10Gi")):
        claim(admin, namespace, c, cls, size)

    # kube-scheduler's verdict on a pod that fits nowhere, to hold ours to.
    theirs = f"go-{label}"
    go = kube_scheduler(apiserver, theirs, label)
    try:
        create_pod(admin, namespace, "theirs", theirs, volumes=volumes("theirs-too-big"))
        their_note = poll(
            lambda: failed_note(admin, namespace, "theirs"), 60, "kube-scheduler's FailedScheduling"
        )
    finally:
        go.stop()
    assert "2 node(s) did not have enough free storage" in their_note

    ours = f"ours-{label}"
    with scheduler_running(kept_to_nodes_config(apiserver, ours, "capacity-test", label), tmp_path):
        create_pod(admin, namespace, "fits", ours, volumes=volumes("fits-n2"))
        assert (
            poll(lambda: selected_node(admin, namespace, "fits-n2"), 30, "the claim's node") == storage["n2"]
        )

        create_pod(admin, namespace, "waits", ours, volumes=volumes("too-big"))
        note = poll(lambda: failed_note(admin, namespace, "waits"), 30, "our FailedScheduling")
        assert note == their_note
        assert selected_node(admin, namespace, "too-big") is None

        # A capacity with room appears: the waiting pod is tried again, and goes there.
        capacity(admin, namespace, "grown-n1", cls, storage["n1"], "20Gi")
        assert (
            poll(lambda: selected_node(admin, namespace, "too-big"), 30, "the claim's node") == storage["n1"]
        )


def test_claims_go_where_the_pool_has_the_most_room_as_with_kube_scheduler(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, storage: dict[str, str], tmp_path: Path
) -> None:
    """StorageCapacityScoring: a 1Gi claim takes all of n1's 1Gi pool (score 0) and a fifth of
    n2's 5Gi (score 80); the nodes are alike otherwise, so each pod's claim goes to n2."""
    label, cls = storage["label"], storage["class"]
    capacity(admin, namespace, "n1-pool", cls, storage["n1"], "1Gi")
    capacity(admin, namespace, "n2-pool", cls, storage["n2"], "5Gi")
    for i in range(6):
        claim(admin, namespace, f"c{i}", cls, "1Gi")

    theirs = f"go-{label}"
    go = kube_scheduler(apiserver, theirs, label)
    try:
        create_pod(admin, namespace, "theirs", theirs, volumes=volumes("c0"))
        assert (
            poll(lambda: selected_node(admin, namespace, "c0"), 60, "kube-scheduler's choice")
            == storage["n2"]
        )
    finally:
        go.stop()

    ours = f"ours-{label}"
    with scheduler_running(kept_to_nodes_config(apiserver, ours, "capacity-test", label), tmp_path):
        for i in range(1, 6):  # without the score, each would go to either node: 1 in 32 all to n2
            create_pod(admin, namespace, f"p{i}", ours, volumes=volumes(f"c{i}"))
            assert (
                poll(lambda i=i: selected_node(admin, namespace, f"c{i}"), 30, "our choice") == storage["n2"]
            )
