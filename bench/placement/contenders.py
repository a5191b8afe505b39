"""The placement benchmark's contenders, each placing the same pods on its own copy of the nodes.

- ``kube-scheduler``: the pinned kube-scheduler, default profile (requests only).
- ``ours``: ours with the default profile (requests only).
- ``ours-crane``: ours with the Dynamic plugin as crane-scheduler decides: crane's default
  policy, no estimate of pods placed since a sample, limits never relaxed.
- ``ours-dynamic``: ours with the Dynamic plugin as the manifests configure it now: the
  estimate, and the limits relaxed when no node is within them.
- ``oracle``: not a scheduler (``oracle``): it knows every pod's real usage at once.

Every contender runs as its own process (the oracle as a thread of the benchmark) with its own
schedulerName; its pods select its nodes by label.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench import contenders as ct

QPS = (5000.0, 5000)
ALL = ("kube-scheduler", "ours", "ours-crane", "ours-dynamic", "oracle")
CRANE_WEIGHT = 3
"""As crane-scheduler's manifests weigh the Dynamic score (``ours-crane``)."""


@dataclass(frozen=True)
class Setup:
    kubeconfig: str
    workdir: Path
    kube_scheduler: str
    prometheus_url: str
    crane_policy_path: str
    """``ours-crane``'s policy: crane-scheduler's default."""
    estimator: dict[str, Any]
    """The estimator args matching the bench's Prometheus windows (``estimator_args``)."""
    dynamic_policy_path: str
    """``ours-dynamic``'s policy: the manifests', or the one of ``--dynamic-policy``."""
    dynamic_weight: int
    """``ours-dynamic``'s Dynamic score weight: the manifests', or ``--dynamic-weight``."""


def scheduler_name(contender: str) -> str:
    return f"placement-{contender}"


def ours_config(contender: str, setup: Setup) -> dict[str, Any]:
    name = scheduler_name(contender)
    if contender not in ("ours-crane", "ours-dynamic"):
        return ct.unelected_config({"schedulerName": name})
    improved = contender == "ours-dynamic"
    args = {
        "promeAddr": setup.prometheus_url,
        "policyConfigPath": setup.dynamic_policy_path if improved else setup.crane_policy_path,
        "relaxWhenNothingFits": improved,
        "estimator": {**setup.estimator, "enabled": improved},
    }
    weight = setup.dynamic_weight if improved else CRANE_WEIGHT
    return ct.unelected_config(ct.dynamic_profile(name, weight, args))


def start(contender: str, setup: Setup, tag: str) -> ct.Running:
    """Start a contender's process (not the oracle); its log is ``<workdir>/<name>-<tag>.log``."""
    log = setup.workdir / f"{contender}-{tag}.log"
    port = ct.free_port()
    if contender == "kube-scheduler":
        c = ct.Contender(contender, "kube-scheduler", *QPS)
        cfg_doc = ct.kube_scheduler_config_of(scheduler_name(contender), setup.kubeconfig, *QPS)
        cfg = setup.workdir / f"{contender}.yaml"
        cfg.write_text(yaml.safe_dump(cfg_doc), encoding="utf-8")
        cmd = [setup.kube_scheduler, f"--config={cfg}", f"--secure-port={port}", "--bind-address=127.0.0.1"]
    else:
        c = ct.Contender(contender, "ours", *QPS)
        cfg = setup.workdir / f"{contender}.yaml"
        cfg.write_text(yaml.safe_dump(ours_config(contender, setup)), encoding="utf-8")
        cmd = [
            sys.executable,
            "-m",
            "scheduler",
            f"--config={cfg}",
            f"--kubeconfig={setup.kubeconfig}",
            f"--kube-api-qps={QPS[0]:g}",
            f"--kube-api-burst={QPS[1]}",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ct.REPO)
    return ct.Running(c, proc, log, port, dynamic=contender in ("ours-crane", "ours-dynamic"))
