"""The soak's goals, report and chart (``bench/results/soak/latest.{json,md,png}``).

The leader's RSS is held to :data:`bench.soak.plan.Settings.rss_growth_limit` (10 %) above its
highest in the first ten minutes: every leader after those is a standby that took over with its
caches already full, so a scheduler that keeps nothing it should not has the same RSS whichever
replica leads and whenever; what moves it otherwise is the number of live pods in the caches
(about 500 at the defaults, 4 MiB at the measured 8 KiB per pod) and the allocator's own noise
(a few MiB), both well under 10 % of a leader's 85 to 90 MiB (the 2-hour run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.soak.plan import LEADER, NODES, PROMETHEUS
from bench.soak.sample import KUBE_SCHEDULER


def leader_rss(samples: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(t, RSS MiB) of our leader at each sample where one of ours led and was measured."""
    out = []
    for s in samples:
        r = s["replicas"].get(s["leader"]) if s["leader"] != KUBE_SCHEDULER else None
        if r and r.get("rss_mib") is not None:
            out.append((s["t"], r["rss_mib"]))
    return out


def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) points, per hour."""
    if len(points) < 2:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    if var == 0:
        return None
    return sum((t - mt) * (v - mv) for t, v in points) / var * 3600


def longest_gap(binds: list[float], at: float, window: float) -> float | None:
    """The longest time without a bind in ``[at, at + window]`` (``binds``: sorted times), the
    wait from ``at`` to the first bind included; None when no bind falls in it."""
    inside = [t for t in binds if at <= t <= at + window]
    if not inside:
        return None
    return round(max(b - a for a, b in zip([at, *inside], inside, strict=False)), 1)


def rss_growth(samples: list[dict[str, Any]], warmup_s: float) -> dict[str, Any]:
    """The leader's highest RSS in the warm-up and after it, their ratio, and the slope after."""
    points = leader_rss(samples)
    before = [v for t, v in points if t <= warmup_s]
    after = [(t, v) for t, v in points if t > warmup_s]
    ref = max(before) if before else None
    peak = max((v for _, v in after), default=None)
    return {
        "warmup_peak_mib": ref,
        "after_peak_mib": peak,
        "ratio": peak / ref if ref and peak is not None else None,
        "slope_mib_per_hour": slope_per_hour(after),
    }


def _goal(goal: str, figure: Any, met: bool, **extra: Any) -> dict[str, Any]:
    return {"goal": goal, "figure": figure, "met": bool(met), **extra}


def goals(doc: dict[str, Any]) -> list[dict[str, Any]]:
    s, pods = doc["settings"], doc["pods"]
    growth = doc["rss"]
    ratio = growth["ratio"]
    restarts = doc["restarts"]
    stuck = sum(len(x["pending_with_room"]) for x in doc["samples"])
    return [
        _goal(
            "ours leading for at least 2 hours under churn",
            round(doc["minutes"], 1),
            doc["minutes"] >= 120,
            unit="minutes",
        ),
        _goal(
            f"the leader's RSS after the first {s['warmup_s'] / 60:g} minutes at most "
            f"{s['rss_growth_limit']:.0%} above its peak in them",
            None if ratio is None else round(ratio, 3),
            ratio is not None and ratio <= 1 + s["rss_growth_limit"],
            unit="ratio",
        ),
        _goal(
            "every pod bound at most once (one nodeName, at most one Scheduled event)",
            len(pods["bound_twice"]) + len(pods["reported_twice"]),
            not pods["bound_twice"] and not pods["reported_twice"],
            unit="pods",
        ),
        _goal(
            "every bind reported (a Scheduled event)",
            pods["unreported"],
            pods["unreported"] == 0,
            unit="pods",
        ),
        _goal(
            "every pod bound where it fits", len(pods["overcommits"]), not pods["overcommits"], unit="moments"
        ),
        _goal(
            f"no pod Pending longer than {s['pending_grace_s']:g} s while a node has room for it",
            stuck,
            stuck == 0,
            unit="pod samples",
        ),
        _goal(
            "no pod left Pending at the end",
            len(pods["pending_at_end"]),
            not pods["pending_at_end"],
            unit="pods",
        ),
        _goal("no restart of ours beyond the soak's deletions", restarts, restarts == 0, unit="restarts"),
    ]


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


def markdown(doc: dict[str, Any]) -> str:
    s, pods, growth = doc["settings"], doc["pods"], doc["rss"]
    m = doc["machine"]
    lines = [
        "# Soak",
        "",
        f"{doc['started']}: {doc['minutes']:.0f} minutes on kind ({m['cpu_model']}, {m['cores']} cores), "
        f"image `{doc['image']}`, the lease method (3 replicas, kube-scheduler a standby).",
        f"Churn: {s['pods_per_second']:g} pods/s living {s['pod_life_s'][0]:g} to {s['pod_life_s'][1]:g} s on "
        f"{s['nodes']} kwok nodes (one added and the oldest drained every {s['node_every_s'] / 60:g} min), "
        f"the leader deleted every {s['leader_every_s'] / 60:g} min, Prometheus restarted once.",
        "",
        "| goal | figure | met |",
        "| --- | --- | --- |",
    ]
    for g in doc["goals"]:
        lines.append(
            f"| {g['goal']} | {_fmt(g['figure'])} {g.get('unit', '')} | {'yes' if g['met'] else '**no**'} |"
        )
    lines += [
        "",
        f"Pods: {pods['created']} created, {pods['bound']} bound ({pods['by_kube_scheduler']} by kube-scheduler "
        f"while it held the Lease), {pods['deleted']} deleted at the end of their lifetime, "
        f"{pods['drained']} with their node; creations refused: {pods['create_failed']}.",
        f"Leader's RSS: {_fmt(growth['warmup_peak_mib'])} MiB at most in the warm-up, "
        f"{_fmt(growth['after_peak_mib'])} MiB at most after; slope after the warm-up "
        f"{_fmt(growth['slope_mib_per_hour'])} MiB/h.",
    ]
    gaps = [f["gap_s"] for f in doc["failovers"] if f["gap_s"] is not None]
    if gaps:
        lines.append(
            f"Leader deletions: {len(doc['failovers'])}; the longest time without a bind in the "
            f"two minutes after each: {min(gaps):.1f} to {max(gaps):.1f} s."
        )
    if doc.get("failed_steps"):
        lines.append(
            f"Steps that failed (logged, the soak went on): {len(doc['failed_steps'])}, "
            + "; ".join(f"{f['what']} at {f['t'] / 60:.0f} min" for f in doc["failed_steps"][:10])
            + "."
        )
    if doc.get("interrupted"):
        lines.append("**Interrupted**: the figures cover what ran.")
    lines += ["", "![soak](latest.png)", ""]
    return "\n".join(lines)


def chart(doc: dict[str, Any], path: Path) -> None:
    """RSS and CPU of every replica (the leader's samples marked), the leader's queues and the
    pods Pending, over the soak's minutes, with its disruptions as vertical lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = doc["samples"]
    fig, (rss, cpu, queue) = plt.subplots(3, 1, figsize=(12, 10), sharex=True)
    names = list(dict.fromkeys(n for s in samples for n in s["replicas"]))
    for name in names:
        pts = [
            (s["t"] / 60, s["replicas"][name], s["leader"] == name) for s in samples if name in s["replicas"]
        ]
        xs = [x for x, r, _ in pts if r["rss_mib"] is not None]
        line = rss.plot(xs, [r["rss_mib"] for _, r, _ in pts if r["rss_mib"] is not None], lw=1)[0]
        lead = [(x, r["rss_mib"]) for x, r, led in pts if led and r["rss_mib"] is not None]
        if lead:
            rss.plot(*zip(*lead, strict=True), "o", ms=3, color=line.get_color())
        c = [(x, r["cpu_cores"]) for x, r, _ in pts if r["cpu_cores"] is not None]
        if c:
            cpu.plot(*zip(*c, strict=True), lw=1, color=line.get_color())
    rss.set_ylabel("RSS (MiB); dots: leading")
    rss.set_title("each replica of ours (one colour per pod)")
    cpu.set_ylabel("CPU (cores)")
    t = [s["t"] / 60 for s in samples]
    for q in ("active", "backoff", "unschedulable"):
        queue.plot(t, [(s["queues"] or {}).get(q) for s in samples], label=f"leader's {q} queue", lw=1)
    queue.plot(t, [s["pending"] for s in samples], label="pods Pending (API)", lw=1, color="black")
    queue.set_ylabel("pods")
    queue.set_xlabel("minutes since the start")
    queue.legend(fontsize=8)
    styles = {LEADER: ("grey", "--"), PROMETHEUS: ("red", "-"), NODES: ("tab:green", ":")}
    for d in doc["disruptions"]:
        color, ls = styles[d["what"]]
        for ax in (rss, cpu, queue):
            ax.axvline(d["t"] / 60, color=color, ls=ls, lw=0.8, alpha=0.6)
    for ax in (rss, cpu, queue):
        ax.grid(True, alpha=0.3)
    fig.suptitle(
        f"soak {doc['started']}: dashed grey the leader deleted, dotted green a node turn, red Prometheus restarted",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write(doc: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "latest.json", "md": out_dir / "latest.md", "png": out_dir / "latest.png"}
    paths["json"].write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    paths["md"].write_text(markdown(doc), encoding="utf-8")
    chart(doc, paths["png"])
    return paths
