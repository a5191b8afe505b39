"""NodeResourcesBalancedAllocation: prefer nodes whose resources would be used evenly.

For each configured resource (cpu and memory by default) the fraction
requested/allocatable after placing the pod is taken, capped at 1; the score
is ``(1 - std) * 100`` of those fractions (for two resources the std is
half their difference). As in current kube-scheduler, the node's and the
pod's real requests are counted (no non-zero defaults), and pods requesting
none of the resources are not scored by this plugin at all: they would
otherwise all pile onto the same node.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from scheduler.core.framework import MAX_NODE_SCORE, SKIP, CycleState, Status
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.noderesources import ResourceAllocationScorer, arg_field, resource_specs


def balanced_score(values: list[tuple[int, int, int]]) -> int:
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


class NodeResourcesBalancedAllocation:
    name: ClassVar[str] = "NodeResourcesBalancedAllocation"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        self.allocation = ResourceAllocationScorer(resource_specs(arg_field(args, "resources", "resources")),
                                                   use_requested=True)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        reqs = self.allocation.pod_requests(pod)
        if not any(r[3] for r in reqs):
            return SKIP  # best-effort pod (kubernetes#129138)
        state[self.name] = reqs
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        reqs = state.get(self.name)
        if reqs is None:  # PreScore disabled
            reqs = self.allocation.pod_requests(pod)
            if not any(r[3] for r in reqs):
                return 0
        return balanced_score(self.allocation.values(node, reqs))
