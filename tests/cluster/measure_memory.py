"""Measure the scheduler's resident memory once its caches are synced, by cluster size.

Run by hand (it starts its own API server; a few minutes on 2 cores for the defaults)::

    .venv/bin/python -m tests.cluster.measure_memory [--nodes 200] [--per-node 30]

Three points, each a fresh ``python -m scheduler`` (leader election off) started against
the same API server, its RSS read from ``/proc`` once it logs "Caches are synced":

1. ``--nodes`` nodes, no pods;
2. twice as many nodes, no pods: the slope per node;
3. twice as many nodes, ``--per-node`` running pods on each (``bench.population``'s
   shapes, with a kubelet's status): the slope per pod.

It logs each point and the fit: the process alone, KiB per node, KiB per pod.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from bench import kwok
from bench.population import Population, populate
from scheduler.cluster.client import ClientOptions, api_request, new_api_client
from scheduler.logs import kv, setup
from scheduler.polling import poll
from tests.apiserver import ControlPlane, measure_on_standalone

logger = logging.getLogger("measure_memory")


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


def synced_rss(cp: ControlPlane, workdir: Path, label: str) -> int:
    """Start the scheduler, wait until its caches are synced, and return its RSS in KiB."""
    config = workdir / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "leaderElection": {"leaderElect": False},
                "clientConnection": {"kubeconfig": cp.kubeconfig},
                "profiles": [{"schedulerName": "measure-memory"}],
            }
        )
    )
    log = workdir / f"scheduler-{label}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scheduler", "--config", str(config), "--secure-port=0"],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parents[2],
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        started = time.monotonic()
        poll(
            lambda: b"Caches are synced" in log.read_bytes() or proc.poll() is not None,
            600,
            "the scheduler's caches synced",
            0.2,
        )
        if proc.poll() is not None:
            raise RuntimeError(f"the scheduler exited ({proc.returncode}); see {log}")
        rss, hwm = rss_kib(proc.pid)
        logger.info(
            "point",
            extra=kv(
                point=label,
                rssMiB=round(rss / 1024, 1),
                peakMiB=round(hwm / 1024, 1),
                syncedAfterSeconds=round(time.monotonic() - started, 1),
            ),
        )
        return rss
    finally:
        proc.terminate()
        proc.wait(30)


def add_nodes(api: Any, start: int, stop: int) -> None:
    with ThreadPoolExecutor(16) as ex:
        list(
            ex.map(
                lambda i: api_request(api, "POST", "/api/v1/nodes", body=kwok.node_body(i)),
                range(start, stop),
            )
        )


def run_pods(api: Any, pop: Population) -> None:
    """The population's pods, Running as a kubelet reports them (``populate`` writes that)."""
    for ns in pop.namespace_names():
        api_request(api, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    done = populate(api, pop, workers=16)
    if done.failed:
        raise RuntimeError(f"{done.failed} pods not created: {done.errors}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--per-node", type=int, default=30)
    args = ap.parse_args()
    setup(0)
    return measure_on_standalone(measure, args)


def measure(cp: ControlPlane, args: argparse.Namespace) -> int:
    api = new_api_client(ClientOptions(kubeconfig=cp.kubeconfig, qps=0, pool_maxsize=32))
    workdir = Path(tempfile.mkdtemp(prefix="ds-measure-memory-"))
    n = args.nodes
    add_nodes(api, 0, n)
    base = synced_rss(cp, workdir, f"{n}-nodes")
    add_nodes(api, n, 2 * n)
    nodes = synced_rss(cp, workdir, f"{2 * n}-nodes")
    pop = Population(nodes=2 * n, per_node=args.per_node, namespaces=max(1, 2 * n * args.per_node // 1000))
    start = time.monotonic()
    run_pods(api, pop)
    logger.info("pods running", extra=kv(pods=pop.pods, seconds=round(time.monotonic() - start)))
    pods = synced_rss(cp, workdir, f"{2 * n}-nodes-{pop.pods}-pods")
    per_node = (nodes - base) / n
    per_pod = (pods - nodes) / pop.pods
    logger.info(
        "fit",
        extra=kv(
            processMiB=round((base - per_node * n) / 1024, 1),
            kibPerNode=round(per_node, 1),
            kibPerPod=round(per_pod, 2),
            at5000Nodes150000PodsMiB=round((base - per_node * n + 5000 * per_node + 150000 * per_pod) / 1024),
        ),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
