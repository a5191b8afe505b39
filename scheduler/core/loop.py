"""The scheduling loop: pop → filter → score → (preempt) → assume → reserve → (bind in the background) → post-bind.

One thread runs scheduling cycles, one pod at a time, holding the cache lock
for the cycle; binds (PreBind, the Binding call, PostBind) run concurrently
on a thread pool, so the API server's latency does not stall the loop. What
talks to the API server (binding, events, pod conditions, evicting the
victims of a preemption) is behind :class:`ClusterIO`, so the loop itself
has no I/O.

When no node fits, the profile's PostFilter (DefaultPreemption) may choose
a node and victims: the pod is nominated to that node at once (so the next
cycles leave the room to it), ``status.nominatedNodeName`` is written with
the FailedScheduling condition, and the victims are evicted in the
background, as kube-scheduler's asynchronous preemption. Until that is
done the pod is not scheduled again; then it is retried at once.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from scheduler.core.cache import Cache
from scheduler.core.filtering import FitError, SchedulingError
from scheduler.core.framework import CycleState
from scheduler.core.podinfo import PodInfo
from scheduler.core.preemption import Preemption
from scheduler.core.profile import Profile, ScheduleResult
from scheduler.core.queue import QueuedPod, SchedulingQueue
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

PREEMPTION_WAIT = "DefaultPreemption"
"""The plugin a pod held back until its preemption is carried out is parked for."""


class BindOutcome(enum.Enum):
    """How a bind ended (``scheduler.cluster.binder`` reports it)."""

    BOUND = "bound"
    GONE = "gone"
    """409 Conflict or 404: the pod is bound already (by someone else) or deleted. Drop it; don't retry."""
    FAILED = "failed"
    """Anything else, after retries: a scheduling error (requeued with backoff)."""
    CANCELLED = "cancelled"
    """Not sent: the scheduler was halted (its Lease lost) before the bind, or between its retries."""


class ClusterIO(Protocol):
    def bind(self, pod: PodInfo, node: str) -> tuple[BindOutcome, str]:
        """Bind (retrying 429/5xx); the string says why when not BOUND."""
        ...

    def scheduled(self, pod: PodInfo, node: str, profile: str) -> None:
        """The ``Scheduled`` event."""
        ...

    def relaxed(self, pod: PodInfo, node: str, profile: str, plugins: tuple[str, ...], why: str) -> None:
        """The ``FilterRelaxed`` warning: the pod went to ``node`` only with the filters of
        ``plugins`` relaxed; ``why``: FailedScheduling's words for the cycle before."""
        ...

    def unschedulable(
        self, pod: PodInfo, message: str, profile: str, reason: str, nominated_node: str | None = ""
    ) -> None:
        """The ``FailedScheduling`` event and the ``PodScheduled=False`` condition
        (reason ``Unschedulable`` or ``SchedulerError``), and ``status.nominatedNodeName``:
        set to ``nominated_node``, cleared for "", left as it is for None."""
        ...

    def preempt(self, preemption: Preemption, profile: str, done: Callable[[bool], None]) -> None:
        """Carry out ``preemption`` in the background; call ``done(ok)`` when it is over
        (``ok``: every write it needed succeeded)."""
        ...


class LoopMetrics(Protocol):
    def attempt(self, result: str, profile: str, seconds: float) -> None: ...
    def scheduled(self, profile: str, attempts: int, sli_seconds: float) -> None: ...
    def algorithm(self, seconds: float) -> None:
        """The scheduling algorithm of an attempt, from its start: to a node, an error, or
        through PostFilter when no node fits (kube-scheduler's ``schedulingAlgorithm``)."""
        ...

    def preemption(self, victims: int | None) -> None:
        """A preemption attempt; ``victims``: how many it chose to evict (None: it chose no node)."""
        ...


class _NoMetrics:
    def attempt(self, result: str, profile: str, seconds: float) -> None:
        return None

    def algorithm(self, seconds: float) -> None:
        return None

    def scheduled(self, profile: str, attempts: int, sli_seconds: float) -> None:
        return None

    def preemption(self, victims: int | None) -> None:
        return None


class Scheduler:
    def __init__(
        self,
        cache: Cache,
        queue: SchedulingQueue,
        profiles: dict[str, Profile],
        io: ClusterIO,
        metrics: LoopMetrics | None = None,
        bind_workers: int = 16,
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.profiles = profiles
        self.io = io
        self.metrics = metrics or _NoMetrics()
        self._binds = ThreadPoolExecutor(max_workers=bind_workers, thread_name_prefix="bind")
        self._inflight_binds = 0
        self._idle = threading.Condition()
        self._preempting: set[str] = set()
        """Pods whose victims are being evicted (``Executor.IsPodRunningPreemption``)."""
        self._preempting_lock = threading.Lock()
        self.halted = threading.Event()
        """Set by :meth:`halt`: no cycle starts and no bind is sent any more."""

    def run(self, stop: threading.Event) -> None:
        """Schedule until ``stop`` is set (or the queue is closed)."""
        logger.info("Starting scheduling loop", extra=kv(profiles=sorted(self.profiles)))
        flusher = threading.Thread(target=self.queue.run, args=(stop,), name="queue-flush", daemon=True)
        flusher.start()
        while not stop.is_set() and not self.halted.is_set():
            qp = self.queue.pop(timeout=0.5)
            if qp is None:
                continue
            if self.halted.is_set():
                self.queue.requeue(qp, nominate=None)
                break
            try:
                self.schedule_one(qp)
            except Exception:
                # A bug in one cycle must not stop scheduling for everyone else.
                logger.exception("Scheduling cycle failed", extra=kv(pod=qp.pod.key))
                self.queue.requeue(qp, error=True)
        flusher.join()
        logger.info("Scheduling loop stopped")

    def schedule_one(self, qp: QueuedPod) -> None:
        pi = qp.pod
        profile = self.profiles.get(pi.scheduler_name)
        if profile is None or self.cache.has_pod(pi.uid):
            # Not ours (any more), or already assumed/bound: nothing to do.
            self.queue.done(qp)
            return
        with self._preempting_lock:
            preempting = pi.uid in self._preempting
        if preempting:
            # DefaultPreemption's PreEnqueue: not before its victims are on their way out.
            logger.log(V(4), "Waiting for the preemption for this pod to be finished", extra=kv(pod=pi.key))
            self.queue.requeue(qp, frozenset({PREEMPTION_WAIT}), nominate=None, gated=True)
            return
        held = profile.pre_enqueue(pi)
        if held is not None:
            # As kube-scheduler's PreEnqueue: no attempt, no condition, no event; the pod
            # waits until an event of the plugin that holds it moves it on.
            logger.log(
                V(4),
                "Pod waits before its cycle",
                extra=kv(pod=pi.key, plugin=held.plugin, reason=held.message()),
            )
            self.queue.requeue(qp, frozenset({held.plugin}), nominate=None, gated=True)
            return
        logger.log(V(3), "Attempting to schedule pod", extra=kv(pod=pi.key))
        start = time.perf_counter()
        state = CycleState()
        with self.cache.lock:
            try:
                result = profile.schedule(state, pi, self.cache)
            except FitError as e:
                self._no_fit(qp, profile, state, start, e)
                return
            except SchedulingError as e:
                self.metrics.algorithm(time.perf_counter() - start)
                self._failed(qp, profile, start, str(e), "SchedulerError", error=True)
                return
            self.metrics.algorithm(time.perf_counter() - start)
            node = result.node
            self.cache.assume(pi, node)
            self.queue.nominator.delete(pi.uid)
            st = profile.reserve(state, pi, node)
            if st is not None:
                self.cache.forget(pi)
                if st.rejected:
                    self._failed(qp, profile, start, st.message(), "Unschedulable", frozenset({st.plugin}))
                else:
                    self._failed(
                        qp,
                        profile,
                        start,
                        f"running Reserve plugin {st.plugin!r}: {st.message()}",
                        "SchedulerError",
                        error=True,
                    )
                return
        logger.log(
            V(4),
            "Chose node",
            extra=kv(pod=pi.key, node=node, evaluated=result.evaluated, feasible=result.feasible),
        )
        with self._idle:
            self._inflight_binds += 1
        self._binds.submit(self._bind_cycle, qp, profile, state, node, start, result)

    def _bind_cycle(
        self,
        qp: QueuedPod,
        profile: Profile,
        state: CycleState,
        node: str,
        start: float,
        result: ScheduleResult,
    ) -> None:
        pi = qp.pod
        try:
            st = profile.pre_bind(state, pi, node)
            if st is not None:
                self._undo(qp, profile, state, node)
                self._failed(
                    qp,
                    profile,
                    start,
                    f"running PreBind plugin {st.plugin!r}: {st.message()}",
                    "SchedulerError",
                    error=True,
                )
                return
            outcome, why = (
                (BindOutcome.CANCELLED, "halted") if self.halted.is_set() else self._bind(profile, pi, node)
            )
            if outcome is BindOutcome.CANCELLED:
                self._undo(qp, profile, state, node)
                self.queue.requeue(qp, nominate=None)
            elif outcome is BindOutcome.BOUND:
                elapsed = time.perf_counter() - start
                logger.log(
                    V(2),
                    "Successfully bound pod to node",
                    extra=kv(pod=pi.key, node=node, attempts=qp.attempts),
                )
                self.metrics.attempt("scheduled", profile.name, elapsed)
                # From the first attempt (kube-scheduler's InitialAttemptTimestamp), as the SLI says.
                first = qp.initial_attempt if qp.initial_attempt is not None else qp.timestamp
                self.metrics.scheduled(profile.name, qp.attempts, time.monotonic() - first)
                profile.post_bind(state, pi, node)
                self.io.scheduled(pi, node, profile.name)
                if result.relaxed:
                    self.io.relaxed(pi, node, profile.name, result.relaxed, result.unrelaxed_message)
                self.queue.done(qp)
            elif outcome is BindOutcome.GONE:
                logger.info(
                    "Pod was bound or deleted elsewhere; dropping it", extra=kv(pod=pi.key, reason=why)
                )
                self._undo(qp, profile, state, node)
                self.queue.done(qp)
            else:
                self._undo(qp, profile, state, node)
                self._failed(qp, profile, start, f"binding rejected: {why}", "SchedulerError", error=True)
                # The assumed pod's room is free again: others may fit now.
                self.queue.move_all("AssumedPodDeleted")
        except Exception:
            logger.exception("Binding cycle failed", extra=kv(pod=pi.key, node=node))
            self._undo(qp, profile, state, node)
            self.queue.requeue(qp, error=True)
        finally:
            with self._idle:
                self._inflight_binds -= 1
                self._idle.notify_all()

    def _no_fit(self, qp: QueuedPod, profile: Profile, state: CycleState, start: float, e: FitError) -> None:
        """No node fits: PostFilter (preemption) may nominate one; then wait (cache locked)."""
        pi = qp.pod
        nominate: str | None = ""  # no PostFilter: clear a nomination (clearNominatedNode)
        preemption: Preemption | None = None
        if profile.post_filters:
            result, st = profile.run_post_filter(state, pi, e, self.cache)
            e.post_filter_message = st.message()
            nominate = None if result is None else result.nominated_node
            preemption = None if result is None else result.preemption
            self.metrics.preemption(len(preemption.victims) if isinstance(preemption, Preemption) else None)
        self.metrics.algorithm(time.perf_counter() - start)
        if isinstance(preemption, Preemption):
            for other in preemption.clear_nominations:
                self.queue.nominator.delete(other.uid)
            with self._preempting_lock:
                self._preempting.add(pi.uid)
            logger.info(
                "Preempting",
                extra=kv(pod=pi.key, node=preemption.node, victims=[v.key for v in preemption.victims]),
            )
        self._failed(
            qp, profile, start, e.message(), "Unschedulable", e.unschedulable_plugins(), nominate=nominate
        )
        if isinstance(preemption, Preemption):
            try:
                self.io.preempt(preemption, profile.name, lambda ok: self._preempted(pi.uid, ok))
            except Exception:
                logger.exception("Starting the preemption failed", extra=kv(pod=pi.key))
                self._preempted(pi.uid, False)

    def _preempted(self, uid: str, ok: bool) -> None:
        """The victims are marked and deleted (or that failed): the preemptor may go again.

        As kube-scheduler's ``prepareCandidateAsync``: after a failure it is tried at once;
        otherwise the victims' deletions, as the watch delivers them, move it on (tried
        before, it would find them still in the cache, fail, and back off), unless it was
        held back meanwhile to wait for this preemption: then nothing else would move it."""
        with self._preempting_lock:
            self._preempting.discard(uid)
        self.queue.activate(uid, None if not ok else PREEMPTION_WAIT)

    def _bind(self, profile: Profile, pi: PodInfo, node: str) -> tuple[BindOutcome, str]:
        """The Binding call, timed as the Bind extension point (Success or Error; not when
        cancelled, as then nothing was decided)."""
        t0 = time.perf_counter()
        outcome, why = self.io.bind(pi, node)
        if outcome is not BindOutcome.CANCELLED:
            status = "Success" if outcome is BindOutcome.BOUND else "Error"
            profile.observe("Bind", status, time.perf_counter() - t0)
        return outcome, why

    def _undo(self, qp: QueuedPod, profile: Profile, state: CycleState, node: str) -> None:
        with self.cache.lock:
            profile.unreserve(state, qp.pod, node)
            self.cache.forget(qp.pod)

    def _failed(
        self,
        qp: QueuedPod,
        profile: Profile,
        start: float,
        message: str,
        reason: str,
        plugins: frozenset[str] = frozenset(),
        error: bool = False,
        nominate: str | None = "",
    ) -> None:
        """Requeue the pod and report why; ``nominate``: the node to nominate it to, ""
        to clear its nomination, None to keep it (as ``NominatingInfo`` modes)."""
        pi = qp.pod
        result = "error" if error else "unschedulable"
        self.metrics.attempt(result, profile.name, time.perf_counter() - start)
        if error:
            logger.error("Error scheduling pod; retrying", extra=kv(pod=pi.key, err=message))
        else:
            logger.info("Unable to schedule pod; waiting", extra=kv(pod=pi.key, reason=message))
        self.queue.requeue(qp, plugins, error=error, nominate=nominate)
        try:
            self.io.unschedulable(pi, message, profile.name, reason, nominate)
        except Exception:
            logger.exception("Recording the scheduling failure failed", extra=kv(pod=pi.key))

    def halt(self) -> None:
        """Leadership is lost: start no cycle and send no bind from now on (kube-scheduler's
        OnStoppedLeading exits at once). Binds already sent may still land."""
        self.halted.set()
        self.queue.close()

    def preempting(self) -> int:
        """How many pods have a preemption being carried out."""
        with self._preempting_lock:
            return len(self._preempting)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no bind is in flight (for shutdown and tests)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._inflight_binds:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    def shutdown(self, timeout: float = 10.0) -> None:
        self.queue.close()
        self.wait_idle(timeout)
        self._binds.shutdown(wait=False, cancel_futures=True)
        for p in self.profiles.values():
            p.stop()
