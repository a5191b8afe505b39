"""One scheduling profile: its plugins in order, and the algorithm of one cycle.

``Profile.schedule`` is kube-scheduler's ``schedulePod``: PreFilter; a pod
nominated to a node (its preemption made room there) tries that node first,
alone; then Filter over the nodes (:mod:`scheduler.core.filtering`: from
where the previous cycle stopped, until enough fit, nominated pods counted),
PreScore and weighted Score, and the best node, ties broken at random.

Score runs one plugin over the list of feasible nodes at a time
(``score_nodes`` where a plugin has it, else ``score`` in a loop): with a
thousand nodes, a call per node and plugin was a large part of a cycle's
cost in Python.

When no node fits, PostFilter plugins run (``run_post_filter``): the
DefaultPreemption plugin may nominate a node and name the pods to evict.
The profile is also the ``framework.Framework`` those plugins run filters
through.
"""

from __future__ import annotations

import logging
import operator
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from scheduler.core.breakdown import breakdown_wanted, log_top_nodes
from scheduler.core.filtering import (
    Filtering,
    FitError,
    FitStatuses,
    SchedulingError,
)
from scheduler.core.framework import (
    BatchScore,
    Code,
    CycleState,
    FilterPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScoreNormalizer,
    ScorePlugin,
    Snapshot,
    Status,
)
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.nominator import Nominator, nominated_node_name
from scheduler.core.podinfo import PodInfo
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

_BY_LIST, _BY_NAME = "list", "name"
"""How a score plugin normalizes: ``normalize_score_list`` or ``normalize_scores``."""

Observer = Callable[[str, str, float], None]
"""observe(extension_point, status, seconds), for the extension-point duration metric."""


@dataclass(slots=True)
class ScheduleResult:
    node: str
    evaluated: int
    feasible: int
    relaxed: tuple[str, ...] = ()
    """The plugins whose filter was relaxed to place the pod (``relaxed_pass``)."""
    unrelaxed_message: str = ""
    """Why no node fitted before they were relaxed (FailedScheduling's words)."""


def _noop_observer(point: str, status: str, seconds: float) -> None:
    return None


def score_nodes_of(plugin: Any) -> BatchScore:
    """The plugin's ``score_nodes``, or its ``score`` run over the nodes."""
    batch = getattr(plugin, "score_nodes", None)
    if callable(batch):
        return batch
    one = plugin.score

    def score_nodes(state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        return [one(state, pod, ni) for ni in nodes]

    return score_nodes


class Profile:
    """The plugins of one ``schedulerName``, ready to run."""

    def __init__(
        self,
        name: str,
        plugins: Sequence[Any],
        *,
        filters: Sequence[str],
        pre_enqueues: Sequence[str] = (),
        pre_filters: Sequence[str] | None = None,
        pre_scores: Sequence[str] | None = None,
        scores: Sequence[tuple[str, int]] = (),
        post_filters: Sequence[str] = (),
        reserves: Sequence[str] = (),
        pre_binds: Sequence[str] = (),
        post_binds: Sequence[str] = (),
        percentage_of_nodes_to_score: int = 0,
        observe: Observer | None = None,
        rng: random.Random | None = None,
        nominator: Nominator | None = None,
    ) -> None:
        """``plugins`` are the built plugin objects; the other lists name, per
        extension point, which of them run there, in order (as configured)."""
        by_name = {p.name: p for p in plugins}

        def pick(names: Sequence[str], kind: type) -> list[Any]:
            out = []
            for n in names:
                p = by_name[n]
                if isinstance(p, kind):
                    out.append(p)
            return out

        self.name = name
        self.plugins = by_name
        self.filters: list[Any] = pick(filters, FilterPlugin)
        self.pre_enqueues: list[Any] = pick(pre_enqueues, PreEnqueuePlugin)
        self.pre_filters: list[Any] = pick(
            pre_filters if pre_filters is not None else filters, PreFilterPlugin
        )
        score_names = [n for n, _ in scores]
        self.pre_scores: list[Any] = pick(
            pre_scores if pre_scores is not None else score_names, PreScorePlugin
        )
        self.scores: list[tuple[Any, int]] = [
            (by_name[n], w) for n, w in scores if isinstance(by_name[n], ScorePlugin)
        ]
        self.post_filters: list[Any] = pick(post_filters, PostFilterPlugin)
        self.relaxable = frozenset(p.name for p in self.filters if getattr(p, "relaxable", False))
        """Filter plugins that may relax their filter when no node fits (``relaxed_pass``)."""
        self._score_nodes = [(p, w, score_nodes_of(p)) for p, w in self.scores]
        # isinstance against a runtime-checkable Protocol is slow: decided once, not per pod.
        self._normalizes = {
            p.name: _BY_LIST if callable(getattr(p, "normalize_score_list", None)) else _BY_NAME
            for p, _ in self.scores
            if isinstance(p, ScoreNormalizer)
        }
        self.reserves: list[Any] = pick(reserves, ReservePlugin)
        self.pre_binds: list[Any] = pick(pre_binds, PreBindPlugin)
        self.post_binds: list[Any] = pick(post_binds, PostBindPlugin)
        self.observe = observe or _noop_observer
        self._rng = rng or random.Random()
        self.nominator = nominator if nominator is not None else Nominator()
        self.filtering = Filtering(
            self.filters,
            [p for p in self.pre_filters if isinstance(p, PreFilterExtensions)],
            self.nominator,
            percentage_of_nodes_to_score,
        )

    # --- the scheduling cycle ---------------------------------------------------

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        """The first PreEnqueue plugin that holds the pod back, its status naming it."""
        for p in self.pre_enqueues:
            st = p.pre_enqueue(pod)
            if st is not None:
                return st.with_plugin(p.name)
        return None

    def schedule(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> ScheduleResult:
        """Pick a node for ``pod``; raises FitError or SchedulingError."""
        all_nodes = snapshot.list()
        if not all_nodes:
            raise FitError(0)

        t0 = time.perf_counter()
        skip_filter, allowed = self.run_pre_filter(state, pod, snapshot, len(all_nodes))
        state.skip_filter = frozenset(skip_filter)
        t1 = time.perf_counter()
        self.observe("PreFilter", "Success", t1 - t0)

        statuses: dict[str, tuple[str, Status]] = {}
        filtering = self.filtering
        nominated = filtering.nominated_for(pod)
        # A nominated node (a preemption made room there) is likely the only one that fits:
        # it is tried first, alone (schedulePod's evaluateNominatedNode).
        nnn = self.nominator.node_of(pod.uid) or nominated_node_name(pod)
        if nnn:
            ni = snapshot.get(nnn)
            if ni is not None and (allowed is None or nnn in allowed[0]):
                failed = filtering.filter_node(
                    state, pod, ni, filtering.filters_for(skip_filter), nominated.get(nnn)
                )
                if failed is None:
                    self.observe("Filter", "Success", time.perf_counter() - t1)
                    return ScheduleResult(nnn, 1, 1)
                statuses[nnn] = failed

        if allowed is not None:
            names, plugins = allowed
            reason = f"node(s) didn't satisfy plugin(s) [{', '.join(sorted(plugins))}]"
            excluded = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (reason,))
            nodes = []
            for ni in all_nodes:
                if ni.name in names:
                    nodes.append(ni)
                else:
                    statuses[ni.name] = (sorted(plugins)[0], excluded)
        else:
            nodes = all_nodes

        feasible = filtering.find_feasible(
            state, pod, nodes, len(all_nodes), statuses, skip_filter, nominated
        )
        relaxed: tuple[str, ...] = ()
        unrelaxed = ""
        if not feasible:
            again = self.relaxed_pass(state, pod, nodes, len(all_nodes), statuses, skip_filter, nominated)
            if again is None:
                raise FitError(len(all_nodes), statuses)
            feasible, relaxed_statuses, relaxed = again
            if not feasible:
                raise FitError(len(all_nodes), relaxed_statuses)
            unrelaxed = FitError(len(all_nodes), statuses).message()
            statuses = relaxed_statuses
        t2 = time.perf_counter()
        self.observe("Filter", "Success", t2 - t1)

        evaluated = len(feasible) + len(statuses)
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, evaluated, 1, relaxed, unrelaxed)

        breakdown: list[tuple[str, int, list[int], list[int]]] | None = [] if breakdown_wanted() else None
        totals = self.score(state, pod, feasible, breakdown)
        self.observe("Score", "Success", time.perf_counter() - t2)
        chosen = self._select(feasible, totals)
        if breakdown is not None:
            log_top_nodes(pod, feasible, totals, breakdown, chosen)
        return ScheduleResult(chosen, evaluated, len(feasible), relaxed, unrelaxed)

    def relaxed_pass(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: list[NodeInfo],
        num_all_nodes: int,
        statuses: dict[str, tuple[str, Status]],
        skip_filter: set[str],
        nominated: Any,
    ) -> tuple[list[NodeInfo], dict[str, tuple[str, Status]], tuple[str, ...]] | None:
        """No node fitted: when a relaxable plugin (the Dynamic plugin's load limits) rejected
        some, filter again with ``state.relaxed`` set, so that the pod goes where it would
        without those limits rather than wait for every node's load to fall. None when no
        relaxable plugin rejected a node; else the feasible nodes, the new statuses (the nodes
        PreFilter excluded keep theirs) and the relaxable plugins that had rejected nodes.

        From then on the cycle is relaxed: if nothing fits even so, PostFilter (preemption)
        sees the relaxed statuses, as kube-scheduler without those plugins would."""
        relaxed = tuple(sorted({p for p, _ in statuses.values()} & self.relaxable))
        if not relaxed:
            return None
        state.relaxed = True
        evaluated = {ni.name for ni in nodes}
        again = {name: entry for name, entry in statuses.items() if name not in evaluated}
        feasible = self.filtering.find_feasible(
            state, pod, nodes, num_all_nodes, again, skip_filter, nominated
        )
        logger.log(
            V(2),
            "No node passed every filter; filtered again with the relaxable ones relaxed",
            extra=kv(pod=pod.key, relaxed=",".join(relaxed), feasible=len(feasible)),
        )
        return feasible, again, relaxed

    def run_pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, num_nodes: int
    ) -> tuple[set[str], tuple[frozenset[str], set[str]] | None]:
        """PreFilter: the plugins that returned SKIP, and the nodes the others allow with the
        plugins that narrowed them (None: all). Raises FitError when one rejects the pod."""
        skip: set[str] = set()
        allowed: frozenset[str] | None = None
        contributors: set[str] = set()
        for p in self.pre_filters:
            try:
                res = p.pre_filter(state, pod, snapshot)
            except Exception as e:  # a plugin bug must not kill the loop
                logger.exception("PreFilter plugin failed", extra=kv(plugin=p.name, pod=pod.key))
                raise SchedulingError(p.name, str(e)) from e
            if res is None:
                continue
            if isinstance(res, PreFilterResult):
                allowed = res.node_names if allowed is None else allowed & res.node_names
                contributors.add(p.name)
                continue
            if res.code == Code.SKIP:
                skip.add(p.name)
            elif res.code == Code.ERROR:
                raise SchedulingError(p.name, res.message())
            else:
                raise FitError(num_nodes, pre_filter=(p.name, res))
        if allowed is not None and not allowed:
            st = Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                (f"node(s) didn't satisfy plugin(s) [{', '.join(sorted(contributors))}]",),
            )
            raise FitError(num_nodes, pre_filter=(sorted(contributors)[0], st))
        return skip, (None if allowed is None else (allowed, contributors))

    # --- framework.Framework, for PostFilter plugins -----------------------------------

    def nominated_pods_for_node(self, node: str) -> list[PodInfo]:
        return self.nominator.pods_for_node(node)

    def nominated_node(self, pod: PodInfo) -> str:
        """Where ``pod`` is nominated: in memory (the status write may lag), else its status."""
        return self.nominator.node_of(pod.uid) or nominated_node_name(pod)

    def run_filters_with_nominated(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, *, pods_only: bool = False
    ) -> Status | None:
        return self.filtering.run_filters_with_nominated(state, pod, node, pods_only=pods_only)

    def run_add_pod(self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo) -> Status | None:
        return self.filtering.run_extension("add_pod", state, pod, other, node)

    def run_remove_pod(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo
    ) -> Status | None:
        return self.filtering.run_extension("remove_pod", state, pod, other, node)

    # --- when no node fits -----------------------------------------------------------

    def run_post_filter(
        self, state: CycleState, pod: PodInfo, fit: FitError, snapshot: Snapshot
    ) -> tuple[PostFilterResult | None, Status]:
        """The PostFilter plugins in order until one succeeds (``RunPostFilterPlugins``)."""
        statuses = FitStatuses(fit, snapshot)
        t0 = time.perf_counter()
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        final: Status | None = None
        for p in self.post_filters:
            try:
                r, st = p.post_filter(state, pod, statuses)
            except Exception as e:  # a plugin bug must not kill the loop
                logger.exception("PostFilter plugin failed", extra=kv(plugin=p.name, pod=pod.key))
                final, result = Status(Code.ERROR, (str(e),), p.name), None
                break
            if st.code == Code.SUCCESS:
                final, result = st, r
                break
            if st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                final, result = st.with_plugin(p.name), r
                break
            if not st.rejected:
                final, result = Status(Code.ERROR, st.reasons, p.name), None
                break
            if r is not None:
                result = r
            reasons.extend(st.reasons)
            rejector = rejector or p.name
        if final is None:
            final = Status(Code.UNSCHEDULABLE, tuple(reasons), rejector)
        self.observe("PostFilter", final.code.name.title().replace("_", ""), time.perf_counter() - t0)
        return result, final

    def score(
        self,
        state: CycleState,
        pod: PodInfo,
        feasible: list[NodeInfo],
        breakdown: list[tuple[str, int, list[int], list[int]]] | None = None,
    ) -> list[int]:
        """The weighted total per feasible node, in their order. ``breakdown``, when given,
        receives per plugin (name, weight, raw scores, normalized scores) in node order; a
        plugin skipped at PreScore has empty lists."""
        skip: set[str] = set()
        for p in self.pre_scores:
            try:
                st = p.pre_score(state, pod, feasible)
            except Exception as e:
                logger.exception("PreScore plugin failed", extra=kv(plugin=p.name, pod=pod.key))
                raise SchedulingError(p.name, str(e)) from e
            if st is not None:
                if st.code == Code.SKIP:
                    skip.add(p.name)
                else:
                    raise SchedulingError(p.name, st.message())
        totals: list[int] | None = None
        names: list[str] | None = None
        for p, weight, score_nodes in self._score_nodes:
            if p.name in skip:
                if breakdown is not None:
                    breakdown.append((p.name, weight, [], []))
                continue
            try:
                scores = score_nodes(state, pod, feasible)
                raw = list(scores) if breakdown is not None else scores
                how = self._normalizes.get(p.name)
                if how is _BY_LIST:
                    scores = list(scores)  # the plugin's own list stays as it gave it
                    p.normalize_score_list(state, pod, scores)
                elif how is _BY_NAME:
                    if names is None:
                        names = [ni.name for ni in feasible]
                    by_name = dict(zip(names, scores, strict=True))
                    p.normalize_scores(state, pod, by_name)
                    scores = [by_name[n] for n in names]
            except Exception as e:
                logger.exception("Score plugin failed", extra=kv(plugin=p.name, pod=pod.key))
                raise SchedulingError(p.name, str(e)) from e
            if len(scores) != len(feasible):
                raise SchedulingError(p.name, f"{len(scores)} scores for {len(feasible)} nodes")
            if breakdown is not None:
                breakdown.append((p.name, weight, raw, list(scores)))
            if weight != 1:
                scores = list(map(operator.mul, scores, repeat(weight)))
            totals = scores if totals is None else list(map(operator.add, totals, scores))
        return totals if totals is not None else [0] * len(feasible)

    def _select(self, feasible: list[NodeInfo], totals: list[int]) -> str:
        best = max(totals)
        if totals.count(best) == 1:
            return feasible[totals.index(best)].name
        winners = [ni.name for ni, s in zip(feasible, totals, strict=True) if s == best]
        return self._rng.choice(winners)

    # --- after the choice -----------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status | None:
        for i, p in enumerate(self.reserves):
            try:
                st = p.reserve(state, pod, node)
            except Exception as e:
                logger.exception("Reserve plugin failed", extra=kv(plugin=p.name, pod=pod.key))
                st = Status(Code.ERROR, (str(e),))
            if st is not None:
                self._unreserve(state, pod, node, self.reserves[: i + 1])
                return st.with_plugin(p.name)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self._unreserve(state, pod, node, self.reserves)

    def _unreserve(self, state: CycleState, pod: PodInfo, node: str, plugins: list[Any]) -> None:
        for p in reversed(plugins):
            try:
                p.unreserve(state, pod, node)
            except Exception:
                logger.exception("Unreserve plugin failed", extra=kv(plugin=p.name, pod=pod.key))

    def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status | None:
        for p in self.pre_binds:
            try:
                st = p.pre_bind(state, pod, node)
            except Exception as e:
                logger.exception("PreBind plugin failed", extra=kv(plugin=p.name, pod=pod.key))
                st = Status(Code.ERROR, (str(e),))
            if st is not None:
                return st.with_plugin(p.name)
        return None

    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        for p in self.post_binds:
            try:
                p.post_bind(state, pod, node)
            except Exception:
                logger.exception("PostBind plugin failed", extra=kv(plugin=p.name, pod=pod.key))

    def stop(self) -> None:
        """Stop plugins that run in the background (e.g. Dynamic's Prometheus source)."""
        for p in self.plugins.values():
            stop = getattr(p, "stop", None)
            if callable(stop):
                try:
                    stop()
                except Exception:
                    logger.exception("Stopping plugin failed", extra=kv(plugin=p.name))
