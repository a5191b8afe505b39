"""Running the project's own commands against the e2e cluster.

The suites replace the scheduler with exactly what an operator runs
(``dynamic-scheduler deploy|restore ...``), with the values file of this
machine's images (``hack/deploy-values.sh``, exported as DS_DEPLOY_VALUES by
``make e2e``), so they never need to know whether the images are stock or
offline.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config

from e2e.schedulers import end_kube_scheduler_backoff

REPO = Path(__file__).resolve().parent.parent
COMMANDS_LOG = Path(os.environ.get("ARTIFACTS", REPO / "_artifacts")) / "e2e-commands.log"

# Short windows: 10 s scrapes (their timeout is the interval; a kubelet can be slow to answer on
# a busy machine), a 30 s rate, cpu_usage_avg_5m averaged over 30 s instead of 5 m.
SHORT_PROMETHEUS_WINDOWS: dict[str, Any] = {
    "prometheus": {
        "scrapeInterval": "10s",
        "evaluationInterval": "5s",
        "rateWindow": "30s",
        "windows": {"avg5m": "30s", "max1h": "2m", "max1d": "2m"},
    },
}


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    seconds: float


def values_args() -> list[str]:
    values = os.environ.get("DS_DEPLOY_VALUES")
    if not values:
        values = subprocess.check_output(["bash", str(REPO / "hack/deploy-values.sh")], text=True).strip()
    return ["-f", values]


def cli(*args: str, timeout: float = 600, check: bool = True) -> Result:
    """``python -m scheduler <args>`` with the cluster's kubeconfig; output captured."""
    env = {**os.environ}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "scheduler", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )
    res = Result(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)
    # Every command's progress lines, kept: what a slow deploy or restore waited for.
    COMMANDS_LOG.parent.mkdir(parents=True, exist_ok=True)
    with COMMANDS_LOG.open("a", encoding="utf-8") as log:
        log.write(
            f"=== {time.strftime('%H:%M:%S')} dynamic-scheduler {' '.join(args)}: "
            f"exit {res.code} after {res.seconds:.1f}s\n{res.stderr}{res.stdout}"
        )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"dynamic-scheduler {' '.join(args)} exited {proc.returncode}:\n"
            f"{proc.stderr[-4000:]}\n{proc.stdout[-2000:]}"
        )
    return res


def kind_flags() -> list[str]:
    flags = ["--kind-cluster", os.environ.get("KIND_CLUSTER", "dynamic-scheduler")]
    if os.environ.get("KIND"):
        flags += ["--kind-bin", os.environ["KIND"]]
    return flags


def deploy(method: str, *extra: str, timeout: float = 600) -> Result:
    flags = kind_flags() if method == "static" else []
    return cli("deploy", method, *values_args(), *flags, *extra, timeout=timeout)


@functools.cache
def _core() -> client.CoreV1Api:
    """One client of the cluster (``$KUBECONFIG``) for every restore."""
    return client.CoreV1Api(config.new_client_from_config(os.environ["KUBECONFIG"]))


def log_command(line: str) -> None:
    """A line in the commands log: something done to the cluster besides our commands."""
    COMMANDS_LOG.parent.mkdir(parents=True, exist_ok=True)
    with COMMANDS_LOG.open("a", encoding="utf-8") as log:
        log.write(f"--- {time.strftime('%H:%M:%S')} {line}\n")


def _end_backoff() -> None:
    if end_kube_scheduler_backoff(_core()):
        log_command("kube-scheduler was in CrashLoopBackOff: its kubelet restarted")


def restore(*what: str, timeout: float = 600) -> Result:
    """``dynamic-scheduler restore``, with kube-scheduler's restart back-off ended before and
    while it runs (``end_kube_scheduler_backoff``), so that its time is the restore's, not the
    kubelet's.

    Every takeover of the suite before made kube-scheduler exit, and a back-off started just
    before the restore (or while it waits for our replicas to stop) would be waited out by it:
    minutes, after a churn that has made it exit many times. The restore itself keeps our
    replicas from taking the Lease over meanwhile (its ``restoring`` annotation); each kubelet
    restart here is logged, so the log shows how often the guard was still needed."""
    stop = threading.Event()

    def guard() -> None:
        while not stop.wait(3):
            try:
                _end_backoff()
            except Exception as e:  # noqa: BLE001 - a failed check is retried, and logged
                log_command(f"checking kube-scheduler's back-off failed: {e!r}"[:300])

    _end_backoff()
    thread = threading.Thread(target=guard, name="ks-backoff", daemon=True)
    thread.start()
    try:
        return cli("restore", *what, *values_args(), *kind_flags(), timeout=timeout)
    finally:
        stop.set()
        thread.join(150)
