"""NodeName: a pod that names its node (``spec.nodeName``) fits only that node."""

from __future__ import annotations

from typing import Any, ClassVar

from scheduler.core.framework import SKIP, CycleState, Snapshot, Status, filter_each, unresolvable
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo

ERR_REASON = "node(s) didn't match the requested node name"

_REJECTED = unresolvable(ERR_REASON)


class NodeName:
    name: ClassVar[str] = "NodeName"
    node_static: ClassVar[bool] = True
    """Filter reads only the Node object and the pod's ``core.filtering.NODE_STATIC_FIELDS``."""

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        # Most pods name no node: nothing to check for them.
        return None if pod.node_name else SKIP

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not pod.node_name or pod.node_name == node.name:
            return None
        return _REJECTED

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None] | None:
        if not pod.node_name:
            return None
        return filter_each(self.filter, state, pod, nodes)
