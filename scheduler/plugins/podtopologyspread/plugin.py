"""PodTopologySpread: spread a workload's pods evenly over topology domains.

Semantics are kube-scheduler's (``pkg/scheduler/framework/plugins/podtopologyspread``):

* A constraint counts, per domain (value of ``topologyKey``), the pods in the
  incoming pod's namespace that its ``labelSelector`` selects (with
  ``matchLabelKeys`` folded in), skipping pods being deleted or finished.
  Only nodes that carry every constraint's key and pass the constraint's node
  inclusion policies count: ``nodeAffinityPolicy`` (default Honor: the pod's
  nodeSelector and required node affinity) and ``nodeTaintsPolicy`` (default
  Ignore; Honor: the pod must tolerate the NoSchedule/NoExecute taints).
* Filter (``whenUnsatisfiable: DoNotSchedule``): on the node's domain,
  ``matching + (1 if the pod matches itself) - global minimum <= maxSkew``,
  where the global minimum is 0 while fewer than ``minDomains`` domains exist.
  A node lacking a key is rejected as unresolvable.
* Score (``ScheduleAnyway``): fewer matching pods in the node's domain score
  higher, each constraint weighted by log(number of domains + 2).
* A pod with no constraints of its own gets the profile's default
  constraints: with ``defaultingType: System`` hostname maxSkew 3 and zone
  maxSkew 5, both ScheduleAnyway.

Deviation: kube-scheduler applies default constraints only to pods selected
by a Service, ReplicaSet, StatefulSet or ReplicationController, and spreads
by those objects' selectors. This scheduler does not watch them; it applies
default constraints to pods whose controller owner is a ReplicaSet,
StatefulSet or ReplicationController, and uses the pod's own labels (minus
the labels its controller sets per pod or per revision) as the selector.
Pods selected only by a Service get no default spreading.

This module holds Filter and Score; parsing the constraints and counting
what each node contributes to them is in
:mod:`scheduler.plugins.podtopologyspread.constraints`.

Cost: the per-node counts are memoized on the NodeInfo per pod shape
(namespace, constraints, node affinity, tolerations), so each cycle of a
workload only recounts the nodes that changed since the last one.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Hashable
from typing import Any

from scheduler.core.framework import (
    MAX_NODE_SCORE,
    SKIP,
    CycleState,
    Handle,
    Snapshot,
    Status,
    error,
    filter_each,
    unresolvable,
    unschedulable,
)
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.logs import V, kv
from scheduler.plugins.labelselector import EVERYTHING, NOTHING
from scheduler.plugins.nodeselector import required_node_affinity
from scheduler.plugins.podtopologyspread.constraints import (
    HOSTNAME,
    NAME,
    SYSTEM_DEFAULT_CONSTRAINTS,
    Constraint,
    PodConstraints,
    node_entries,
    parse_constraints,
    pod_shape,
    raw_constraint,
)
from scheduler.plugins.topologycounts import SumsCache

logger = logging.getLogger(__name__)

ERR_CONSTRAINTS = "node(s) didn't match pod topology spread constraints"
ERR_MISSING_LABEL = ERR_CONSTRAINTS + " (missing required label)"

# One Status per reason (it is frozen): a cycle rejects most nodes for the same one.
_MISSING_LABEL = unresolvable(ERR_MISSING_LABEL)
_SKEWED = unschedulable(ERR_CONSTRAINTS)

_FILTER_KEY = NAME + "/filter"
_SCORE_KEY = NAME + "/score"
_instances = itertools.count()


class _FilterState:
    __slots__ = ("constraints", "counts", "minimums", "self_match", "own")

    def __init__(
        self,
        constraints: tuple[Constraint, ...],
        counts: list[dict[Hashable, int]],
        minimums: list[int],
        self_match: list[int],
        own: bool = False,
    ) -> None:
        self.constraints = constraints
        self.counts = counts
        """Per constraint, matching pods per domain; in PreFilter's state these are the
        plugin's running sums, shared across cycles: only a clone's may change."""
        self.minimums = minimums
        self.self_match = self_match
        self.own = own

    def clone(self) -> _FilterState:
        return _FilterState(
            self.constraints, [dict(c) for c in self.counts], list(self.minimums), self.self_match, True
        )

    def update(self, i: int, domain: str, delta: int) -> None:
        if not self.own:
            raise RuntimeError("PodTopologySpread: add_pod/remove_pod on a state that was not cloned")
        counts = self.counts[i]
        counts[domain] = max(0, counts.get(domain, 0) + delta)
        c = self.constraints[i]
        self.minimums[i] = min(counts.values()) if counts and len(counts) >= c.min_domains else 0


class _ScoreState:
    __slots__ = ("scores",)

    def __init__(self, scores: dict[str, int | None]) -> None:
        self.scores = scores
        """Raw score of each filtered node; None for the nodes Score must leave out (missing a key)."""


class PodTopologySpread:
    name = NAME

    def __init__(self, args: Any = None, handle: Handle | None = None) -> None:
        self.handle = handle
        defaulting = getattr(args, "defaulting_type", "System") or "System"
        self.system_defaulted = defaulting == "System"
        raw = (
            SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else getattr(args, "default_constraints", ())
        )
        self.default_constraints = tuple(raw_constraint(c) for c in raw or ())
        self._memo_key = (NAME, next(_instances))  # per instance: profiles may default differently
        self._sums = SumsCache()

    def _constraints(self, pod: PodInfo) -> PodConstraints:
        pc = pod.memo.get(self._memo_key)
        if pc is None:
            pc = pod.memo[self._memo_key] = parse_constraints(pod, self.default_constraints)
        return pc

    # --- Filter -------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        pc = self._constraints(pod)
        if pc.error:
            return error(f"obtaining pod's hard topology spread constraints: {pc.error}")
        constraints = pc.hard
        if not constraints:
            return SKIP
        shape = pod_shape(pod, constraints)
        sums = self._sums.get(("filter", shape))
        sums.refresh(
            snapshot.list(),
            lambda nodes: [e.filter_part for e in node_entries(pod, constraints, shape, nodes)],
        )
        counts = [sums.group(i) for i in range(len(constraints))]
        # The global minimum is 0 while fewer than minDomains domains are eligible.
        minimums = [
            min(d.values()) if d and len(d) >= c.min_domains else 0
            for c, d in zip(constraints, counts, strict=True)
        ]
        self_match = [1 if c.selector.matches(pod.labels) else 0 for c in constraints]
        state[_FILTER_KEY] = _FilterState(constraints, counts, minimums, self_match)
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        s: _FilterState | None = state.get(_FILTER_KEY)
        if s is None:
            return None
        labels = node.labels
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                logger.log(
                    V(5), "Node doesn't have required label", extra=kv(node=node.name, label=c.topology_key)
                )
                return _MISSING_LABEL
            matching = s.counts[i].get(value, 0)
            if matching + s.self_match[i] - s.minimums[i] > c.max_skew:
                if logger.isEnabledFor(V(5)):
                    logger.log(
                        V(5),
                        "Node failed spreadConstraint",
                        extra=kv(
                            node=node.name,
                            topologyKey=c.topology_key,
                            matchNum=matching,
                            selfMatchNum=s.self_match[i],
                            minMatchNum=s.minimums[i],
                            maxSkew=c.max_skew,
                        ),
                    )
                return _SKEWED
        return None

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None] | None:
        """``filter`` over many nodes, a constraint at a time: a node is rejected by the first
        constraint it fails, as ``filter`` does. With -v=5, node by node, to log each."""
        s: _FilterState | None = state.get(_FILTER_KEY)
        if s is None:
            return None
        if logger.isEnabledFor(V(5)):
            return filter_each(self.filter, state, pod, nodes)
        results: list[Status | None] = [None] * len(nodes)
        rejected = False
        for i, c in enumerate(s.constraints):
            key, counts = c.topology_key, s.counts[i]
            # matching + selfMatch - minimum > maxSkew, with the node's terms on one side.
            limit = c.max_skew + s.minimums[i] - s.self_match[i]
            for j, ni in enumerate(nodes):
                if results[j] is None:
                    value = ni.labels.get(key)
                    if value is None:
                        results[j], rejected = _MISSING_LABEL, True
                    elif counts.get(value, 0) > limit:
                        results[j], rejected = _SKEWED, True
        return results if rejected else None

    # --- PreFilterExtensions ------------------------------------------------------

    def add_pod(self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo) -> Status | None:
        self._update_with_pod(state, pod, other, node, 1)
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo) -> Status | None:
        self._update_with_pod(state, pod, other, node, -1)
        return None

    def _update_with_pod(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo, delta: int
    ) -> None:
        """``updateWithPod``: ``other`` counts (or no longer counts) in ``node``'s domains, if
        the node passes the constraints' inclusion policies and ``other`` matches.

        Pods being deleted or finished are skipped, as the counts of PreFilter skip them
        (kube-scheduler's updateWithPod does not, and can then count one pod away twice)."""
        s: _FilterState | None = state.get(_FILTER_KEY)
        if s is None or other.namespace != pod.namespace or node.node is None:
            return
        if other.deleting or other.terminal:
            return
        labels = node.labels
        if not all(c.topology_key in labels for c in s.constraints):
            return
        rna = required_node_affinity(pod)
        tolerations = pod.spec.get("tolerations") or ()
        for i, c in enumerate(s.constraints):
            if c.selector is NOTHING or c.selector is EVERYTHING or not c.selector.matches(other.labels):
                continue  # as countPodsMatchSelector: an empty selector counts nothing
            if c.includes(node, rna, tolerations):
                s.update(i, labels[c.topology_key], delta)

    # --- Score --------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        pc = self._constraints(pod)
        if pc.error:
            return error(f"obtaining pod's soft topology spread constraints: {pc.error}")
        constraints = pc.soft
        if not constraints or self.handle is None:
            return SKIP
        all_nodes = self.handle.snapshot.list()
        if not all_nodes:
            return SKIP
        # Only the system defaults let nodes without a zone label still be spread by hostname.
        require_all = pc.own or not self.system_defaulted
        keys = [c.topology_key for c in constraints]
        labels = [ni.labels for ni in nodes]
        if require_all:
            key_set = frozenset(keys)
            scored = [key_set <= lb.keys() for lb in labels]  # nodes missing a key are left out
        else:
            scored = [True] * len(nodes)
        n_scored = sum(scored)
        # The domains of the scored nodes (hostname: each node is one; its count is read per node).
        domains = [
            None if k == HOSTNAME else {lb.get(k, "") for lb, ok in zip(labels, scored, strict=True) if ok}
            for k in keys
        ]

        shape = pod_shape(pod, constraints)
        sums = self._sums.get(("score", shape, require_all))
        sums.refresh(
            all_nodes,
            lambda ns: [
                e.score_part_all_keys if require_all else e.score_part
                for e in node_entries(pod, constraints, shape, ns)
            ],
        )

        # Score is a lookup: every filtered node's raw score is computed here, one constraint at a time.
        totals = [0.0] * len(nodes)
        entries = None
        for i, (c, k, dom) in enumerate(zip(constraints, keys, domains, strict=True)):
            tolerance = c.max_skew - 1
            if dom is None:
                weight = math.log(n_scored + 2)
                if entries is None:
                    entries = node_entries(pod, constraints, shape, nodes)
                totals = [
                    t + (e.counts[i] * weight + tolerance if k in lb else 0.0)
                    for t, e, lb in zip(totals, entries, labels, strict=True)
                ]
            else:
                weight = math.log(len(dom) + 2)
                matching = sums.group(i)
                # Nodes without the key (only when not every key is required) have no part.
                part: dict[str | None, float] = {v: matching.get(v, 0) * weight + tolerance for v in dom}
                totals = [t + part.get(lb.get(k), 0.0) for t, lb in zip(totals, labels, strict=True)]
        # Go's math.Round for these non-negative scores; None: not scored.
        scores = {
            ni.name: math.floor(t + 0.5) if ok else None
            for ni, t, ok in zip(nodes, totals, scored, strict=True)
        }
        state[_SCORE_KEY] = _ScoreState(scores)
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return state[_SCORE_KEY].scores.get(node.name) or 0

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        """Fewest matching pods scores 100: ``100 * (max + min - score) / max``; unscored nodes 0."""
        raw = state[_SCORE_KEY].scores
        valid = [v for name, v in scores.items() if raw.get(name, 0) is not None]
        lo, hi = min(valid, default=0), max(valid, default=0)
        scores.update(
            {
                name: 0
                if raw.get(name, 0) is None
                else MAX_NODE_SCORE
                if hi == 0
                else MAX_NODE_SCORE * (hi + lo - v) // hi
                for name, v in scores.items()
            }
        )
