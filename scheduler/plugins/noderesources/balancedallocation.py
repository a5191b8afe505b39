"""NodeResourcesBalancedAllocation: prefer nodes whose resources the pod would make more even.

For each configured resource (cpu and memory by default) the fraction
requested/allocatable is taken, capped at 1, and a node's balance is
``(1 - std) * 100`` of those fractions (for two resources the std is half
their difference). As kube-scheduler v1.37 (``balancedResourceScorer``), the
score compares the balance with the pod placed and without it:
``50 + (50 + with - without) / 2``, from 50 (the pod upsets the balance) to
100 (it restores it), about 75 when it changes little. The node's and the
pod's real requests are counted (no non-zero defaults), and pods requesting
none of the resources are not scored by this plugin at all: they would
otherwise all pile onto the same node.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from scheduler.core.framework import MAX_NODE_SCORE, SKIP, CycleState, Status, memoized_scores
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.noderesources.scoring import ResourceAllocationScorer, arg_field, resource_specs

_SCORE_KEY = "NodeResourcesBalancedAllocation"


def improvement(with_pod: int, without_pod: int) -> int:
    """``MaxNodeScore/2 + (MaxNodeScore/2 + with - without) / 2`` in Go's integer division
    (truncating toward zero)."""
    d = MAX_NODE_SCORE // 2 + with_pod - without_pod
    return MAX_NODE_SCORE // 2 + (d // 2 if d >= 0 else -(-d // 2))


def balanced_score(with_pod: list[tuple[int, int, int]], without_pod: list[tuple[int, int, int]]) -> int:
    """(requested, allocatable, weight) per resource, with the pod and without: the score."""
    return improvement(balance(with_pod), balance(without_pod))


def balance(values: list[tuple[int, int, int]]) -> int:
    """(requested, allocatable, weight) per resource -> ``(1 - std) * 100`` (weights unused)."""
    fractions = [min(r / a, 1.0) for r, a, _ in values]
    n = len(fractions)
    if n == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    elif n > 2:
        mean = sum(fractions) / n
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / n)
    else:
        std = 0.0
    return int((1 - std) * MAX_NODE_SCORE)


_UNCHANGED = improvement(MAX_NODE_SCORE, MAX_NODE_SCORE)
"""75: the score of a node whose balance the pod does not change."""


class NodeResourcesBalancedAllocation:
    name: ClassVar[str] = "NodeResourcesBalancedAllocation"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        self.allocation = ResourceAllocationScorer(
            resource_specs(arg_field(args, "resources", "resources")), use_requested=True
        )
        self._memo_key = object()  # this plugin's entries in NodeInfo.memo
        # The default, cpu and memory, is computed inline.
        self._cpu_memory = (
            self.allocation.cpu_memory_weights() is not None and len(self.allocation.resources) == 2
        )

    def _state(self, pod: PodInfo) -> Any:
        """What Score needs of the pod, or None for a best-effort pod (kubernetes#129138)."""
        reqs = self.allocation.pod_requests(pod)
        if not any(r[3] for r in reqs):
            return None
        if self._cpu_memory:
            return (pod.requests.milli_cpu, pod.requests.memory)
        return reqs

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        st = self._state(pod)
        if st is None:
            return SKIP
        state[_SCORE_KEY] = st
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        st = state.get(_SCORE_KEY)
        if st is None:  # PreScore disabled
            st = self._state(pod)
            if st is None:
                return 0
            state[_SCORE_KEY] = st
        if self._cpu_memory:
            return self._cpu_memory_scores(st, [node])[0]
        return balanced_score(
            self.allocation.values(node, st), self.allocation.values(node, st, include_pod=False)
        )

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        """``score`` over many nodes, the cpu-and-memory case inlined."""
        st = state.get(_SCORE_KEY)
        if not self._cpu_memory or st is None:
            return [self.score(state, pod, ni) for ni in nodes]
        return memoized_scores(nodes, self._memo_key, st, lambda todo: self._cpu_memory_scores(st, todo))

    def _cpu_memory_scores(self, st: tuple[int, int], nodes: list[NodeInfo]) -> list[int]:
        pc, pm = st
        out = []
        for ni in nodes:
            a = ni.allocatable
            ac, am = a.milli_cpu, a.memory
            if not (ac and am):
                out.append(_UNCHANGED)  # at most one fraction: no deviation, with or without the pod
                continue
            r = ni.requested
            fc, fm = r.milli_cpu / ac, r.memory / am
            before = int(
                (1 - abs((fc if fc < 1.0 else 1.0) - (fm if fm < 1.0 else 1.0)) / 2) * MAX_NODE_SCORE
            )
            fc, fm = (r.milli_cpu + pc) / ac, (r.memory + pm) / am
            after = int((1 - abs((fc if fc < 1.0 else 1.0) - (fm if fm < 1.0 else 1.0)) / 2) * MAX_NODE_SCORE)
            d = MAX_NODE_SCORE // 2 + after - before
            out.append(MAX_NODE_SCORE // 2 + (d // 2 if d >= 0 else -(-d // 2)))
        return out
