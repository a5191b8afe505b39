"""Shadow mode's verdicts: what ours would have done with each pod the active scheduler placed.

For every bind the informer reports (a pod of one of our profiles' names goes from
unbound to bound), :meth:`Judge.bound` runs the profile over every node on the cache as
it stood just before that bind (the event handler calls it before the cache counts the
pod; :func:`scheduler.core.explain.compare`) and records one :class:`Decision`:

- ``same``: the active scheduler's node has ours' best total (a tie counts: ours breaks
  ties at random);
- ``different``: ours would choose another node; the decision names both nodes' totals
  and the score plugin that gave ours its largest lead, or, when ours would refuse the
  active scheduler's node, the filter that refuses it;
- ``unschedulable``: no node fits for ours; the decision has the FailedScheduling message;
- ``placeable``: a pod the active scheduler left Pending (its ``PodScheduled`` condition is
  ``False``/``Unschedulable``) that ours would place (:meth:`Judge.sweep_pending`; one that
  ours cannot place either is looked at again a minute later).

Decisions are counted in ``dynamic_scheduler_shadow_decisions_total{profile,verdict}``,
their CPU time in ``dynamic_scheduler_shadow_decision_cpu_seconds``, the last ones kept
for ``/shadow/decisions`` (:meth:`Judge.report`), and a summary is logged every minute.
Nothing here writes to the API server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client import Counter as PromCounter

from scheduler.config.decode import camel
from scheduler.core.cache import Cache
from scheduler.core.explain import Comparison, compare
from scheduler.core.filtering import SchedulingError
from scheduler.core.podinfo import PodInfo
from scheduler.core.profile import Profile
from scheduler.logs import V, kv
from scheduler.settings import ShadowSettings

logger = logging.getLogger(__name__)

SAME, DIFFERENT, UNSCHEDULABLE, PLACEABLE = "same", "different", "unschedulable", "placeable"
VERDICTS = (SAME, DIFFERENT, UNSCHEDULABLE, PLACEABLE)
CPU_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


@dataclass(frozen=True, slots=True)
class Decision:
    time: float
    """When it was judged (epoch seconds)."""
    pod: str
    profile: str
    verdict: str
    active_node: str
    """Where the active scheduler bound the pod ("" for ``placeable``)."""
    ours_node: str
    """Where ours would put it ("" for ``unschedulable``); for a tie, the first of the best."""
    ours_total: int | None
    active_total: int | None
    """Ours' total on the active scheduler's node (None: ours refuses it, or placeable)."""
    plugin: str
    """What made the difference: the score plugin with the largest lead, or the refusing filter."""
    reason: str
    cpu_seconds: float

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {camel(k): v for k, v in d.items()}


def decide(c: Comparison, active_node: str) -> tuple[str, str, int | None, int | None, str, str]:
    """(verdict, ours' node, ours' total, total on ``active_node``, plugin, reason) for a pod the
    active scheduler bound to ``active_node``."""
    verdict, ours, best, total, plugin, reason = _decide(c, active_node)
    if c.relaxed and c.best:
        reason += f" (no node passed every filter: {', '.join(c.relaxed)} relaxed)"
    return verdict, ours, best, total, plugin, reason


def _decide(c: Comparison, active_node: str) -> tuple[str, str, int | None, int | None, str, str]:
    if not c.best:
        return UNSCHEDULABLE, "", None, None, "", c.message
    ours = c.best[0]
    if active_node in c.best:
        tie = f" (tied with {len(c.best) - 1} more)" if len(c.best) > 1 else ""
        return SAME, active_node, c.best_total, c.best_total, "", f"best total {c.best_total}{tie}"
    if not c.known:
        return DIFFERENT, ours, c.best_total, None, "", f"{active_node} is not a node ours knows"
    if c.rejection is not None:
        reason = f"ours refuses {active_node}: {c.rejection.message}"
        return DIFFERENT, ours, c.best_total, None, c.rejection.plugin, reason
    plugin, points = c.lead if c.lead is not None else ("", 0)
    reason = f"{ours} {c.best_total} vs {active_node} {c.total}"
    if plugin and points > 0:
        reason += f"; {plugin} +{points}"
    return DIFFERENT, ours, c.best_total, c.total, plugin, reason


@dataclass
class _Tally:
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, profile: str, verdict: str) -> None:
        self.counts[(profile, verdict)] += 1

    def by_verdict(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for (_, verdict), n in self.counts.items():
            out[verdict] += n
        return out


def agreement(by_verdict: Counter[str]) -> float | None:
    total = sum(by_verdict.values())
    return by_verdict[SAME] / total if total else None


class Judge:
    """Judges the active scheduler's binds (thread-safe; call under no lock of the cache).

    ``settings`` say how many decisions are kept and how often Pending pods are swept."""

    def __init__(
        self,
        cache: Cache,
        profiles: dict[str, Profile],
        registry: CollectorRegistry,
        *,
        settings: ShadowSettings | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cache = cache
        self.profiles = profiles
        self.settings = settings or ShadowSettings()
        self._clock = clock
        self._lock = threading.Lock()
        self._decisions: deque[Decision] = deque(maxlen=self.settings.kept)
        self._total = _Tally()
        self._since_summary = _Tally()
        self._placeable_seen: set[str] = set()
        self._relook_at: dict[str, float] = {}
        """Pending pods ours could not place either: uid -> when to judge them again."""
        self._monotonic = monotonic
        self.started = clock()
        self._decided = PromCounter(
            "dynamic_scheduler_shadow_decisions",
            "Shadow mode's verdicts on the active scheduler's placements, by profile and verdict.",
            ["profile", "verdict"],
            registry=registry,
        )
        self._cpu = Histogram(
            "dynamic_scheduler_shadow_decision_cpu_seconds",
            "CPU time of one shadow decision (a full cycle over every node).",
            buckets=CPU_BUCKETS,
            registry=registry,
        )
        for name in profiles:
            for verdict in VERDICTS:
                self._decided.labels(name, verdict)

    # --- judging ------------------------------------------------------------------

    def bound(self, pod: PodInfo, node: str) -> Decision | None:
        """The active scheduler bound ``pod`` (as it was before: unbound) to ``node``; call
        before the cache counts it there."""
        profile = self.profiles.get(pod.scheduler_name)
        if profile is None:
            return None
        judged = self._compare(profile, pod, node)
        if judged is None:
            return None
        comparison, cpu = judged
        verdict, ours, ours_total, active_total, plugin, reason = decide(comparison, node)
        return self._record(
            Decision(
                self._clock(),
                pod.key,
                profile.name,
                verdict,
                node,
                ours,
                ours_total,
                active_total,
                plugin,
                reason,
                cpu,
            )
        )

    def sweep_pending(self, pods: Iterable[dict[str, Any]]) -> list[Decision]:
        """Judge the pods the active scheduler left Pending as unschedulable: ``placeable``
        for each that ours would place (once per pod)."""
        out = []
        for raw in pods:
            if not _left_unschedulable(raw):
                continue
            uid = raw["metadata"].get("uid", "")
            now = self._monotonic()
            with self._lock:
                if uid in self._placeable_seen or now < self._relook_at.get(uid, 0.0):
                    continue
            pi = PodInfo.from_pod(raw)
            profile = self.profiles.get(pi.scheduler_name)
            if profile is None:
                continue
            judged = self._compare(profile, pi, "")
            if judged is None or not judged[0].best:
                with self._lock:
                    self._relook_at[uid] = now + self.settings.relook_every
                continue
            comparison, cpu = judged
            with self._lock:
                self._placeable_seen.add(uid)
            message = _condition_message(raw)
            out.append(
                self._record(
                    Decision(
                        self._clock(),
                        pi.key,
                        profile.name,
                        PLACEABLE,
                        "",
                        comparison.best[0],
                        comparison.best_total,
                        None,
                        "",
                        f"left Pending by the active scheduler ({message})" if message else "left Pending",
                        cpu,
                    )
                )
            )
        return out

    def forget(self, uid: str) -> None:
        """The pod is bound or gone: it may be judged placeable again if it comes back Pending."""
        with self._lock:
            self._placeable_seen.discard(uid)
            self._relook_at.pop(uid, None)

    def _compare(self, profile: Profile, pod: PodInfo, node: str) -> tuple[Comparison, float] | None:
        start = time.thread_time()
        try:
            with self.cache.lock:
                c = compare(profile, pod, self.cache, node)
        except SchedulingError as e:
            logger.warning("Shadow decision failed", extra=kv(pod=pod.key, err=str(e)))
            return None
        cpu = time.thread_time() - start
        self._cpu.observe(cpu)
        return c, cpu

    def _record(self, d: Decision) -> Decision:
        with self._lock:
            self._decisions.append(d)
            self._total.add(d.profile, d.verdict)
            self._since_summary.add(d.profile, d.verdict)
        self._decided.labels(d.profile, d.verdict).inc()
        level = logging.INFO if d.verdict != SAME else V(4)
        logger.log(
            level,
            "Shadow decision",
            extra=kv(
                pod=d.pod,
                verdict=d.verdict,
                active=d.active_node or None,
                ours=d.ours_node or None,
                plugin=d.plugin or None,
                reason=d.reason,
            ),
        )
        return d

    # --- reporting ----------------------------------------------------------------

    def report(self, limit: int = 50) -> dict[str, Any]:
        """What ``/shadow/decisions`` answers: counts by profile and verdict since the start,
        the agreement rate, and the last ``limit`` decisions (newest last)."""
        with self._lock:
            counts: dict[str, dict[str, int]] = {}
            for (profile, verdict), n in sorted(self._total.counts.items()):
                counts.setdefault(profile, {})[verdict] = n
            by_verdict = self._total.by_verdict()
            last = list(self._decisions)[-limit:] if limit > 0 else []
        return {
            "since": self.started,
            "decisions": sum(by_verdict.values()),
            "agreement": agreement(by_verdict),
            "counts": counts,
            "last": [d.to_dict() for d in last],
        }

    def summarize(self) -> None:
        """The minute's summary line: decisions since the last one, and the rate since the start."""
        with self._lock:
            minute = self._since_summary.by_verdict()
            self._since_summary = _Tally()
            total = self._total.by_verdict()
        rate = agreement(total)
        logger.info(
            "Shadow summary",
            extra=kv(
                decisions=sum(minute.values()),
                **{v: minute[v] for v in VERDICTS},
                agreementSinceStart=None if rate is None else round(rate, 4),
                decisionsSinceStart=sum(total.values()),
            ),
        )

    def run(self, stop: threading.Event, pending: Callable[[], Iterable[dict[str, Any]]]) -> None:
        """Sweep the Pending pods and log a summary, as often as the settings say, until ``stop``."""
        summary_every, sweep_every = self.settings.summary_every, self.settings.sweep_every
        next_summary = time.monotonic() + summary_every
        while not stop.wait(min(sweep_every, max(0.0, next_summary - time.monotonic()))):
            try:
                self.sweep_pending(pending())
            except Exception:  # the sweep must not end the thread
                logger.exception("Shadow sweep of Pending pods failed")
            if time.monotonic() >= next_summary:
                self.summarize()
                next_summary = time.monotonic() + summary_every


def _left_unschedulable(pod: dict[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    if spec.get("nodeName") or spec.get("schedulingGates") or pod["metadata"].get("deletionTimestamp"):
        return False
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled":
            return cond.get("status") == "False" and cond.get("reason") == "Unschedulable"
    return False


def _condition_message(pod: dict[str, Any]) -> str:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled":
            return str(cond.get("message") or "")
    return ""
