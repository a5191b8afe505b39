"""Figures of a run, their medians over runs, ratios, goals, and the JSON / Markdown / PNG outputs."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.contenders import BY_NAME
from bench.load import ServerTimes, WatchTimes

STREAM, BACKLOG = "stream", "backlog"
"""How a run creates its pods: while the contender runs, or all before it starts."""
PERCENTILES = (50, 90, 99)
CDF_POINTS = 201
GOAL_RSS_MIB = 300
GOAL_RSS_AT = (5000, 5000)
"""(nodes, pods) where the RSS goal is judged."""
GOAL_VS_KUBE_SCHEDULER = 1.2
"""Ours' pods/s over kube-scheduler's, each workload's stream at QPS 5000..."""
GOAL_VS_KUBE_SCHEDULER_LARGE = (5000, 1.3)
"""...and from this many nodes, this ratio."""
GOAL_VS_RAW_EVENTS = 0.9
"""Ours' pods/s over the raw binder's that writes events."""
GOAL_CPU_RATIO = 0.7
GOAL_CPU_WORKLOAD = "basic"
"""Ours' CPU per pod over kube-scheduler's, in this workload's stream."""
GOAL_MIN_QPS = 1000
"""No throughput goal for clients limited below this: their limiter sets the pace by design."""


def _pcts(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {f"p{p}": None for p in PERCENTILES} | {"max": None}
    arr = np.asarray(values, dtype=float)
    out: dict[str, float | None] = {f"p{p}": round(float(np.percentile(arr, p)), 3) for p in PERCENTILES}
    out["max"] = round(float(arr.max()), 3)
    return out


def run_figures(
    *,
    contender: str,
    run: int,
    workload: str = "basic",
    mode: str = STREAM,
    pods: int,
    create: dict[str, Any],
    watch: WatchTimes,
    server: ServerTimes,
    cpu_window: float | None,
    cpu_total: float | None,
    peak_rss: int | None,
    t0: float,
    rss_ready: int | None = None,
    wall_limit_hit: bool,
) -> dict[str, Any]:
    """One contender's figures for one run. ``t0``: in stream mode when the first create was sent;
    in backlog mode when the contender was started, every pod Pending already (its CPU is then
    the whole process's, ``cpu_total``, since its start reads the backlog)."""
    if mode == BACKLOG:
        cpu_window = cpu_total
    binds = sorted(watch.bound.values())
    watch_lat = [watch.bound[n] - watch.seen[n] for n in watch.bound if n in watch.seen]
    server_lat = [server.scheduled[n] - server.created[n] for n in server.scheduled if n in server.created]
    n = len(binds)
    span = binds[-1] - binds[0] if n > 1 else 0.0
    rate = (n - 1) / span if span > 0 else None
    sched = sorted(server.scheduled.values())
    # Binds per second since t0, for the throughput-over-time chart.
    timeline: list[int] = []
    if binds:
        counts = np.bincount(np.floor(np.asarray(binds) - t0).astype(int).clip(min=0))
        timeline = [int(c) for c in counts]
    cdf = (
        [round(float(x), 4) for x in np.percentile(np.asarray(watch_lat), np.linspace(0, 100, CDF_POINTS))]
        if watch_lat
        else []
    )
    return {
        "contender": contender,
        "run": run,
        "workload": workload,
        "mode": mode,
        "pods": pods,
        "created": create["created"],
        "create_failed": create["failed"],
        "create_rate": round(create["rate"], 1),
        "bound_watch": n,
        "bound_server": len(server.nodes),
        "complete": n == pods and not wall_limit_hit,
        "pods_per_s": round(rate, 1) if rate else None,
        "bind_span_s": round(span, 3),
        "first_bind_after_s": round(binds[0] - t0, 3) if binds else None,
        "last_bind_after_s": round(binds[-1] - t0, 3) if binds else None,
        "server_span_s": (sched[-1] - sched[0]) if len(sched) > 1 else None,
        "latency_watch_s": _pcts(watch_lat),
        "latency_server_s": _pcts(server_lat),
        "cpu_s": round(cpu_window, 2) if cpu_window is not None else None,
        "cpu_s_total": round(cpu_total, 2) if cpu_total is not None else None,
        "peak_rss_mib": round(peak_rss / 2**20, 1) if peak_rss else None,
        # Once ready: its caches synced, in a stream before any measured pod (the nodes' cost).
        "rss_ready_mib": round(rss_ready / 2**20, 1) if rss_ready else None,
        "nodes_used": len(set(server.nodes.values())),
        "timeline_binds_per_s": timeline,
        "latency_watch_cdf_s": cdf,
    }


def _median(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(statistics.median(vals), 3) if vals else None


def summarize(runs: list[dict[str, Any]], contenders: list[str]) -> dict[str, dict[str, Any]]:
    """Per contender: the median over runs of each figure (peak RSS: also the max). The runs are
    of one mode (:func:`by_mode`)."""
    out = {}
    for name in contenders:
        rs = [r for r in runs if r["contender"] == name]
        if not rs:
            continue
        s: dict[str, Any] = {
            "runs": len(rs),
            "complete_runs": sum(1 for r in rs if r["complete"]),
            "pods_per_s": _median([r["pods_per_s"] for r in rs]),
            "first_bind_after_s": _median([r.get("first_bind_after_s") for r in rs]),
            "last_bind_after_s": _median([r.get("last_bind_after_s") for r in rs]),
            "create_rate": _median([r["create_rate"] for r in rs]),
            "cpu_s": _median([r["cpu_s"] for r in rs]),
            "scheduled_events": _median([r.get("scheduled_events") for r in rs]),
            "events_lag_s": _median([r.get("events_lag_s") for r in rs]),
            "peak_rss_mib": _median([r["peak_rss_mib"] for r in rs]),
            "rss_ready_mib": _median([r.get("rss_ready_mib") for r in rs]),
            "peak_rss_mib_max": max((r["peak_rss_mib"] for r in rs if r["peak_rss_mib"]), default=None),
            "load_1m_at_start": _median([r.get("load_1m_at_start") for r in rs]),
        }
        for kind in ("latency_watch_s", "latency_server_s"):
            s[kind] = {k: _median([r[kind][k] for r in rs]) for k in rs[0][kind]}
        out[name] = s
    return out


def median_run(runs: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The run whose pods/s is the median one (the lower middle for an even count)."""
    rs = sorted(
        (r for r in runs if r["contender"] == name and r["pods_per_s"]), key=lambda r: r["pods_per_s"]
    )
    return rs[(len(rs) - 1) // 2] if rs else None


def _per_run_ratio(runs: list[dict[str, Any]], a: str, b: str, key: Any) -> tuple[float | None, list[float]]:
    by_run: dict[int, dict[str, Any]] = {}
    for r in runs:
        by_run.setdefault(r["run"], {})[r["contender"]] = r
    ratios = []
    for rr in by_run.values():
        if a in rr and b in rr:
            va, vb = key(rr[a]), key(rr[b])
            if va is not None and vb:
                ratios.append(round(va / vb, 3))
    return (_median(ratios) if ratios else None), ratios


def ratios(runs: list[dict[str, Any]], contenders: list[str], mode: str = STREAM) -> list[dict[str, Any]]:
    """ours / kube-scheduler at equal client settings (pods/s, CPU per pod; p99 latency in a
    stream, the time to drain in a backlog, where a pod's latency is mostly its wait for the
    start), ours / each raw binder (pods/s): each the median of the per-run ratios (the
    contenders of one run ran back to back)."""
    out = []

    def p99(r: dict[str, Any]) -> float | None:
        return r["latency_watch_s"]["p99"]

    def p99_server(r: dict[str, Any]) -> float | None:
        return r["latency_server_s"]["p99"]

    def rate(r: dict[str, Any]) -> float | None:
        return r["pods_per_s"]

    def drained(r: dict[str, Any]) -> float | None:
        return r.get("last_bind_after_s")

    def cpu_per_pod(r: dict[str, Any]) -> float | None:
        bound = r.get("bound_watch") or r.get("pods")
        return r["cpu_s"] / bound if r.get("cpu_s") is not None and bound else None

    for name in contenders:
        c = BY_NAME[name]
        if c.kind != "ours":
            continue
        ks = next(
            (
                k
                for k in contenders
                if BY_NAME[k].kind == "kube-scheduler"
                and (BY_NAME[k].qps, BY_NAME[k].burst) == (c.qps, c.burst)
            ),
            None,
        )
        if ks:
            versus_ks = (
                (("pods/s", rate), ("drained (s)", drained), ("CPU per pod", cpu_per_pod))
                if mode == BACKLOG
                else (
                    ("pods/s", rate),
                    ("p99 latency (watch)", p99),
                    ("p99 latency (server)", p99_server),
                    ("CPU per pod", cpu_per_pod),
                )
            )
            for metric, key in versus_ks:
                med, per_run = _per_run_ratio(runs, name, ks, key)
                if per_run:
                    out.append(
                        {"ours": name, "versus": ks, "metric": metric, "median": med, "per_run": per_run}
                    )
        for raw in ("raw-binder", "raw-binder-events"):
            if raw in contenders:
                med, per_run = _per_run_ratio(runs, name, raw, rate)
                if per_run:
                    out.append(
                        {"ours": name, "versus": raw, "metric": "pods/s", "median": med, "per_run": per_run}
                    )
    return out


def _goal(goal: str, value: float | None, target: str, met: bool | None, **extra: Any) -> dict[str, Any]:
    """A goal as the issues ask for it: ``goal``, ``figure``, ``met`` (the figure is the value
    unless ``extra`` names another), with the target beside."""
    return {"goal": goal, "value": value, "target": target, "met": met, "figure": value, **extra}


def goals(
    summary: dict[str, Any],
    ratio_rows: list[dict[str, Any]],
    nodes: int,
    pods: int,
    workload: str = GOAL_CPU_WORKLOAD,
) -> list[dict[str, Any]]:
    """The goals of one workload's stream runs: versus kube-scheduler (pods/s, p99 latency; CPU
    per pod in ``GOAL_CPU_WORKLOAD``) and the raw binder that writes events, for clients not
    limited below ``GOAL_MIN_QPS``; peak RSS for every one of ours."""
    out = []
    large_nodes, large_ratio = GOAL_VS_KUBE_SCHEDULER_LARGE
    vs_ks = large_ratio if nodes >= large_nodes else GOAL_VS_KUBE_SCHEDULER
    for r in ratio_rows:
        med, ours, versus = r["median"], r["ours"], r["versus"]
        if BY_NAME[ours].qps < GOAL_MIN_QPS or versus == "raw-binder":
            continue  # the raw binder without events is shown, not a goal: no scheduler skips them
        if versus == "raw-binder-events":
            out.append(
                _goal(
                    f"{ours} >= {GOAL_VS_RAW_EVENTS:.0%} of the pods/s of the raw binder with events",
                    med,
                    f">= {GOAL_VS_RAW_EVENTS}",
                    None if med is None else med >= GOAL_VS_RAW_EVENTS,
                )
            )
        elif r["metric"] == "pods/s":
            out.append(
                _goal(
                    f"{ours} pods/s >= {vs_ks}x {versus}'s",
                    med,
                    f">= {vs_ks}",
                    None if med is None else med >= vs_ks,
                )
            )
        elif r["metric"] == "p99 latency (watch)":
            out.append(
                _goal(
                    f"{ours} p99 latency no worse than {versus}'s",
                    med,
                    "<= 1.0",
                    None if med is None else med <= 1.0,
                )
            )
        elif r["metric"] == "CPU per pod" and workload == GOAL_CPU_WORKLOAD:
            out.append(
                _goal(
                    f"{ours} CPU per pod <= {GOAL_CPU_RATIO}x {versus}'s",
                    med,
                    f"<= {GOAL_CPU_RATIO}",
                    None if med is None else med <= GOAL_CPU_RATIO,
                )
            )
    at_size = (nodes, pods) == GOAL_RSS_AT
    for name, s in summary.items():
        if BY_NAME[name].kind != "ours":
            continue
        v = s["peak_rss_mib_max"]
        out.append(
            _goal(
                f"{name} peak RSS <= {GOAL_RSS_MIB} MiB at {GOAL_RSS_AT[0]} nodes and {GOAL_RSS_AT[1]} pods",
                v,
                f"<= {GOAL_RSS_MIB}",
                (None if v is None else v <= GOAL_RSS_MIB) if at_size else None,
                **({} if at_size else {"note": f"measured at {nodes} nodes and {pods} pods"}),
            )
        )
    return out


DRA_WORKLOAD = "dra"
"""Its goals are its issue's: at least kube-scheduler's pods/s, in a stream and a backlog, and a
backlog drained no slower (bound by the resourceclaim controller, not a lead to keep)."""


def dra_goals(ratio_rows: list[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    out = []
    for r in ratio_rows:
        med, ours, versus = r["median"], r["ours"], r["versus"]
        if BY_NAME[versus].kind != "kube-scheduler" or BY_NAME[ours].qps < GOAL_MIN_QPS:
            continue
        if r["metric"] == "pods/s":
            out.append(
                _goal(
                    f"{ours} pods/s >= {versus}'s ({mode})",
                    med,
                    ">= 1.0",
                    None if med is None else med >= 1.0,
                )
            )
        elif r["metric"] == "drained (s)":
            out.append(
                _goal(
                    f"{ours} drains the backlog no slower than {versus}",
                    med,
                    "<= 1.0",
                    None if med is None else med <= 1.0,
                )
            )
    return out


SCALE_DRAIN_RATIO = 0.8
"""With resident pods (the scale benchmark): ours drains a backlog in at most this share of
kube-scheduler's time, binds its first pod no later, and peaks at no more RSS."""


SCALE_EVENTS_LAG_S = 1.0
"""At the end of a backlog, ours' last Scheduled event at most this long after its last bind."""


def scale_goals(
    runs: list[dict[str, Any]], contenders: list[str], mode: str, resident: int
) -> list[dict[str, Any]]:
    """The scale benchmark's goals, each the median of per-run ratios ours / kube-scheduler at
    equal client settings: peak RSS (both modes), first bind and time to drain (backlog)."""
    out = []
    checks: list[tuple[str, str, Any, float]] = [
        ("peak RSS", "peak_rss_mib", lambda r: r.get("peak_rss_mib"), 1.0),
    ]
    if mode == BACKLOG:
        checks += [
            ("first bind after its start", "first_bind_after_s", lambda r: r.get("first_bind_after_s"), 1.0),
            ("backlog drained", "last_bind_after_s", lambda r: r.get("last_bind_after_s"), SCALE_DRAIN_RATIO),
        ]
    for name in contenders:
        c = BY_NAME[name]
        if c.kind != "ours":
            continue
        ks = next(
            (k for k in contenders if BY_NAME[k].kind == "kube-scheduler" and BY_NAME[k].qps == c.qps),
            None,
        )
        if ks is None:
            continue
        for what, _, key, limit in checks:
            med, per_run = _per_run_ratio(runs, name, ks, key)
            out.append(
                _goal(
                    f"{name} {what} <= {limit:g}x {ks}'s with {resident} resident pods ({mode})",
                    med,
                    f"<= {limit:g}",
                    None if med is None else med <= limit,
                    per_run=per_run,
                )
            )
        if mode == BACKLOG:
            out += _event_goals(runs, name, mode)
    return out


def _event_goals(runs: list[dict[str, Any]], name: str, mode: str) -> list[dict[str, Any]]:
    """Ours' Scheduled events at the end of a backlog: the last within
    ``SCALE_EVENTS_LAG_S`` of the last bind (median run), none missing (any run)."""
    mine = [r for r in runs if r["contender"] == name]
    lag = _median([r.get("events_lag_s") for r in mine])
    missing = [
        (r.get("bound_watch") or 0) - (r.get("scheduled_events") or 0)
        for r in mine
        if r.get("scheduled_events") is not None
    ]
    worst = max(missing) if missing else None
    return [
        _goal(
            f"{name} last Scheduled event <= {SCALE_EVENTS_LAG_S:g} s after its last bind ({mode})",
            lag,
            f"<= {SCALE_EVENTS_LAG_S:g}",
            None if lag is None else lag <= SCALE_EVENTS_LAG_S,
            per_run=[r.get("events_lag_s") for r in mine],
        ),
        _goal(
            f"{name} every bound pod has its Scheduled event ({mode})",
            worst,
            "0 missing",
            None if worst is None else worst <= 0,
            per_run=missing,
        ),
    ]


def cases(
    runs: list[dict[str, Any]],
    contenders: list[str],
    workloads: list[str],
    modes: list[str],
    nodes: int,
    pods: int,
    resident: int = 0,
) -> list[dict[str, Any]]:
    """Per workload and mode: the summary, the ratios and the goals of its runs. The goals are
    the stream mode's (they are set for pods created at a steady rate); a backlog's figures are
    reported beside them. The ``dra`` workload has goals of its own, in both modes; with
    resident pods, the scale goals come first (:func:`scale_goals`)."""
    out = []
    for workload in workloads:
        for mode in modes:
            rs = [r for r in runs if r.get("workload", "basic") == workload and r.get("mode", STREAM) == mode]
            summary = summarize(rs, contenders)
            ratio_rows = ratios(rs, contenders, mode)
            if workload == DRA_WORKLOAD:
                case_goals = dra_goals(ratio_rows, mode)
            else:
                case_goals = goals(summary, ratio_rows, nodes, pods, workload) if mode == STREAM else []
            if resident:
                case_goals = scale_goals(rs, contenders, mode, resident) + case_goals
            out.append(
                {
                    "workload": workload,
                    "mode": mode,
                    "summary": summary,
                    "ratios": ratio_rows,
                    "goals": case_goals,
                }
            )
    return out


def all_goals(case_list: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every case's goals in one list, each naming its case (``workload/mode``): the report's
    top-level ``goals``, which a script checks without walking the cases."""
    return [{"case": f"{c['workload']}/{c['mode']}", **g} for c in case_list for g in c["goals"]]


def case_runs(runs: list[dict[str, Any]], case: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r
        for r in runs
        if r.get("workload", "basic") == case["workload"] and r.get("mode", STREAM) == case["mode"]
    ]


# --- outputs ------------------------------------------------------------------------------------


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _lat(d: dict[str, Any]) -> str:
    return " / ".join(_fmt(d[f"p{p}"]) for p in PERCENTILES)


def _resident(cfg: dict[str, Any]) -> str:
    n = cfg.get("resident_pods") or 0
    return f" running {n} resident pods" if n else ""


def _header(doc: dict[str, Any]) -> list[str]:
    cfg, m = doc["config"], doc["machine"]
    return [
        f"### {cfg['nodes']} kwok nodes{_resident(cfg)}, {cfg['pods']} pods, {cfg['runs']} run(s) per contender",
        "",
        f"Taken {doc['started']} in {doc['duration_s'] / 60:.0f} min"
        + (f" of running, in {len(doc['parts'])} parts" if len(doc.get("parts", ())) > 1 else "")
        + (f", our scheduler at {doc['ours_code'][:12]}" if doc.get("ours_code") else "")
        + f", on {m['cpu_model']}, {m['cores']} cores, "
        f"{m['memory_gib']} GiB, Linux {m['kernel']}; Kubernetes {m['kubernetes']} (kind), "
        f"{m.get('kwok', '')}, {m.get('kube_scheduler', '')}, Python {m['python']}. "
        f"Load average at start {m['load_average_at_start']}"
        + (f", at end {doc['load_average_at_end']}" if doc.get("load_average_at_end") else "")
        + (f". {doc['note']}" if doc.get("note") else "."),
        *_parts(doc.get("parts", [])),
        *_missing(doc.get("missing_cases", [])),
    ]


def _missing(cases: list[str]) -> list[str]:
    """An unfinished benchmark (``--report-from``) says which cases its tables lack."""
    if not cases:
        return []
    return ["", f"**Unfinished**: {len(cases)} cases have not run yet ({', '.join(cases)})."]


def _parts(parts: list[dict[str, Any]]) -> list[str]:
    """A benchmark resumed (--resume) names each part's time and host; a case runs whole in one."""
    if len(parts) < 2:
        return []
    lines = [
        "",
        "Interrupted and resumed (`--resume`); each case (all contenders' run of a workload and mode) ran in one part:",
    ]
    for i, p in enumerate(parts, 1):
        h = p.get("host", {})
        lines.append(
            f"- part {i}: {p['started']}, {p['duration_s'] / 60:.0f} min, on {h.get('cpu_model')}, "
            f"{h.get('cores')} cores, Linux {h.get('kernel')}, load average at start {h.get('load_average_at_start')}"
        )
    return lines


Column = tuple[str, Callable[[str, dict[str, Any]], str]]
"""A table column: its header and how a contender's summary fills its cell."""

_NAME: Column = ("contender", lambda name, s: name)
_CLIENT: Column = ("client QPS/burst", lambda name, s: BY_NAME[name].client)
_RATE: Column = ("pods/s", lambda name, s: _fmt(s["pods_per_s"], 1))
_CPU: Column = ("CPU s", lambda name, s: _fmt(s["cpu_s"], 1))
_RSS: Column = ("peak RSS MiB", lambda name, s: _fmt(s["peak_rss_mib"], 0))
_COMPLETE: Column = ("complete runs", lambda name, s: f"{s['complete_runs']}/{s['runs']}")
_EVENTS: Column = ("Scheduled events", lambda name, s: _fmt(s.get("scheduled_events"), 0))
_LOAD: Column = ("load at start", lambda name, s: _fmt(s.get("load_1m_at_start"), 1))
_LOAD_ABOUT = (
    " Load at start: the machine's 1-minute load average as the contender was started (on a "
    "machine this busy every process starts and lists slower)."
)

STREAM_COLUMNS: list[Column] = [
    _NAME,
    _CLIENT,
    _RATE,
    ("latency p50 / p90 / p99, watch (s)", lambda name, s: _lat(s["latency_watch_s"])),
    ("latency p50 / p90 / p99, server (s)", lambda name, s: _lat(s["latency_server_s"])),
    _CPU,
    _RSS,
    ("RSS when ready MiB", lambda name, s: _fmt(s.get("rss_ready_mib"), 0)),
    _COMPLETE,
    ("pods created/s", lambda name, s: _fmt(s["create_rate"], 0)),
    _EVENTS,
    _LOAD,
]
STREAM_ABOUT = (
    "**Stream**: the pods are created while the contender runs. Medians over the runs. pods/s: "
    "first to last bind as the watch saw them. Latency: creation to bind, in seconds, "
    "watch-observed (sub-second) and server-side (whole seconds, from creationTimestamp and "
    "PodScheduled's lastTransitionTime). CPU: the contender's CPU seconds from the first create "
    "to the last Scheduled event (the bench waits for them). RSS: peak (VmHWM) of the process; when ready: VmRSS once its caches "
    "synced, before the first measured pod (what the nodes and the cluster's other pods take)." + _LOAD_ABOUT
)
BACKLOG_COLUMNS: list[Column] = [
    _NAME,
    _CLIENT,
    _RATE,
    ("first bind (s)", lambda name, s: _fmt(s.get("first_bind_after_s"), 1)),
    ("drained (s)", lambda name, s: _fmt(s.get("last_bind_after_s"), 1)),
    ("last event after the last bind (s)", lambda name, s: _fmt(s.get("events_lag_s"), 1)),
    _CPU,
    _RSS,
    _COMPLETE,
    _EVENTS,
    _LOAD,
]
BACKLOG_ABOUT = (
    "**Backlog**: every pod is Pending before the contender starts, as after a restart or a big "
    "rollout. Medians over the runs. pods/s: first to last bind. Drained: seconds from the "
    "contender's start to the last bind (its start, cache sync and leader election included). "
    "Events: the bench waits (60 s at most) until every bound pod has its Scheduled event, then "
    "takes the CPU: the whole process's, start and events included." + _LOAD_ABOUT
)


def _table(about: str, columns: list[Column], summary: dict[str, Any]) -> list[str]:
    """A paragraph, then one row per contender; the first two columns are text, the rest numbers."""
    lines = [
        about,
        "",
        "| " + " | ".join(header for header, _ in columns) + " |",
        "| " + " | ".join("---" if i < 2 else "---:" for i in range(len(columns))) + " |",
    ]
    for name, s in summary.items():
        lines.append("| " + " | ".join(cell(name, s) for _, cell in columns) + " |")
    return lines


def _ratio_and_goal_tables(part: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if part["ratios"]:
        lines += ["", "| ours | versus | ratio of | median | per run |", "| --- | --- | --- | ---: | --- |"]
        for r in part["ratios"]:
            lines.append(
                f"| {r['ours']} | {r['versus']} | {r['metric']} | {_fmt(r['median'])} | "
                f"{', '.join(_fmt(x) for x in r['per_run'])} |"
            )
    if part["goals"]:
        lines += ["", "| goal | value | target | result |", "| --- | ---: | --- | --- |"]
        for g in part["goals"]:
            result = {True: "met", False: "**missed**", None: "not evaluated"}[g["met"]]
            if g.get("note"):
                result += f" ({g['note']})"
            v = g["value"]  # ratios to three places: 1.00 must not read as met when it is 0.996
            lines.append(
                f"| {g['goal']} | {_fmt(v, 3 if isinstance(v, float) and v < 10 else 1)} | {g['target']} | {result} |"
            )
    return lines


def markdown(doc: dict[str, Any]) -> str:
    lines = _header(doc)
    described = doc["config"].get("workloads") or {}
    for case in doc["cases"]:
        about, columns = (
            (BACKLOG_ABOUT, BACKLOG_COLUMNS) if case["mode"] == BACKLOG else (STREAM_ABOUT, STREAM_COLUMNS)
        )
        what = described.get(case["workload"])
        lines += ["", f"#### {case['workload']}, {case['mode']}" + (f" ({what})" if what else ""), ""]
        if not case["summary"]:
            lines.append("Not run yet.")
            continue
        lines += [*_table(about, columns, case["summary"]), *_ratio_and_goal_tables(case)]
    return "\n".join(lines) + "\n"


def chart(doc: dict[str, Any], path: Path) -> None:
    """One row per workload: the stream's latency CDF and throughput, and the backlog's drain,
    each from the median run of every contender; only the panels of the modes that ran."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(c["workload"] for c in doc["cases"]))
    modes = [m for m in (STREAM, BACKLOG) if any(c["mode"] == m for c in doc["cases"])]
    by_key = {(c["workload"], c["mode"]): c for c in doc["cases"]}
    columns = 2 * (STREAM in modes) + (BACKLOG in modes)
    fig, axes = plt.subplots(
        len(workloads), columns, figsize=(7 * columns, 5 * len(workloads)), squeeze=False
    )
    for row, workload in zip(axes, workloads, strict=True):
        panels = iter(row)
        if STREAM in modes:
            _stream_panels(doc, by_key.get((workload, STREAM)), workload, next(panels), next(panels))
        if BACKLOG in modes:
            _drain_panel(doc, by_key.get((workload, BACKLOG)), workload, next(panels))
        for ax in row:
            ax.grid(True, which="both", alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
    cfg = doc["config"]
    fig.suptitle(
        f"{cfg['nodes']} kwok nodes{_resident(cfg)}, {cfg['pods']} pods\n{doc['machine']['cpu_model']}, "
        f"{doc['machine']['cores']} cores ({doc['started']})",
        fontsize=10,
    )
    # Two lines of title, about 0.3 in, above the panels whatever the figure's height.
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _stream_panels(
    doc: dict[str, Any], stream: dict[str, Any] | None, workload: str, lat: Any, through: Any
) -> None:
    for name in (stream or {}).get("summary", {}):
        r = median_run(case_runs(doc["runs"], stream), name) if stream else None
        if r is None:
            continue
        if r["latency_watch_cdf_s"]:
            cdf = r["latency_watch_cdf_s"]
            lat.plot(cdf, np.linspace(0, 1, len(cdf)), label=name)
        if r["timeline_binds_per_s"]:
            tl = r["timeline_binds_per_s"]
            through.plot(np.arange(len(tl)) + 0.5, tl, label=name, drawstyle="steps-mid")
    lat.set_xscale("log")
    lat.set_xlabel("creation to bind, watch-observed (s, log scale)")
    lat.set_ylabel("fraction of pods")
    lat.set_title(f"{workload}, stream: latency CDF (median run)")
    through.set_xlabel("seconds since the first pod was created")
    through.set_ylabel("binds per second")
    through.set_title(f"{workload}, stream: throughput (median run)")


def _drain_panel(doc: dict[str, Any], backlog: dict[str, Any] | None, workload: str, drain: Any) -> None:
    for name in (backlog or {}).get("summary", {}):
        r = median_run(case_runs(doc["runs"], backlog), name) if backlog else None
        if r is not None and r["timeline_binds_per_s"]:
            tl = r["timeline_binds_per_s"]
            drain.plot(np.arange(len(tl)) + 0.5, tl, label=name, drawstyle="steps-mid")
    drain.set_xlabel("seconds since the contender started, every pod Pending")
    drain.set_ylabel("binds per second")
    drain.set_title(f"{workload}, backlog: drain (median run)")


def write(doc: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "latest.json", "md": out_dir / "latest.md", "png": out_dir / "latest.png"}
    paths["json"].write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    paths["md"].write_text(markdown(doc), encoding="utf-8")
    chart(doc, paths["png"])
    return paths
