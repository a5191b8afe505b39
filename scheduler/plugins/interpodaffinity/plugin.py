"""InterPodAffinity: required pod affinity/anti-affinity (Filter) and preferred terms (Score).

Semantics are kube-scheduler's (``pkg/scheduler/framework/plugins/interpodaffinity``):

* Filter, per node, in this order:
  the incoming pod's required affinity: every term's topology key must be on
  the node and some pod matching *all* the terms must run in that topology
  domain ("node(s) didn't match pod affinity rules", unresolvable) - unless no
  pod matches anywhere and the pod matches its own terms (the first pod of a
  group with affinity to itself); its required anti-affinity: no matching pod
  in the node's domain of any term ("node(s) didn't match pod anti-affinity
  rules"); the existing pods' required anti-affinity, matched against the
  incoming pod ("node(s) didn't satisfy existing pods anti-affinity rules").
* Score: per topology domain, the weights of the incoming pod's preferred terms
  that existing pods match (anti-affinity subtracts), plus the existing pods'
  preferred terms and, weighted by ``hardPodAffinityWeight``, their required
  affinity terms that the incoming pod matches; min-max normalized to 0..100.

Cost: PreFilter and PreScore count matches into maps keyed by topology key
and value, so Filter and Score are a few dict lookups. The counts of a pod
shape are kept across cycles (:mod:`scheduler.plugins.topologycounts`): the
next pod of the same workload only recounts the nodes that changed. A pod
without terms skips Filter unless an existing pod's required anti-affinity
selects it, and skips Score unless some existing pod has an affinity.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from scheduler.core.framework import (
    MAX_NODE_SCORE,
    SKIP,
    CycleState,
    Handle,
    Snapshot,
    Status,
    error,
    unresolvable,
    unschedulable,
)
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.interpodaffinity.terms import (
    NAME,
    AffinityTerm,
    matches_all,
    pod_terms,
    resolve_namespace_selectors,
)
from scheduler.plugins.topologycounts import Part, SumsCache, memo_entries, shape_id

logger = logging.getLogger(__name__)

ERR_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

# One Status per reason (it is frozen): a cycle rejects most nodes for the same one.
_NO_AFFINITY = unresolvable(ERR_AFFINITY)
_ANTI_AFFINITY = unschedulable(ERR_ANTI_AFFINITY)
_EXISTING_ANTI_AFFINITY = unschedulable(ERR_EXISTING_ANTI_AFFINITY)

_FILTER_KEY = NAME + "/filter"
_SCORE_KEY = NAME + "/score"

# NodeSums groups of the incoming pod's required terms: (kind, topology key) -> value -> pods.
_AFF, _ANTI = "affinity", "anti-affinity"

Counts = dict[Any, dict[Any, int]]
"""group -> key -> amount (the ``sums`` of a :class:`NodeSums`)."""


def _where(
    t: AffinityTerm, labels: dict[str, str], out: list[tuple[Any, Any, int]], group: Any, amount: int
) -> None:
    value = labels.get(t.topology_key)
    if value is not None:
        out.append((group, value, amount))


class _FilterState:
    __slots__ = (
        "affinity",
        "anti_affinity",
        "incoming",
        "existing",
        "self_match",
        "ns_labels",
        "own",
        "_verdicts",
    )

    def __init__(
        self,
        affinity: tuple[AffinityTerm, ...],
        anti_affinity: tuple[AffinityTerm, ...],
        incoming: Counts,
        existing: Counts,
        self_match: bool,
        ns_labels: dict[str, str] | None = None,
        own: bool = False,
    ) -> None:
        self.affinity = affinity
        self.anti_affinity = anti_affinity
        self.incoming = incoming
        """(_AFF | _ANTI, topology key) -> domain -> existing pods matching the incoming pod's terms."""
        self.existing = existing
        """topology key -> domains where existing pods' required anti-affinity selects the pod.

        Both maps may be the plugin's running sums, shared across cycles: only a clone's change."""
        self.self_match = self_match
        self.ns_labels = ns_labels or {}
        """The labels of the incoming pod's namespace (existing pods' namespaceSelectors)."""
        self.own = own
        self._verdicts: _Verdicts | None = None

    def verdicts(self) -> _Verdicts:
        """Filter's verdicts from these counts (kept until they change)."""
        if self._verdicts is None:
            self._verdicts = _Verdicts(self)
        return self._verdicts

    def clone(self) -> _FilterState:
        return _FilterState(
            self.affinity,
            self.anti_affinity,
            {g: dict(by) for g, by in self.incoming.items()},
            {g: dict(by) for g, by in self.existing.items()},
            self.self_match,
            self.ns_labels,
            True,
        )

    def update_with_pod(self, pod: PodInfo, other: PodInfo, node: NodeInfo, delta: int) -> None:
        """``updateWithPod``: the counts as if ``other`` were added to / removed from ``node``."""
        if not self.own:
            raise RuntimeError("InterPodAffinity: add_pod/remove_pod on a state that was not cloned")
        found: list[tuple[Any, Any, int]] = []
        labels = node.labels
        if other.has_required_anti_affinity:
            for t in pod_terms(other).required_anti_affinity:
                if t.matches(pod.namespace, pod.labels, self.ns_labels):
                    _where(t, labels, found, t.topology_key, 1)
        for group, value, _ in found:
            _bump(self.existing, group, value, delta)
        found = []
        if self.affinity and matches_all(self.affinity, other.namespace, other.labels):
            for t in self.affinity:
                _where(t, labels, found, (_AFF, t.topology_key), 1)
        for t in self.anti_affinity:
            if t.matches(other.namespace, other.labels, None):
                _where(t, labels, found, (_ANTI, t.topology_key), 1)
        for group, value, _ in found:
            _bump(self.incoming, group, value, delta)
        self._verdicts = None


def _bump(counts: Counts, group: Any, key: Any, delta: int) -> None:
    """Add ``delta`` to ``counts[group][key]``; a count that reaches 0 is dropped, as the
    filter reads a present key as "some pod matches here"."""
    by_key = counts.get(group)
    if by_key is None:
        by_key = counts[group] = {}
    n = by_key.get(key, 0) + delta
    if n > 0:
        by_key[key] = n
    else:
        by_key.pop(key, None)
        if not by_key:
            del counts[group]


class _Verdicts:
    """Filter's verdict for a node's labels, from one cycle's :class:`_FilterState`, in
    kube-scheduler's order: the incoming pod's required affinity, its anti-affinity, then
    the existing pods' anti-affinity (``interpodaffinity.Filter``)."""

    __slots__ = ("affinity", "anti", "existing", "first_of_group", "admits_all")

    def __init__(self, s: _FilterState) -> None:
        incoming = s.incoming
        self.affinity = [(t.topology_key, incoming.get((_AFF, t.topology_key), {})) for t in s.affinity]
        self.anti = [
            (t.topology_key, by_value)
            for t in s.anti_affinity
            if (by_value := incoming.get((_ANTI, t.topology_key)))
        ]
        self.existing = [(key, by_value) for key, by_value in s.existing.items() if by_value]
        # The first pod of a group with affinity to itself: no pod matches its terms anywhere
        # yet, so a domain without one does not rule a node out.
        self.first_of_group = s.self_match and not any(
            by_value for (kind, _), by_value in incoming.items() if kind == _AFF
        )
        self.admits_all = not (self.affinity or self.anti or self.existing)

    def of(self, labels: dict[str, str]) -> Status | None:
        if self.affinity:
            found = True
            for key, by_value in self.affinity:
                value = labels.get(key)
                if value is None:  # every topology key must be on the node, first pod or not
                    return _NO_AFFINITY
                if by_value.get(value, 0) <= 0:
                    found = False
            if not found and not self.first_of_group:
                return _NO_AFFINITY
        for key, by_value in self.anti:
            value = labels.get(key)
            if value is not None and by_value.get(value, 0) > 0:
                return _ANTI_AFFINITY
        for key, by_value in self.existing:
            value = labels.get(key)
            if value is not None and by_value.get(value, 0) > 0:
                return _EXISTING_ANTI_AFFINITY
        return None


class InterPodAffinity:
    name = NAME

    def __init__(self, args: Any = None, handle: Handle | None = None) -> None:
        self.handle = handle
        self.hard_pod_affinity_weight = int(getattr(args, "hard_pod_affinity_weight", 1))
        self.ignore_preferred_terms_of_existing_pods = bool(
            getattr(args, "ignore_preferred_terms_of_existing_pods", False)
        )
        self._sums = SumsCache()

    # --- helpers ------------------------------------------------------------------

    def _namespaces(self) -> list[dict[str, Any]]:
        return self.handle.store("namespaces").list() if self.handle is not None else []

    def _namespace_labels(self, namespace: str) -> dict[str, str]:
        if self.handle is None:
            return {}
        ns = self.handle.store("namespaces").get(namespace)
        return ((ns or {}).get("metadata") or {}).get("labels") or {}

    def _count(
        self,
        key: tuple,
        compute: Callable[[NodeInfo], Part],
        nodes: Sequence[NodeInfo],
        subset: Sequence[NodeInfo] | None = None,
    ) -> Counts:
        """The sums over ``nodes`` of ``compute`` (one node's contribution for a pod shape).

        ``subset``: the only nodes that can contribute. When it is small its parts are
        summed afresh; otherwise the sums over all nodes are kept up to date across cycles.
        """
        sid = shape_id((NAME, *key))
        if subset is not None and len(subset) * 4 < len(nodes):
            out: Counts = {}
            for part in memo_entries(subset, NAME, sid, compute):
                for group, k, amount in part:
                    by_key = out.get(group)
                    if by_key is None:
                        by_key = out[group] = {}
                    by_key[k] = by_key.get(k, 0) + amount
            return out
        sums = self._sums.get(sid)
        sums.refresh(nodes, lambda ns: memo_entries(ns, NAME, sid, compute))
        return sums.sums

    # --- Filter -------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        terms = pod_terms(pod)
        if terms.errors:
            return unresolvable("parsing pod: " + "; ".join(terms.errors))

        existing: Counts = {}
        with_anti = snapshot.have_pods_with_required_anti_affinity()
        if with_anti:
            existing = self._existing_anti_affinity(pod, snapshot.list(), with_anti)
        if not terms.has_required and not any(existing.values()):
            return SKIP

        affinity: tuple[AffinityTerm, ...] = ()
        anti: tuple[AffinityTerm, ...] = ()
        incoming: Counts = {}
        if terms.has_required:
            namespaces = self._namespaces()
            affinity = resolve_namespace_selectors(terms.required_affinity, namespaces)
            anti = resolve_namespace_selectors(terms.required_anti_affinity, namespaces)
            incoming = self._incoming_counts(affinity, anti, snapshot.list())
        state[_FILTER_KEY] = _FilterState(
            affinity,
            anti,
            incoming,
            existing,
            matches_all(affinity, pod.namespace, pod.labels),
            self._namespace_labels(pod.namespace),
        )
        return None

    # --- PreFilterExtensions ------------------------------------------------------

    def add_pod(self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo) -> Status | None:
        s: _FilterState | None = state.get(_FILTER_KEY)
        if s is not None:
            s.update_with_pod(pod, other, node, 1)
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo) -> Status | None:
        s: _FilterState | None = state.get(_FILTER_KEY)
        if s is not None:
            s.update_with_pod(pod, other, node, -1)
        return None

    def _existing_anti_affinity(
        self, pod: PodInfo, nodes: Sequence[NodeInfo], subset: Sequence[NodeInfo]
    ) -> Counts:
        """Per topology key, the domains where an existing pod's required anti-affinity selects ``pod``."""
        namespace, labels = pod.namespace, pod.labels
        ns_labels = self._namespace_labels(namespace)

        def compute(ni: NodeInfo) -> Part:
            out: list[tuple[Any, Any, int]] = []
            node_labels = ni.labels
            for existing in ni.pods_with_required_anti_affinity.values():
                for t in pod_terms(existing).required_anti_affinity:
                    if t.matches(namespace, labels, ns_labels):
                        _where(t, node_labels, out, t.topology_key, 1)
            return tuple(out)

        key = ("existing", namespace, frozenset(labels.items()), frozenset(ns_labels.items()))
        return self._count(key, compute, nodes, subset)

    def _incoming_counts(
        self, affinity: tuple[AffinityTerm, ...], anti: tuple[AffinityTerm, ...], nodes: Sequence[NodeInfo]
    ) -> Counts:
        """Per domain, the existing pods matching all of ``affinity`` / each term of ``anti``."""

        def compute(ni: NodeInfo) -> Part:
            out: list[tuple[Any, Any, int]] = []
            node_labels = ni.labels
            for p in ni.pods.values():
                if affinity and matches_all(affinity, p.namespace, p.labels):
                    for t in affinity:
                        _where(t, node_labels, out, (_AFF, t.topology_key), 1)
                for t in anti:
                    if t.matches(p.namespace, p.labels, None):
                        _where(t, node_labels, out, (_ANTI, t.topology_key), 1)
            return tuple(out)

        key = ("incoming", tuple(t.key for t in affinity), tuple(t.key for t in anti))
        return self._count(key, compute, nodes)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        s: _FilterState | None = state.get(_FILTER_KEY)
        if s is None:
            return None
        return s.verdicts().of(node.labels)

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None] | None:
        """``filter`` over many nodes, the cycle's counts looked up once."""
        s: _FilterState | None = state.get(_FILTER_KEY)
        if s is None:
            return None
        verdicts = s.verdicts()
        if verdicts.admits_all:
            return None
        of = verdicts.of
        results = [of(ni.labels) for ni in nodes]
        return results if any(r is not None for r in results) else None

    # --- Score --------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        terms = pod_terms(pod)
        if terms.errors:
            return error("parsing pod: " + "; ".join(terms.errors))
        has_constraints = terms.has_preferred
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return SKIP
        if self.handle is None:
            return SKIP
        snapshot = self.handle.snapshot
        parts: list[Counts] = []
        with_affinity = snapshot.have_pods_with_affinity()
        if with_affinity:
            parts.append(self._score_existing_terms(pod, snapshot.list(), with_affinity))
        if has_constraints:
            namespaces = self._namespaces()
            preferred = (
                resolve_namespace_selectors(terms.preferred_affinity, namespaces),
                resolve_namespace_selectors(terms.preferred_anti_affinity, namespaces),
            )
            parts.append(self._score_incoming_terms(*preferred, snapshot.list()))
        parts = [p for p in parts if any(p.values())]
        if not parts:
            return SKIP
        state[_SCORE_KEY] = parts
        return None

    def _score_existing_terms(
        self, pod: PodInfo, nodes: Sequence[NodeInfo], subset: Sequence[NodeInfo]
    ) -> Counts:
        """The existing pods' terms that select the incoming pod: topology key -> domain -> weight."""
        namespace, labels = pod.namespace, pod.labels
        ns_labels = self._namespace_labels(namespace)
        hard_weight = self.hard_pod_affinity_weight

        def compute(ni: NodeInfo) -> Part:
            out: list[tuple[Any, Any, int]] = []
            node_labels = ni.labels
            for existing in ni.pods_with_affinity.values():
                et = pod_terms(existing)
                weighted = [(t, t.weight) for t in et.preferred_affinity]
                weighted += [(t, -t.weight) for t in et.preferred_anti_affinity]
                if hard_weight > 0:
                    weighted += [(t, hard_weight) for t in et.required_affinity]
                for t, weight in weighted:
                    if t.matches(namespace, labels, ns_labels):
                        _where(t, node_labels, out, t.topology_key, weight)
            return tuple(out)

        # Profiles share the NodeInfos, and may weigh required terms differently.
        key = (
            "score-existing",
            hard_weight,
            namespace,
            frozenset(labels.items()),
            frozenset(ns_labels.items()),
        )
        return self._count(key, compute, nodes, subset)

    def _score_incoming_terms(
        self, affinity: tuple[AffinityTerm, ...], anti: tuple[AffinityTerm, ...], nodes: Sequence[NodeInfo]
    ) -> Counts:
        """The incoming pod's preferred terms matched by existing pods: topology key -> domain -> weight."""
        weighted = [(t, t.weight) for t in affinity] + [(t, -t.weight) for t in anti]

        def compute(ni: NodeInfo) -> Part:
            out: list[tuple[Any, Any, int]] = []
            node_labels = ni.labels
            for t, weight in weighted:
                n = sum(1 for p in ni.pods.values() if t.matches(p.namespace, p.labels, None))
                if n:
                    _where(t, node_labels, out, t.topology_key, n * weight)
            return tuple(out)

        key = ("score-incoming", tuple(t.key for t in affinity), tuple(t.key for t in anti))
        return self._count(key, compute, nodes)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        labels = node.labels
        total = 0
        for counts in state[_SCORE_KEY]:
            for key, by_value in counts.items():
                value = labels.get(key)
                if value is not None:
                    total += by_value.get(value, 0)
        return total

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        """Min-max to 0..100; all equal gives 0 everywhere (kube-scheduler's NormalizeScore)."""
        if not scores:
            return
        lo = min(scores.values())
        diff = max(scores.values()) - lo
        for name, s in scores.items():
            scores[name] = int(MAX_NODE_SCORE * ((s - lo) / diff)) if diff > 0 else 0
