"""VolumeRestrictions against the private API server: a ReadWriteOncePod claim in use keeps a
second pod off every node until the first is gone."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from kubernetes.client import ApiClient

from scheduler.cluster.client import api_request
from scheduler.plugins.volumerestrictions import ERR_REASON_RWOP_CONFLICT
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


def test_a_read_write_once_pod_claim_serves_one_pod_at_a_time(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path
) -> None:
    label = f"w{uuid.uuid4().hex[:6]}"
    nodes = [make_node(admin, f"{label}-{x}", {"rwop-test": label})["metadata"]["name"] for x in "ab"]
    profile = f"rwop-{label}"
    claim = bound_claim(admin, namespace, f"{label}-pv", "solo", access_modes=("ReadWriteOncePod",))
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    try:
        with scheduler_running(kept_to_nodes_config(apiserver, profile, "rwop-test", label), tmp_path):
            create_pod(admin, namespace, "first", profile, volumes=volumes)
            assert bound_node(admin, namespace, "first") in nodes
            create_pod(admin, namespace, "second", profile, volumes=volumes)
            note = poll(lambda: failed_note(admin, namespace, "second"), 20, "second refused")
            # other tests' nodes are refused by the profile's node affinity; these two for the claim
            # (where in the sorted list depends on how many other nodes there are: "2 ..." < "20 ...")
            assert re.search(rf"(: |, )2 {re.escape(ERR_REASON_RWOP_CONFLICT)}[,.]", note), note
            assert "2 No preemption victims found" in note, note
            api_request(
                admin,
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods/first",
                query=[("gracePeriodSeconds", "0")],
            )
            assert bound_node(admin, namespace, "second") in nodes  # the delete brings it back
    finally:
        for n in nodes:
            api_request(admin, "DELETE", f"/api/v1/nodes/{n}")
        api_request(admin, "DELETE", f"/api/v1/persistentvolumes/{label}-pv")
