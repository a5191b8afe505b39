"""The contenders, and how each runs as a local process against the kind cluster.

- ``ours-*``: ``python -m scheduler`` with a KubeSchedulerConfiguration of one
  profile (kube-scheduler's default plugins, plus ``Dynamic`` as the lease and
  static manifests configure it in the ``dynamic`` workload), leader election
  off, client QPS/burst by ``--kube-api-qps``/``--kube-api-burst``.
- ``kube-scheduler-*``: a second instance of the pinned kube-scheduler, with
  ``--config`` (its own schedulerName, leader election off, QPS/burst in
  ``clientConnection``) and its secure port on a free local port.
- ``raw-binder``: ``rawbinder`` (hack/tools/rawbinder), which binds pending pods
  round robin with no scheduling logic, ``RAW_WORKERS`` binds at a time: what
  the API server takes. (With too few, it measures its own round trips when
  the API server is slow: 16 fell behind the pods' creation on a loaded 2-core
  machine, where kube-scheduler, whose binds are not capped, kept up.)
- ``raw-binder-events``: the same, and a ``Scheduled`` event per bound pod
  through client-go's events broadcaster, as kube-scheduler writes them: the
  API server's limit for a scheduler that reports its binds (ours and
  kube-scheduler both do; the event is a write as costly as the Binding).

Each schedules only pods that name its schedulerName, in its own namespace.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.kwok import LABEL
from scheduler.polling import PollTimeoutError, poll

REPO = Path(__file__).resolve().parent.parent
DEFAULT_QPS = (50.0, 100)
HIGH_QPS = (5000.0, 5000)
RAW_WORKERS = 64


@dataclass(frozen=True)
class Contender:
    name: str
    kind: str
    """ours | kube-scheduler | raw"""
    qps: float
    burst: int
    events: bool = False
    """raw only: also record a Scheduled event per bind."""

    @property
    def scheduler_name(self) -> str:
        return f"bench-{self.name}"

    @property
    def namespace(self) -> str:
        return f"bench-{self.name}"

    @property
    def client(self) -> str:
        return f"{self.qps:g}/{self.burst}"

    def describe(self) -> str:
        what = {
            "ours": "dynamic-scheduler",
            "kube-scheduler": "kube-scheduler",
            "raw": f"raw binder (no scheduling, {RAW_WORKERS} binds at a time"
            + (", a Scheduled event per bind)" if self.events else ")"),
        }[self.kind]
        return f"{what}, client QPS/burst {self.client}"


ALL = [
    Contender("ours-qps50", "ours", *DEFAULT_QPS),
    Contender("kube-scheduler-qps50", "kube-scheduler", *DEFAULT_QPS),
    Contender("ours-qps5000", "ours", *HIGH_QPS),
    Contender("kube-scheduler-qps5000", "kube-scheduler", *HIGH_QPS),
    Contender("raw-binder", "raw", *HIGH_QPS),
    Contender("raw-binder-events", "raw", *HIGH_QPS, events=True),
]
BY_NAME = {c.name: c for c in ALL}
DEFAULT = [c.name for c in ALL if c.qps >= 1000]
"""What ``make bench`` runs unless told otherwise: at QPS 50 the client's limit sets every
scheduler's pace (50 binds/s), so those runs measure the limiter; ask for them by name."""


@dataclass(frozen=True)
class Setup:
    """What the contenders' processes need."""

    kubeconfig: str
    workdir: Path
    kube_scheduler: str
    rawbinder: str
    prometheus_url: str = ""
    policy_path: str = ""
    dynamic_weight: int = 3
    python: str = sys.executable
    ours_source: Path = REPO
    """The checkout whose ``scheduler`` package the ours-* contenders run (to compare two)."""
    ours_args: tuple[str, ...] = ()
    """More flags for the ours-* processes (``-v=4`` to see each cycle)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dynamic_profile(scheduler_name: str, weight: int, args: dict[str, Any]) -> dict[str, Any]:
    """A profile with the Dynamic plugin, enabled as manifests/common/scheduler-config.yaml.j2
    enables it, with ``args``."""
    return {
        "schedulerName": scheduler_name,
        "plugins": {
            "filter": {"enabled": [{"name": "Dynamic"}]},
            "score": {"enabled": [{"name": "Dynamic", "weight": weight}]},
            "reserve": {"enabled": [{"name": "Dynamic"}]},
            "postBind": {"enabled": [{"name": "Dynamic"}]},
        },
        "pluginConfig": [{"name": "Dynamic", "args": args}],
    }


def unelected_config(profile: dict[str, Any]) -> dict[str, Any]:
    """A configuration of the one ``profile``, without leader election."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [profile],
    }


def ours_config(c: Contender, setup: Setup, dynamic: bool = False) -> dict[str, Any]:
    if not dynamic:
        return unelected_config({"schedulerName": c.scheduler_name})
    args = {
        "promeAddr": setup.prometheus_url,
        "policyConfigPath": setup.policy_path,
        "metricsUpdatePeriodBySeconds": "5m",
    }
    return unelected_config(dynamic_profile(c.scheduler_name, setup.dynamic_weight, args))


def kube_scheduler_config(c: Contender, setup: Setup) -> dict[str, Any]:
    return kube_scheduler_config_of(c.scheduler_name, setup.kubeconfig, c.qps, c.burst)


def kube_scheduler_config_of(scheduler_name: str, kubeconfig: str, qps: float, burst: int) -> dict[str, Any]:
    """kube-scheduler's configuration of one default profile, with its client's kubeconfig and QPS."""
    config = unelected_config({"schedulerName": scheduler_name})
    config["clientConnection"] = {"kubeconfig": kubeconfig, "qps": qps, "burst": burst}
    return config


class Running:
    """A started contender."""

    def __init__(
        self,
        contender: Contender,
        proc: subprocess.Popen[bytes],
        log: Path,
        port: int | None,
        dynamic: bool = False,
    ) -> None:
        self.contender = contender
        self.proc = proc
        self.log = log
        self.port = port
        self.dynamic = dynamic
        """Ours with the Dynamic plugin on: ready once it has load data too."""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _get(self, path: str) -> tuple[int, str]:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.port}{path}", context=ctx, timeout=5) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def check(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.contender.name} exited with {self.proc.returncode}:\n{self.tail()}")

    def wait_ready(self, timeout: float = 120) -> None:
        """Caches synced (/readyz), and for Dynamic, load data fetched from Prometheus."""

        def ready() -> bool:
            self.check()
            return self._ready()

        try:
            poll(ready, timeout, f"{self.contender.name} ready", 0.2)
        except PollTimeoutError:
            raise TimeoutError(
                f"{self.contender.name} not ready within {timeout:.0f}s:\n{self.tail()}"
            ) from None

    def _ready(self) -> bool:
        if self.contender.kind == "raw":
            return "rawbinder ready" in self.log.read_text(errors="replace")
        try:
            if self._get("/readyz")[0] != 200:
                return False
            if self.dynamic:
                status, body = self._get("/metrics")
                if status in (401, 403):
                    raise RuntimeError(
                        f"{self.contender.name} refused the bench's /metrics: {status} {body[:200]}"
                    )
                return status == 200 and "\ndynamic_scheduler_prometheus_up 1.0" in body
        except OSError:
            return False
        return True

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start(
    c: Contender, setup: Setup, tag: str, dynamic: bool = False, extra_env: dict[str, str] | None = None
) -> Running:
    """Start the contender's process (ours with the Dynamic plugin on if ``dynamic``); its log
    is ``<workdir>/<name>-<tag>.log``."""
    dynamic = dynamic and c.kind == "ours"
    log = setup.workdir / f"{c.name}-{tag}.log"
    port: int | None = None
    if c.kind == "ours":
        port = free_port()
        cfg = setup.workdir / f"{c.name}{'-dynamic' if dynamic else ''}.yaml"
        cfg.write_text(yaml.safe_dump(ours_config(c, setup, dynamic)), encoding="utf-8")
        cmd = [
            setup.python,
            "-m",
            "scheduler",
            f"--config={cfg}",
            f"--kubeconfig={setup.kubeconfig}",
            f"--kube-api-qps={c.qps:g}",
            f"--kube-api-burst={c.burst}",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            # The bench reads /metrics anonymously (is Dynamic's load data in?), as the probes
            # read /readyz; no authorization-kubeconfig serves the always-allowed paths only.
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            *setup.ours_args,
        ]
    elif c.kind == "kube-scheduler":
        port = free_port()
        cfg = setup.workdir / f"{c.name}.yaml"
        cfg.write_text(yaml.safe_dump(kube_scheduler_config(c, setup)), encoding="utf-8")
        cmd = [setup.kube_scheduler, f"--config={cfg}", f"--secure-port={port}", "--bind-address=127.0.0.1"]
    elif c.kind == "raw":
        cmd = [
            setup.rawbinder,
            f"--kubeconfig={setup.kubeconfig}",
            f"--namespace={c.namespace}",
            f"--scheduler-name={c.scheduler_name}",
            f"--node-selector={LABEL}=true",
            f"--kube-api-qps={c.qps:g}",
            f"--kube-api-burst={c.burst}",
            f"--workers={RAW_WORKERS}",
            "--progress=0",
        ]
        if c.events:
            cmd.append("--events")
    else:
        raise ValueError(f"unknown contender kind {c.kind!r}")
    env = {**os.environ, **(extra_env or {})}
    # python -m puts the working directory first on sys.path: ours runs that checkout's package.
    cwd = setup.ours_source if c.kind == "ours" else REPO
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env)
    return Running(c, proc, log, port, dynamic)
