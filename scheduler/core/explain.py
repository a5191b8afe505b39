"""Why a pod goes where it goes: one scheduling cycle with every verdict kept.

:func:`explain` runs a profile for a pod over a snapshot like
``Profile.schedule`` does, and records what the cycle otherwise throws
away: which PreFilter plugins skipped or narrowed the nodes, each Filter
plugin's verdict on each node (all of them, not only the first rejection),
each Score plugin's raw, normalized and weighted score on each feasible
node, the totals, and the nodes with the best total. A plugin with an
``explain_node(state, pod, node)`` method adds what it read about the node
(Dynamic: the metric values, their age, the hot value; DynamicResources: each
claim's verdict).

Filters and scores run one plugin over the list of nodes at a time, as in a cycle. It
differs from a real cycle on purpose: every node is evaluated (no
``percentageOfNodesToScore`` sampling, no resuming from the last search),
a single feasible node is scored too, ties are reported instead of broken
at random, and pods nominated to nodes are not counted. With fewer than 100
nodes, the first two make no difference. It only reads: nothing is assumed
or reserved.

Used by ``dynamic-scheduler explain`` and by shadow mode, which judges the
active scheduler's binds against it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from scheduler.core.breakdown import Breakdown, largest_lead
from scheduler.core.filtering import FitError, SchedulingError, filter_nodes_of
from scheduler.core.framework import Code, CycleState, Snapshot, Status, unresolvable
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.core.profile import Profile
from scheduler.logs import kv

logger = logging.getLogger(__name__)

SUCCESS = "Success"
RELAXED = "Relaxed"
"""The code of a relaxable plugin's rejection that a relaxed pass waived (``relaxed_pass``)."""


def code_name(code: Code) -> str:
    """``UNSCHEDULABLE_AND_UNRESOLVABLE`` -> ``UnschedulableAndUnresolvable``, as kube-scheduler prints codes."""
    return code.name.title().replace("_", "")


@dataclass(frozen=True, slots=True)
class Verdict:
    """One plugin's answer at one extension point."""

    plugin: str
    code: str
    """``Success``, ``Skip``, ``Unschedulable``, ``UnschedulableAndUnresolvable`` or ``Error``."""
    message: str = ""
    status: Status | None = field(default=None, compare=False, repr=False)
    """The plugin's own answer (None for success and skip), for the FitError of a pod that fits
    nowhere."""

    @property
    def rejected(self) -> bool:
        return self.code not in (SUCCESS, "Skip", RELAXED)

    @classmethod
    def of(cls, plugin: str, st: Status | None) -> Verdict:
        if st is None:
            return cls(plugin, SUCCESS)
        return cls(plugin, code_name(st.code), st.message(), st)


@dataclass(frozen=True, slots=True)
class PluginScore:
    plugin: str
    weight: int
    raw: int
    normalized: int

    @property
    def weighted(self) -> int:
        return self.normalized * self.weight


@dataclass(slots=True)
class NodeExplanation:
    node: str
    filters: list[Verdict] = field(default_factory=list)
    scores: list[PluginScore] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    """Per plugin, what it read about the node (its ``explain_node``)."""

    @property
    def rejection(self) -> Verdict | None:
        """The first filter that rejected the node: the one a real cycle stops at."""
        return next((v for v in self.filters if v.rejected), None)

    @property
    def feasible(self) -> bool:
        return self.rejection is None

    @property
    def total(self) -> int | None:
        return sum(s.weighted for s in self.scores) if self.feasible else None

    def score_of(self, plugin: str) -> PluginScore | None:
        return next((s for s in self.scores if s.plugin == plugin), None)


@dataclass(slots=True)
class Explanation:
    pod: str
    profile: str
    pre_filter: list[Verdict]
    nodes: list[NodeExplanation]
    """Every node of the snapshot, by name."""
    best: list[str]
    """The feasible nodes with the highest total (more than one: a tie, broken at random)."""
    skipped_scores: list[str] = field(default_factory=list)
    """Score plugins whose PreScore returned SKIP: they scored no node."""
    message: str = ""
    """When no node fits: the FailedScheduling message kube-scheduler would write."""
    scored: list[str] = field(default_factory=list)
    """The feasible nodes in the order of ``breakdown``'s score lists."""
    breakdown: Breakdown = field(default_factory=list)
    """The cycle's score breakdown (``Profile.score``)."""
    relaxed: list[str] = field(default_factory=list)
    """The plugins whose filter was relaxed because no node passed every filter."""
    unrelaxed_message: str = ""
    """Then: what FailedScheduling would have said without relaxing them."""

    def node(self, name: str) -> NodeExplanation | None:
        return next((n for n in self.nodes if n.node == name), None)

    @property
    def feasible(self) -> list[NodeExplanation]:
        return [n for n in self.nodes if n.feasible]

    def deciding_plugin(self, winner: str, other: str) -> tuple[str, int] | None:
        """The score plugin that gave ``winner`` its largest lead over ``other`` (weighted
        points), when both are feasible."""
        if winner not in self.scored or other not in self.scored:
            return None
        return largest_lead(self.breakdown, self.scored.index(winner), self.scored.index(other))

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "profile": self.profile,
            "preFilter": [_verdict_dict(v) for v in self.pre_filter],
            "nodes": [
                {
                    "name": n.node,
                    "feasible": n.feasible,
                    "filters": [_verdict_dict(v) for v in n.filters],
                    "scores": [
                        {
                            "plugin": s.plugin,
                            "raw": s.raw,
                            "normalized": s.normalized,
                            "weight": s.weight,
                            "weighted": s.weighted,
                        }
                        for s in n.scores
                    ],
                    "total": n.total,
                    **({"details": n.details} if n.details else {}),
                }
                for n in self.nodes
            ],
            "best": self.best,
            **({"skippedScores": self.skipped_scores} if self.skipped_scores else {}),
            **({"message": self.message} if self.message else {}),
            **({"relaxed": self.relaxed, "unrelaxedMessage": self.unrelaxed_message} if self.relaxed else {}),
        }


def _verdict_dict(v: Verdict) -> dict[str, str]:
    out = {"plugin": v.plugin, "code": v.code}
    if v.message:
        out["message"] = v.message
    return out


def explain(profile: Profile, pod: PodInfo, snapshot: Snapshot) -> Explanation:
    """Run ``profile`` for ``pod`` on ``snapshot`` and keep every verdict (see the module doc).

    Hold the snapshot's lock (the cache's) around the call, as a cycle does. Raises
    SchedulingError when a plugin fails, as a cycle would."""
    state = CycleState()
    all_nodes = sorted(snapshot.list(), key=lambda ni: ni.name)
    out = Explanation(pod.key, profile.name, [], [NodeExplanation(ni.name) for ni in all_nodes], [])
    try:
        skip, allowed = profile.run_pre_filter(state, pod, snapshot, len(all_nodes))
    except FitError as e:
        assert e.pre_filter is not None
        plugin, rejected = e.pre_filter
        out.pre_filter.append(Verdict.of(plugin, rejected))
        for n in out.nodes:
            n.filters.append(Verdict.of(plugin, rejected))
        out.message = e.message()
        return out
    state.skip_filter = frozenset(skip)
    out.pre_filter.extend(Verdict(p.name, "Skip") for p in profile.pre_filters if p.name in skip)
    if allowed is not None:
        names, plugins = allowed
        excluded = Verdict.of(
            sorted(plugins)[0],
            unresolvable(f"node(s) didn't satisfy plugin(s) [{', '.join(sorted(plugins))}]"),
        )
        out.pre_filter.append(
            Verdict(", ".join(sorted(plugins)), SUCCESS, f"only node(s) {', '.join(sorted(names))}")
        )
    else:
        names, excluded = frozenset(), None

    by_name = {n.node: n for n in out.nodes}
    candidates = [ni for ni in all_nodes if excluded is None or ni.name in names]
    for ni in all_nodes:
        if excluded is not None and ni.name not in names:
            by_name[ni.name].filters.append(excluded)
    # One plugin over the list at a time, as a cycle filters (filter_nodes where a plugin has
    # it), every plugin over every candidate.
    for p in profile.filters:
        if p.name in skip or not candidates:
            continue
        for ni, st in zip(candidates, _filter_nodes(p, state, pod, candidates), strict=True):
            by_name[ni.name].filters.append(Verdict.of(p.name, st))
    feasible = [ni for ni in candidates if by_name[ni.name].feasible]
    if not feasible:
        feasible = _relax(profile, state, pod, candidates, by_name, out, len(all_nodes))
    for ni in candidates:
        _details(profile, state, pod, ni, by_name[ni.name])

    if not feasible:
        statuses = _statuses(out.nodes)
        out.message = FitError(len(all_nodes), statuses).message()
        return out

    breakdown = out.breakdown
    out.scored = [ni.name for ni in feasible]
    profile.score(state, pod, feasible, breakdown)
    for plugin, weight, raw, normalized in breakdown:
        if not raw:
            out.skipped_scores.append(plugin)
            continue
        for ni, r, s in zip(feasible, raw, normalized, strict=True):
            by_name[ni.name].scores.append(PluginScore(plugin, weight, r, s))
    totals = {ni.name: by_name[ni.name].total or 0 for ni in feasible}
    top = max(totals.values())
    out.best = [name for name, t in totals.items() if t == top]
    return out


def _passing(
    profile: Profile,
    state: CycleState,
    pod: PodInfo,
    nodes: list[NodeInfo],
    skip: set[str],
    statuses: dict[str, tuple[str, Status]],
) -> list[NodeInfo]:
    """The nodes that pass every filter; the others' first rejection goes to ``statuses``."""
    for p in profile.filters:
        if p.name in skip or not nodes:
            continue
        kept = []
        for ni, result in zip(nodes, _filter_nodes(p, state, pod, nodes), strict=True):
            if result is None:
                kept.append(ni)
            else:
                statuses[ni.name] = (p.name, result)
        nodes = kept
    return nodes


def _statuses(nodes: list[NodeExplanation]) -> dict[str, tuple[str, Status]]:
    return {
        n.node: (rej.plugin, rej.status)
        for n in nodes
        if (rej := n.rejection) is not None and rej.status is not None
    }


def _relax(
    profile: Profile,
    state: CycleState,
    pod: PodInfo,
    candidates: list[NodeInfo],
    by_name: dict[str, NodeExplanation],
    out: Explanation,
    num_all_nodes: int,
) -> list[NodeInfo]:
    """No node passed every filter: the relaxed pass of ``Profile.relaxed_pass``, where a
    relaxable plugin had rejected nodes. Its verdicts are asked again with ``state.relaxed``;
    a rejection the relaxed pass waives stays listed, as ``Relaxed``. The feasible nodes then."""
    rejected_by = {rej.plugin for n in out.nodes if (rej := n.rejection) is not None}
    relaxed = sorted(rejected_by & profile.relaxable)
    if not relaxed:
        return []
    out.relaxed = relaxed
    out.unrelaxed_message = FitError(num_all_nodes, _statuses(out.nodes)).message()
    state.relaxed = True
    for p in profile.filters:
        if p.name not in relaxed:
            continue
        for ni, st in zip(candidates, _filter_nodes(p, state, pod, candidates), strict=True):
            verdicts = by_name[ni.name].filters
            i = next(i for i, v in enumerate(verdicts) if v.plugin == p.name)
            if st is None and verdicts[i].rejected:
                verdicts[i] = Verdict(p.name, RELAXED, verdicts[i].message, verdicts[i].status)
    return [ni for ni in candidates if by_name[ni.name].feasible]


def _filter_nodes(p: Any, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[Status | None]:
    try:
        results = filter_nodes_of(p)(state, pod, nodes)
    except Exception as e:  # a plugin bug: reported as the cycle would
        logger.exception("Filter plugin failed", extra=kv(plugin=p.name, pod=pod.key))
        raise SchedulingError(p.name, str(e)) from e
    if results is None:
        return [None] * len(nodes)
    for st in results:
        if st is not None and st.code == Code.ERROR:
            raise SchedulingError(p.name, st.message())
    return list(results)


def _details(profile: Profile, state: CycleState, pod: PodInfo, ni: NodeInfo, n: NodeExplanation) -> None:
    for p in profile.plugins.values():
        describe = getattr(p, "explain_node", None)
        if callable(describe):
            details = describe(state, pod, ni)
            if details is not None:
                n.details[p.name] = details


# --- the shadow's question, at a cycle's cost ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Comparison:
    """Where ours would put a pod, against one node (the active scheduler's choice)."""

    best: list[str]
    """The feasible nodes with the highest total ([] when none fits)."""
    best_total: int | None
    total: int | None
    """Ours' total on the node compared (None: ours refuses it, or does not know it)."""
    rejection: Verdict | None
    """The filter (or PreFilter) that refuses the node compared."""
    lead: tuple[str, int] | None
    """The score plugin with the best node's largest weighted lead over the node compared."""
    message: str = ""
    """When no node fits: the FailedScheduling message."""
    known: bool = True
    """Whether the node compared is in the snapshot."""
    relaxed: tuple[str, ...] = ()
    """The plugins whose filter ours relaxed, as no node passed every filter."""


def compare(profile: Profile, pod: PodInfo, snapshot: Snapshot, node: str) -> Comparison:
    """What :func:`explain` concludes about ``node`` and the best nodes, without keeping every
    verdict: filters stop at a node's first rejection and only the totals are kept, so that
    judging a bind costs about a scheduling cycle over every node (shadow mode)."""
    state = CycleState()
    all_nodes = snapshot.list()
    known = snapshot.get(node) is not None
    try:
        skip, allowed = profile.run_pre_filter(state, pod, snapshot, len(all_nodes))
    except FitError as e:
        assert e.pre_filter is not None
        return Comparison([], None, None, Verdict.of(*e.pre_filter), None, e.message(), known)
    state.skip_filter = frozenset(skip)
    statuses: dict[str, tuple[str, Status]] = {}
    remaining = all_nodes
    if allowed is not None:
        names, plugins = allowed
        st = Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            (f"node(s) didn't satisfy plugin(s) [{', '.join(sorted(plugins))}]",),
        )
        remaining = [ni for ni in all_nodes if ni.name in names]
        statuses = {ni.name: (sorted(plugins)[0], st) for ni in all_nodes if ni.name not in names}
    candidates = remaining
    remaining = _passing(profile, state, pod, candidates, skip, statuses)
    relaxed: tuple[str, ...] = ()
    if not remaining:
        relaxed = tuple(sorted({p for p, _ in statuses.values()} & profile.relaxable))
    if relaxed:  # as Profile.relaxed_pass
        state.relaxed = True
        evaluated = {ni.name for ni in candidates}
        statuses = {name: entry for name, entry in statuses.items() if name not in evaluated}
        remaining = _passing(profile, state, pod, candidates, skip, statuses)
    refused = statuses.get(node)
    rejection = Verdict.of(refused[0], refused[1]) if refused is not None else None
    if not remaining:
        return Comparison(
            [], None, None, rejection, None, FitError(len(all_nodes), statuses).message(), known
        )
    breakdown: list[tuple[str, int, list[int], list[int]]] = []
    totals = profile.score(state, pod, remaining, breakdown)
    top = max(totals)
    best_at = [i for i, t in enumerate(totals) if t == top]
    at = next((i for i, ni in enumerate(remaining) if ni.name == node), None)
    lead = largest_lead(breakdown, best_at[0], at) if at is not None and at not in best_at else None
    return Comparison(
        [remaining[i].name for i in best_at],
        top,
        totals[at] if at is not None else None,
        rejection,
        lead,
        known=known,
        relaxed=relaxed,
    )
