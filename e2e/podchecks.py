"""What every pod of a namespace went through under load: bound once, where it fit, in time.

Shared by the suites that create pods while something goes wrong (e2e/test_churn.py,
e2e/test_faults.py): :func:`check_pods` holds a :class:`e2e.watching.PodWatch`'s records
against the rules, :func:`restarts` counts our replicas' container restarts.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from kubernetes import client

from e2e.events import events
from e2e.measure import summary
from e2e.schedulers import OUR_NS, OUR_SELECTOR
from e2e.watching import PodWatch
from scheduler.polling import PollTimeoutError, poll

EVENT_WAIT = 30.0
"""How long a bound pod's Scheduled event may trail its bind."""


def scheduled_events(core: client.CoreV1Api, ns: str, uids: set[str]) -> dict[str, int]:
    """Scheduled events per pod UID (a series counted whole), read until every one of ``uids``
    has one or :data:`EVENT_WAIT` has passed."""
    last: dict[str, int] = {}

    def read() -> bool:
        last.clear()
        for ev in events(core, ns, reason="Scheduled"):
            uid = ev["involvedObject"].get("uid") or ev["involvedObject"]["name"]
            count = max(ev.get("count") or 1, (ev.get("series") or {}).get("count") or 1)
            last[uid] = last.get(uid, 0) + count
        return uids <= last.keys()

    with contextlib.suppress(PollTimeoutError):
        poll(read, EVENT_WAIT, "a Scheduled event for every bound pod", 1)
    return last


def restarts(core: client.CoreV1Api) -> dict[str, int]:
    return {
        p.metadata.name: sum(cs.restart_count for cs in p.status.container_statuses or ())
        for p in core.list_namespaced_pod(OUR_NS, label_selector=OUR_SELECTOR).items
    }


def check_pods(
    core: client.CoreV1Api,
    ns: str,
    watch: PodWatch,
    t0: float,
    deleted: list[int],
    *,
    p99_bound: float | None,
    max_unbound: float,
    unreported_ok: bool = False,
) -> tuple[dict[str, Any], list[str]]:
    """Every pod's bind latency and binding history: (the figures, what is wrong).

    ``unreported_ok``: a bound pod without a Scheduled event is counted, not a problem (a
    leader cut off from the API server cannot report a Binding that landed before it exits)."""
    problems = []
    recs = watch.records()
    if len(watch.errors) >= 5:
        problems.append(f"the pod watch kept failing: {watch.errors[:5]}")
    created = [r for r in recs if r.seen >= t0]
    if len(created) < sum(deleted):
        problems.append(f"{sum(deleted)} pods were force-deleted but only {len(created)} created since")
    rebound = {r.name: r.nodes for r in recs if len(r.nodes) > 1}
    if rebound:
        problems.append(f"pods whose nodeName changed (bound twice): {rebound}")
    if watch.overcommits:
        problems.append(f"requests above allocatable: {watch.overcommits[:5]}")
    now = time.time()
    waited = {
        r.name: round((r.deleted_seen or now) - r.seen, 1)
        for r in recs
        if r.bound_seen is None and (r.deleted_seen or now) - r.seen > max_unbound
    }
    if waited:
        problems.append(f"pods that waited over {max_unbound:g}s unbound (deleted or still there): {waited}")
    slow = {r.name: round(r.watch_latency() or 0, 1) for r in recs if (r.watch_latency() or 0) > max_unbound}
    if slow:
        problems.append(f"pods bound over {max_unbound:g}s after they were created: {slow}")
    # Exactly one Scheduled event per bound pod: a second would be a second binding decision,
    # none a bind nobody reported. Events trail binds, so a missing one is waited for.
    bound = {r.uid: r.name for r in recs if r.bound_seen is not None}
    per_pod = scheduled_events(core, ns, set(bound))
    twice = {u: n for u, n in per_pod.items() if n > 1}
    if twice:
        problems.append(f"pods with more than one Scheduled event: {twice}")
    missing = sorted(name for uid, name in bound.items() if uid not in per_pod)
    if missing and not unreported_ok:
        problems.append(f"bound pods without a Scheduled event after {EVENT_WAIT:g}s: {missing[:10]}")
    api_lat = [x for x in (r.api_latency() for r in recs) if x is not None]
    watch_lat = [x for x in (r.watch_latency() for r in recs) if x is not None]
    api_summary, watch_summary = summary(api_lat), summary(watch_lat)
    if p99_bound is not None:
        if api_summary.get("p99", 0) > p99_bound:
            problems.append(f"creation -> PodScheduled {api_summary}: p99 over {p99_bound:g}s")
        if watch_summary.get("p99", 0) > p99_bound:
            problems.append(f"seen -> bound (watch) {watch_summary}: p99 over {p99_bound:g}s")
    figures = {
        "pods": len(recs),
        "rounds": len(deleted),
        "force_deleted": sum(deleted),
        "created_since_churn_start": len(created),
        "bound": len(watch_lat),
        "deleted_before_bound": len([r for r in recs if r.bound_seen is None and r.deleted_seen]),
        "creation_to_podscheduled_s": api_summary,
        "seen_to_bound_watch_s": watch_summary,
        "kubelet_rejected": len([r for r in recs if r.reason in ("OutOfcpu", "OutOfmemory")]),
        "peak_requested_cpu_m": {n: c for n, (c, _) in sorted(watch.peak.items())},
        "bound_without_scheduled_event": missing,
    }
    return figures, problems
