"""The rendered Prometheus runs: the Deployment's command and flags, the config and the rules, on the
``prometheus`` binary of this machine (Debian's 2.42 here; the official 3.x image takes the same flags).
Skipped where no prometheus binary is installed."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from scheduler.deploy.waiting import poll
from tests.apiserver import CA
from tests.deploy.util import rendered

PROMETHEUS = shutil.which("prometheus")
SA = "/var/run/secrets/kubernetes.io/serviceaccount"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=2) as r:
        return (
            json.loads(r.read()) if r.headers.get_content_type() == "application/json" else r.read().decode()
        )


@pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary on this machine")
def test_prometheus_starts_with_the_rendered_flags_config_and_rules(tmp_path: Path) -> None:
    r = rendered("prometheus", "prometheus.discovery=static", "prometheus.nodes=[kind-worker]")
    dep = r.objects[-1]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["prometheus"]
    etc, data = tmp_path / "etc", tmp_path / "data"
    etc.mkdir()
    (tmp_path / "ca.crt").write_bytes(CA().pem)  # the service account's CA bundle must parse
    (tmp_path / "token").write_text("t")
    (etc / "rules.yml").write_text(r.files["rules.yml"])
    (etc / "prometheus.yml").write_text(
        r.files["prometheus.yml"].replace("/etc/prometheus", str(etc)).replace(SA, str(tmp_path))
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
            targets: list[Any] = []

            def discovered() -> tuple[bool, str]:  # the scrape manager applies discoveries every 5 s
                targets[:] = get(f"{base}/api/v1/targets")["data"]["activeTargets"]
                return len(targets) == 2, f"{len(targets)} targets"

            poll("targets", discovered, 30, interval=0.2)
            assert sorted(
                (t["labels"]["job"], t["labels"]["instance"], t["labels"]["node"], t["scrapeUrl"])
                for t in targets
            ) == [
                (
                    "kubelet-cadvisor",
                    "kind-worker",
                    "kind-worker",
                    "https://kubernetes.default.svc:443/api/v1/nodes/kind-worker/proxy/metrics/cadvisor",
                ),
                (
                    "kubelet-resource",
                    "kind-worker",
                    "kind-worker",
                    "https://kubernetes.default.svc:443/api/v1/nodes/kind-worker/proxy/metrics/resource",
                ),
            ]
        finally:
            proc.terminate()
            proc.wait(timeout=30)
