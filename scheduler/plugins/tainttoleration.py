"""TaintToleration: a node's NoSchedule/NoExecute taints keep out pods that don't tolerate them;
untolerated PreferNoSchedule taints lower the node's score.

Filter rejects with ``node(s) had untolerated taint(s)``, as kube-scheduler 1.37
words it (the taint itself is logged at -v=4: messages aggregate across nodes
only when they are alike). Score counts the untolerated
PreferNoSchedule taints and normalizes in reverse, so the node with the fewest
gets 100.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from scheduler.core.framework import (
    SKIP,
    CycleState,
    Snapshot,
    Status,
    default_normalize,
    default_normalize_list,
    unresolvable,
)
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.logs import V, kv
from scheduler.plugins.taints import (
    DO_NOT_SCHEDULE_EFFECTS,
    PREFER_NO_SCHEDULE,
    tolerates_everything,
    tolerations_tolerate_taint,
)
from scheduler.plugins.topologycounts import shape_id

logger = logging.getLogger(__name__)

_PREFER_KEY = "TaintToleration/prefer"
_FILTER_KEY = "TaintToleration"
_MEMO = "TaintToleration"
_VERDICTS = "TaintToleration/verdicts"
"""Filter's verdict per taint key (``_taint_key``), for this cycle's pod."""
_PREFER_COUNTS = "TaintToleration/prefer-counts"
_NONE: tuple[dict[str, Any], ...] = ()


UNTOLERATED = "node(s) had untolerated taint(s)"
_REJECTED = unresolvable(UNTOLERATED)


def _taint_key(taints: tuple[dict[str, Any], ...]) -> int:
    """A number for what decides whether tolerations tolerate these taints (0: no taints).

    Nodes with the same number share one verdict per scheduling cycle (a
    fleet is usually tainted alike); a number hashes faster than the taints.
    The numbers are topologycounts' shape ids (from 1, never reused), so
    forgetting the table only costs some verdicts computed twice."""
    if not taints:
        return 0
    return shape_id(
        ("taints", tuple((t.get("key") or "", t.get("value") or "", t.get("effect") or "") for t in taints))
    )


def _split_taints(node: NodeInfo) -> tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any], ...], Any, Any]:
    """(NoSchedule/NoExecute taints, PreferNoSchedule taints, and their keys) of a node; memoized
    until the Node changes (not when its pods do)."""
    split = node.node_memo.get(_MEMO)
    if split is None:
        hard = tuple(t for t in node.taints if t.get("effect") in DO_NOT_SCHEDULE_EFFECTS)
        soft = tuple(t for t in node.taints if t.get("effect") == PREFER_NO_SCHEDULE)
        split = node.node_memo[_MEMO] = (hard, soft, _taint_key(hard), _taint_key(soft))
    return split


class TaintToleration:
    name: ClassVar[str] = "TaintToleration"
    node_static: ClassVar[bool] = True
    """Filter reads only the Node object and the pod's ``core.filtering.NODE_STATIC_FIELDS``."""

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        tolerations = pod.spec.get("tolerations") or ()
        # A toleration with operator Exists and no key or effect tolerates every taint.
        if tolerations and tolerates_everything(tolerations):
            return SKIP
        state[_FILTER_KEY] = tuple(tolerations)
        return None

    def _tolerations(self, state: CycleState, pod: PodInfo) -> tuple[dict[str, Any], ...]:
        tolerations = state.get(_FILTER_KEY)
        if tolerations is None:  # PreFilter disabled
            tolerations = state[_FILTER_KEY] = tuple(pod.spec.get("tolerations") or ())
        return tolerations

    def _verdicts(self, state: CycleState) -> dict[int, Status | None]:
        verdicts = state.get(_VERDICTS)
        if verdicts is None:
            verdicts = state[_VERDICTS] = {0: None}
        return verdicts

    @staticmethod
    def _verdict(
        tolerations: tuple[dict[str, Any], ...], hard: tuple[dict[str, Any], ...], pod: PodInfo
    ) -> Status | None:
        """The verdict for nodes with the taints ``hard`` (one per set of taints and cycle)."""
        for taint in hard:
            if not tolerations or not tolerations_tolerate_taint(tolerations, taint):
                if logger.isEnabledFor(V(4)):
                    logger.log(
                        V(4),
                        "node had untolerated taints",
                        extra=kv(
                            pod=pod.key, untoleratedTaint=f"{taint.get('key')}={taint.get('value') or ''}"
                        ),
                    )
                return _REJECTED
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not node.taints:
            return None
        hard, _, key, _ = node.node_memo.get(_MEMO) or _split_taints(node)
        if not hard:
            return None
        verdicts = self._verdicts(state)
        if key in verdicts:
            return verdicts[key]
        verdict = verdicts[key] = self._verdict(self._tolerations(state, pod), hard, pod)
        return verdict

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None] | None:
        """``filter`` over many nodes: one verdict per distinct set of taints."""
        verdicts = self._verdicts(state)
        keys = [(ni.node_memo.get(_MEMO) or _split_taints(ni))[2] if ni.taints else 0 for ni in nodes]
        distinct = set(keys)
        for key in distinct.difference(verdicts):
            ni = nodes[keys.index(key)]
            verdicts[key] = self._verdict(self._tolerations(state, pod), _split_taints(ni)[0], pod)
        if all(verdicts[k] is None for k in distinct):
            return None
        return [verdicts[k] for k in keys]

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
        _, soft, _, key = node.node_memo.get(_MEMO) or _split_taints(node)
        if not soft:
            return 0
        counts = state.get(_PREFER_COUNTS)
        if counts is None:
            counts = state[_PREFER_COUNTS] = {}
        elif key in counts:
            return counts[key]
        tolerations = state.get(_PREFER_KEY)
        if tolerations is None:  # PreScore disabled
            tolerations = state[_PREFER_KEY] = tuple(pod.spec.get("tolerations") or ())
        n = (
            sum(1 for taint in soft if not tolerations_tolerate_taint(tolerations, taint))
            if tolerations
            else len(soft)
        )
        counts[key] = n
        return n

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        """``score`` over many nodes: the nodes without PreferNoSchedule taints score 0 at once."""
        out = [0] * len(nodes)
        for i, ni in enumerate(nodes):
            if ni.taints and (ni.node_memo.get(_MEMO) or _split_taints(ni))[1]:
                out[i] = self.score(state, pod, ni)
        return out

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        default_normalize(scores, reverse=True)

    def normalize_score_list(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        default_normalize_list(scores, reverse=True)
