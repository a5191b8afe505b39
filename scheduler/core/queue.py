"""The scheduling queue: active (a priority heap), backoff, and unschedulable.

As kube-scheduler's PriorityQueue:

- ``active`` pops the highest priority first, then the pod queued earliest
  (PrioritySort); a pod that failed counts as queued when it came back
  (``AddUnschedulableIfNotPresent`` refreshes its timestamp), so pods that
  keep failing take turns with the others instead of going first forever.
- A pod that failed goes to ``backoff`` for ``initial * 2^(attempts-1)``
  seconds (capped at ``max``) if it failed with an error, or if the cluster
  changed while it was being scheduled; otherwise to ``unschedulable``.
- ``unschedulable`` pods move on when the cluster changes in a way that may
  help (a node added or changed, a pod deleted, ...: ``move_all``), or after
  ``unschedulable_timeout`` (5 minutes) at the latest.
- When ``active`` is empty, ``pop`` takes a pod from ``backoff`` before its
  backoff ends, one that failed as unschedulable (not with an error): the
  earliest to end its backoff, by whole seconds, then by priority and queue
  time (kube-scheduler's ``SchedulerPopFromBackoffQ``, on by default since
  1.33: an idle scheduler need not wait out a backoff).
- A pod held back before its cycle (``requeue(gated=True)``: its preemption is
  still being carried out, DefaultPreemption's PreEnqueue) waits in
  ``unschedulable``, counted as ``gated``; that is no attempt: its attempts
  and backoff stay as they were (kube-scheduler never pops a pod its
  PreEnqueue plugins reject). Cluster changes leave it there, but for the
  events of the plugin that holds it (a claim created moves a pod
  DynamicResources held back); DefaultPreemption's gate is lifted by
  ``activate``.
- Pods are keyed by uid. An update to a queued pod replaces it in place; an
  update to an unschedulable pod moves it on, as the change may make it fit.

A background thread (``run``) moves pods whose backoff has expired, and old
unschedulable pods, to ``active``. ``pop`` blocks until a pod is ready.

The queue also keeps the nominated pods (``nominator``), fed by the same
adds, updates and deletes, as kube-scheduler's PriorityQueue does.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.core.nominator import Nominator
from scheduler.core.podinfo import PodInfo
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

ACTIVE, BACKOFF, UNSCHEDULABLE = "active", "backoff", "unschedulable"


@dataclass(slots=True, eq=False)
class QueuedPod:
    pod: PodInfo
    timestamp: float
    """When the pod was (last) added to the queue; PrioritySort's tie breaker."""
    initial_attempt: float | None = None
    """When it was first popped, for the end-to-end scheduling latency."""
    attempts: int = 0
    unschedulable_plugins: frozenset[str] = field(default_factory=frozenset)
    backoff_expiry: float = 0.0
    error: bool = False
    """Its last attempt ended in an error (such backoffs are waited out in full)."""


def scheduling_properties_changed(old: PodInfo, new: PodInfo) -> bool:
    """Whether an update of an unscheduled pod can change a plugin's verdict: its spec or
    labels changed (not its status, resourceVersion, managed fields or annotations), or the
    claims made for it from templates (``UpdatePodGeneratedResourceClaim``)."""
    return (
        old.spec != new.spec
        or (old.pod.get("metadata") or {}).get("labels") != (new.pod.get("metadata") or {}).get("labels")
        or (old.pod.get("status") or {}).get("resourceClaimStatuses")
        != (new.pod.get("status") or {}).get("resourceClaimStatuses")
    )


class SchedulingQueue:
    def __init__(
        self,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        unschedulable_timeout: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[dict[str, int]], None] | None = None,
        on_enqueue: Callable[[str, str], None] | None = None,
        pop_from_backoff: bool = True,
    ) -> None:
        """``on_change(counts)`` after every move; ``on_enqueue(queue, event)`` for every pod
        that enters a queue (kube-scheduler's scheduler_queue_incoming_pods_total);
        ``pop_from_backoff``: kube-scheduler's ``SchedulerPopFromBackoffQ``."""
        self.pop_from_backoff = pop_from_backoff
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.unschedulable_timeout = unschedulable_timeout
        self._clock = clock
        self._on_change = on_change
        self._on_enqueue = on_enqueue
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._active: list[tuple[int, float, int, str]] = []  # (-priority, timestamp, seq, uid)
        self._backoff: list[tuple[float, int, str]] = []  # (expiry, seq, uid)
        # Unschedulable pods in backoff, in the order pop takes them when active is empty:
        # (whole second of expiry, -priority, timestamp, seq, uid, expiry).
        self._backoff_pop: list[tuple[int, int, float, int, str, float]] = []
        self._where: dict[str, str] = {}  # uid -> ACTIVE|BACKOFF|UNSCHEDULABLE
        self._counts = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0}
        self._pods: dict[str, QueuedPod] = {}  # queued pods (not in flight)
        self._unsched_since: dict[str, float] = {}
        self._gated: set[str] = set()  # unschedulable pods held back before their cycle
        self._in_flight: dict[str, QueuedPod] = {}
        self._latest: dict[str, PodInfo] = {}  # updates that arrived while in flight
        self._deleted_in_flight: set[str] = set()
        self._move_cycle = 0  # bumped by every move_all
        self._pop_cycle: dict[str, int] = {}
        self._activated: set[str] = set()  # activated while in flight
        self._closed = False
        self.nominator = Nominator()

    # --- producers (informer threads) -----------------------------------------

    def add(self, pod: PodInfo) -> None:
        with self._cond:
            in_flight = self._in_flight.get(pod.uid)
            if in_flight is not None:
                self.nominator.update(self._latest.get(pod.uid) or in_flight.pod, pod)
                self._latest[pod.uid] = pod
                return
            if pod.uid in self._pods:
                self.nominator.update(self._pods[pod.uid].pod, pod)
                self._update_locked(pod)
                return
            self.nominator.nominate(pod)
            qp = QueuedPod(pod, self._clock())
            self._pods[pod.uid] = qp
            self._push_active(qp)
            self._enqueued(ACTIVE, "PodAdd")
            self._changed()

    def update(self, pod: PodInfo) -> None:
        self.add(pod)

    def delete(self, uid: str) -> None:
        with self._cond:
            self.nominator.delete(uid)
            if uid in self._in_flight:
                self._deleted_in_flight.add(uid)
                self._latest.pop(uid, None)
            if self._pods.pop(uid, None) is not None:
                self._set_where(uid, None)  # heap entries are dropped lazily
                self._unsched_since.pop(uid, None)
                self._changed()

    def move_all(
        self,
        event: str,
        plugins: frozenset[str] | None = None,
        only: Callable[[PodInfo], bool] | None = None,
    ) -> None:
        """The cluster changed (``event`` says how): give unschedulable pods another try.

        With ``plugins``, only pods rejected by one of those plugins move (an
        added pod can only help a pod that failed on pod affinity or spread);
        with ``only``, only the pods it accepts (a claim created can only help
        the pods that name it: kube-scheduler's queueing hints).
        """
        with self._cond:
            self._move_cycle += 1
            if not self._unsched_since:
                return
            now = self._clock()
            moved = 0
            for uid in list(self._unsched_since):
                qp = self._pods[uid]
                if plugins is not None and not (qp.unschedulable_plugins & plugins):
                    continue
                if uid in self._gated and plugins is None:
                    continue  # held back before its cycle: only its plugin's events move it
                if only is not None and not only(qp.pod):
                    continue
                del self._unsched_since[uid]
                if qp.backoff_expiry > now:
                    self._push_backoff(qp)
                    self._enqueued(BACKOFF, event)
                else:
                    self._push_active(qp)
                    self._enqueued(ACTIVE, event)
                moved += 1
            logger.log(V(5), "Moved unschedulable pods", extra=kv(event=event, pods=moved))
            self._changed()

    def activate(self, uid: str, only_if_parked_for: str | None = None) -> None:
        """Try ``uid`` again now, backoff or not (kube-scheduler's ``Activate``): a pod whose
        preemption has just been carried out. A pod in flight is retried when it comes back.
        With ``only_if_parked_for``, a queued pod moves only if that plugin alone parked it."""
        with self._cond:
            if uid in self._in_flight:
                self._activated.add(uid)
                return
            qp = self._pods.get(uid)
            if only_if_parked_for is not None and (
                qp is None or qp.unschedulable_plugins != frozenset({only_if_parked_for})
            ):
                return
            where = self._where.get(uid)
            if where == UNSCHEDULABLE:
                del self._unsched_since[uid]
            if where in (UNSCHEDULABLE, BACKOFF):
                self._push_active(self._pods[uid])
                self._changed()

    # --- the scheduling loop ----------------------------------------------------

    def pop(self, timeout: float | None = None) -> QueuedPod | None:
        """The next pod to schedule; None once closed (or after ``timeout``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._closed:
                    return None
                while self._active:
                    _, _, _, uid = heapq.heappop(self._active)
                    if self._where.get(uid) != ACTIVE:
                        continue  # stale heap entry
                    return self._take(uid)
                while self.pop_from_backoff and self._backoff_pop:
                    *_, uid, expiry = heapq.heappop(self._backoff_pop)
                    qp = self._pods.get(uid)
                    if qp is None or self._where.get(uid) != BACKOFF or qp.backoff_expiry != expiry:
                        continue  # stale heap entry
                    self._enqueued(ACTIVE, "PopFromBackoffQ")
                    return self._take(uid)
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._cond.wait(remaining)

    def _take(self, uid: str) -> QueuedPod:
        """Pop bookkeeping: ``uid`` leaves its queue and is in flight."""
        self._set_where(uid, None)
        qp = self._pods.pop(uid)
        qp.attempts += 1
        if qp.initial_attempt is None:
            qp.initial_attempt = self._clock()
        self._in_flight[uid] = qp
        self._pop_cycle[uid] = self._move_cycle
        self._changed()
        return qp

    def done(self, qp: QueuedPod) -> None:
        """The pod's cycle ended and it was bound (or dropped): forget it."""
        with self._cond:
            uid = qp.pod.uid
            self._in_flight.pop(uid, None)
            self._pop_cycle.pop(uid, None)
            self._latest.pop(uid, None)
            self._deleted_in_flight.discard(uid)
            self._activated.discard(uid)

    def requeue(
        self,
        qp: QueuedPod,
        unschedulable_plugins: frozenset[str] = frozenset(),
        error: bool = False,
        nominate: str | None = "",
        gated: bool = False,
    ) -> None:
        """The pod's cycle failed: back off, or park it until the cluster changes.

        ``nominate``: the node its preemption chose, "" to end its nomination (a failure
        without one), None to keep the nomination it has (in memory, else its status's).
        ``gated``: no cycle ran, the pod was held back (PreEnqueue): its pop is not counted,
        its backoff and queue time stay, and it waits in ``unschedulable``, left there by
        cluster changes, until what lifts the gate activates it (``activate``)."""
        with self._cond:
            uid = qp.pod.uid
            self._in_flight.pop(uid, None)
            popped_at = self._pop_cycle.pop(uid, self._move_cycle)
            activated = uid in self._activated
            self._activated.discard(uid)
            if uid in self._deleted_in_flight:
                self._deleted_in_flight.discard(uid)
                self._latest.pop(uid, None)
                return
            latest = self._latest.pop(uid, None)
            if latest is not None:
                qp.pod = latest
            if nominate is None:
                nominate = self.nominator.node_of(uid) or None
            self.nominator.nominate(qp.pod, nominate)
            qp.unschedulable_plugins = unschedulable_plugins
            qp.error = error
            now = self._clock()
            if gated:
                qp.attempts -= 1
            else:
                qp.timestamp = now
                qp.backoff_expiry = now + self.backoff_duration(qp.attempts)
            self._pods[uid] = qp
            if latest is not None or activated:
                self._push_active(qp)  # it changed (or was activated) while in flight: retry now
            elif not gated and (error or self._move_cycle > popped_at):
                self._push_backoff(qp)
            else:
                self._set_where(uid, UNSCHEDULABLE)
                self._unsched_since[uid] = now
                if gated:
                    self._gated.add(uid)
            self._enqueued(self._where[uid], "ScheduleAttemptFailure")
            self._changed()

    def backoff_duration(self, attempts: int) -> float:
        d = self.initial_backoff * (2 ** max(0, attempts - 1))
        return min(d, self.max_backoff)

    # --- time-driven moves --------------------------------------------------------

    def flush(self) -> None:
        """Move expired backoffs, and pods unschedulable for too long, to active."""
        with self._cond:
            now = self._clock()
            moved = False
            while self._backoff and self._backoff[0][0] <= now:
                _, _, uid = heapq.heappop(self._backoff)
                qp = self._pods.get(uid)
                if qp is None or self._where.get(uid) != BACKOFF or qp.backoff_expiry > now:
                    continue
                self._push_active(qp)
                self._enqueued(ACTIVE, "BackoffComplete")
                moved = True
            for uid, since in list(self._unsched_since.items()):
                if now - since >= self.unschedulable_timeout:
                    del self._unsched_since[uid]
                    self._push_active(self._pods[uid])
                    self._enqueued(ACTIVE, "UnschedulableTimeout")
                    moved = True
            if moved:
                self._changed()

    def next_flush_in(self) -> float:
        with self._cond:
            now = self._clock()
            waits = [1.0]
            if self._backoff:
                waits.append(max(0.0, self._backoff[0][0] - now))
            return min(waits)

    def run(self, stop: threading.Event) -> None:
        """Flush on time until ``stop``; run it in a thread."""
        while not stop.is_set():
            self.flush()
            stop.wait(max(0.01, self.next_flush_in()))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # --- introspection ------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        with self._cond:
            return self._counts_locked()

    def where(self, uid: str) -> str | None:
        """``active``, ``backoff``, ``unschedulable``, ``gated`` (held back before its cycle),
        ``in-flight``, or None."""
        with self._cond:
            if uid in self._in_flight:
                return "in-flight"
            if uid in self._gated:
                return "gated"
            return self._where.get(uid)

    def __len__(self) -> int:
        with self._cond:
            return len(self._pods)

    # --- internals ----------------------------------------------------------------

    def _update_locked(self, pod: PodInfo) -> None:
        qp = self._pods[pod.uid]
        old, qp.pod = qp.pod, pod
        where = self._where.get(pod.uid)
        if where == UNSCHEDULABLE:
            # An update may make it schedulable. kube-scheduler asks each plugin's
            # QueueingHint about the change (framework.PodSchedulingPropertiesChange:
            # labels, requests, tolerations, gates); a change of spec or labels is our
            # proxy. A status-only update (our own PodScheduled condition) leaves it be.
            if not scheduling_properties_changed(old, pod):
                return
            del self._unsched_since[pod.uid]
            if qp.backoff_expiry > self._clock():
                self._push_backoff(qp)
            else:
                self._push_active(qp)
            self._enqueued(self._where[pod.uid], "PodUpdate")
            self._changed()
        elif where == ACTIVE:
            self._push_active(qp)  # priority may have changed; the old entry goes stale

    def _enqueued(self, queue: str, event: str) -> None:
        if self._on_enqueue is not None:
            self._on_enqueue(queue, event)

    def _push_active(self, qp: QueuedPod) -> None:
        uid = qp.pod.uid
        self._set_where(uid, ACTIVE)
        heapq.heappush(self._active, (-qp.pod.priority, qp.timestamp, next(self._seq), uid))
        self._cond.notify()

    def _push_backoff(self, qp: QueuedPod) -> None:
        uid = qp.pod.uid
        self._set_where(uid, BACKOFF)
        seq = next(self._seq)
        heapq.heappush(self._backoff, (qp.backoff_expiry, seq, uid))
        if self.pop_from_backoff and not qp.error:
            entry = (int(qp.backoff_expiry), -qp.pod.priority, qp.timestamp, seq, uid, qp.backoff_expiry)
            heapq.heappush(self._backoff_pop, entry)
            if len(self._backoff_pop) > 2 * self._counts[BACKOFF] + 64:
                # Entries go stale as flush moves their pods on; drop them while the queue is busy.
                self._backoff_pop = [
                    e
                    for e in self._backoff_pop
                    if self._where.get(e[4]) == BACKOFF and self._pods[e[4]].backoff_expiry == e[5]
                ]
                heapq.heapify(self._backoff_pop)
            self._cond.notify()

    def _set_where(self, uid: str, where: str | None) -> None:
        old = self._where.pop(uid, None)
        if old is not None:
            self._counts[old] -= 1
            self._gated.discard(uid)
        if where is not None:
            self._where[uid] = where
            self._counts[where] += 1

    def _counts_locked(self) -> dict[str, int]:
        gated = len(self._gated)
        return {**self._counts, UNSCHEDULABLE: self._counts[UNSCHEDULABLE] - gated, "gated": gated}

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self._counts_locked())
