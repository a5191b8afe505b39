"""NodeResourcesFit: the node must have room for the pod's requests; score by allocation.

Filter compares the pod's requests (``PodInfo.requests``) with what the
node's pods already request, resource by resource, and the pod count with the
node's ``pods`` allocatable. Reasons are kube-scheduler's ("Insufficient cpu",
"Too many pods", ...). The rejection cannot be resolved by preemption when
the pod asks for more than the node has at all.

Score follows ``scoringStrategy``: LeastAllocated (default; emptier nodes
win), MostAllocated (fuller nodes win) or RequestedToCapacityRatio (a
piecewise-linear function of utilization). Scoring counts cpu and memory with
the non-zero defaults for containers that request nothing (100m / 200Mi).
The strategies themselves are in :mod:`scheduler.plugins.noderesources.scoring`.

An extended resource that a DeviceClass provides, asked for on a node whose
allocatable does not list it, is left to DynamicResources
(``shouldDelegateResourceToDRA``; :mod:`scheduler.plugins.dynamicresources.extended`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from scheduler.core.framework import Code as _Code
from scheduler.core.framework import CycleState, Snapshot, Status, filter_each
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.core.resources import is_extended_resource_name
from scheduler.plugins.dynamicresources.extended import backed_requests, cycle_resolver
from scheduler.plugins.noderesources.scoring import (
    LEAST_ALLOCATED,
    ResourceAllocationScorer,
    arg_field,
    cpu_memory_score_fn,
    cpu_memory_score_nodes_fn,
    resource_specs,
    strategy_scorer,
)

_SCORE_KEY = "NodeResourcesFit/score"
_FILTER_KEY = "NodeResourcesFit"


def _non_zero_cpu_memory(pod: PodInfo) -> tuple[int, int]:
    nz = pod.non_zero_requests
    return (nz.milli_cpu, nz.memory)


class NodeResourcesFit:
    name: ClassVar[str] = "NodeResourcesFit"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        self.device_classes = handle.store("deviceclasses") if handle is not None else None
        self.ignored_resources = frozenset(arg_field(args, "ignored_resources", "ignoredResources") or ())
        self.ignored_groups = frozenset(
            arg_field(args, "ignored_resource_groups", "ignoredResourceGroups") or ()
        )
        strategy = arg_field(args, "scoring_strategy", "scoringStrategy")
        kind = arg_field(strategy, "type", "type") or LEAST_ALLOCATED
        resources = resource_specs(arg_field(strategy, "resources", "resources"))
        self._scorer = strategy_scorer(kind, strategy)
        self.strategy = kind
        self.allocation = ResourceAllocationScorer(resources, use_requested=False)
        weights = self.allocation.cpu_memory_weights()
        self._inlined = (
            None if weights is None else cpu_memory_score_fn(kind, *weights, _SCORE_KEY, _non_zero_cpu_memory)
        )
        if self._inlined is not None and weights is not None:
            # The default configuration: Score is one function over cpu and memory (it runs for
            # every node), and so is its loop over many nodes.
            self.score = self._inlined  # type: ignore[method-assign,assignment]
            self.score_nodes = cpu_memory_score_nodes_fn(kind, *weights, _SCORE_KEY, _non_zero_cpu_memory)

    # --- filtering ---------------------------------------------------------------

    def _ignored(self, name: str) -> bool:
        if not is_extended_resource_name(name):
            return False
        return name in self.ignored_resources or (
            bool(self.ignored_groups) and name.split("/", 1)[0] in self.ignored_groups
        )

    def _wanted(
        self, state: CycleState, pod: PodInfo
    ) -> tuple[int, int, int, tuple[tuple[str, int], ...], frozenset[str]]:
        """cpu, memory, ephemeral storage, the other resources, and those of them DRA may provide."""
        req = pod.requests
        scalars = tuple((n, q) for n, q in req.scalar.items() if q > 0 and not self._ignored(n))
        dra: frozenset[str] = frozenset()
        if scalars and self.device_classes is not None and len(self.device_classes):
            resolver = cycle_resolver(state, self.device_classes)
            dra = frozenset(n for n in backed_requests(pod, resolver) if resolver.get(n) is not None)
        return (req.milli_cpu, req.memory, req.ephemeral_storage, scalars, dra)

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        state[_FILTER_KEY] = self._wanted(state, pod)
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        want = state.get(_FILTER_KEY)
        if want is None:  # PreFilter disabled
            want = state[_FILTER_KEY] = self._wanted(state, pod)
        cpu, mem, eph, scalars, dra = want
        alloc = node.allocatable
        reasons: list[str] | None = None
        if len(node.pods) + 1 > alloc.allowed_pod_number:
            reasons = ["Too many pods"]
        if not (cpu or mem or eph or scalars):
            return None if reasons is None else Status(_Code.UNSCHEDULABLE, tuple(reasons))
        used = node.requested
        unresolvable = False
        if cpu and cpu > alloc.milli_cpu - used.milli_cpu:
            reasons = (reasons or []) + ["Insufficient cpu"]
            unresolvable |= cpu > alloc.milli_cpu
        if mem and mem > alloc.memory - used.memory:
            reasons = (reasons or []) + ["Insufficient memory"]
            unresolvable |= mem > alloc.memory
        if eph and eph > alloc.ephemeral_storage - used.ephemeral_storage:
            reasons = (reasons or []) + ["Insufficient ephemeral-storage"]
            unresolvable |= eph > alloc.ephemeral_storage
        for name, q in scalars:
            have = alloc.scalar.get(name, 0)
            if have <= 0 and name in dra:
                continue
            if q > have - used.scalar.get(name, 0):
                reasons = (reasons or []) + [f"Insufficient {name}"]
                unresolvable |= q > have
        if reasons is None:
            return None
        code = _Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else _Code.UNSCHEDULABLE
        return Status(code, tuple(reasons))

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None] | None:
        """``filter`` over many nodes: a quick check of pods, cpu and memory first; only nodes
        that fail it, or pods asking for other resources, take the full path."""
        want = state.get(_FILTER_KEY)
        if want is None:
            want = state[_FILTER_KEY] = self._wanted(state, pod)
        cpu, mem, eph, scalars, _ = want
        if eph or scalars:
            return filter_each(self.filter, state, pod, nodes)
        failed = [i for i, ni in enumerate(nodes) if (f := ni.free)[0] <= 0 or cpu > f[1] or mem > f[2]]
        if not failed:
            return None
        results: list[Status | None] = [None] * len(nodes)
        for i in failed:
            results[i] = self.filter(state, pod, nodes[i])
        return results

    # --- scoring -----------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        state[_SCORE_KEY] = (
            _non_zero_cpu_memory(pod) if self._inlined is not None else self.allocation.pod_requests(pod)
        )
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        """The general path; the default configuration replaces it with an inlined function."""
        reqs = state.get(_SCORE_KEY)
        if reqs is None:  # PreScore disabled
            reqs = state[_SCORE_KEY] = self.allocation.pod_requests(pod)
        return self._scorer(self.allocation.values(node, reqs))
