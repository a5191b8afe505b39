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
import itertools
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

PLUGINS = [
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "NodeResourcesBalancedAllocation",
]
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
            pods.append(
                make_pod(
                    f"p{i}-{j}",
                    cpu=f"{rng.choice([50, 100, 250, 500])}m",
                    memory=f"{rng.choice([64, 128, 256, 512])}Mi",
                    host_ports=ports,
                )
            )
        nodes.append(
            node_info(
                f"node-{i:04d}",
                cpu=str(rng.choice([16, 32, 64])),
                memory=f"{rng.choice([64, 128, 256])}Gi",
                pods=pods,
                taints=taints,
                unschedulable=rng.random() < 0.01,
                labels={
                    "topology.kubernetes.io/zone": ZONES[i % 3],
                    "node.kubernetes.io/instance-type": TYPES[i % 4],
                    "kubernetes.io/os": "linux",
                    "disk": "ssd" if i % 2 else "hdd",
                },
            )
        )
    return nodes


def plain_pod(shape: int = 0) -> dict:
    return make_pod("plain", cpu=f"{250 + shape}m", memory="512Mi")


def rich_pod(shape: int = 0) -> dict:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ZONES},
                            {
                                "key": "node.kubernetes.io/instance-type",
                                "operator": "NotIn",
                                "values": [f"t3.micro{shape}"],
                            },
                        ]
                    }
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {
                        "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
                    },
                },
                {
                    "weight": 5 + shape % 50,
                    "preference": {
                        "matchExpressions": [
                            {
                                "key": "node.kubernetes.io/instance-type",
                                "operator": "In",
                                "values": ["c5.2xlarge"],
                            }
                        ]
                    },
                },
            ],
        }
    }
    return make_pod(
        "rich",
        containers=[container(cpu=f"{500 + shape}m", memory="1Gi", ports=[host_port(8080)])],
        node_selector={"kubernetes.io/os": "linux"},
        affinity=affinity,
        tolerations=[
            toleration("spot", "true", "PreferNoSchedule"),
            toleration("node.kubernetes.io/not-ready", operator="Exists", effect="NoExecute"),
        ],
    )


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()

    rng = random.Random(42)
    nodes = make_nodes(args.nodes, rng)
    snapshot = FakeSnapshot(nodes)
    shapes = itertools.count(1)
    # "replica": every cycle schedules a pod of the same shape (a Deployment's
    # replicas); "unique": every cycle a pod of a shape not seen before.
    pods: dict[str, Callable[[], dict]] = {
        "plain replica": plain_pod,
        "rich replica": rich_pod,
        "plain unique": lambda: plain_pod(next(shapes)),
        "rich unique": lambda: rich_pod(next(shapes)),
    }
    out = sys.stdout
    out.write(f"{args.nodes} nodes, best of {args.repeat} cycles; CPU microseconds per node\n")
    header = "".join(f"{k:>14}" for k in pods)
    totals: dict[str, list[float]] = {}
    for point, timer, method in (("Filter", time_filter, "filter"), ("Score", time_score, "score")):
        out.write(f"\n{'PreFilter+Filter' if point == 'Filter' else 'PreScore+Score+Normalize':34}{header}\n")
        sums = totals[point] = [0.0] * len(pods)
        for name in PLUGINS:
            plugin = build_plugin(name, None, None)
            if not hasattr(plugin, method):
                continue
            row = []
            for i, make in enumerate(pods.values()):
                v = min(timer(plugin, make(), nodes, snapshot) for _ in range(args.repeat)) / len(nodes) * 1e6
                row.append(v)
                sums[i] += v
            out.write(f"{name:34}" + "".join(f"{v:14.3f}" for v in row) + "\n")
        out.write(f"{'total':34}" + "".join(f"{v:14.3f}" for v in sums) + "\n")
    both = [f + s for f, s in zip(totals["Filter"], totals["Score"], strict=True)]
    out.write(f"\n{'filter + score':34}" + "".join(f"{v:14.3f}" for v in both) + "\n")


if __name__ == "__main__":
    main()
