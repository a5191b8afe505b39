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

Cost: PreFilter and PreScore count matches once per cycle into maps keyed by
(topology key, value), so Filter and Score are a few dict lookups. What one
node contributes is memoized on the node (``NodeInfo.memo``, cleared whenever
the node or its pods change) per pod shape, so the next pod of the same
workload only recounts the nodes that changed. A pod without terms skips
Filter unless an existing pod's required anti-affinity selects it, and skips
Score unless some existing pod has an affinity.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
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
from scheduler.plugins.interpodaffinity_terms import (
    NAME,
    AffinityTerm,
    matches_all,
    pod_terms,
    resolve_namespace_selectors,
)

logger = logging.getLogger(__name__)

ERR_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

_FILTER_KEY = NAME + "/filter"
_SCORE_KEY = NAME + "/score"
MEMO_LIMIT = 64
"""Pod shapes remembered per node between two changes of the node."""

Pair = tuple[str, str]


def node_memo(ni: NodeInfo, plugin: str, key: Hashable, compute: Callable[[NodeInfo], Any]) -> Any:
    """``compute(ni)``, memoized on the node under ``(plugin, key)`` until the node changes."""
    memo = ni.memo.get(plugin)
    if memo is None:
        memo = ni.memo[plugin] = {}
    value = memo.get(key)
    if value is None:
        if len(memo) >= MEMO_LIMIT:
            memo.clear()
        value = memo[key] = compute(ni)
    return value


class _FilterState:
    __slots__ = ("affinity", "anti_affinity", "affinity_counts", "anti_counts", "existing_anti",
                 "self_match")

    def __init__(self, affinity: tuple[AffinityTerm, ...], anti_affinity: tuple[AffinityTerm, ...],
                 affinity_counts: dict[Pair, int], anti_counts: dict[Pair, int],
                 existing_anti: dict[str, set[str]], self_match: bool) -> None:
        self.affinity = affinity
        self.anti_affinity = anti_affinity
        self.affinity_counts = affinity_counts
        self.anti_counts = anti_counts
        self.existing_anti = existing_anti
        """topology key -> the values of domains where an existing pod's anti-affinity selects the pod."""
        self.self_match = self_match


class InterPodAffinity:
    name = NAME

    def __init__(self, args: Any = None, handle: Handle | None = None) -> None:
        self.handle = handle
        self.hard_pod_affinity_weight = int(getattr(args, "hard_pod_affinity_weight", 1))
        self.ignore_preferred_terms_of_existing_pods = bool(
            getattr(args, "ignore_preferred_terms_of_existing_pods", False))

    # --- helpers ------------------------------------------------------------------

    def _namespaces(self) -> list[dict[str, Any]]:
        return self.handle.store("namespaces").list() if self.handle is not None else []

    def _namespace_labels(self, namespace: str) -> dict[str, str]:
        if self.handle is None:
            return {}
        ns = self.handle.store("namespaces").get(namespace)
        return ((ns or {}).get("metadata") or {}).get("labels") or {}

    # --- Filter -------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        terms = pod_terms(pod)
        if terms.errors:
            return unresolvable("parsing pod: " + "; ".join(terms.errors))

        existing_anti = self._existing_anti_affinity(pod, snapshot.have_pods_with_required_anti_affinity())
        if not terms.has_required and not existing_anti:
            return SKIP

        affinity = anti = ()
        affinity_counts: dict[Pair, int] = {}
        anti_counts: dict[Pair, int] = {}
        if terms.has_required:
            namespaces = self._namespaces()
            affinity = resolve_namespace_selectors(terms.required_affinity, namespaces)
            anti = resolve_namespace_selectors(terms.required_anti_affinity, namespaces)
            affinity_counts, anti_counts = self._incoming_counts(affinity, anti, snapshot.list())
        state[_FILTER_KEY] = _FilterState(
            affinity, anti, affinity_counts, anti_counts, existing_anti,
            matches_all(affinity, pod.namespace, pod.labels))
        return None

    def _existing_anti_affinity(self, pod: PodInfo, nodes: list[NodeInfo]) -> dict[str, set[str]]:
        """The domains where an existing pod's required anti-affinity term selects ``pod``."""
        if not nodes:
            return {}
        namespace, labels = pod.namespace, pod.labels
        ns_labels = self._namespace_labels(namespace)
        key = ("existing", namespace, frozenset(labels.items()), frozenset(ns_labels.items()))

        def compute(ni: NodeInfo) -> tuple[Pair, ...]:
            out = []
            node_labels = ni.labels
            for existing in ni.pods_with_required_anti_affinity.values():
                for t in pod_terms(existing).required_anti_affinity:
                    if t.matches(namespace, labels, ns_labels):
                        value = node_labels.get(t.topology_key)
                        if value is not None:
                            out.append((t.topology_key, value))
            return tuple(out)

        domains: dict[str, set[str]] = {}
        for ni in nodes:
            for k, v in node_memo(ni, NAME, key, compute):
                domains.setdefault(k, set()).add(v)
        return domains

    def _incoming_counts(self, affinity: tuple[AffinityTerm, ...], anti: tuple[AffinityTerm, ...],
                         nodes: list[NodeInfo]) -> tuple[dict[Pair, int], dict[Pair, int]]:
        """Per domain, the existing pods matching all of ``affinity`` / each term of ``anti``."""
        key = ("incoming", tuple(t.key for t in affinity), tuple(t.key for t in anti))

        def compute(ni: NodeInfo) -> tuple[tuple[Pair, ...], tuple[Pair, ...]]:
            aff_out: list[Pair] = []
            anti_out: list[Pair] = []
            node_labels = ni.labels
            for p in ni.pods.values():
                if affinity and matches_all(affinity, p.namespace, p.labels):
                    for t in affinity:
                        value = node_labels.get(t.topology_key)
                        if value is not None:
                            aff_out.append((t.topology_key, value))
                for t in anti:
                    if t.matches(p.namespace, p.labels, None):
                        value = node_labels.get(t.topology_key)
                        if value is not None:
                            anti_out.append((t.topology_key, value))
            return tuple(aff_out), tuple(anti_out)

        affinity_counts: dict[Pair, int] = {}
        anti_counts: dict[Pair, int] = {}
        for ni in nodes:
            aff_pairs, anti_pairs = node_memo(ni, NAME, key, compute)
            for pair in aff_pairs:
                affinity_counts[pair] = affinity_counts.get(pair, 0) + 1
            for pair in anti_pairs:
                anti_counts[pair] = anti_counts.get(pair, 0) + 1
        return affinity_counts, anti_counts

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        s: _FilterState | None = state.get(_FILTER_KEY)
        if s is None:
            return None
        labels = node.labels
        if s.affinity:
            found = True
            counts = s.affinity_counts
            for t in s.affinity:
                value = labels.get(t.topology_key)
                if value is None:  # every topology key must be on the node, first pod or not
                    return unresolvable(ERR_AFFINITY)
                if counts.get((t.topology_key, value), 0) <= 0:
                    found = False
            if not found and not (not counts and s.self_match):
                return unresolvable(ERR_AFFINITY)
        if s.anti_counts:
            for t in s.anti_affinity:
                value = labels.get(t.topology_key)
                if value is not None and s.anti_counts.get((t.topology_key, value), 0) > 0:
                    return unschedulable(ERR_ANTI_AFFINITY)
        for key, values in s.existing_anti.items():
            value = labels.get(key)
            if value is not None and value in values:
                return unschedulable(ERR_EXISTING_ANTI_AFFINITY)
        return None

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
        scores: dict[str, dict[str, int]] = {}
        self._score_existing_terms(pod, snapshot.have_pods_with_affinity(), scores)
        if has_constraints:
            namespaces = self._namespaces()
            preferred = (resolve_namespace_selectors(terms.preferred_affinity, namespaces),
                         resolve_namespace_selectors(terms.preferred_anti_affinity, namespaces))
            self._score_incoming_terms(*preferred, snapshot.list(), scores)
        if not scores:
            return SKIP
        state[_SCORE_KEY] = scores
        return None

    def _score_existing_terms(self, pod: PodInfo, nodes: list[NodeInfo],
                              scores: dict[str, dict[str, int]]) -> None:
        """The existing pods' terms that select the incoming pod, by domain."""
        if not nodes:
            return
        namespace, labels = pod.namespace, pod.labels
        ns_labels = self._namespace_labels(namespace)
        hard_weight = self.hard_pod_affinity_weight
        # Profiles share the NodeInfos, and may weigh required terms differently.
        key = ("score-existing", hard_weight, namespace, frozenset(labels.items()),
               frozenset(ns_labels.items()))

        def compute(ni: NodeInfo) -> tuple[tuple[str, str, int], ...]:
            out = []
            node_labels = ni.labels
            if not node_labels:
                return ()

            def add(t: AffinityTerm, weight: int) -> None:
                value = node_labels.get(t.topology_key)
                if value is not None and t.matches(namespace, labels, ns_labels):
                    out.append((t.topology_key, value, weight))

            for existing in ni.pods_with_affinity.values():
                et = pod_terms(existing)
                if hard_weight > 0:
                    for t in et.required_affinity:
                        add(t, hard_weight)
                for t in et.preferred_affinity:
                    add(t, t.weight)
                for t in et.preferred_anti_affinity:
                    add(t, -t.weight)
            return tuple(out)

        for ni in nodes:
            for k, v, w in node_memo(ni, NAME, key, compute):
                by_value = scores.setdefault(k, {})
                by_value[v] = by_value.get(v, 0) + w

    def _score_incoming_terms(self, affinity: tuple[AffinityTerm, ...], anti: tuple[AffinityTerm, ...],
                              nodes: list[NodeInfo], scores: dict[str, dict[str, int]]) -> None:
        """The incoming pod's preferred terms matched by existing pods, by domain."""
        key = ("score-incoming", tuple(t.key for t in affinity), tuple(t.key for t in anti))
        weighted = [(t, t.weight) for t in affinity] + [(t, -t.weight) for t in anti]

        def compute(ni: NodeInfo) -> dict[Pair, int]:
            out: dict[Pair, int] = {}
            node_labels = ni.labels
            for t, weight in weighted:
                value = node_labels.get(t.topology_key)
                if value is None:
                    continue
                n = sum(1 for p in ni.pods.values() if t.matches(p.namespace, p.labels, None))
                if n:
                    pair = (t.topology_key, value)
                    out[pair] = out.get(pair, 0) + n * weight
            return out

        for ni in nodes:
            for (k, v), w in node_memo(ni, NAME, key, compute).items():
                by_value = scores.setdefault(k, {})
                by_value[v] = by_value.get(v, 0) + w

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        scores: dict[str, dict[str, int]] = state[_SCORE_KEY]
        labels = node.labels
        total = 0
        for key, by_value in scores.items():
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
