"""The rendered Prometheus runs: the Deployment's command and flags, the config and the rules, on the
``prometheus`` binary of this machine (Debian's 2.42 here; the official 3.x image takes the same flags).
It scrapes a stand-in kubelet over HTTPS, as it would each node's: the paths, the bearer token, the
serving certificate checked or not as ``kubeletTLS`` says, and the recording rules' series labelled
with the node's name. Skipped where no prometheus binary is installed."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import ssl
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from scheduler.deploy.waiting import poll
from tests.apiserver import CA
from tests.deploy.util import rendered

PROMETHEUS = shutil.which("prometheus")
SA = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN = "prometheus-token"
NODE = "kind-worker"

# What a kubelet serves, cut down: the series the config keeps, and one it drops.
METRICS = {
    "/metrics/resource": (
        "# TYPE node_cpu_usage_seconds_total counter\n"
        "node_cpu_usage_seconds_total 12.5\n"
        "# TYPE node_memory_working_set_bytes gauge\n"
        "node_memory_working_set_bytes 1e+09\n"
        "# TYPE container_memory_working_set_bytes gauge\n"
        'container_memory_working_set_bytes{container="c",namespace="n",pod="p"} 5e+08\n'
    ),
    "/metrics/cadvisor": (
        "# TYPE machine_cpu_cores gauge\n"
        "machine_cpu_cores 4\n"
        "# TYPE machine_memory_bytes gauge\n"
        "machine_memory_bytes 4e+09\n"
    ),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as r:
        return (
            json.loads(r.read()) if r.headers.get_content_type() == "application/json" else r.read().decode()
        )


@dataclass
class Kubelet:
    """A stand-in kubelet: HTTPS on 127.0.0.1 with a certificate of ``ca``; 401 without the token."""

    address: str
    requests: list[tuple[str, str]] = field(default_factory=list)
    """(path, Authorization header) of each request."""


@pytest.fixture
def kubelet(tmp_path: Path) -> Iterator[tuple[Kubelet, CA]]:
    ca = CA()
    cert, key = ca.issue(NODE, server=True)  # SANs include 127.0.0.1
    (tmp_path / "kubelet.crt").write_bytes(cert)
    (tmp_path / "kubelet.key").write_bytes(key)
    seen: list[tuple[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server name
            auth = self.headers.get("Authorization", "")
            seen.append((self.path, auth))
            body = METRICS.get(self.path)
            status = 401 if auth != f"Bearer {TOKEN}" else 200 if body is not None else 404
            data = (body if status == 200 else "no\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(tmp_path / "kubelet.crt", tmp_path / "kubelet.key")
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Kubelet(f"127.0.0.1:{server.server_address[1]}", seen), ca
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def run_prometheus(tmp_path: Path, sets: tuple[str, ...], sa_ca: bytes) -> Iterator[str]:
    """The rendered Deployment's prometheus, its files under tmp_path (the ServiceAccount's files
    too: ``sa_ca`` as its ca.crt); yields the base URL once ready."""
    assert PROMETHEUS is not None
    r = rendered("prometheus", *sets)
    dep = r.objects[-1]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["prometheus"]
    etc, data, sa = tmp_path / "etc", tmp_path / "data", tmp_path / "sa"
    etc.mkdir()
    sa.mkdir()
    (sa / "ca.crt").write_bytes(sa_ca)
    (sa / "token").write_text(TOKEN + "\n")  # a mounted token may end with a newline; Prometheus trims it
    (etc / "rules.yml").write_text(r.files["rules.yml"])
    (etc / "prometheus.yml").write_text(
        r.files["prometheus.yml"].replace("/etc/prometheus", str(etc)).replace(SA, str(sa))
    )
    port = free_port()
    args = [
        a.replace("/etc/prometheus", str(etc))
        .replace("=/prometheus", f"={data}")
        .replace("--web.listen-address=:9090", f"--web.listen-address=127.0.0.1:{port}")
        for a in container["args"]
    ]
    assert any(a.startswith("--web.listen-address=127.0.0.1:") for a in args)
    with subprocess.Popen(
        [str(PROMETHEUS), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        try:
            base = f"http://127.0.0.1:{port}"

            def ready() -> tuple[bool, str]:
                if proc.poll() is not None:
                    out = proc.stdout.read() if proc.stdout else ""
                    raise AssertionError(f"prometheus exited {proc.returncode}: {out}")
                try:
                    get(f"{base}/-/ready")
                except OSError as e:
                    return False, str(e)
                return True, "ready"

            poll("prometheus ready", ready, 60, interval=0.2)
            yield base
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def scraped(base: str, want_health: str) -> list[dict[str, Any]]:
    """The two targets once both have been scraped and are ``want_health``."""
    targets: list[Any] = []

    def check() -> tuple[bool, str]:  # the scrape manager applies discoveries every 5 s
        targets[:] = get(f"{base}/api/v1/targets")["data"]["activeTargets"]
        states = [(t["labels"]["job"], t["health"], t.get("lastError", "")) for t in targets]
        return len(targets) == 2 and all(t["health"] == want_health for t in targets), str(states)

    poll(f"both targets {want_health}", check, 30, interval=0.2)
    return targets


FAST = ("prometheus.scrapeInterval=1s", "prometheus.evaluationInterval=1s", "prometheus.rateWindow=2s")


@pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary on this machine")
@pytest.mark.parametrize("verify", [False, True], ids=["skip-verify", "verify-against-the-sa-ca"])
def test_prometheus_scrapes_the_kubelet_directly_with_its_token(
    tmp_path: Path, kubelet: tuple[Kubelet, CA], verify: bool
) -> None:
    server, ca = kubelet
    sets = (
        *FAST,
        "prometheus.discovery=static",
        f"prometheus.nodes={{{NODE}: {server.address}}}",
        f"prometheus.kubeletTLS.insecureSkipVerify={str(not verify).lower()}",
    )
    # skip-verify: the ServiceAccount's CA is another one, as a self-signed kubelet's would be
    with run_prometheus(tmp_path, sets, ca.pem if verify else CA().pem) as base:
        groups = get(f"{base}/api/v1/rules")["data"]["groups"]
        records = [rule["name"] for g in groups for rule in g["rules"]]
        assert records == [
            "cpu_usage_active",
            "mem_usage_active",
            "cpu_usage_avg_5m",
            "cpu_usage_max_avg_1h",
            "cpu_usage_max_avg_1d",
            "mem_usage_avg_5m",
            "mem_usage_max_avg_1h",
            "mem_usage_max_avg_1d",
        ]
        targets = scraped(base, "up")
        assert sorted(
            (t["labels"]["job"], t["labels"]["instance"], t["labels"]["node"], t["scrapeUrl"])
            for t in targets
        ) == [
            ("kubelet-cadvisor", NODE, NODE, f"https://{server.address}/metrics/cadvisor"),
            ("kubelet-resource", NODE, NODE, f"https://{server.address}/metrics/resource"),
        ]
        assert {path for path, _ in server.requests} == {"/metrics/resource", "/metrics/cadvisor"}
        assert {auth for _, auth in server.requests} == {f"Bearer {TOKEN}"}

        def mem() -> tuple[bool, str]:
            got = get(f"{base}/api/v1/query?query=mem_usage_active")["data"]["result"]
            return [(r["metric"], r["value"][1]) for r in got] == [
                ({"__name__": "mem_usage_active", "instance": NODE, "node": NODE}, "0.25")
            ], str(got)

        poll("mem_usage_active of the node", mem, 30, interval=0.2)
        dropped = get(f"{base}/api/v1/query?query=container_memory_working_set_bytes")["data"]["result"]
        assert dropped == []


@pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary on this machine")
def test_a_kubelet_certificate_of_another_ca_fails_verification(
    tmp_path: Path, kubelet: tuple[Kubelet, CA]
) -> None:
    server, _ = kubelet
    sets = (
        *FAST,
        "prometheus.discovery=static",
        f"prometheus.nodes={{{NODE}: {server.address}}}",
        "prometheus.kubeletTLS.insecureSkipVerify=false",
    )
    with run_prometheus(tmp_path, sets, CA().pem) as base:
        errors = [t["lastError"] for t in scraped(base, "down")]
        assert all("x509: certificate signed by unknown authority" in e for e in errors), errors
        assert server.requests == []
