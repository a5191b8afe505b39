"""TaintToleration: a node's NoSchedule/NoExecute taints keep out pods that don't tolerate them;
untolerated PreferNoSchedule taints lower the node's score.

Filter rejects with ``node(s) had untolerated taint {<key>: <value>}`` (the
first such taint), as kube-scheduler words it. Score counts the untolerated
PreferNoSchedule taints and normalizes in reverse, so the node with the fewest
gets 100.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, ClassVar

from scheduler.core.framework import SKIP, CycleState, Snapshot, Status, default_normalize, unresolvable
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.helpers import (
    DO_NOT_SCHEDULE_EFFECTS,
    PREFER_NO_SCHEDULE,
    tolerates_everything,
    tolerations_tolerate_taint,
)

_PREFER_KEY = "TaintToleration/prefer"
_FILTER_KEY = "TaintToleration"
_MEMO = "TaintToleration"
_NONE: tuple[dict[str, Any], ...] = ()


def untolerated_taint_reason(taint: dict[str, Any]) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"


@lru_cache(maxsize=1024)
def _rejection(key: str, value: str) -> Status:
    return unresolvable(untolerated_taint_reason({"key": key, "value": value}))


def _split_taints(node: NodeInfo) -> tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]:
    """(NoSchedule/NoExecute taints, PreferNoSchedule taints) of a node; memoized until it changes."""
    split = node.memo.get(_MEMO)
    if split is None:
        hard = tuple(t for t in node.taints if t.get("effect") in DO_NOT_SCHEDULE_EFFECTS)
        soft = tuple(t for t in node.taints if t.get("effect") == PREFER_NO_SCHEDULE)
        split = node.memo[_MEMO] = (hard, soft)
    return split


class TaintToleration:
    name: ClassVar[str] = "TaintToleration"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        tolerations = pod.spec.get("tolerations") or ()
        # A toleration with operator Exists and no key or effect tolerates every taint.
        if tolerations and tolerates_everything(tolerations):
            return SKIP
        state[_FILTER_KEY] = tuple(tolerations)
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not node.taints:
            return None
        hard = _split_taints(node)[0]
        if not hard:
            return None
        tolerations = state.get(_FILTER_KEY)
        if tolerations is None:  # PreFilter disabled
            tolerations = state[_FILTER_KEY] = tuple(pod.spec.get("tolerations") or ())
        for taint in hard:
            if not tolerations or not tolerations_tolerate_taint(tolerations, taint):
                return _rejection(taint.get("key") or "", taint.get("value") or "")
        return None

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        # Only tolerations that can apply to PreferNoSchedule (no effect, or that effect).
        state[_PREFER_KEY] = tuple(
            t
            for t in pod.spec.get("tolerations") or ()
            if not t.get("effect") or t.get("effect") == PREFER_NO_SCHEDULE
        )
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        if not node.taints:
            return 0
        soft = _split_taints(node)[1]
        if not soft:
            return 0
        tolerations = state.get(_PREFER_KEY)
        if tolerations is None:  # PreScore disabled
            tolerations = state[_PREFER_KEY] = tuple(pod.spec.get("tolerations") or ())
        if not tolerations:
            return len(soft)
        return sum(1 for taint in soft if not tolerations_tolerate_taint(tolerations, taint))

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        default_normalize(scores, reverse=True)
