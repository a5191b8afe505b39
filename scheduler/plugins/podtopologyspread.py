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

Cost: the per-node counts are memoized on the NodeInfo per pod shape
(namespace, constraints, node affinity, tolerations), so each cycle of a
workload only recounts the nodes that changed since the last one.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from collections.abc import Mapping
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
from scheduler.logs import V, kv
from scheduler.plugins.helpers import (
    EVERYTHING,
    NOTHING,
    LabelSelector,
    SelectorError,
    compile_label_selector,
    find_untolerated_taint,
    required_node_affinity,
)
from scheduler.plugins.interpodaffinity import node_memo
from scheduler.plugins.interpodaffinity_terms import selector_key

logger = logging.getLogger(__name__)

NAME = "PodTopologySpread"
ERR_CONSTRAINTS = "node(s) didn't match pod topology spread constraints"
ERR_MISSING_LABEL = ERR_CONSTRAINTS + " (missing required label)"

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"
SYSTEM_DEFAULT_CONSTRAINTS: tuple[dict[str, Any], ...] = (
    {"maxSkew": 3, "topologyKey": HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY},
    {"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY},
)
DEFAULT_SELECTOR_OWNERS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
PER_POD_LABELS = frozenset({"controller-revision-hash", "statefulset.kubernetes.io/pod-name",
                            "apps.kubernetes.io/pod-index"})
"""Labels a StatefulSet sets per pod or per revision: never part of its selector."""

_FILTER_KEY = NAME + "/filter"
_SCORE_KEY = NAME + "/score"
_instances = itertools.count()


class Constraint:
    """A parsed ``TopologySpreadConstraint`` (``topologySpreadConstraint``)."""

    __slots__ = ("max_skew", "topology_key", "selector", "min_domains", "honor_affinity", "honor_taints", "key")

    def __init__(self, max_skew: int, topology_key: str, selector: LabelSelector, min_domains: int = 1,
                 honor_affinity: bool = True, honor_taints: bool = False) -> None:
        self.max_skew = max_skew
        self.topology_key = topology_key
        self.selector = selector
        self.min_domains = min_domains
        self.honor_affinity = honor_affinity
        self.honor_taints = honor_taints
        self.key = (topology_key, selector_key(selector), honor_affinity, honor_taints)
        """What a node's contribution depends on (besides the pod's namespace and node affinity)."""

    def __repr__(self) -> str:
        return (f"Constraint({self.topology_key!r}, maxSkew={self.max_skew}, minDomains={self.min_domains}, "
                f"selector={self.selector!r})")


def _raw_constraint(c: Any) -> Mapping[str, Any]:
    """A default constraint as an API dict: configuration gives dataclasses, tests may give dicts."""
    if isinstance(c, Mapping):
        return c
    return {"maxSkew": c.max_skew, "topologyKey": c.topology_key, "whenUnsatisfiable": c.when_unsatisfiable,
            "nodeAffinityPolicy": getattr(c, "node_affinity_policy", None),
            "nodeTaintsPolicy": getattr(c, "node_taints_policy", None)}


def _parse(raw: Mapping[str, Any], selector: LabelSelector) -> Constraint:
    return Constraint(int(raw.get("maxSkew") or 1), raw.get("topologyKey") or "", selector,
                      int(raw.get("minDomains") or 1),
                      (raw.get("nodeAffinityPolicy") or "Honor") == "Honor",
                      (raw.get("nodeTaintsPolicy") or "Ignore") == "Honor")


def _pod_selector(raw: Mapping[str, Any], labels: Mapping[str, str]) -> LabelSelector:
    """``labelSelector`` with ``key In (value)`` for each ``matchLabelKeys`` key the pod carries."""
    selector = raw.get("labelSelector")
    if selector is None:
        return NOTHING
    extra = [{"key": k, "operator": "In", "values": [labels[k]]}
             for k in raw.get("matchLabelKeys") or () if k in labels]
    if extra:
        selector = {**selector, "matchExpressions": [*(selector.get("matchExpressions") or ()), *extra]}
    return compile_label_selector(selector, strict=True)


def default_selector(pod: PodInfo) -> LabelSelector | None:
    """The selector default constraints spread by, or None when the pod gets none (see module doc)."""
    owners = pod.pod["metadata"].get("ownerReferences") or ()
    if not any(o.get("controller") and o.get("kind") in DEFAULT_SELECTOR_OWNERS for o in owners):
        return None
    labels = {k: v for k, v in pod.labels.items() if k not in PER_POD_LABELS}
    if not labels:
        return None
    try:
        return compile_label_selector({"matchLabels": labels}, strict=True)
    except SelectorError:  # the API server validates labels: cannot happen
        return None


class _PodConstraints:
    __slots__ = ("hard", "soft", "own", "error")

    def __init__(self, hard: tuple[Constraint, ...] = (), soft: tuple[Constraint, ...] = (),
                 own: bool = False, error: str = "") -> None:
        self.hard = hard
        self.soft = soft
        self.own = own
        """The pod has constraints of its own (not defaults)."""
        self.error = error


class _FilterState:
    __slots__ = ("constraints", "counts", "minimums", "self_match")

    def __init__(self, constraints: tuple[Constraint, ...], counts: list[dict[str, int]],
                 minimums: list[int], self_match: list[int]) -> None:
        self.constraints = constraints
        self.counts = counts
        self.minimums = minimums
        self.self_match = self_match


class _ScoreState:
    __slots__ = ("constraints", "counts", "weights", "ignored", "shape")

    def __init__(self, constraints: tuple[Constraint, ...], counts: list[dict[str, int]],
                 weights: list[float], ignored: set[str], shape: tuple) -> None:
        self.constraints = constraints
        self.counts = counts
        self.weights = weights
        self.ignored = ignored
        self.shape = shape


def _count(ni: NodeInfo, namespace: str, selector: LabelSelector) -> int:
    """``countPodsMatchSelector``: an empty selector counts nothing, nor do pods going away."""
    if selector is NOTHING or selector is EVERYTHING:
        return 0
    n = 0
    for p in ni.pods.values():
        if p.namespace == namespace and not p.deleting and not p.terminal and selector.matches(p.labels):
            n += 1
    return n


class PodTopologySpread:
    name = NAME

    def __init__(self, args: Any = None, handle: Handle | None = None) -> None:
        self.handle = handle
        defaulting = getattr(args, "defaulting_type", "System") or "System"
        self.system_defaulted = defaulting == "System"
        raw = SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else getattr(args, "default_constraints", ())
        self.default_constraints = tuple(_raw_constraint(c) for c in raw or ())
        self._memo_key = (NAME, next(_instances))  # per instance: profiles may default differently

    # --- the pod's constraints ------------------------------------------------------

    def _constraints(self, pod: PodInfo) -> _PodConstraints:
        pc = pod.memo.get(self._memo_key)
        if pc is None:
            pc = pod.memo[self._memo_key] = self._parse_constraints(pod)
        return pc

    def _parse_constraints(self, pod: PodInfo) -> _PodConstraints:
        own = pod.spec.get("topologySpreadConstraints") or ()
        if own:
            hard, soft = [], []
            try:
                for raw in own:
                    c = _parse(raw, _pod_selector(raw, pod.labels))
                    (hard if raw.get("whenUnsatisfiable") == DO_NOT_SCHEDULE else soft).append(c)
            except SelectorError as e:
                return _PodConstraints(own=True, error=str(e))
            return _PodConstraints(tuple(hard), tuple(soft), own=True)
        if not self.default_constraints:
            return _PodConstraints()
        selector = default_selector(pod)
        if selector is None:
            return _PodConstraints()
        hard = tuple(_parse(c, selector) for c in self.default_constraints
                     if c.get("whenUnsatisfiable") == DO_NOT_SCHEDULE)
        soft = tuple(_parse(c, selector) for c in self.default_constraints
                     if c.get("whenUnsatisfiable") == SCHEDULE_ANYWAY)
        return _PodConstraints(hard, soft)

    def _shape(self, pod: PodInfo, constraints: tuple[Constraint, ...]) -> tuple:
        """Everything a node's contribution depends on: the key of its memo entry."""
        affinity = tolerations = None
        if any(c.honor_affinity for c in constraints) and not required_node_affinity(pod).empty:
            spec = pod.spec
            affinity = json.dumps([spec.get("nodeSelector"),
                                   ((spec.get("affinity") or {}).get("nodeAffinity") or {})
                                   .get("requiredDuringSchedulingIgnoredDuringExecution")], sort_keys=True)
        if any(c.honor_taints for c in constraints):
            tolerations = json.dumps(pod.spec.get("tolerations") or [], sort_keys=True)
        return (pod.namespace, tuple(c.key for c in constraints), affinity, tolerations)

    def _node_entries(self, pod: PodInfo, constraints: tuple[Constraint, ...], shape: tuple,
                      nodes: list[NodeInfo]) -> list[tuple[bool, tuple[tuple[str | None, int], ...]]]:
        """Per node: (has every topology key, per constraint (domain or None if excluded, matching pods))."""
        namespace = pod.namespace
        rna = required_node_affinity(pod)
        check_affinity = not rna.empty
        tolerations = pod.spec.get("tolerations") or ()

        def compute(ni: NodeInfo) -> tuple[bool, tuple[tuple[str | None, int], ...]]:
            labels = ni.labels
            items = []
            for c in constraints:
                value: str | None = labels.get(c.topology_key, "")
                if c.honor_affinity and check_affinity and not rna.matches(labels, ni.name):
                    value = None  # nodeAffinityPolicy: Honor
                elif c.honor_taints and ni.taints and find_untolerated_taint(ni.taints, tolerations) is not None:
                    value = None  # nodeTaintsPolicy: Honor
                items.append((value, _count(ni, namespace, c.selector)))
            return all(c.topology_key in labels for c in constraints), tuple(items)

        return [node_memo(ni, NAME, shape, compute) for ni in nodes]

    # --- Filter -------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        pc = self._constraints(pod)
        if pc.error:
            return error(f"obtaining pod's hard topology spread constraints: {pc.error}")
        constraints = pc.hard
        if not constraints:
            return SKIP
        counts: list[dict[str, int]] = [{} for _ in constraints]
        shape = self._shape(pod, constraints)
        for all_keys, items in self._node_entries(pod, constraints, shape, snapshot.list()):
            if not all_keys:
                continue
            for i, (value, n) in enumerate(items):
                if value is not None:
                    by_value = counts[i]
                    by_value[value] = by_value.get(value, 0) + n
        # The global minimum is 0 while fewer than minDomains domains are eligible.
        minimums = [min(d.values()) if d and len(d) >= c.min_domains else 0
                    for c, d in zip(constraints, counts, strict=True)]
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
                logger.log(V(5), "Node doesn't have required label",
                           extra=kv(node=node.name, label=c.topology_key))
                return unresolvable(ERR_MISSING_LABEL)
            matching = s.counts[i].get(value, 0)
            if matching + s.self_match[i] - s.minimums[i] > c.max_skew:
                logger.log(V(5), "Node failed spreadConstraint", extra=kv(
                    node=node.name, topologyKey=c.topology_key, matchNum=matching, selfMatchNum=s.self_match[i],
                    minMatchNum=s.minimums[i], maxSkew=c.max_skew))
                return unschedulable(ERR_CONSTRAINTS)
        return None

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
        ignored: set[str] = set()
        counts: list[dict[str, int]] = [{} for _ in constraints]
        for ni in nodes:
            labels = ni.labels
            if require_all and not all(k in labels for k in keys):
                ignored.add(ni.name)
                continue
            for i, k in enumerate(keys):
                if k != HOSTNAME:  # per-node counts are read in Score
                    counts[i].setdefault(labels.get(k, ""), 0)
        weights = [math.log((len(nodes) - len(ignored) if k == HOSTNAME else len(counts[i])) + 2)
                   for i, k in enumerate(keys)]

        shape = self._shape(pod, constraints)
        for all_keys, items in self._node_entries(pod, constraints, shape, all_nodes):
            if require_all and not all_keys:
                continue
            for i, (value, n) in enumerate(items):
                by_value = counts[i]
                if value is not None and value in by_value:
                    by_value[value] += n
        state[_SCORE_KEY] = _ScoreState(constraints, counts, weights, ignored, shape)
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        s: _ScoreState = state[_SCORE_KEY]
        if node.name in s.ignored:
            return 0
        labels = node.labels
        items = None
        total = 0.0
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                continue
            if c.topology_key == HOSTNAME:
                if items is None:
                    items = self._node_entries(pod, s.constraints, s.shape, [node])[0][1]
                n = items[i][1]
            else:
                n = s.counts[i].get(value, 0)
            total += n * s.weights[i] + (c.max_skew - 1)
        return math.floor(total + 0.5)  # Go's math.Round, for non-negative scores

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        """Fewest matching pods scores 100: ``100 * (max + min - score) / max``; ignored nodes 0."""
        s: _ScoreState = state[_SCORE_KEY]
        ignored = s.ignored
        valid = [v for name, v in scores.items() if name not in ignored]
        lo = min(valid, default=0)
        hi = max(valid, default=0)
        for name, v in scores.items():
            if name in ignored:
                scores[name] = 0
            elif hi == 0:
                scores[name] = MAX_NODE_SCORE
            else:
                scores[name] = MAX_NODE_SCORE * (hi + lo - v) // hi
