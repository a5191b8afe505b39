"""``explain``'s answer for people: the nodes' filter results, the score table, Dynamic's
load values, each claim's verdict per node, and the verdict, as aligned plain-text tables
(``-o json`` has everything)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.core.explain import RELAXED, Explanation, NodeExplanation

MAX_SCORE_COLUMNS = 6
"""Feasible nodes shown in the score table (the best first); -o json lists every one."""


def table(rows: Sequence[Sequence[str]], indent: str = "") -> str:
    """Columns padded to their widest cell, two spaces apart, as kubectl prints."""
    widths = [max(len(r[i]) if i < len(r) else 0 for r in rows) for i in range(max(map(len, rows)))]
    lines = []
    for r in rows:
        cells = [c.ljust(widths[i]) for i, c in enumerate(r)]
        lines.append((indent + "  ".join(cells)).rstrip())
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Judgement:
    """What ours makes of the pod's placement."""

    agrees: bool | None
    """True: ours would choose the node it is bound to; False: another; None: not bound."""
    text: str


def judge(ex: Explanation, bound_to: str) -> Judgement:
    """The verdict line: where ours would put the pod, against where it is bound (if it is)."""
    j = _judge(ex, bound_to)
    if ex.relaxed and ex.best:
        j = Judgement(
            j.agrees,
            f"{j.text} No node passed every filter ({ex.unrelaxed_message}), so ours relaxed "
            f"the {', '.join(ex.relaxed)} filter.",
        )
    return j


def _judge(ex: Explanation, bound_to: str) -> Judgement:
    if not ex.best:
        if bound_to:
            return Judgement(False, f"ours would not place it anywhere: {ex.message}")
        return Judgement(None, f"ours finds no node: {ex.message}")
    first = ex.node(ex.best[0])
    assert first is not None
    ties = f" (tied with {', '.join(ex.best[1:])}; ties are broken at random)" if len(ex.best) > 1 else ""
    if not bound_to:
        return Judgement(None, f"ours would choose {ex.best[0]} (total {first.total}){ties}.")
    if bound_to in ex.best:
        runner = _runner_up(ex, bound_to)
        return Judgement(True, f"ours would choose {bound_to} too (total {first.total}{runner}){ties}.")
    there = ex.node(bound_to)
    if there is None:
        return Judgement(False, f"the pod is bound to {bound_to}, a node ours does not know.")
    rejection = there.rejection
    if rejection is not None:
        return Judgement(
            False,
            f"ours would not place it on {bound_to}: {rejection.plugin}: {rejection.message}; "
            f"it would choose {ex.best[0]}. The active scheduler chose differently, "
            "or the cluster changed since the pod was bound.",
        )
    lead = ex.deciding_plugin(ex.best[0], bound_to)
    why = f", {lead[0]} +{lead[1]}" if lead is not None and lead[1] > 0 else ""
    return Judgement(
        False,
        f"ours would choose {ex.best[0]} (total {first.total}) over {bound_to} "
        f"(total {there.total}{why}). The active scheduler chose differently, "
        "or the cluster changed since the pod was bound.",
    )


def _runner_up(ex: Explanation, winner: str) -> str:
    others = sorted((n for n in ex.feasible if n.node not in ex.best), key=lambda n: -(n.total or 0))
    if not others:
        return ""
    lead = ex.deciding_plugin(winner, others[0].node)
    by = f", {lead[0]} +{lead[1]}" if lead is not None and lead[1] > 0 else ""
    return f"; next {others[0].node} {others[0].total}{by}"


def render(
    ex: Explanation, bound_to: str, failing_metrics: Sequence[str] = (), configuration: str = ""
) -> str:
    out = [f"Pod {ex.pod} (profile {ex.profile})"]
    if configuration:
        out.append(f"Configuration: {configuration}")
    if bound_to:
        out.append(f"Bound to {bound_to}; explained as if it were pending.")
    out.append("")
    for v in ex.pre_filter:
        if v.code == "Skip":
            continue
        out.append(f"PreFilter {v.plugin}: {v.code}" + (f": {v.message}" if v.message else ""))
    skipped = [v.plugin for v in ex.pre_filter if v.code == "Skip"]
    if skipped:
        out.append(f"PreFilter skipped (nothing to check for this pod): {', '.join(skipped)}")
    if len(out) > 3 or skipped:
        out.append("")

    rows = [["NODE", "FILTERS", "TOTAL", ""]]
    for n in ex.nodes:
        rows.append(
            [n.node, _filters_cell(n), "-" if n.total is None else str(n.total), _mark(ex, n, bound_to)]
        )
    out.append(table(rows))

    feasible = sorted(ex.feasible, key=lambda n: (-(n.total or 0), n.node))
    if feasible:
        shown = feasible[:MAX_SCORE_COLUMNS]
        if bound_to and bound_to not in {n.node for n in shown}:
            there = ex.node(bound_to)
            if there is not None and there.feasible:
                shown = [*shown[:-1], there] if len(shown) == MAX_SCORE_COLUMNS else [*shown, there]
        out += ["", "SCORES (raw -> normalized -> x weight)"]
        rows = [["PLUGIN", "WEIGHT", *(n.node for n in shown)]]
        for s in shown[0].scores:
            cells = []
            for n in shown:
                ps = n.score_of(s.plugin)
                cells.append("-" if ps is None else f"{ps.raw} -> {ps.normalized} -> {ps.weighted}")
            rows.append([s.plugin, str(s.weight), *cells])
        rows.append(["TOTAL", "", *(str(n.total) for n in shown)])
        out.append(table(rows))
        if len(feasible) > len(shown):
            out.append(f"({len(feasible) - len(shown)} more feasible nodes in -o json)")
        if ex.skipped_scores:
            out.append(f"Score skipped (nothing to score for this pod): {', '.join(ex.skipped_scores)}")

    dynamic = [(n.node, n.details["Dynamic"]) for n in ex.nodes if "Dynamic" in n.details]
    if dynamic:
        out += [
            "",
            "DYNAMIC (node load; a value older than its period plus staleGrace is not used;"
            " +N% placed since: the estimate of pods the sample does not show yet)",
        ]
        metrics = list(dynamic[0][1]["metrics"])
        rows = [["NODE", *metrics, "HOT VALUE", "LOAD SCORE"]]
        for node, d in dynamic:
            rows.append(
                [
                    node,
                    *(_metric_cell(d["metrics"][m]) for m in metrics),
                    str(d["hotValue"]),
                    str(d["loadScore"]),
                ]
            )
        out.append(table(rows))
        if failing_metrics:
            out.append(f"Prometheus did not answer for: {', '.join(failing_metrics)}")

    devices = [(n.node, n.details["DynamicResources"]) for n in ex.nodes if "DynamicResources" in n.details]
    if devices:
        out += ["", "CLAIMS (DynamicResources: each of the pod's ResourceClaims on each node)"]
        rows = [["NODE", "CLAIM", "VERDICT"]]
        for node, d in devices:
            for c in d["claims"]:
                rows.append([node, c["claim"], c["verdict"]])
        out.append(table(rows))

    out += ["", f"Verdict: {judge(ex, bound_to).text}"]
    return "\n".join(out) + "\n"


def _filters_cell(n: NodeExplanation) -> str:
    rejected = [v for v in n.filters if v.rejected]
    if not rejected:
        relaxed = [v.plugin for v in n.filters if v.code == RELAXED]
        return f"passed {len(n.filters)}" + (f" ({', '.join(relaxed)} relaxed)" if relaxed else "")
    first = rejected[0]
    more = f" (and {len(rejected) - 1} more)" if len(rejected) > 1 else ""
    return f"{first.plugin}: {first.message}{more}"


def _mark(ex: Explanation, n: NodeExplanation, bound_to: str) -> str:
    marks = []
    if n.node in ex.best:
        marks.append("best")
    if n.node == bound_to:
        marks.append("bound here")
    return ", ".join(marks)


def _metric_cell(m: dict[str, Any]) -> str:
    limit = f", limit {m['limitPercent']:g}%" if "limitPercent" in m else ""
    if m.get("missing"):
        return f"no data{limit}"
    stale = ", stale" if m.get("stale") else ""
    unseen = f" +{m['unseenPercent']:g}% placed since" if "unseenPercent" in m else ""
    return f"{m['percent']:g}%{unseen} ({m['ageSeconds']:g}s old{stale}{limit})"
