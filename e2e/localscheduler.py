"""The scheduler as a local process against the e2e cluster (``python -m scheduler``).

A context manager starts it with a configuration and flags, keeps its log
under _artifacts/, waits until /readyz answers, and stops it with SIGTERM
(or reports how it ended).
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from scheduler.polling import poll

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(os.environ.get("ARTIFACTS", REPO / "_artifacts"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LocalScheduler:
    proc: subprocess.Popen[bytes]
    log: Path
    port: int

    def get(self, path: str) -> tuple[int, str]:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.port}{path}", context=ctx, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def wait_ready(self, timeout: float = 60) -> None:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"scheduler exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                return self.get("/readyz")[0] == 200
            except OSError:
                return False

        poll(ready, timeout, "the local scheduler's /readyz", interval=0.5)

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"scheduler still running after {timeout:.0f}s:\n{self.tail()}") from None

    def terminate(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@contextmanager
def local_scheduler(name: str, config: dict, kubeconfig: str, *flags: str) -> Iterator[LocalScheduler]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = ARTIFACTS / f"local-scheduler-{name}-{int(time.time())}.log"
    port = free_port()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(config, f)
        cfg_path = f.name
    cmd = [
        sys.executable,
        "-m",
        "scheduler",
        f"--config={cfg_path}",
        f"--kubeconfig={kubeconfig}",
        f"--secure-port={port}",
        "--bind-address=127.0.0.1",
        "-v=4",
        *flags,
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    sched = LocalScheduler(proc, log, port)
    try:
        yield sched
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        os.unlink(cfg_path)


def config(scheduler_name: str, lease_name: str, lease_namespace: str = "kube-system") -> dict:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {
            "leaderElect": True,
            "resourceName": lease_name,
            "resourceNamespace": lease_namespace,
        },
        "profiles": [{"schedulerName": scheduler_name}],
    }
