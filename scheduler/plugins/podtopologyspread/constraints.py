"""PodTopologySpread's constraints and what each node counts toward them.

kube-scheduler's ``podtopologyspread/common.go``: :func:`parse_constraints`
reads a pod's own ``topologySpreadConstraints`` (or gives it the profile's
default constraints, spreading by :func:`default_selector`), and
:func:`node_entries` what each node contributes to the counts of Filter and
Score: the matching pods on it, and its domain for each constraint whose node
inclusion policies admit it. The entries are memoized per node and pod shape
(:mod:`scheduler.plugins.topologycounts`), so the next pod of a workload only
recounts the nodes that changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.interpodaffinity.terms import selector_key
from scheduler.plugins.labelrequirements import SelectorError
from scheduler.plugins.labelselector import EVERYTHING, NOTHING, LabelSelector, compile_label_selector
from scheduler.plugins.nodeselector import RequiredNodeAffinity, required_node_affinity
from scheduler.plugins.taints import find_untolerated_taint
from scheduler.plugins.topologycounts import Part, memo_entries, shape_id

NAME = "PodTopologySpread"

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"
SYSTEM_DEFAULT_CONSTRAINTS: tuple[dict[str, Any], ...] = (
    {"maxSkew": 3, "topologyKey": HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY},
    {"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY},
)
DEFAULT_SELECTOR_OWNERS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
PER_POD_LABELS = frozenset(
    {"controller-revision-hash", "statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index"}
)
"""Labels a StatefulSet sets per pod or per revision: never part of its selector."""


@dataclass(eq=False, repr=False, slots=True)
class Constraint:
    """A parsed ``TopologySpreadConstraint`` (``topologySpreadConstraint``)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    honor_affinity: bool = True
    honor_taints: bool = False
    key: tuple[Any, ...] = field(init=False)
    """What a node's contribution depends on (besides the pod's namespace and node affinity)."""

    def __post_init__(self) -> None:
        self.key = (self.topology_key, selector_key(self.selector), self.honor_affinity, self.honor_taints)

    def __repr__(self) -> str:
        return (
            f"Constraint({self.topology_key!r}, maxSkew={self.max_skew}, minDomains={self.min_domains}, "
            f"selector={self.selector!r})"
        )

    def includes(
        self, node: NodeInfo, affinity: RequiredNodeAffinity, tolerations: Iterable[Mapping[str, Any]]
    ) -> bool:
        """``matchNodeInclusionPolicies``: whether the pods on ``node`` count toward this constraint,
        for a pod with this required node ``affinity`` and these ``tolerations``."""
        if self.honor_affinity and not affinity.empty and not affinity.matches(node.labels, node.name):
            return False  # nodeAffinityPolicy: Honor
        # nodeTaintsPolicy: Honor
        return not (
            self.honor_taints and node.taints and find_untolerated_taint(node.taints, tolerations) is not None
        )


def raw_constraint(c: Any) -> Mapping[str, Any]:
    """A default constraint as an API dict: configuration gives dataclasses, tests may give dicts."""
    if isinstance(c, Mapping):
        return c
    return {
        "maxSkew": c.max_skew,
        "topologyKey": c.topology_key,
        "whenUnsatisfiable": c.when_unsatisfiable,
        "nodeAffinityPolicy": getattr(c, "node_affinity_policy", None),
        "nodeTaintsPolicy": getattr(c, "node_taints_policy", None),
    }


def _parse(raw: Mapping[str, Any], selector: LabelSelector) -> Constraint:
    return Constraint(
        int(raw.get("maxSkew") or 1),
        raw.get("topologyKey") or "",
        selector,
        int(raw.get("minDomains") or 1),
        (raw.get("nodeAffinityPolicy") or "Honor") == "Honor",
        (raw.get("nodeTaintsPolicy") or "Ignore") == "Honor",
    )


def _pod_selector(raw: Mapping[str, Any], labels: Mapping[str, str]) -> LabelSelector:
    """``labelSelector`` with ``key In (value)`` for each ``matchLabelKeys`` key the pod carries."""
    selector = raw.get("labelSelector")
    if selector is None:
        return NOTHING
    extra = [
        {"key": k, "operator": "In", "values": [labels[k]]}
        for k in raw.get("matchLabelKeys") or ()
        if k in labels
    ]
    if extra:
        selector = {**selector, "matchExpressions": [*(selector.get("matchExpressions") or ()), *extra]}
    return compile_label_selector(selector, strict=True)


def default_selector(pod: PodInfo) -> LabelSelector | None:
    """The selector default constraints spread by, or None when the pod gets none.

    See the deviation in :mod:`scheduler.plugins.podtopologyspread.plugin`'s module doc.
    """
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


@dataclass(eq=False, slots=True)
class PodConstraints:
    """A pod's constraints, split by ``whenUnsatisfiable``."""

    hard: tuple[Constraint, ...] = ()
    soft: tuple[Constraint, ...] = ()
    own: bool = False
    """The pod has constraints of its own (not defaults)."""
    error: str = ""


def parse_constraints(pod: PodInfo, defaults: Sequence[Mapping[str, Any]]) -> PodConstraints:
    """``getConstraints``: the pod's own constraints, or else the ``defaults`` spreading by
    :func:`default_selector`."""
    own = pod.spec.get("topologySpreadConstraints") or ()
    if own:
        hard: list[Constraint] = []
        soft: list[Constraint] = []
        try:
            for raw in own:
                c = _parse(raw, _pod_selector(raw, pod.labels))
                (hard if raw.get("whenUnsatisfiable") == DO_NOT_SCHEDULE else soft).append(c)
        except SelectorError as e:
            return PodConstraints(own=True, error=str(e))
        return PodConstraints(tuple(hard), tuple(soft), own=True)
    if not defaults:
        return PodConstraints()
    selector = default_selector(pod)
    if selector is None:
        return PodConstraints()
    return PodConstraints(
        tuple(_parse(c, selector) for c in defaults if c.get("whenUnsatisfiable") == DO_NOT_SCHEDULE),
        tuple(_parse(c, selector) for c in defaults if c.get("whenUnsatisfiable") == SCHEDULE_ANYWAY),
    )


class NodeEntry:
    """One node's part in a pod's spreading: the memo entry of its shape."""

    __slots__ = ("counts", "filter_part", "score_part", "score_part_all_keys")

    def __init__(
        self,
        all_keys: bool,
        counts: tuple[int, ...],
        domains: tuple[tuple[int, str, int], ...],
        per_node: tuple[bool, ...],
    ) -> None:
        self.counts = counts
        """Per constraint, the matching pods on the node."""
        # ``domains``: (constraint index, domain, matching pods) for the constraints whose inclusion
        # policies admit the node; the domain is "" when the node lacks the key.
        self.filter_part: Part = domains if all_keys else ()
        """Filter counts only nodes with every key, and needs the domains without pods too."""
        self.score_part: Part = tuple(d for d in domains if d[2] and not per_node[d[0]])
        """Score sums pods by domain (hostname counts are read per node)."""
        self.score_part_all_keys: Part = self.score_part if all_keys else ()


def _count(ni: NodeInfo, namespace: str, selector: LabelSelector) -> int:
    """``countPodsMatchSelector``: an empty selector counts nothing, nor do pods going away."""
    if selector is NOTHING or selector is EVERYTHING:
        return 0
    n = 0
    for p in ni.pods.values():
        if p.namespace == namespace and not p.deleting and not p.terminal and selector.matches(p.labels):
            n += 1
    return n


def pod_shape(pod: PodInfo, constraints: tuple[Constraint, ...]) -> int:
    """Everything a node's contribution depends on, as the id of its memo entries."""
    affinity = tolerations = None
    if any(c.honor_affinity for c in constraints) and not required_node_affinity(pod).empty:
        spec = pod.spec
        affinity = json.dumps(
            [
                spec.get("nodeSelector"),
                ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
                    "requiredDuringSchedulingIgnoredDuringExecution"
                ),
            ],
            sort_keys=True,
        )
    if any(c.honor_taints for c in constraints):
        tolerations = json.dumps(pod.spec.get("tolerations") or [], sort_keys=True)
    return shape_id((NAME, pod.namespace, tuple(c.key for c in constraints), affinity, tolerations))


def node_entries(
    pod: PodInfo, constraints: tuple[Constraint, ...], shape: int, nodes: Sequence[NodeInfo]
) -> list[NodeEntry]:
    """What each node contributes to the counts (memoized per node and pod ``shape``)."""
    namespace = pod.namespace
    rna = required_node_affinity(pod)
    tolerations = pod.spec.get("tolerations") or ()
    per_node = tuple(c.topology_key == HOSTNAME for c in constraints)

    def compute(ni: NodeInfo) -> NodeEntry:
        labels = ni.labels
        counts = []
        domains: list[tuple[int, str, int]] = []
        for i, c in enumerate(constraints):
            n = _count(ni, namespace, c.selector)
            counts.append(n)
            if c.includes(ni, rna, tolerations):
                domains.append((i, labels.get(c.topology_key, ""), n))
        return NodeEntry(
            all(c.topology_key in labels for c in constraints), tuple(counts), tuple(domains), per_node
        )

    return memo_entries(nodes, NAME, shape, compute)
