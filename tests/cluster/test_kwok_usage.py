"""The placement benchmark's simulation, against the private API server and the pinned kwok: a
pod's usage annotations become the node's series on kwok's kubelet-like endpoint, as the
benchmark's Prometheus reads them (``bench.placement.kwokconfig``)."""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import ApiClient

from bench import kwok
from bench.placement import run as prun
from bench.placement.kwokconfig import documents, metrics_path
from scheduler.cluster.client import api_request
from scheduler.polling import poll
from tests.apiserver import ControlPlane, find_bin_dir, free_port, kwok_stage_files

pytestmark = pytest.mark.apiserver


@pytest.fixture
def kwok_server(apiserver: ControlPlane, tmp_path: Path) -> Iterator[int]:
    bin_dir = find_bin_dir()
    assert bin_dir is not None and (bin_dir / "kwok").exists(), "run make tools first"
    port = free_port()
    controller = kwok.KwokController(
        str(bin_dir / "kwok"),
        apiserver.kubeconfig,
        kwok_stage_files(),
        tmp_path,
        extra_config=documents(),
        server_port=port,
    )
    controller.start()
    try:
        yield port
    finally:
        controller.stop()


def series(port: int, node: str) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{metrics_path(node)}", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name.split("{")[0]] = float(value)
    return out


def test_a_pods_usage_annotations_are_its_nodes_usage_on_kwoks_endpoint(
    admin: ApiClient, namespace: str, kwok_server: int
) -> None:
    contender = f"t{uuid.uuid4().hex[:6]}"
    node = prun.node_body(contender, 0)
    name = node["metadata"]["name"]
    api_request(admin, "POST", "/api/v1/nodes", body=node)
    try:
        body = prun.usage_pod("busy", name, 1500, 3 * 2**30)
        api_request(admin, "POST", f"/api/v1/namespaces/{namespace}/pods", body=body)
        first = poll(
            lambda: (s := series(kwok_server, name)).get("node_memory_working_set_bytes") == 3 * 2**30 and s,
            30,
            "the pod's memory on its node's endpoint",
            0.5,
            retry_on=(OSError,),
        )
        assert first["machine_cpu_cores"] == 8
        assert first["machine_memory_bytes"] == 32 * 2**30
        # The CPU counter grows by the pod's 1.5 cores per second (kwok integrates between reads).
        t0, c0 = time.monotonic(), first["node_cpu_usage_seconds_total"]
        second = poll(
            lambda: time.monotonic() - t0 >= 2 and series(kwok_server, name), 10, "a later read", 0.5
        )
        rate = (second["node_cpu_usage_seconds_total"] - c0) / (time.monotonic() - t0)
        assert 1.2 < rate <= 1.6, rate
    finally:
        api_request(admin, "DELETE", f"/api/v1/nodes/{name}")
