"""bench.workloads and bench.churn: each workload's pods are what it says, and ours places them
by those rules.

A few nodes labelled as the benchmark's kwok nodes (one much larger, and
zones of unequal size, so that scores alone would crowd the pods), our
scheduler kept to them, and every pod of a small run of each workload: all
are bound, the anti-affinity groups never share a node, and the zone spread
holds. The preemption workload's high-priority pods get their nodes by
evicting every low-priority pod bound there before; the churn recreates its
objects while ours schedules, and leaves none behind.
"""

from __future__ import annotations

import collections
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient

from bench import churn, kwok, load
from bench import workloads as wl
from scheduler.cluster.client import api_request
from scheduler.polling import poll
from tests.apiserver import ControlPlane
from tests.cluster.util import kept_to_nodes_config, make_node, scheduler_running

pytestmark = pytest.mark.apiserver

SHAPE = wl.Shape(nodes=4, pods=12)


NODES = ((0, "32"), (10, "1"), (20, "1"), (1, "1"))
"""(kwok node index, CPUs): zone-0 holds three nodes, one of them 32 times the others, zone-1
one; so that, the rules aside, our scores (least allocated) would put every pod on the big node."""


def node_set(admin: ApiClient, nodes: tuple[tuple[int, str], ...]) -> Any:
    """Nodes (kwok index, CPUs) labelled as the kwok nodes are (their zone) and with a key of
    their own, named ``<key>-<index:05d>`` (``Shape.node_name`` with ``node_prefix=<key>-``)."""
    key = f"t{uuid.uuid4().hex[:6]}"
    zones = {}
    for i, cpu in nodes:
        name = f"{key}-{i:05d}"
        labels = {
            kwok.LABEL: "true",
            kwok.ZONE_LABEL: kwok.zone_of(i),
            "kubernetes.io/hostname": name,
            key: "y",
        }
        make_node(admin, name, labels, cpu=cpu, memory="256Gi")
        # Without the not-ready taint the API server gives a new node (no kubelet makes them
        # Ready here), as the kwok nodes are once kwok has: the churn's pods tolerate no more.
        api_request(
            admin,
            "PATCH",
            f"/api/v1/nodes/{name}",
            body={"spec": {"taints": None}},
            content_type="application/merge-patch+json",
        )
        zones[name] = kwok.zone_of(i)
    yield key, zones
    for name in zones:
        api_request(admin, "DELETE", f"/api/v1/nodes/{name}")


@pytest.fixture
def bench_nodes(admin: ApiClient) -> Any:
    yield from node_set(admin, NODES)


@pytest.fixture
def two_big_nodes(admin: ApiClient) -> Any:
    yield from node_set(admin, ((0, "32"), (1, "32")))


def measured_pods(admin: ApiClient, namespace: str) -> list[dict[str, Any]]:
    query = [("labelSelector", wl.MEASURED)]
    return api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/pods", query=query)["items"]


def create(admin: ApiClient, namespace: str, body: dict[str, Any]) -> None:
    api_request(admin, "POST", f"/api/v1/namespaces/{namespace}/pods", body=body)


def placed(
    admin: ApiClient, namespace: str, workload: wl.Workload, profile: str, shape: wl.Shape = SHAPE
) -> list[dict[str, Any]]:
    """Create the workload's measured pods for ``profile``; the pods, once every one is bound."""
    count = workload.measured(shape)
    for i in range(count):
        create(admin, namespace, workload.pod(i, profile, shape))

    def all_bound() -> list[dict[str, Any]]:
        pods = measured_pods(admin, namespace)
        return pods if len(pods) == count and all(p["spec"].get("nodeName") for p in pods) else []

    def pending() -> str:
        pods = measured_pods(admin, namespace)
        return "; ".join(
            f"{p['metadata']['name']}: {[c.get('message') for c in (p.get('status') or {}).get('conditions') or []]}"
            for p in pods
            if not p["spec"].get("nodeName")
        )

    try:
        return poll(all_bound, 60, f"the {workload.name} pods bound")
    except AssertionError as e:
        raise AssertionError(f"{e}; pending: {pending()}") from None


@pytest.mark.parametrize("name", ["basic", "affinity", "spread"])
def test_ours_places_every_workload_by_its_rules(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path, bench_nodes: Any, name: str
) -> None:
    workload = wl.BY_NAME[name]
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


def test_the_other_workloads_measure_basic_pods() -> None:
    """churn and dynamic differ from basic in what runs beside the pods, not in the pods."""
    for name in ("churn", "dynamic"):
        assert wl.BY_NAME[name].pod(3, "s", SHAPE) == wl.BY_NAME["basic"].pod(3, "s", SHAPE)


def test_preemption_pods_take_their_nodes_by_evicting_every_low_priority_pod(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path, two_big_nodes: Any
) -> None:
    key, zones = two_big_nodes
    shape = wl.Shape(nodes=2, pods=5, node_prefix=f"{key}-")
    workload = wl.BY_NAME["preemption"]
    load.ensure_priority_classes(admin, wl.PRIORITY_CLASSES)
    assert workload.prefill(shape) == 8 and workload.measured(shape) == 2
    low = [workload.prefill_pod(j, shape) for j in range(workload.prefill(shape))]
    assert sorted({p["spec"]["nodeName"] for p in low}) == sorted(zones)
    for body in low:
        create(admin, namespace, body)
    profile = f"bench-{key}"
    with scheduler_running(kept_to_nodes_config(apiserver, profile, key, "y"), tmp_path):
        pods = placed(admin, namespace, workload, profile, shape)

        def low_pods() -> list[dict[str, Any]]:
            query = [("labelSelector", wl.PREFILLED)]
            return api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/pods", query=query)["items"]

        # Their terminationGracePeriodSeconds is 0: an eviction deletes them at once.
        poll(lambda: not low_pods(), 30, "every low-priority pod evicted")
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(zones)


def test_the_churn_recreates_its_objects_while_ours_schedules_and_leaves_none(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path, bench_nodes: Any
) -> None:
    key, _ = bench_nodes
    profile = f"bench-{key}"
    load.ensure_priority_classes(admin, wl.PRIORITY_CLASSES)
    pods_path = f"/api/v1/namespaces/{namespace}/pods"
    churn_query = [("labelSelector", "=".join(churn.CHURN_LABEL))]

    def churned() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        nodes = api_request(admin, "GET", "/api/v1/nodes", query=churn_query)["items"]
        return nodes, api_request(admin, "GET", pods_path, query=churn_query)["items"]

    churner = churn.Churner(str(apiserver.kubeconfig), namespace, profile, "t", interval=0.5)
    with scheduler_running(kept_to_nodes_config(apiserver, profile, key, "y"), tmp_path):
        churner.start()
        try:
            # A pod that fits was bound while the next ones were being made.
            poll(
                lambda: any(p["spec"].get("nodeName") for p in churned()[1]) and churner.stats.ticks >= 3,
                30,
                "a churn pod bound, and three ticks",
            )
            nodes, pods = churned()
            assert len(nodes) == 1 and not nodes[0]["metadata"]["labels"].get(kwok.LABEL)
            huge = [p for p in pods if "huge" in p["metadata"]["name"]]
            assert len(huge) == 1 and not huge[0]["spec"].get("nodeName")
        finally:
            stats = churner.stop()
    assert stats.failed == 0 and stats.created == 3 * stats.ticks and stats.deleted == stats.created
    assert churned() == ([], [])
