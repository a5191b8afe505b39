"""bench.population against the API server and the pinned kwok: every resident pod is valid,
created bound and Running, a second population finds them there instead of failing, and kwok
leaves them alone while it still runs other pods on the same node."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import ApiClient

from bench import kwok
from bench.population import RESIDENT_LABEL, Population, populate
from scheduler.cluster.client import api_request
from scheduler.polling import poll
from tests.apiserver import ControlPlane, find_bin_dir, kwok_stage_files

pytestmark = pytest.mark.apiserver


def resident_pods(admin: ApiClient, pop: Population) -> list[dict]:
    selector = [("labelSelector", "=".join(RESIDENT_LABEL))]
    return [
        p
        for ns in pop.namespace_names()
        for p in api_request(admin, "GET", f"/api/v1/namespaces/{ns}/pods", query=selector)["items"]
    ]


def test_the_population_is_created_bound_running_and_resumes(admin: ApiClient) -> None:
    pop = Population(nodes=6, per_node=5, namespaces=2, namespace_prefix=f"r{uuid.uuid4().hex[:6]}")
    for ns in pop.namespace_names():
        api_request(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    said: list[str] = []
    first = populate(admin, pop, workers=4, progress=said.append)
    assert (first.created, first.existed, first.failed) == (30, 0, 0), first.errors
    pods = resident_pods(admin, pop)
    assert len(pods) == 30 and all(p["spec"]["nodeName"] for p in pods)
    for p in pods:
        st = p["status"]
        assert st["phase"] == "Running", p["metadata"]["name"]
        assert {c["type"] for c in st["conditions"] if c["status"] == "True"} >= {"Ready", "ContainersReady"}
        assert [c["name"] for c in st["containerStatuses"]] == [c["name"] for c in p["spec"]["containers"]]
        assert st["hostIP"] == kwok.node_ip(int(p["spec"]["nodeName"].removeprefix(kwok.NODE_PREFIX)))
        for c, cs in zip(p["spec"]["containers"], st["containerStatuses"], strict=True):
            assert [m["mountPath"] for m in cs.get("volumeMounts", [])] == [
                m["mountPath"] for m in c.get("volumeMounts", [])
            ]
    assert len({p["status"]["podIP"] for p in pods}) == 30
    again = populate(admin, pop, workers=4)
    assert (again.created, again.existed, again.failed) == (0, 30, 0)


def ready(node: dict) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or ()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@pytest.fixture
def kwok_running(apiserver: ControlPlane, tmp_path: Path) -> Iterator[kwok.KwokController]:
    bin_dir = find_bin_dir()
    assert bin_dir is not None and (bin_dir / "kwok").exists(), "run make tools first"
    controller = kwok.KwokController(
        str(bin_dir / "kwok"), apiserver.kubeconfig, kwok_stage_files(), tmp_path
    )
    controller.start()
    try:
        yield controller
    finally:
        controller.stop()


def test_kwok_runs_other_pods_but_leaves_the_resident_ones_alone(
    admin: ApiClient, namespace: str, kwok_running: kwok.KwokController
) -> None:
    name = kwok.node_name(0)
    api_request(admin, "POST", "/api/v1/nodes", body=kwok.node_body(0))
    try:
        # kwok manages the node (its Ready condition) before the pods come: it sees their creation.
        poll(lambda: ready(api_request(admin, "GET", f"/api/v1/nodes/{name}")), 60, "kwok node Ready", 0.2)
        pop = Population(nodes=1, per_node=3, namespaces=1, namespace_prefix=f"k{uuid.uuid4().hex[:6]}")
        api_request(
            admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": pop.namespace_names()[0]}}
        )
        done = populate(admin, pop, workers=2)
        assert (done.created, done.failed) == (3, 0), done.errors
        written = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in resident_pods(admin, pop)}

        # A resident pod whose status nobody writes stays Pending: kwok's pod-ready stage
        # would run it, as it runs another pod created after it on the same node...
        ns = pop.namespace_names()[0]
        unwritten = {
            "metadata": {"name": "unwritten", "labels": dict([RESIDENT_LABEL])},
            "spec": {
                "nodeName": name,
                "tolerations": [kwok.TOLERATION],
                "containers": [{"name": "c", "image": "registry.example.com/c:1"}],
            },
        }
        api_request(admin, "POST", f"/api/v1/namespaces/{ns}/pods", body=unwritten)
        other = {
            "metadata": {"name": "other"},
            "spec": {
                "nodeName": name,
                "tolerations": [kwok.TOLERATION],
                "containers": [{"name": "c", "image": "registry.example.com/c:1"}],
            },
        }
        api_request(admin, "POST", f"/api/v1/namespaces/{namespace}/pods", body=other)
        poll(
            lambda: (
                api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/pods/other")["status"].get("phase")
                == "Running"
            ),
            60,
            "kwok runs the other pod",
            0.2,
        )
        # ... and has not written the resident pods' status over the population's, nor tried
        # (a pod IP of its own beside theirs is refused, and kwok logs that).
        unwritten = api_request(admin, "GET", f"/api/v1/namespaces/{ns}/pods/unwritten")
        assert unwritten["status"]["phase"] == "Pending"
        after = {
            p["metadata"]["name"]: p["metadata"]["resourceVersion"]
            for p in resident_pods(admin, pop)
            if p["metadata"]["name"] != "unwritten"
        }
        assert after == written
        log = kwok_running.tail(1000)
        assert not [n for n in written if n in log], log
    finally:
        api_request(admin, "DELETE", f"/api/v1/nodes/{name}")
