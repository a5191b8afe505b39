"""One scheduling profile: its plugins in order, and the algorithm of one cycle.

``Profile.schedule`` is kube-scheduler's ``schedulePod``: PreFilter, then
Filter over the nodes starting where the previous cycle stopped, stopping once
enough feasible nodes were found (``percentageOfNodesToScore``), then PreScore
and weighted Score, and the best node, ties broken at random.

Filter and Score run one plugin over a list of nodes at a time
(``filter_nodes``/``score_nodes`` where a plugin has them, else its per-node
method in a loop): with a thousand nodes, a call per node and plugin was a
large part of a cycle's cost in Python. Filtering takes the nodes in chunks
of as many as are still wanted, so it stops where a node-by-node search
would have stopped and evaluates the same nodes.
"""

from __future__ import annotations

import logging
import operator
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from typing import Any

from scheduler.core.framework import (
    BatchFilter,
    BatchScore,
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
    filter_each,
)
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.logs import kv

logger = logging.getLogger(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
MIN_FILTER_CHUNK = 32
"""Nodes filtered per batch at least: near the end of a search fewer are wanted; filtering a
few more and dropping them beats many calls over one node each."""
NO_NODES_MSG = "no nodes available to schedule pods"

_BY_LIST, _BY_NAME = "list", "name"
"""How a score plugin normalizes: ``normalize_score_list`` or ``normalize_scores``."""

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


def filter_nodes_of(plugin: Any) -> BatchFilter:
    """The plugin's ``filter_nodes``, or its ``filter`` run over the nodes."""
    batch = getattr(plugin, "filter_nodes", None)
    if callable(batch):
        return batch  # type: ignore[no-any-return]
    return partial(filter_each, plugin.filter)


def score_nodes_of(plugin: Any) -> BatchScore:
    """The plugin's ``score_nodes``, or its ``score`` run over the nodes."""
    batch = getattr(plugin, "score_nodes", None)
    if callable(batch):
        return batch  # type: ignore[no-any-return]
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
        self._filter_nodes = [(p.name, filter_nodes_of(p)) for p in self.filters]
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
        return ScheduleResult(self._select(feasible, totals), evaluated, len(feasible))

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
        filters = [(name, f) for name, f in self._filter_nodes if name not in skip]
        feasible: list[NodeInfo] = []
        start = self._next_start % n
        order = nodes[start:] + nodes[:start] if start else nodes
        pos = 0
        while pos < n and len(feasible) < want:
            need = want - len(feasible)
            chunk = order[pos : pos + max(need, MIN_FILTER_CHUNK)]
            passed = chunk
            for name, f in filters:
                try:
                    results = f(state, pod, passed)
                except Exception as e:  # a plugin bug must not kill the loop
                    logger.exception("Filter plugin failed", extra=kv(plugin=name, pod=pod.key))
                    raise SchedulingError(name, str(e)) from e
                if results is None:
                    continue
                kept = []
                for ni, st in zip(passed, results, strict=True):
                    if st is None:
                        kept.append(ni)
                    elif st.code == Code.ERROR:
                        raise SchedulingError(name, st.message())
                    else:
                        statuses[ni.name] = (name, st)
                passed = kept
                if not passed:
                    break
            used = len(chunk)
            if len(passed) > need:
                # The search ends at the node that completes it: later ones don't count.
                passed = passed[:need]
                last = passed[-1]
                used = next(i for i, ni in enumerate(chunk) if ni is last) + 1
                for ni in chunk[used:]:
                    statuses.pop(ni.name, None)
            feasible.extend(passed)
            pos += used
        self._next_start = (start + pos) % n
        return feasible

    def _score(self, state: CycleState, pod: PodInfo, feasible: list[NodeInfo]) -> list[int]:
        """The weighted total per feasible node, in their order."""
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
                continue
            try:
                scores = score_nodes(state, pod, feasible)
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
