"""The workloads: what the pods of a run ask of the scheduler, after kube-scheduler's scheduler_perf.

Every contender gets the same pods of a workload (only ``schedulerName``
differs); each pod requests 100m CPU and 128Mi, selects the kwok nodes,
tolerates their taint and is never evicted from them. The kwok nodes are spread over ``bench.kwok.ZONES``
zones (``topology.kubernetes.io/zone``), so that zone topologies mean something.

- ``basic``: nothing else (scheduler_perf's SchedulingBasic).
- ``affinity``: the pods form groups; each pod must not share a node with
  another of its group (required pod anti-affinity on the hostname, as
  SchedulingPodAntiAffinity) and prefers a zone with pods of the bench
  (preferred pod affinity, weight 100, as SchedulingPreferredPodAffinity).
  There are enough groups for each to fit on half the nodes.
- ``spread``: each pod spreads over the zones with ``maxSkew: 1``
  (``DoNotSchedule``) and over the nodes with ``maxSkew: 1``
  (``ScheduleAnyway``), as SchedulingPodTopologySpreading.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.kwok import LABEL, TOLERATION, ZONE_LABEL, ZONES

POD_CPU = "100m"
POD_MEMORY = "128Mi"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
HOSTNAME_LABEL = "kubernetes.io/hostname"
APP = {"app": "bench"}
GROUP_LABEL = "bench.dynamic-scheduler.io/group"
STAY_ON_UNHEALTHY_NODES = [
    {"key": key, "operator": "Exists", "effect": "NoExecute"}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
]
"""No eviction when the node lifecycle controller marks a kwok node NotReady: on a busy machine
kwok's Lease renewals come late, and the evictions deleted pods in the middle of a run."""


@dataclass(frozen=True)
class Shape:
    """The size of a run, which some workloads' pods depend on, and its pods' name prefix."""

    nodes: int
    pods: int
    prefix: str = "bench"
    """Names differ from run to run: a deletecollection of the run before, still at work in the
    API server after the namespace looked empty, deletes by name, and took new pods of the same
    names (the last hundreds of a backlog)."""

    def pod_name(self, i: int) -> str:
        return f"{self.prefix}-{i:05d}"


def _basic(i: int, scheduler_name: str, shape: Shape) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": shape.pod_name(i), "labels": dict(APP)},
        "spec": {
            "schedulerName": scheduler_name,
            "nodeSelector": {LABEL: "true"},
            "tolerations": [TOLERATION, *STAY_ON_UNHEALTHY_NODES],
            "containers": [
                {
                    "name": "pause",
                    "image": PAUSE_IMAGE,
                    "resources": {"requests": {"cpu": POD_CPU, "memory": POD_MEMORY}},
                }
            ],
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
        },
    }


def groups(shape: Shape) -> int:
    """Anti-affinity groups of at most half the nodes' count each."""
    return max(1, math.ceil(2 * shape.pods / shape.nodes))


def _affinity(i: int, scheduler_name: str, shape: Shape) -> dict[str, Any]:
    pod = _basic(i, scheduler_name, shape)
    group = f"g{i % groups(shape)}"
    pod["metadata"]["labels"][GROUP_LABEL] = group
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {GROUP_LABEL: group}}, "topologyKey": HOSTNAME_LABEL}
            ]
        },
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {"labelSelector": {"matchLabels": APP}, "topologyKey": ZONE_LABEL},
                }
            ]
        },
    }
    return pod


def _spread(i: int, scheduler_name: str, shape: Shape) -> dict[str, Any]:
    pod = _basic(i, scheduler_name, shape)
    pod["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE_LABEL,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": APP},
        },
        {
            "maxSkew": 1,
            "topologyKey": HOSTNAME_LABEL,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": APP},
        },
    ]
    return pod


@dataclass(frozen=True)
class Workload:
    name: str
    describe: str
    pod: Callable[[int, str, Shape], dict[str, Any]]
    """The body of pod ``i`` for the scheduler of that name."""


ALL = [
    Workload("basic", "plain pods: requests, a nodeSelector and a toleration", _basic),
    Workload(
        "affinity",
        "required pod anti-affinity within a group (hostname), preferred pod affinity (zone)",
        _affinity,
    ),
    Workload(
        "spread", f"topology spread over {ZONES} zones (DoNotSchedule) and nodes (ScheduleAnyway)", _spread
    ),
]
BY_NAME = {w.name: w for w in ALL}
