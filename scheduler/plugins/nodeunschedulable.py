"""NodeUnschedulable: keep pods off cordoned nodes (``spec.unschedulable``).

A pod that tolerates the ``node.kubernetes.io/unschedulable:NoSchedule`` taint
(DaemonSet pods do) may still land on such a node.
"""

from __future__ import annotations

from typing import Any, ClassVar

from scheduler.core.framework import CycleState, Status, filter_each, unresolvable
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.taints import NO_SCHEDULE, tolerations_tolerate_taint

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"

_UNSCHEDULABLE_TAINT = {"key": TAINT_NODE_UNSCHEDULABLE, "effect": NO_SCHEDULE}
_REJECTED = unresolvable(ERR_REASON_UNSCHEDULABLE)


class NodeUnschedulable:
    name: ClassVar[str] = "NodeUnschedulable"
    node_static: ClassVar[bool] = True
    """Filter reads only the Node object and the pod's ``core.filtering.NODE_STATIC_FIELDS``."""

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        pass

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not node.unschedulable:
            return None
        tolerated = pod.memo.get(self.name)
        if tolerated is None:
            tolerated = tolerations_tolerate_taint(pod.spec.get("tolerations") or (), _UNSCHEDULABLE_TAINT)
            pod.memo[self.name] = tolerated
        return None if tolerated else _REJECTED

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None] | None:
        if not any(ni.unschedulable for ni in nodes):
            return None
        return filter_each(self.filter, state, pod, nodes)
