"""One scheduling profile: its plugins in order, and the algorithm of one cycle.

``Profile.schedule`` is kube-scheduler's ``schedulePod``: PreFilter, then
Filter over the nodes starting where the previous cycle stopped, stopping once
enough feasible nodes were found (``percentageOfNodesToScore``), then PreScore
and weighted Score, and the best node, ties broken at random.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.core.framework import (
    Code,
    CycleState,
    FilterPlugin,
    PostBindPlugin,
    PreBindPlugin,
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
from scheduler.core.podinfo import PodInfo
from scheduler.logs import kv

logger = logging.getLogger(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODES_MSG = "no nodes available to schedule pods"

Observer = Callable[[str, str, float], None]
"""observe(extension_point, status, seconds), for the extension-point duration metric."""


class SchedulingError(Exception):
    """A plugin failed (not "the pod does not fit"): the pod backs off and is retried."""

    def __init__(self, plugin: str, message: str) -> None:
        super().__init__(f"running {plugin}: {message}")
        self.plugin = plugin


@dataclass
class FitError(Exception):
    """No node fits; ``message()`` is the FailedScheduling text users see."""

    num_all_nodes: int
    statuses: dict[str, tuple[str, Status]] = field(default_factory=dict)
    """node name -> (plugin, status) of the filter that rejected it."""
    pre_filter: tuple[str, Status] | None = None

    def message(self) -> str:
        if self.num_all_nodes == 0:
            return NO_NODES_MSG
        head = f"0/{self.num_all_nodes} nodes are available:"
        if self.pre_filter is not None:
            return f"{head} {self.pre_filter[1].message()}."
        histogram: Counter[str] = Counter()
        for _, st in self.statuses.values():
            for reason in st.reasons:
                histogram[reason] += 1
        parts = sorted(f"{n} {reason}" for reason, n in histogram.items())
        return f"{head} {', '.join(parts)}."

    def unschedulable_plugins(self) -> frozenset[str]:
        plugins = {p for p, _ in self.statuses.values()}
        if self.pre_filter is not None:
            plugins.add(self.pre_filter[0])
        return frozenset(plugins)

    def __str__(self) -> str:
        return self.message()


@dataclass(slots=True)
class ScheduleResult:
    node: str
    evaluated: int
    feasible: int


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """kube-scheduler's sampling: all nodes below 100, else a percentage (adaptive when 0)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    adaptive = percentage
    if adaptive <= 0:
        adaptive = 50 - num_all_nodes // 125
        if adaptive < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            adaptive = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    if adaptive >= 100:
        return num_all_nodes
    n = num_all_nodes * adaptive // 100
    return max(n, MIN_FEASIBLE_NODES_TO_FIND)


def _noop_observer(point: str, status: str, seconds: float) -> None:
    return None


class Profile:
    """The plugins of one ``schedulerName``, ready to run."""

    def __init__(
        self,
        name: str,
        plugins: Sequence[Any],
        *,
        filters: Sequence[str],
        pre_filters: Sequence[str] | None = None,
        pre_scores: Sequence[str] | None = None,
        scores: Sequence[tuple[str, int]] = (),
        reserves: Sequence[str] = (),
        pre_binds: Sequence[str] = (),
        post_binds: Sequence[str] = (),
        percentage_of_nodes_to_score: int = 0,
        observe: Observer | None = None,
        rng: random.Random | None = None,
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
        # isinstance against a runtime-checkable Protocol is slow: decided once, not per pod.
        self._normalizes = {p.name for p, _ in self.scores if isinstance(p, ScoreNormalizer)}
        self.reserves: list[Any] = pick(reserves, ReservePlugin)
        self.pre_binds: list[Any] = pick(pre_binds, PreBindPlugin)
        self.post_binds: list[Any] = pick(post_binds, PostBindPlugin)
        self.percentage = percentage_of_nodes_to_score
        self.observe = observe or _noop_observer
        self._rng = rng or random.Random()
        self._next_start = 0

    # --- the scheduling cycle ---------------------------------------------------

    def schedule(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> ScheduleResult:
        """Pick a node for ``pod``; raises FitError or SchedulingError."""
        all_nodes = snapshot.list()
        if not all_nodes:
            raise FitError(0)

        t0 = time.perf_counter()
        skip_filter, allowed = self._run_pre_filter(state, pod, snapshot, len(all_nodes))
        t1 = time.perf_counter()
        self.observe("PreFilter", "Success", t1 - t0)

        statuses: dict[str, tuple[str, Status]] = {}
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

        feasible = self._find_feasible(state, pod, nodes, len(all_nodes), statuses, skip_filter)
        t2 = time.perf_counter()
        self.observe("Filter", "Success", t2 - t1)
        if not feasible:
            raise FitError(len(all_nodes), statuses)

        evaluated = len(feasible) + len(statuses)
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, evaluated, 1)

        totals = self._score(state, pod, feasible)
        self.observe("Score", "Success", time.perf_counter() - t2)
        return ScheduleResult(self._select(totals), evaluated, len(feasible))

    def _run_pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, num_nodes: int
    ) -> tuple[set[str], tuple[frozenset[str], set[str]] | None]:
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

    def _find_feasible(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: list[NodeInfo],
        num_all: int,
        statuses: dict[str, tuple[str, Status]],
        skip: set[str],
    ) -> list[NodeInfo]:
        n = len(nodes)
        if n == 0:
            return []
        want = num_feasible_nodes_to_find(self.percentage, num_all)
        filters = [(p.name, p.filter) for p in self.filters if p.name not in skip]
        feasible: list[NodeInfo] = []
        start = self._next_start % n
        processed = 0
        order = nodes[start:] + nodes[:start] if start else nodes
        for ni in order:
            processed += 1
            for name, f in filters:
                try:
                    st = f(state, pod, ni)
                except Exception as e:
                    logger.exception("Filter plugin failed", extra=kv(plugin=name, pod=pod.key, node=ni.name))
                    raise SchedulingError(name, str(e)) from e
                if st is not None:
                    if st.code == Code.ERROR:
                        raise SchedulingError(name, st.message())
                    statuses[ni.name] = (name, st)
                    break
            else:
                feasible.append(ni)
                if len(feasible) >= want:
                    break
        self._next_start = (start + processed) % n
        return feasible

    def _score(self, state: CycleState, pod: PodInfo, feasible: list[NodeInfo]) -> dict[str, int]:
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
        totals = dict.fromkeys((ni.name for ni in feasible), 0)
        for p, weight in self.scores:
            if p.name in skip:
                continue
            score = p.score
            try:
                scores = {ni.name: score(state, pod, ni) for ni in feasible}
                if p.name in self._normalizes:
                    p.normalize_scores(state, pod, scores)
            except Exception as e:
                logger.exception("Score plugin failed", extra=kv(plugin=p.name, pod=pod.key))
                raise SchedulingError(p.name, str(e)) from e
            for name, s in scores.items():
                totals[name] += s * weight
        return totals

    def _select(self, totals: dict[str, int]) -> str:
        best = max(totals.values())
        winners = [n for n, s in totals.items() if s == best]
        return winners[0] if len(winners) == 1 else self._rng.choice(winners)

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
