"""The scheduling loop: pop → filter → score → assume → reserve → (bind in the background) → post-bind.

One thread runs scheduling cycles, one pod at a time, holding the cache lock
for the cycle; binds (PreBind, the Binding call, PostBind) run concurrently
on a thread pool, so the API server's latency does not stall the loop. What
talks to the API server (binding, events, pod conditions) is behind
:class:`ClusterIO`, so the loop itself has no I/O.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from scheduler.core.cache import Cache
from scheduler.core.framework import CycleState
from scheduler.core.podinfo import PodInfo
from scheduler.core.profile import FitError, Profile, SchedulingError
from scheduler.core.queue import QueuedPod, SchedulingQueue
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)


class BindOutcome(enum.Enum):
    BOUND = "bound"
    GONE = "gone"
    """409/404: someone else bound the pod, or it was deleted. Drop it; don't retry."""
    FAILED = "failed"


class ClusterIO(Protocol):
    def bind(self, pod: PodInfo, node: str) -> tuple[BindOutcome, str]:
        """Bind (retrying 429/5xx); the string says why when not BOUND."""
        ...

    def scheduled(self, pod: PodInfo, node: str, profile: str) -> None:
        """The ``Scheduled`` event."""
        ...

    def unschedulable(self, pod: PodInfo, message: str, profile: str, reason: str) -> None:
        """The ``FailedScheduling`` event and the ``PodScheduled=False`` condition
        (reason ``Unschedulable`` or ``SchedulerError``)."""
        ...


class LoopMetrics(Protocol):
    def attempt(self, result: str, profile: str, seconds: float) -> None: ...
    def scheduled(self, profile: str, attempts: int, sli_seconds: float) -> None: ...


class _NoMetrics:
    def attempt(self, result: str, profile: str, seconds: float) -> None:
        return None

    def scheduled(self, profile: str, attempts: int, sli_seconds: float) -> None:
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

    def run(self, stop: threading.Event) -> None:
        """Schedule until ``stop`` is set (or the queue is closed)."""
        logger.info("Starting scheduling loop", extra=kv(profiles=sorted(self.profiles)))
        flusher = threading.Thread(target=self.queue.run, args=(stop,), name="queue-flush", daemon=True)
        flusher.start()
        while not stop.is_set():
            qp = self.queue.pop(timeout=0.5)
            if qp is None:
                continue
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
        logger.log(V(3), "Attempting to schedule pod", extra=kv(pod=pi.key))
        start = time.perf_counter()
        state = CycleState()
        with self.cache.lock:
            try:
                result = profile.schedule(state, pi, self.cache)
            except FitError as e:
                self._failed(qp, profile, start, e.message(), "Unschedulable", e.unschedulable_plugins())
                return
            except SchedulingError as e:
                self._failed(qp, profile, start, str(e), "SchedulerError", error=True)
                return
            node = result.node
            self.cache.assume(pi, node)
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
        self._binds.submit(self._bind_cycle, qp, profile, state, node, start)

    def _bind_cycle(
        self, qp: QueuedPod, profile: Profile, state: CycleState, node: str, start: float
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
            outcome, why = self.io.bind(pi, node)
            if outcome is BindOutcome.BOUND:
                elapsed = time.perf_counter() - start
                logger.log(
                    V(2),
                    "Successfully bound pod to node",
                    extra=kv(pod=pi.key, node=node, attempts=qp.attempts),
                )
                self.metrics.attempt("scheduled", profile.name, elapsed)
                self.metrics.scheduled(profile.name, qp.attempts, time.monotonic() - qp.timestamp)
                profile.post_bind(state, pi, node)
                self.io.scheduled(pi, node, profile.name)
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
    ) -> None:
        pi = qp.pod
        result = "error" if error else "unschedulable"
        self.metrics.attempt(result, profile.name, time.perf_counter() - start)
        if error:
            logger.error("Error scheduling pod; retrying", extra=kv(pod=pi.key, err=message))
        else:
            logger.info("Unable to schedule pod; waiting", extra=kv(pod=pi.key, reason=message))
        self.queue.requeue(qp, plugins, error=error)
        try:
            self.io.unschedulable(pi, message, profile.name, reason)
        except Exception:
            logger.exception("Recording the scheduling failure failed", extra=kv(pod=pi.key))

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
