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
- ``preemption``: every node is filled first with four low-priority pods of
  90% of a quarter of its CPU each (bound by the bench, no scheduler); then one
  high-priority pod per node, which fits only once all four are evicted
  (PreemptionBasic: 900m pods on 4-CPU nodes, 3970m preemptors, scaled to the
  kwok nodes' 32 CPUs). The raw binders do not run it: they do not preempt.
- ``churn``: ``basic`` pods, while every second a node, a pod that fits no node
  (high priority, more CPU than a node has) and a pod that fits are each
  deleted and created anew (SchedulingWithMixedChurn's ``recreate`` churn; a
  Service there, a second pod here, as no scheduler here watches Services).
  The churn nodes carry no bench label, so the measured pods never land on a
  node that is deleted under them.
- ``dra``: ``basic`` pods that each need one device, through a claim made from
  a ResourceClaimTemplate by kind's resourceclaim controller; every kwok node
  publishes a slice of ``bench.dra.DEVICES_PER_NODE`` devices (scheduler_perf's
  SchedulingWithResourceClaimTemplate). The raw binders do not run it: they
  allocate nothing.
- ``dynamic``: ``basic`` pods, with our ``Dynamic`` plugin on (as the lease and
  static manifests enable it) against the synthetic load of ``bench.prom``;
  the other contenders run the same pods as in ``basic``.

Only the measured pods (label ``app=bench``) count: a run ends when they are all
bound, and its figures are theirs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench import dra
from bench.kwok import LABEL, NODE_PREFIX, TOLERATION, ZONE_LABEL, ZONES

POD_CPU = "100m"
LOW_CPU = "7200m"
"""A low-priority pod of ``preemption``: four fill 90% of a kwok node's 32 CPUs."""
HIGH_CPU = "31760m"
"""A high-priority pod of ``preemption``: it fits a node only once all four low ones are gone."""
LOW_PER_NODE = 4
HUGE_CPU = "64"
"""The churn's pod that fits no node (twice a kwok node's CPUs)."""
PRIORITY_CLASSES = {"bench-low": 1, "bench-high": 1_000_000}
"""The ``preemption`` and ``churn`` pods' PriorityClasses (the bench creates them)."""
POD_MEMORY = "128Mi"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
HOSTNAME_LABEL = "kubernetes.io/hostname"
APP = {"app": "bench"}
"""The label of the measured pods."""
MEASURED = "app=bench"
"""The label selector of the measured pods (a run's watch, its figures)."""
LOW_APP = {"app": "bench-low"}
PREFILLED = "app=bench-low"
CHURN_APP = {"app": "bench-churn"}
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

    node_prefix: str = NODE_PREFIX
    """The names of the nodes (``bench.kwok.node_name``), where pods are bound before a run."""

    def pod_name(self, i: int) -> str:
        return f"{self.prefix}-{i:05d}"

    def node_name(self, i: int) -> str:
        return f"{self.node_prefix}{i:05d}"


def pod_body(name: str, scheduler_name: str, labels: dict[str, str], cpu: str = POD_CPU) -> dict[str, Any]:
    """A bench pod: ``cpu`` and POD_MEMORY requested, on the kwok nodes only, never evicted."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "schedulerName": scheduler_name,
            "nodeSelector": {LABEL: "true"},
            "tolerations": [TOLERATION, *STAY_ON_UNHEALTHY_NODES],
            "containers": [
                {
                    "name": "pause",
                    "image": PAUSE_IMAGE,
                    "resources": {"requests": {"cpu": cpu, "memory": POD_MEMORY}},
                }
            ],
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
        },
    }


def _basic(i: int, scheduler_name: str, shape: Shape) -> dict[str, Any]:
    return pod_body(shape.pod_name(i), scheduler_name, APP)


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


def _high(i: int, scheduler_name: str, shape: Shape) -> dict[str, Any]:
    pod = pod_body(shape.pod_name(i), scheduler_name, APP, HIGH_CPU)
    pod["spec"]["priorityClassName"] = "bench-high"
    return pod


def _low(j: int, shape: Shape) -> dict[str, Any]:
    """Low-priority pod ``j``, bound at creation (``spec.nodeName``): four to a node."""
    pod = pod_body(f"{shape.prefix}-low-{j:05d}", "none", LOW_APP, LOW_CPU)
    pod["spec"]["priorityClassName"] = "bench-low"
    pod["spec"]["nodeName"] = shape.node_name(j // LOW_PER_NODE)
    return pod


def _dra(i: int, scheduler_name: str, shape: Shape) -> dict[str, Any]:
    return dra.with_claim(_basic(i, scheduler_name, shape))


def _no_prefill(j: int, shape: Shape) -> dict[str, Any]:
    raise AssertionError("this workload has no pods bound before the run")


@dataclass(frozen=True)
class Workload:
    name: str
    describe: str
    pod: Callable[[int, str, Shape], dict[str, Any]]
    """The body of measured pod ``i`` for the scheduler of that name."""
    measured: Callable[[Shape], int] = lambda shape: shape.pods
    """How many measured pods a run of that shape has."""
    prefill: Callable[[Shape], int] = lambda shape: 0
    """How many pods are bound before the run (by the bench, ``spec.nodeName`` set)."""
    prefill_pod: Callable[[int, Shape], dict[str, Any]] = _no_prefill
    churn: bool = False
    """Objects deleted and created anew while the contender runs (``bench.churn``)."""
    dynamic: bool = False
    """Ours runs with the Dynamic plugin on."""
    devices: bool = False
    """The kwok nodes publish devices, and the pods claim them (``bench.dra``)."""
    raw: bool = True
    """The raw binders run it (not when the workload needs a scheduler's decisions to mean anything)."""


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
    Workload(
        "preemption",
        f"{LOW_PER_NODE} low-priority pods of {LOW_CPU} CPU on every node, then a {HIGH_CPU} "
        "high-priority pod per node",
        _high,
        measured=lambda shape: min(shape.pods, shape.nodes),
        prefill=lambda shape: LOW_PER_NODE * shape.nodes,
        prefill_pod=_low,
        raw=False,
    ),
    Workload(
        "churn",
        "basic pods, while a node, a pod that fits no node and one that fits are recreated every second",
        _basic,
        churn=True,
    ),
    Workload(
        "dra",
        f"basic pods, each with a claim for one of the {dra.DEVICES_PER_NODE} devices of every node "
        "(from a ResourceClaimTemplate)",
        _dra,
        raw=False,
        devices=True,
    ),
    Workload(
        "dynamic",
        "basic pods; ours with the Dynamic plugin on, over synthetic node load",
        _basic,
        dynamic=True,
    ),
]
BY_NAME = {w.name: w for w in ALL}
