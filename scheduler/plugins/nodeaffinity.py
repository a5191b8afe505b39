"""NodeAffinity: ``spec.nodeSelector`` and node affinity, plus the profile's ``addedAffinity``.

PreFilter narrows the candidates to the node names a pod's required terms
select through ``matchFields`` on ``metadata.name`` (how DaemonSet pods are
pinned), Filter checks the required rules, and Score sums the weights of the
matching preferred terms (the pod's and the added ones), normalized so the
best node gets 100.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from scheduler.core.framework import (
    SKIP,
    CycleState,
    PreFilterResult,
    Snapshot,
    Status,
    default_normalize,
    default_normalize_list,
    error,
    filter_each,
    unresolvable,
)
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.labelrequirements import SelectorError
from scheduler.plugins.nodeselector import (
    METADATA_NAME,
    NodeSelector,
    PreferredTerms,
    compile_node_selector_terms,
    compile_preferred_terms,
    required_node_affinity,
)

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

_REJECTED_POD = unresolvable(ERR_REASON_POD)
_REJECTED_ENFORCED = unresolvable(ERR_REASON_ENFORCED)
_PREFERRED_MEMO = "NodeAffinity/preferred"
_FILTER_KEY = "NodeAffinity"
_SCORE_KEY = "NodeAffinity/score"


def _zero(labels: Mapping[str, str], name: str) -> int:
    return 0


def _node_affinity(pod: PodInfo) -> Mapping[str, Any]:
    return ((pod.spec.get("affinity") or {}).get("nodeAffinity")) or {}


def preferred_terms(pod: PodInfo) -> PreferredTerms:
    """The pod's compiled preferred terms (memoized); raises SelectorError if one is invalid."""
    memo = pod.memo
    terms = memo.get(_PREFERRED_MEMO)
    if terms is None:
        terms = compile_preferred_terms(
            _node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution")
        )
        memo[_PREFERRED_MEMO] = terms
    return terms


def node_names_from_terms(terms: list[Mapping[str, Any]]) -> set[str] | None:
    """The node names required terms pin the pod to, or None when some term allows any node.

    Terms are ORed, so one term without a ``metadata.name In`` field
    requirement leaves every node possible; within a term such requirements
    are ANDed (intersected).
    """
    names: set[str] = set()
    for t in terms:
        term_names: set[str] | None = None
        for r in t.get("matchFields") or ():
            if r.get("key") == METADATA_NAME and r.get("operator") == "In":
                values = set(r.get("values") or ())
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names |= term_names
    return names


class NodeAffinity:
    name: ClassVar[str] = "NodeAffinity"
    node_static: ClassVar[bool] = True
    """Filter reads only the Node object and the pod's ``core.filtering.NODE_STATIC_FIELDS``."""

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        added = getattr(args, "added_affinity", None) or {}
        self.added_selector: NodeSelector | None = None
        self.added_preferred: PreferredTerms | None = None
        required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
        try:
            if required is not None:
                self.added_selector = compile_node_selector_terms(
                    required.get("nodeSelectorTerms"), strict=True
                )
        except SelectorError as e:
            raise ValueError(f"addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: {e}") from None
        try:
            preferred = compile_preferred_terms(added.get("preferredDuringSchedulingIgnoredDuringExecution"))
        except SelectorError as e:
            raise ValueError(f"addedAffinity.preferredDuringSchedulingIgnoredDuringExecution: {e}") from None
        if preferred:
            self.added_preferred = preferred

    # --- filtering ---------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> Status | PreFilterResult | None:
        required = _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
        if required is None and self.added_selector is None and pod.spec.get("nodeSelector") is None:
            return SKIP
        state[_FILTER_KEY] = required_node_affinity(pod).matches
        terms = (required or {}).get("nodeSelectorTerms") or []
        if not terms:
            return None
        names = node_names_from_terms(terms)
        if names is None:
            return None
        if not names:  # every term pins to a conflicting set of names
            return unresolvable(ERR_REASON_CONFLICT)
        return PreFilterResult(frozenset(names))

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        labels = node.labels
        if self.added_selector is not None and not self.added_selector.matches(labels, node.name):
            return _REJECTED_ENFORCED
        matches = state.get(_FILTER_KEY)
        if matches is None:  # PreFilter disabled
            matches = required_node_affinity(pod).matches
        return None if matches(labels, node.name) else _REJECTED_POD

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None] | None:
        matches = state.get(_FILTER_KEY)
        if self.added_selector is not None or matches is None:
            return filter_each(self.filter, state, pod, nodes)
        ok = [matches(ni.labels, ni.name) for ni in nodes]
        if all(ok):
            return None
        return [None if o else _REJECTED_POD for o in ok]

    # --- scoring -----------------------------------------------------------------

    def _weigher(self, pod: PodInfo) -> Any:
        """The function summing the pod's matching preferred weights (None: no terms), or
        SelectorError if a term is invalid."""
        terms = preferred_terms(pod)
        weigh = terms.score if terms.terms else None
        added = self.added_preferred
        if added is None:
            return weigh
        if weigh is None:
            return added.score
        return lambda labels, name: weigh(labels, name) + added.score(labels, name)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        try:
            weigh = self._weigher(pod)
        except SelectorError as e:
            return error(f"parsing preferredDuringSchedulingIgnoredDuringExecution: {e}")
        if weigh is None:
            return SKIP
        state[_SCORE_KEY] = weigh
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        weigh = state.get(_SCORE_KEY)
        if weigh is None:  # PreScore disabled
            try:
                weigh = state[_SCORE_KEY] = self._weigher(pod) or _zero
            except SelectorError:
                weigh = state[_SCORE_KEY] = _zero
        return weigh(node.labels, node.name)

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        default_normalize(scores)

    def normalize_score_list(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        default_normalize_list(scores)
