"""Preemption's choice among candidate nodes, and the dry run over them (pure logic)."""

from __future__ import annotations

import pytest

from scheduler.core.framework import Code, Status, unresolvable
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.core.preemption import (
    Candidate,
    dry_run,
    num_candidates,
    pick_one_node,
    sort_by_importance,
)
from tests.core.util import node, pod

NOW = 1_800_000_000.0


def victim(name: str, priority: int, started: str | None = "2026-01-01T00:00:00Z") -> PodInfo:
    raw = pod(name, priority=priority)
    if started:
        raw["status"]["startTime"] = started
    return PodInfo.from_pod(raw)


def cand(name: str, *victims: PodInfo, violations: int = 0) -> Candidate:
    return Candidate(name, tuple(sort_by_importance(victims, NOW)), violations)


@pytest.mark.parametrize(
    ("candidates", "winner"),
    [
        # 1. fewest PDB violations, even with higher-priority victims
        ([cand("a", victim("v", 1), violations=1), cand("b", victim("v", 50))], "b"),
        # 2. the lowest priority among each node's most important victim
        ([cand("a", victim("v", 10), victim("w", 1)), cand("b", victim("v", 5), victim("w", 5))], "b"),
        # 3. the smallest sum of priorities
        ([cand("a", victim("v", 5), victim("w", 4)), cand("b", victim("v", 5), victim("w", 1))], "b"),
        # 3'. negative priorities sum as in Go (each shifted by 2^31): two -5s beat one -5
        ([cand("a", victim("v", -5), victim("w", -5)), cand("b", victim("v", -5))], "b"),
        # 4. the fewest victims
        (
            [
                cand("a", victim("v", 5), victim("w", 0)),
                cand("b", victim("v", 5), victim("w", 0), victim("x", 0)),
            ],
            "a",
        ),
        # 5. the latest start among the highest-priority victims
        (
            [
                cand("a", victim("v", 5, "2026-01-01T00:00:00Z"), victim("w", 1, "2026-06-01T00:00:00Z")),
                cand("b", victim("v", 5, "2026-03-01T00:00:00Z"), victim("w", 1, "2025-01-01T00:00:00Z")),
            ],
            "b",
        ),
        # a tie throughout: the first
        ([cand("a", victim("v", 5)), cand("b", victim("v", 5))], "a"),
    ],
)
def test_pick_one_node(candidates: list[Candidate], winner: str) -> None:
    assert pick_one_node(candidates, NOW).node == winner


def test_a_victim_not_started_counts_as_starting_now() -> None:
    started = cand("a", victim("v", 5, "2026-01-01T00:00:00Z"))
    pending = cand("b", victim("v", 5, None))
    assert pick_one_node([started, pending], NOW).node == "b"


def test_importance_order() -> None:
    pods = [
        victim("old-low", 1, "2025-01-01T00:00:00Z"),
        victim("new-high", 9),
        victim("old-high", 9, "2025-01-01T00:00:00Z"),
    ]
    assert [p.name for p in sort_by_importance(pods, NOW)] == ["old-high", "new-high", "old-low"]


@pytest.mark.parametrize(
    ("nodes", "pct", "absolute", "want"),
    [(5000, 10, 100, 500), (500, 10, 100, 100), (50, 10, 100, 50), (1000, 0, 1, 1), (1000, 100, 0, 1000)],
)
def test_num_candidates(nodes: int, pct: int, absolute: int, want: int) -> None:
    assert num_candidates(nodes, pct, absolute) == want


def nodes(n: int) -> list[NodeInfo]:
    return [NodeInfo(f"n{i}", node(f"n{i}")) for i in range(n)]


def test_dry_run_stops_once_enough_candidates_one_without_violations() -> None:
    seen: list[str] = []

    def select(ni: NodeInfo) -> tuple[list[PodInfo], int, Status | None]:
        seen.append(ni.name)
        return [victim("v", 1)], (1 if ni.name in ("n2", "n3") else 0), None

    got, failed = dry_run(nodes(6), select, wanted=2, offset=2)
    # from n2: n2 and n3 violate PDBs, n4 does not: stop there
    assert seen == ["n2", "n3", "n4"]
    assert [c.node for c in got] == ["n4", "n2", "n3"]  # the ones without violations first
    assert failed == {}


def test_dry_run_copies_nodes_and_records_failures() -> None:
    ns = nodes(3)

    def select(ni: NodeInfo) -> tuple[list[PodInfo], int, Status | None]:
        assert all(ni is not orig for orig in ns)  # a copy, which the selection may change
        if ni.name == "n0":
            return [], 0, unresolvable("No preemption victims found for incoming pod")
        if ni.name == "n1":
            return [], 0, None  # nothing to evict, yet no failure: an error
        return [victim("v", 1)], 0, None

    got, failed = dry_run(ns, select, wanted=3, offset=0)
    assert [c.node for c in got] == ["n2"]
    assert failed["n0"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert failed["n1"].code == Code.ERROR and "expected at least one victim" in failed["n1"].message()
