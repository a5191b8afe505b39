"""VolumeZone against the private API server: a pod whose claim is bound to a zonal PV goes to
a node of that zone.

The claim is bound as the PV controller would bind it (``util.bound_claim``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import ApiClient

from scheduler.cluster.client import api_request
from tests.apiserver import ControlPlane
from tests.cluster.util import (
    bound_claim,
    bound_node,
    create_pod,
    kept_to_nodes_config,
    make_node,
    scheduler_running,
)

pytestmark = pytest.mark.apiserver

ZONE = "topology.kubernetes.io/zone"


@pytest.fixture
def zoned(apiserver: ControlPlane, admin: ApiClient, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """Nodes in zones z1 and z2 (and a third in z3), our scheduler kept to them; yields
    (the test label, the profile's name, the z1 node)."""
    label = f"z{uuid.uuid4().hex[:6]}"
    for zone in ("z1", "z2", "z3"):
        make_node(admin, f"{label}-{zone}", {"zone-test": label, ZONE: zone})
    config = kept_to_nodes_config(apiserver, f"zone-{label}", "zone-test", label)
    try:
        with scheduler_running(config, tmp_path):
            yield label, f"zone-{label}", f"{label}-z1"
    finally:
        for zone in ("z1", "z2", "z3"):
            api_request(admin, "DELETE", f"/api/v1/nodes/{label}-{zone}")
        api_request(admin, "DELETE", f"/api/v1/persistentvolumes/{label}-pv")


def test_a_zonal_volumes_pod_goes_to_its_zone(admin: ApiClient, namespace: str, zoned) -> None:
    label, scheduler, z1 = zoned
    claim = bound_claim(admin, namespace, f"{label}-pv", f"{label}-data", pv_labels={ZONE: "z1"})
    for i in range(4):  # the three nodes are alike but for the zone: by chance, 1 in 81
        volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        create_pod(admin, namespace, f"p{i}", scheduler, volumes=volumes)
        assert bound_node(admin, namespace, f"p{i}") == z1
