"""bench.clean (``make bench-clean``) against the private API server: it removes the nodes and
namespaces a bench left, waits until they are gone, and says what stayed when they do not go.

No namespace controller runs here, so a deleted namespace stays Terminating until the test
finalizes it, as the controller would once the namespace's pods are gone.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from kubernetes.client import ApiClient

from bench import churn, dra, kwok, load
from bench import clean as bench_clean
from scheduler.cluster.client import api_request
from tests.apiserver import ControlPlane
from tests.cluster.util import make_node

pytestmark = pytest.mark.apiserver


def _bench_namespace(admin: ApiClient) -> str:
    name = f"bench-{uuid.uuid4().hex[:6]}"
    labels = {load.PART_OF[0]: load.PART_OF[1]}
    api_request(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": name, "labels": labels}})
    return name


def _finalize_terminating(admin: ApiClient) -> int:
    """The namespace controller's last step for every terminating bench namespace."""
    query = [("labelSelector", "=".join(load.PART_OF))]
    done = 0
    for ns in api_request(admin, "GET", "/api/v1/namespaces", query=query).get("items") or ():
        if ns["metadata"].get("deletionTimestamp"):
            ns["spec"]["finalizers"] = []
            api_request(admin, "PUT", f"/api/v1/namespaces/{ns['metadata']['name']}/finalize", body=ns)
            done += 1
    return done


@pytest.fixture
def namespace_controller(admin: ApiClient) -> Iterator[None]:
    """Finalizes terminating bench namespaces in the background while the test runs."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(0.2):
            _finalize_terminating(admin)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    yield
    stop.set()
    t.join(5)


def _leftovers(admin: ApiClient) -> tuple[int, int, int, int]:
    found = bench_clean.leftovers(admin)
    return found.kwok_nodes, found.churn_nodes, found.namespaces, found.resource_slices


def test_removes_nodes_and_namespaces(
    apiserver: ControlPlane, admin: ApiClient, namespace_controller: None, capsys: pytest.CaptureFixture[str]
) -> None:
    key = uuid.uuid4().hex[:6]
    for i in range(3):
        make_node(admin, f"kwok-{key}-{i}", {kwok.LABEL: "true"})
    make_node(admin, f"churn-{key}", {churn.CHURN_LABEL[0]: churn.CHURN_LABEL[1]})
    other = make_node(admin, f"other-{key}", {"kubernetes.io/hostname": f"other-{key}"})
    _bench_namespace(admin)
    _bench_namespace(admin)
    api_request(admin, "POST", f"{dra.DRA}/resourceslices", body=dra.slice_body(f"kwok-{key}-0"))
    before = _leftovers(admin)
    assert before[0] >= 3 and before[1] >= 1 and before[2] >= 2 and before[3] >= 1

    assert bench_clean.main(["--kubeconfig", apiserver.kubeconfig, "--timeout", "60"]) == 0

    assert _leftovers(admin) == (0, 0, 0, 0)
    # A node that is not the bench's stays.
    api_request(admin, "GET", f"/api/v1/nodes/{other['metadata']['name']}")
    err = capsys.readouterr().err
    assert f"removing the benchmark's leftovers: {before[0]} kwok nodes, {before[1]} churn nodes" in err
    assert "benchmark leftovers removed" in err

    # Nothing left: it says so, and deletes nothing.
    assert bench_clean.main(["--kubeconfig", apiserver.kubeconfig]) == 0
    assert "no benchmark leftovers in the cluster" in capsys.readouterr().err


def test_says_what_is_left_when_a_namespace_does_not_go(
    apiserver: ControlPlane, admin: ApiClient, capsys: pytest.CaptureFixture[str]
) -> None:
    name = _bench_namespace(admin)
    try:
        # No namespace controller: the namespace stays Terminating.
        assert bench_clean.main(["--kubeconfig", apiserver.kubeconfig, "--timeout", "2"]) == 1
        err = capsys.readouterr().err
        assert "error: after 2s 0 kwok nodes, 0 churn nodes, 1 namespaces of the benchmark are left" in err
        ns = api_request(admin, "GET", f"/api/v1/namespaces/{name}")
        assert ns["metadata"].get("deletionTimestamp")
    finally:
        _finalize_terminating(admin)


def test_a_bad_kubeconfig_is_one_line(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    assert bench_clean.main(["--kubeconfig", str(missing)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(missing) in err and "Traceback" not in err
