"""Micro-benchmark of InterPodAffinity and PodTopologySpread on a synthetic 1000-node cluster.

    .venv/bin/python -m tests.plugins.bench_affinity_spread [--nodes 1000] [--pods-per-node 30]

The cluster is the scheduler's own cache (its node list stays the same object
between cycles, so the running sums are updated, not rebuilt). Each scenario
runs the cycles the scheduler runs: PreFilter, Filter over the
nodes kube-scheduler would sample (``numFeasibleNodesToFind``: 400 of 1000),
PreScore, Score and NormalizeScore on those. Before every cycle one pod lands
on a random node, as the previous pod of the workload would, so the per-node
memos see realistic churn. Printed: median CPU µs per cycle and per cluster
node, per plugin, for a cold first cycle and then warm cycles.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from typing import Any

from scheduler.core.cache import Cache
from scheduler.core.filtering import filter_nodes_of
from scheduler.core.framework import SKIP, CycleState
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.interpodaffinity.plugin import InterPodAffinity
from scheduler.plugins.podtopologyspread.plugin import PodTopologySpread
from tests.plugins.builders import FakeHandle, make_node, make_pod

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def out(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def workload_pod(i: int, app: str, owner: bool = True, **kw: Any) -> dict[str, Any]:
    return make_pod(
        f"{app}-{i}",
        labels={"app": app, "pod-template-hash": "h1"},
        owner_kind="ReplicaSet" if owner else None,
        **kw,
    )


def required_anti(app: str, key: str = HOSTNAME) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
            ]
        }
    }


def preferred_anti(app: str, key: str = HOSTNAME) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key},
                }
            ]
        }
    }


def build_cluster(n_nodes: int, pods_per_node: int, rng: random.Random) -> Cache:
    """The scheduler's cache with nodes in 10 zones, 50 Deployments' pods, and a few pods with
    (anti-)affinity as in real clusters (CoreDNS prefers spreading by hostname; one workload requires it)."""
    cache = Cache()
    for i in range(n_nodes):
        cache.add_node(make_node(f"node-{i}", labels={ZONE: f"zone-{i % 10}"}))
    k = 0
    for i in range(n_nodes):
        for _ in range(pods_per_node):
            cache.add_pod(
                PodInfo.from_pod(workload_pod(k, f"app-{rng.randrange(50)}", node_name=f"node-{i}"))
            )
            k += 1
    for i in range(2):
        cache.add_pod(
            PodInfo.from_pod(
                workload_pod(i, "coredns", affinity=preferred_anti("coredns"), node_name=f"node-{i}")
            )
        )
    for i in range(20):
        cache.add_pod(
            PodInfo.from_pod(
                workload_pod(
                    i, "cache", affinity=required_anti("cache"), node_name=f"node-{rng.randrange(n_nodes)}"
                )
            )
        )
    return cache


SCENARIOS: dict[str, dict[str, Any]] = {
    "plain pod (no owner, no affinity, no constraints)": {"owner": False},
    "Deployment pod (system default spreading)": {},
    "required hostname anti-affinity + preferred zone affinity": {
        "affinity": {
            **required_anti("app-7"),
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": "app-3"}},
                            "topologyKey": ZONE,
                        },
                    }
                ]
            },
        }
    },
    "DoNotSchedule zone + ScheduleAnyway hostname spread": {
        "topology_spread_constraints": [
            {
                "maxSkew": 2,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "app-7"}},
            },
            {
                "maxSkew": 1,
                "topologyKey": HOSTNAME,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "app-7"}},
            },
        ]
    },
}


def cycle(plugin: Any, pod: PodInfo, snapshot: Cache, sample: list[NodeInfo]) -> float:
    """CPU seconds of one cycle of ``plugin`` (this thread's CPU time: other load does not count)."""
    t0 = time.thread_time()
    state = CycleState()
    if plugin.pre_filter(state, pod, snapshot) is not SKIP:
        verdicts = filter_nodes_of(plugin)(state, pod, sample) or [None] * len(sample)
        feasible = [ni for ni, v in zip(sample, verdicts, strict=True) if v is None]
    else:
        feasible = sample
    if len(feasible) > 1 and plugin.pre_score(state, pod, feasible) is not SKIP:
        scores = {ni.name: plugin.score(state, pod, ni) for ni in feasible}
        plugin.normalize_scores(state, pod, scores)
    return time.thread_time() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--cycles", type=int, default=60)
    parser.add_argument("--sample", type=int, default=400, help="nodes filtered and scored per cycle")
    args = parser.parse_args()

    rng = random.Random(1)
    snapshot = build_cluster(args.nodes, args.pods_per_node, rng)
    nodes = snapshot.list()
    handle = FakeHandle(snapshot, stores={"namespaces": [{"metadata": {"name": "default"}}]})
    plugins = {
        "InterPodAffinity": InterPodAffinity(None, handle),
        "PodTopologySpread": PodTopologySpread(None, handle),
    }
    out(
        f"{args.nodes} nodes, {sum(len(n.pods) for n in nodes)} pods, {args.sample} nodes filtered/scored per cycle"
    )
    out(f"{'scenario':58} {'plugin':18} {'cold µs':>9} {'warm µs':>9} {'µs/node':>8}")
    landed = 0
    for title, kw in SCENARIOS.items():
        owner = kw.pop("owner", True)
        for name, plugin in plugins.items():
            times = []
            for c in range(args.cycles + 1):
                # The previous pod of the workload lands somewhere: one node changes.
                node = nodes[rng.randrange(len(nodes))].name
                snapshot.add_pod(PodInfo.from_pod(workload_pod(100000 + landed, "app-7", node_name=node)))
                landed += 1
                pod = PodInfo.from_pod(workload_pod(c, "app-7", owner=owner, **kw))
                start = rng.randrange(len(nodes))
                sample = (nodes[start:] + nodes[:start])[: args.sample]
                times.append(cycle(plugin, pod, snapshot, sample))
            warm = statistics.median(times[1:]) * 1e6
            out(f"{title[:58]:58} {name:18} {times[0] * 1e6:9.0f} {warm:9.0f} {warm / args.nodes:8.3f}")
        kw["owner"] = owner


if __name__ == "__main__":
    main()
