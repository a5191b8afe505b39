"""The placement benchmark's report: figures per scenario and contender (medians over runs), the
issue's goals with their figures, a Markdown table and a heatmap of node utilization over time.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.placement import figures as fig
from bench.placement.model import Scenario

FIGURES = (
    ("cv_mean", "CV of node CPU utilization (mean over time)"),
    ("cv_mean_outage", "CV while Prometheus is gone (mean over that time)"),
    ("cv_end", "CV at the end"),
    ("hottest_max", "hottest node (max over time)"),
    ("node_minutes_above_65", "node-minutes above 65 %"),
    ("node_minutes_above_80", "node-minutes above 80 %"),
    ("placed_above_limit", "pods placed onto a node above the limit while another had room"),
    ("burst_max_fair_shares", "largest share of one burst on one node, in fair shares"),
    ("pending", "pods left Pending"),
    ("cpu_ms_per_decision", "CPU per decision (ms)"),
)
SUBJECT = "ours-dynamic"
"""The contender the goals are about: ours with Dynamic as improved."""


def _median(values: Sequence[float | int | None]) -> float | None:
    vs = [v for v in values if v is not None]
    return round(statistics.median(vs), 4) if vs else None


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, float | None]]]:
    """scenario -> contender -> figure -> median over runs. ``runs``: one dict per run, scenario
    -> contender -> {"figures": ..., "cpu_seconds": ..., "decisions": ...}."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for run in runs:
        for scenario, by_contender in run.items():
            for contender, r in by_contender.items():
                row = dict(r["figures"])
                cpu, n = r.get("cpu_seconds"), r.get("decisions") or 0
                row["cpu_ms_per_decision"] = round(cpu / n * 1000, 3) if cpu is not None and n else None
                slot = out.setdefault(scenario, {}).setdefault(contender, {})
                for k, v in row.items():
                    slot.setdefault(k, []).append(v)  # type: ignore[attr-defined]
    return {
        s: {c: {k: _median(v) for k, v in figs.items()} for c, figs in by_c.items()}  # type: ignore[arg-type]
        for s, by_c in out.items()
    }


def _goal(goal: str, figure: float | None, met: bool | None, **extra: Any) -> dict[str, Any]:
    return {"goal": goal, "figure": figure, "met": met, **extra}


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 3)


def goals(
    summary: dict[str, dict[str, dict[str, float | None]]], runs: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The issue's goals, each with its figure and whether it is met (None: not measured)."""
    out = []
    qualifying = []
    for scenario, by in summary.items():
        ours, oracle, kube = (by.get(c, {}).get("cv_mean") for c in (SUBJECT, "oracle", "kube-scheduler"))
        r = _ratio(ours, oracle)
        out.append(
            _goal(
                f"{scenario}: CV of node CPU utilization at most 1.25x the oracle's",
                r,
                None if r is None else r <= 1.25,
                ours=ours,
                oracle=oracle,
            )
        )
        oracle_vs_kube = _ratio(oracle, kube)
        if oracle_vs_kube is not None and oracle_vs_kube <= 0.5:
            qualifying.append(scenario)
            r = _ratio(ours, kube)
            out.append(
                _goal(
                    f"{scenario}: CV at most 0.6x kube-scheduler's (the oracle reaches {oracle_vs_kube}x)",
                    r,
                    None if r is None else r <= 0.6,
                    ours=ours,
                    kube_scheduler=kube,
                )
            )
    best = min(
        (
            r
            for by in summary.values()
            if (r := _ratio(by.get("oracle", {}).get("cv_mean"), by.get("kube-scheduler", {}).get("cv_mean")))
            is not None
        ),
        default=None,
    )
    out.append(
        _goal(
            "some scenario where the oracle's CV is 0.5x kube-scheduler's or better (requests predict usage badly)",
            best,
            None if best is None else best <= 0.5,
            scenarios=qualifying,
        )
    )
    shares = [by.get(SUBJECT, {}).get("burst_max_fair_shares") for by in summary.values()]
    worst = max((s for s in shares if s is not None), default=None)
    out.append(
        _goal(
            "in a burst, no node gets more than twice its fair share",
            worst,
            None if worst is None else worst <= 2,
        )
    )
    above = [r[s][SUBJECT]["figures"]["placed_above_limit"] for r in runs for s in r if SUBJECT in r[s]]
    out.append(
        _goal(
            "no pod placed onto a node above the limit while another node has room (every run)",
            max(above) if above else None,
            None if not above else max(above) == 0,
        )
    )
    extra = [
        r[s][SUBJECT]["figures"]["pending"] - r[s]["kube-scheduler"]["figures"]["pending"]
        for r in runs
        for s in r
        if SUBJECT in r[s] and "kube-scheduler" in r[s]
    ]
    out.append(
        _goal(
            "no pod left Pending that kube-scheduler would place (pods Pending beyond kube-scheduler's, every run)",
            max(extra) if extra else None,
            None if not extra else max(extra) <= 0,
        )
    )
    cpu = {c: [0.0, 0] for c in (SUBJECT, "ours")}
    for r in runs:
        for by in r.values():
            for c in cpu:
                if c in by and by[c].get("cpu_seconds") is not None:
                    cpu[c][0] += by[c]["cpu_seconds"]
                    cpu[c][1] += by[c]["decisions"]
    per = {c: (v[0] / v[1] if v[1] else None) for c, v in cpu.items()}
    r = _ratio(per[SUBJECT], per["ours"])
    out.append(
        _goal(
            "CPU per decision with Dynamic at most 1.2x ours without it", r, None if r is None else r <= 1.2
        )
    )
    return out


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        "# Placement quality on simulated usage",
        "",
        f"{doc['about']}",
        "",
        "## Goals",
        "",
        "| goal | figure | met |",
        "| --- | ---: | --- |",
    ]
    for g in doc["goals"]:
        met = {True: "met", False: "**missed**", None: "not measured"}[g["met"]]
        lines.append(f"| {g['goal']} | {'-' if g['figure'] is None else g['figure']} | {met} |")
    for scenario, by in doc["summary"].items():
        lines += ["", f"## {scenario}", "", doc["scenarios"].get(scenario, ""), ""]
        contenders = list(by)
        lines.append("| figure | " + " | ".join(contenders) + " |")
        lines.append("| --- | " + " | ".join("---:" for _ in contenders) + " |")
        for key, label in FIGURES:
            cells = [by[c].get(key) for c in contenders]
            if all(v is None for v in cells):
                continue
            lines.append(f"| {label} | " + " | ".join("-" if v is None else f"{v:g}" for v in cells) + " |")
    return "\n".join(lines) + "\n"


def chart(scenarios: dict[str, Scenario], run: dict[str, Any], path: Path) -> None:
    """One heatmap per scenario and contender: nodes (rows) by time, CPU utilization as colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [s for s in run if s in scenarios]
    contenders = list(next(iter(run.values())))
    fig_, axes = plt.subplots(
        len(names),
        len(contenders),
        figsize=(2.6 * len(contenders) + 1.2, 2.2 * len(names) + 0.8),
        squeeze=False,
        sharex="row",
        layout="constrained",
    )
    image = None
    for row, s in enumerate(names):
        for col, c in enumerate(contenders):
            ax = axes[row][col]
            placements = [fig.Placement(*p) for p in run[s][c]["placements"]]
            ts, matrix = fig.timeline_matrix(scenarios[s], placements)
            image = ax.imshow(
                matrix, aspect="auto", cmap="inferno", vmin=0, vmax=1, extent=(0, ts[-1], len(matrix), 0)
            )
            if row == 0:
                ax.set_title(c, fontsize=9)
            if col == 0:
                ax.set_ylabel(f"{s}\nnode", fontsize=8)
            ax.set_yticks([])
            ax.tick_params(labelsize=7)
    if image is not None:
        fig_.colorbar(image, ax=axes, shrink=0.8, label="node CPU utilization (real)")
    fig_.suptitle("Each node's CPU utilization over the scenario (seconds), first run", fontsize=10)
    fig_.savefig(path, dpi=90)
    plt.close(fig_)


def write(
    out_dir: Path,
    about: str,
    scenarios: dict[str, Scenario],
    runs: Sequence[dict[str, Any]],
    settings: dict[str, Any],
) -> dict[str, Path]:
    summary = summarize(runs)
    doc = {
        "about": about,
        "settings": settings,
        "scenarios": {name: s.about for name, s in scenarios.items()},
        "goals": goals(summary, runs),
        "summary": summary,
        "runs": list(runs),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "latest.json", "md": out_dir / "latest.md", "png": out_dir / "latest.png"}
    paths["json"].write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    paths["md"].write_text(markdown(doc), encoding="utf-8")
    if runs:
        chart(scenarios, runs[0], paths["png"])
    return paths
