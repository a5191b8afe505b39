"""Preemption's pure parts: candidates, the choice among them, and what gets carried out.

kube-scheduler's ``framework/preemption`` (the ``Evaluator``), minus its
I/O: the DefaultPreemption plugin (``scheduler.plugins.defaultpreemption``)
decides per node which pods would have to go; this module runs that over the
candidate nodes (``dry_run``), picks one (``pick_one_node``), and describes
the result as a :class:`Preemption` that the cluster side
(``scheduler.cluster.preemption``) carries out: the victims get a
``DisruptionTarget`` condition and are deleted, lower-priority pods
nominated to that node lose their nomination.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scheduler.core.framework import Code, Status
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo, parse_time

INT32_SPAN = 2**31
"""Added to each priority when summing them, so that negative priorities sum as in Go."""


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    victims: tuple[PodInfo, ...]
    """Most important first (highest priority, then the longest running)."""
    pdb_violations: int = 0


@dataclass(frozen=True, slots=True)
class Preemption:
    """A decision to carry out: evict ``victims`` from ``node`` for ``preemptor``."""

    preemptor: PodInfo
    node: str
    victims: tuple[PodInfo, ...]
    clear_nominations: tuple[PodInfo, ...] = ()
    """Lower-priority pods nominated to ``node``: the room is the preemptor's now."""
    pdb_violations: int = 0


def start_time(pod: PodInfo, now: float | None = None) -> float:
    """``util.GetPodStartTime``: ``status.startTime``, or now for a pod not started yet."""
    value = (pod.pod.get("status") or {}).get("startTime")
    if value:
        return parse_time(value)
    return time.time() if now is None else now


def importance(pod: PodInfo, now: float) -> tuple[int, float]:
    """Sort key, most important first (``MoreImportantVictim`` for single pods): higher
    priority, then the earlier start."""
    return (-pod.priority, start_time(pod, now))


def sort_by_importance(pods: Sequence[PodInfo], now: float | None = None) -> list[PodInfo]:
    at = time.time() if now is None else now
    return sorted(pods, key=lambda p: importance(p, at))


def num_candidates(num_nodes: int, percentage: int, absolute: int) -> int:
    """``calculateNumCandidates``: a percentage of the nodes, at least ``absolute``, at most all."""
    n = num_nodes * percentage // 100
    n = max(n, absolute)
    return min(n, num_nodes)


VictimSelector = Callable[[NodeInfo], "tuple[list[PodInfo], int, Status | None]"]
"""``select(node)`` on a node copy of its own: (victims, PDB violations, failure)."""


def dry_run(
    nodes: Sequence[NodeInfo],
    select: VictimSelector,
    wanted: int,
    offset: int,
) -> tuple[list[Candidate], dict[str, Status]]:
    """``DryRunPreemption``: try the nodes from ``offset`` round, each on a copy of itself,
    until ``wanted`` candidates are found and at least one of them violates no PDB.

    Returns the candidates (those without PDB violations first) and each failed node's status.
    """
    non_violating: list[Candidate] = []
    violating: list[Candidate] = []
    failed: dict[str, Status] = {}
    n = len(nodes)
    for i in range(n):
        ni = nodes[(offset + i) % n]
        victims, violations, st = select(ni.clone())
        if st is None and victims:
            c = Candidate(ni.name, tuple(victims), violations)
            (violating if violations else non_violating).append(c)
            if non_violating and len(non_violating) + len(violating) >= wanted:
                break
            continue
        if st is None:
            st = Status(Code.ERROR, (f'expected at least one victim pod on node "{ni.name}"',))
        failed[ni.name] = st
    return non_violating + violating, failed


def pick_one_node(candidates: Sequence[Candidate], now: float | None = None) -> Candidate:
    """``pickOneNodeForPreemption``: the candidate that, in this order,

    1. violates the fewest PodDisruptionBudgets,
    2. has the lowest-priority most important victim,
    3. has the smallest sum of victim priorities,
    4. has the fewest victims,
    5. has the latest start among its highest-priority victims (the least work lost);

    the first of those still tied otherwise."""
    if not candidates:
        raise ValueError("no candidates")
    at = time.time() if now is None else now

    def latest_start(c: Candidate) -> float:
        top = max(v.priority for v in c.victims)
        return min(start_time(v, at) for v in c.victims if v.priority == top)

    scores: tuple[Callable[[Candidate], float], ...] = (
        lambda c: -c.pdb_violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(v.priority + INT32_SPAN for v in c.victims),
        lambda c: -len(c.victims),
        latest_start,
    )
    left = list(candidates)
    for score in scores:
        values = [score(c) for c in left]
        best = max(values)
        left = [c for c, v in zip(left, values, strict=True) if v == best]
        if len(left) == 1:
            break
    return left[0]


def random_offset(num_nodes: int, rng: random.Random | None = None) -> int:
    """Where the dry run starts (``GetOffsetAndNumCandidates``): spreads preemption over nodes."""
    return (rng or random).randrange(num_nodes) if num_nodes else 0
