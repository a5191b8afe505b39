"""bench.workloads: each workload's pods are what it says, and ours places them by those rules.

A few nodes labelled as the benchmark's kwok nodes (one much larger, and
zones of unequal size, so that scores alone would crowd the pods), our
scheduler kept to them, and every pod of a small run of each workload: all
are bound, the anti-affinity groups never share a node, and the zone spread
holds.
"""

from __future__ import annotations

import collections
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient

from bench import kwok
from bench import workloads as wl
from scheduler.cluster.client import api_request
from scheduler.polling import poll
from tests.apiserver import ControlPlane
from tests.cluster.util import kept_to_nodes_config, make_node, scheduler_running

pytestmark = pytest.mark.apiserver

SHAPE = wl.Shape(nodes=4, pods=12)
NOT_READY = {"key": "node.kubernetes.io/not-ready", "operator": "Exists"}
"""The nodes here have no kubelet, so they keep the not-ready taint the API server gives them."""


NODES = ((0, "32"), (10, "1"), (20, "1"), (1, "1"))
"""(kwok node index, CPUs): zone-0 holds three nodes, one of them 32 times the others, zone-1
one; so that, the rules aside, our scores (least allocated) would put every pod on the big node."""


@pytest.fixture
def bench_nodes(admin: ApiClient) -> Any:
    """The NODES, labelled as the kwok nodes are (their zone), and with a key of their own."""
    key = f"t{uuid.uuid4().hex[:6]}"
    zones = {}
    for i, cpu in NODES:
        name = f"{key}-{i}"
        labels = {
            kwok.LABEL: "true",
            kwok.ZONE_LABEL: kwok.zone_of(i),
            "kubernetes.io/hostname": name,
            key: "y",
        }
        make_node(admin, name, labels, cpu=cpu, memory="256Gi")
        zones[name] = kwok.zone_of(i)
    yield key, zones
    for name in zones:
        api_request(admin, "DELETE", f"/api/v1/nodes/{name}")


def placed(admin: ApiClient, namespace: str, workload: wl.Workload, profile: str) -> list[dict[str, Any]]:
    """Create the workload's pods for ``profile``; the pods, once every one is bound."""
    for i in range(SHAPE.pods):
        body = workload.pod(i, profile, SHAPE)
        body["spec"]["tolerations"].append(NOT_READY)
        api_request(admin, "POST", f"/api/v1/namespaces/{namespace}/pods", body=body)

    def all_bound() -> list[dict[str, Any]]:
        pods = api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
        return pods if len(pods) == SHAPE.pods and all(p["spec"].get("nodeName") for p in pods) else []

    def pending() -> str:
        pods = api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
        return "; ".join(
            f"{p['metadata']['name']}: {[c.get('message') for c in (p.get('status') or {}).get('conditions') or []]}"
            for p in pods
            if not p["spec"].get("nodeName")
        )

    try:
        return poll(all_bound, 60, f"the {workload.name} pods bound")
    except AssertionError as e:
        raise AssertionError(f"{e}; pending: {pending()}") from None


@pytest.mark.parametrize("workload", wl.ALL, ids=lambda w: w.name)
def test_ours_places_every_workload_by_its_rules(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path, bench_nodes: Any, workload: Any
) -> None:
    key, zones = bench_nodes
    profile = f"bench-{key}"
    with scheduler_running(kept_to_nodes_config(apiserver, profile, key, "y"), tmp_path):
        pods = placed(admin, namespace, workload, profile)
    nodes = [p["spec"]["nodeName"] for p in pods]
    assert set(nodes) <= set(zones)
    if workload.name == "affinity":
        by_group = collections.defaultdict(list)
        for p in pods:
            by_group[p["metadata"]["labels"][wl.GROUP_LABEL]].append(p["spec"]["nodeName"])
        assert len(by_group) == wl.groups(SHAPE) == 6
        assert all(len(set(ns)) == len(ns) for ns in by_group.values()), by_group
    if workload.name == "spread":
        per_zone = collections.Counter(zones[n] for n in nodes)
        assert per_zone == {"zone-0": 6, "zone-1": 6}, per_zone
