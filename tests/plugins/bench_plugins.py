"""Micro-benchmark of the core plugins: CPU time per node of Filter and Score.

    python tests/plugins/bench_plugins.py [--nodes 1000] [--repeat 30]

Builds synthetic nodes (labels, a few taints, pods with requests and some host
ports) and two pods: a plain one (requests only) and a rich one (nodeSelector,
required and preferred node affinity, tolerations, a host port). For each
plugin it times PreFilter + Filter over all nodes, and PreScore + Score +
NormalizeScore over all nodes (process CPU time), with a fresh PodInfo per repetition (per-pod
work is paid once per cycle, as in the scheduler), and prints the best
repetition in microseconds per node. Not a test: numbers depend on the
machine.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(os.path.dirname(_HERE))]

from builders import FakeSnapshot, container, host_port, make_pod, node_info, taint, toleration  # noqa: E402

from scheduler.core.framework import CycleState, PreFilterResult  # noqa: E402
from scheduler.core.podinfo import PodInfo  # noqa: E402
from scheduler.plugins.registry import build_plugin  # noqa: E402

PLUGINS = ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts",
           "NodeResourcesFit", "NodeResourcesBalancedAllocation"]
ZONES = ["zone-a", "zone-b", "zone-c"]
TYPES = ["m5.large", "m5.xlarge", "c5.2xlarge", "r5.xlarge"]


def make_nodes(n: int, rng: random.Random) -> list:
    nodes = []
    for i in range(n):
        taints = []
        r = rng.random()
        if r < 0.05:
            taints = [taint("dedicated", "batch", "NoSchedule")]
        elif r < 0.15:
            taints = [taint("spot", "true", "PreferNoSchedule")]
        pods = []
        for j in range(rng.randint(10, 30)):
            ports = [host_port(9100)] if j == 0 and rng.random() < 0.3 else []
            pods.append(make_pod(f"p{i}-{j}", cpu=f"{rng.choice([50, 100, 250, 500])}m",
                                 memory=f"{rng.choice([64, 128, 256, 512])}Mi", host_ports=ports))
        nodes.append(node_info(
            f"node-{i:04d}", cpu=str(rng.choice([16, 32, 64])), memory=f"{rng.choice([64, 128, 256])}Gi",
            pods=pods, taints=taints, unschedulable=rng.random() < 0.01,
            labels={"topology.kubernetes.io/zone": ZONES[i % 3], "node.kubernetes.io/instance-type":
                    TYPES[i % 4], "kubernetes.io/os": "linux", "disk": "ssd" if i % 2 else "hdd"}))
    return nodes


def plain_pod() -> dict:
    return make_pod("plain", cpu="250m", memory="512Mi")


def rich_pod() -> dict:
    affinity = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ZONES},
            {"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ["t3.micro"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}},
            {"weight": 5, "preference": {"matchExpressions": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.2xlarge"]}]}}]}}
    return make_pod("rich", containers=[container(cpu="500m", memory="1Gi", ports=[host_port(8080)])],
                    node_selector={"kubernetes.io/os": "linux"}, affinity=affinity,
                    tolerations=[toleration("spot", "true", "PreferNoSchedule"),
                                 toleration("node.kubernetes.io/not-ready", operator="Exists", effect="NoExecute")])


def time_filter(plugin, pod_dict: dict, nodes: list, snapshot) -> float:
    pod = PodInfo.from_pod(pod_dict)
    state = CycleState()
    t0 = time.process_time()
    pre = getattr(plugin, "pre_filter", None)
    res = pre(state, pod, snapshot) if pre else None
    if res is None or isinstance(res, PreFilterResult):  # not skipped or rejected outright
        f = plugin.filter
        for n in nodes:
            f(state, pod, n)
    return time.process_time() - t0


def time_score(plugin, pod_dict: dict, nodes: list, snapshot) -> float:
    pod = PodInfo.from_pod(pod_dict)
    state = CycleState()
    t0 = time.process_time()
    pre = getattr(plugin, "pre_score", None)
    st = pre(state, pod, nodes) if pre else None
    if st is None:
        s = plugin.score
        scores = {n.name: s(state, pod, n) for n in nodes}
        norm = getattr(plugin, "normalize_scores", None)
        if norm:
            norm(state, pod, scores)
    return time.process_time() - t0


def best(fn: Callable[[], float], repeat: int) -> float:
    return min(fn() for _ in range(repeat))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()

    rng = random.Random(42)
    nodes = make_nodes(args.nodes, rng)
    snapshot = FakeSnapshot(nodes)
    pods = {"plain": plain_pod(), "rich": rich_pod()}
    out = sys.stdout
    out.write(f"{args.nodes} nodes, best of {args.repeat}; microseconds per node\n")
    out.write(f"{'plugin':34} {'filter plain':>12} {'filter rich':>12} {'score plain':>12} {'score rich':>12}\n")
    totals = [0.0, 0.0, 0.0, 0.0]
    for name in PLUGINS:
        plugin = build_plugin(name, None, None)
        row = []
        for timer in (time_filter, time_score):
            for pod_name in ("plain", "rich"):
                if not hasattr(plugin, "filter" if timer is time_filter else "score"):
                    row.append(None)
                    continue
                row.append(best(lambda t=timer, p=pod_name, pl=plugin: t(pl, pods[p], nodes, snapshot),
                                args.repeat) / len(nodes) * 1e6)
        for i, v in enumerate(row):
            totals[i] += v or 0.0
        cells = " ".join(f"{'-':>12}" if v is None else f"{v:12.3f}" for v in row)
        out.write(f"{name:34} {cells}\n")
    out.write(f"{'total':34} " + " ".join(f"{v:12.3f}" for v in totals) + "\n")


if __name__ == "__main__":
    main()
