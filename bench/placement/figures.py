"""The placement figures of one contender in one scenario, from where its pods went and when.

Utilization is the ground truth of the simulation (``model``): a node's background, plus any
rise, plus the real usage of each pod from its bind, over the node's CPU. It is what kwok
reports to Prometheus, without Prometheus's lag: the figures judge where pods went against
what was true, not against what a scheduler could see.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from bench.placement.model import LIMIT, NODE_CPU_MILLI, Scenario

STEP = 5.0
"""Seconds between two samples of the utilization timeline."""


@dataclass(frozen=True, slots=True)
class Placement:
    pod: int
    """PodSpec.index."""
    node: int
    """NodeSpec.index."""
    at: float
    """Seconds from the scenario's start when the pod was bound."""


def times(duration: float, step: float = STEP) -> list[float]:
    return [i * step for i in range(int(duration // step) + 1)]


def utilization(scenario: Scenario, placements: Sequence[Placement], at: float) -> list[float]:
    """Each node's real CPU utilization at ``at`` (pods count from their bind; rises from theirs)."""
    used = [float(n.background_milli) for n in scenario.nodes]
    for r in scenario.rises:
        if r.at <= at:
            used[r.node] += r.milli
    pods = scenario.pods
    for p in placements:
        if p.at <= at:
            used[p.node] += pods[p.pod].usage_milli
    return [u / NODE_CPU_MILLI for u in used]


def cv(values: Sequence[float]) -> float:
    """Coefficient of variation (population standard deviation over the mean); 0 for no load."""
    mean = statistics.fmean(values)
    return statistics.pstdev(values) / mean if mean > 0 else 0.0


def _requested(scenario: Scenario, placements: Sequence[Placement], before: float) -> list[int]:
    req = [0] * len(scenario.nodes)
    for p in placements:
        if p.at < before:
            req[p.node] += scenario.pods[p.pod].request_milli
    return req


def placed_above_limit(scenario: Scenario, placements: Sequence[Placement]) -> int:
    """Pods bound to a node already above LIMIT while another node was at or under it and had
    room for the pod's request."""
    count = 0
    for p in placements:
        util = utilization(scenario, [q for q in placements if q.at < p.at], p.at)
        if util[p.node] <= LIMIT:
            continue
        req = _requested(scenario, placements, p.at)
        need = scenario.pods[p.pod].request_milli
        if any(u <= LIMIT and req[i] + need <= NODE_CPU_MILLI for i, u in enumerate(util) if i != p.node):
            count += 1
    return count


def burst_shares(scenario: Scenario, placements: Sequence[Placement]) -> dict[int, float]:
    """Per burst: the largest share of its pods that went to one node."""
    out = {}
    for burst, size in scenario.bursts.items():
        per_node = Counter(p.node for p in placements if scenario.pods[p.pod].burst == burst)
        out[burst] = max(per_node.values()) / size if per_node else 0.0
    return out


def figures(scenario: Scenario, placements: Sequence[Placement]) -> dict[str, float | int | None]:
    """The figures of one contender's run of ``scenario`` (see the module doc)."""
    timeline = [(t, utilization(scenario, placements, t)) for t in times(scenario.duration)]
    cvs = [cv(u) for _, u in timeline]
    end = timeline[-1][1]
    shares = burst_shares(scenario, placements)
    nodes = len(scenario.nodes)
    down = [
        c
        for (t, _), c in zip(timeline, cvs, strict=True)
        if any(o.at <= t <= o.at + o.seconds for o in scenario.outages)
    ]
    return {
        "cv_mean": round(statistics.fmean(cvs), 4),
        # Without load data a scheduler can only estimate the pods it places; the oracle
        # still sees their real usage: the gap opens here, not before.
        "cv_mean_outage": round(statistics.fmean(down), 4) if down else None,
        "cv_end": round(cv(end), 4),
        "hottest_end": round(max(end), 4),
        "hottest_max": round(max(max(u) for _, u in timeline), 4),
        "node_minutes_above_65": round(sum(STEP / 60 for _, u in timeline for x in u if x > 0.65), 2),
        "node_minutes_above_80": round(sum(STEP / 60 for _, u in timeline for x in u if x > 0.80), 2),
        "placed_above_limit": placed_above_limit(scenario, placements),
        "burst_max_share": round(max(shares.values()), 4) if shares else None,
        "burst_max_fair_shares": round(max(shares.values()) * nodes, 2) if shares else None,
        "pending": len(scenario.pods) - len(placements),
        "mean_utilization_end": round(statistics.fmean(end), 4),
    }


def timeline_matrix(
    scenario: Scenario, placements: Sequence[Placement]
) -> tuple[list[float], list[list[float]]]:
    """(times, utilization[node][time]) for the chart."""
    ts = times(scenario.duration)
    cols = [utilization(scenario, placements, t) for t in ts]
    return ts, [[cols[j][i] for j in range(len(ts))] for i in range(len(scenario.nodes))]
