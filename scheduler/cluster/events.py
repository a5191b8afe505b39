"""Events about pods, as kube-scheduler records them: ``events.k8s.io/v1``, written asynchronously.

What kube-scheduler 1.37 writes (client-go ``tools/events`` through the
profile's recorder), and so do we:

- ``reportingController`` = the profile's schedulerName (``default-scheduler``),
  ``reportingInstance`` = ``<schedulerName>-<hostname>``;
- ``Scheduled``/``Binding``/Normal, note ``Successfully assigned ns/pod to node``;
- ``FailedScheduling``/``Scheduling``/Warning, note = the caller's message,
  truncated to 1024 bytes with `` ...`` (``truncateMessage``);
- ``regarding`` = the pod, ``eventTime`` = now (MicroTime), name ``<pod>.<unixnano hex>``.

In the ``core/v1`` view (``kubectl get events``, ``kubectl describe``) the
controller appears as ``reportingComponent``; ``source`` stays empty, because
the API server maps ``source`` from ``deprecatedSource`` (not from
``reportingController``) and rejects a ``deprecatedSource`` on an
``events.k8s.io/v1`` create. kubectl falls back to ``reportingController``
when ``source.component`` is empty, so ``describe`` shows ``From:
default-scheduler`` as for kube-scheduler.

Writing never blocks the caller: events go into a bounded queue (10000)
that 128 writer threads drain, one request at a time each; a full queue
drops the event and counts it. kube-scheduler writes each event from a
goroutine of its own; a fixed number of writers writes at most
``writers / latency`` events a second, so they are twice the binding
workers (``EventSettings.writers``: with 32, the events of a backlog trailed
its binds by 6 s). client-go's broadcaster
queues 1000, but its goroutines empty it at once; ours, with a queue of
1000, dropped a quarter of the Scheduled events of a 5000-pod backlog bound
at 130 pods/s, so the queue holds a backlog's worth (about 1 KiB each).

Repeats are aggregated like client-go's event series, simplified: an event
identical to one written in the last ``window`` seconds (same pod, type,
reason, action, controller and note) is not written again; its
``series.count``/``series.lastObservedTime`` are patched instead, at most once
per ``series_interval`` per series (and once more on :meth:`EventRecorder.stop`),
by a thread of its own.
client-go leaves the note out of the identity (a changed FailedScheduling
message then only bumps the count of the first one); we keep it in, so the
latest reason is always visible.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.client import api_request
from scheduler.cluster.retry import call_with_retries, status_message
from scheduler.logs import V, kv
from scheduler.settings import EventSettings

logger = logging.getLogger(__name__)

NOTE_LENGTH_LIMIT = 1024
NORMAL = "Normal"
WARNING = "Warning"


def micro_time(t: float | None = None) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds, UTC, ``Z``."""
    return datetime.fromtimestamp(time.time() if t is None else t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def truncate_note(message: str) -> str:
    """kube-scheduler's truncateMessage: at most 1024 bytes, ending in `` ...`` when cut."""
    raw = message.encode()
    if len(raw) <= NOTE_LENGTH_LIMIT:
        return message
    suffix = " ..."
    return raw[: NOTE_LENGTH_LIMIT - len(suffix)].decode(errors="ignore") + suffix


def pod_reference(pod: dict[str, Any]) -> dict[str, Any]:
    meta = pod["metadata"]
    ref = {"apiVersion": "v1", "kind": "Pod", "namespace": meta.get("namespace"), "name": meta["name"]}
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = meta["resourceVersion"]
    return ref


@dataclass
class _Series:
    namespace: str
    name: str
    count: int
    last_observed: float
    last_written: float
    written_count: int


@dataclass
class RecorderStats:
    queued: int = 0
    written: int = 0
    """Events created."""
    patched: int = 0
    """Series updates written."""
    aggregated: int = 0
    """Repeats folded into a series instead of a new event."""
    dropped: int = 0
    """Events dropped because the queue was full."""
    failed: int = 0
    """Writes that failed after retries."""
    extra: dict[str, Any] = field(default_factory=dict)


_STOP = object()


class EventRecorder:
    """Asynchronous ``events.k8s.io/v1`` writer; see the module docstring.

    ``reporting_instance`` overrides ``<controller>-<hostname>``; ``settings`` are the queue,
    the writers, the series and the retries (:class:`scheduler.settings.EventSettings`).
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        reporting_instance: str | None = None,
        settings: EventSettings | None = None,
    ) -> None:
        self.api = api_client
        self.reporting_instance = reporting_instance
        self.hostname = socket.gethostname()
        self.settings = settings = settings or EventSettings()
        if settings.writers < 1:
            raise ValueError(f"events.writers must be at least 1, got {settings.writers}")
        self.stats = RecorderStats()
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=settings.queue_size)
        self._series: dict[tuple[Any, ...], _Series] = {}
        self._lock = threading.Lock()
        """Guards ``_series`` and ``stats`` (the writers share them)."""
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._idle = threading.Condition()
        self._pending = 0

    # --- producer side (any thread, never blocks) ------------------------------------------

    def event(
        self,
        regarding: dict[str, Any],
        type_: str,
        reason: str,
        action: str,
        note: str,
        controller: str,
        related: dict[str, Any] | None = None,
    ) -> bool:
        """Queue an event about ``regarding`` (a raw object; ``related``: a second one, as the
        preemptor of a ``Preempted`` event); False if it was dropped."""
        item = (regarding, type_, reason, action, truncate_note(note), controller, time.time(), related)
        with self._idle:
            self._pending += 1
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()
            self.stats.dropped += 1
            if self.stats.dropped == 1 or self.stats.dropped % 100 == 0:
                logger.warning(
                    "Event queue full; dropping events", extra=kv(dropped=self.stats.dropped, reason=reason)
                )
            return False
        self.stats.queued += 1
        return True

    def scheduled(self, pod: dict[str, Any], node: str, scheduler_name: str) -> bool:
        meta = pod["metadata"]
        return self.event(
            pod,
            NORMAL,
            "Scheduled",
            "Binding",
            f"Successfully assigned {meta.get('namespace')}/{meta['name']} to {node}",
            scheduler_name,
        )

    def filter_relaxed(
        self, pod: dict[str, Any], node: str, plugins: tuple[str, ...], why: str, scheduler_name: str
    ) -> bool:
        """``FilterRelaxed``: no node passed every filter, and the pod went to ``node`` with the
        filters of ``plugins`` relaxed (the Dynamic plugin's load limits); ``why`` is what
        FailedScheduling would have said."""
        meta = pod["metadata"]
        return self.event(
            pod,
            WARNING,
            "FilterRelaxed",
            "Scheduling",
            f"Assigned {meta.get('namespace')}/{meta['name']} to {node} with the {', '.join(plugins)} "
            f"filter relaxed, as no node passed every filter: {why}",
            scheduler_name,
        )

    def failed_scheduling(self, pod: dict[str, Any], message: str, scheduler_name: str) -> bool:
        return self.event(pod, WARNING, "FailedScheduling", "Scheduling", message, scheduler_name)

    def preempted(
        self, victim: dict[str, Any], preemptor: dict[str, Any], node: str, scheduler_name: str
    ) -> bool:
        """``Preempted``/``Preempting`` about the victim, related to the preemptor (the executor's
        ``PreemptPod``)."""
        uid = preemptor["metadata"].get("uid")
        return self.event(
            victim,
            NORMAL,
            "Preempted",
            "Preempting",
            f"Preempted by pod {uid} on node {node}",
            scheduler_name,
            related=preemptor,
        )

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> EventRecorder:
        if not self._threads:
            self._stopping.clear()
            self._threads = [
                threading.Thread(target=self._run, name=f"event-recorder-{i}", daemon=True)
                for i in range(self.settings.writers)
            ]
            self._threads.append(threading.Thread(target=self._run_series, name="event-series", daemon=True))
            for t in self._threads:
                t.start()
        return self

    def flush(self, timeout: float) -> bool:
        """Wait until every queued event has been handled (written, aggregated or failed)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued and the pending series counts (within ``timeout``), then stop."""
        if not self._threads:
            return
        deadline = time.monotonic() + timeout
        if not self.flush(timeout):
            with self._idle:
                left = self._pending
            logger.warning(
                "Stopping with events not written",
                extra=kv(events=left, waitedSeconds=round(timeout, 1)),
            )
        self._stopping.set()
        for _ in range(self.settings.writers):
            with self._idle:
                self._pending += 1
            with contextlib.suppress(queue.Full):
                self._queue.put(_STOP, timeout=max(0.0, deadline - time.monotonic()))
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if time.monotonic() < deadline:
            self._flush_series(time.time(), final=True)
        self._threads = []

    # --- the writers -----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                self._record(*item)
            except Exception:
                logger.exception("Event recorder failed")
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def _run_series(self) -> None:
        while not self._stopping.wait(self.settings.series_interval / 2):
            try:
                self._flush_series(time.time(), final=False)
            except Exception:
                logger.exception("Event recorder failed")

    def _record(
        self,
        regarding: dict[str, Any],
        type_: str,
        reason: str,
        action: str,
        note: str,
        controller: str,
        at: float,
        related: dict[str, Any] | None = None,
    ) -> None:
        ref = pod_reference(regarding) if regarding.get("kind", "Pod") == "Pod" else regarding
        key = (ref.get("namespace"), ref.get("name"), ref.get("uid"), type_, reason, action, controller, note)
        namespace = ref.get("namespace") or "default"
        name = f"{ref['name']}.{int(at * 1e9):x}"
        with self._lock:
            s = self._series.get(key)
            if s is not None and at - s.last_observed <= self.settings.window:
                s.count += 1
                s.last_observed = max(s.last_observed, at)
                self.stats.aggregated += 1
                return
            # Taken before the write, so that a repeat handled meanwhile by another writer
            # counts in this event's series instead of making one of its own.
            s = self._series[key] = _Series(namespace, name, 1, at, at, 1)
        instance = self.reporting_instance or f"{controller}-{self.hostname}"
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(at),
            "reportingController": controller,
            "reportingInstance": instance,
            "action": action,
            "reason": reason,
            "regarding": ref,
            "note": note,
            "type": type_,
        }
        if related is not None:
            body["related"] = pod_reference(related) if related.get("kind", "Pod") == "Pod" else related
        try:
            call_with_retries(
                lambda: api_request(
                    self.api,
                    "POST",
                    f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
                    body=body,
                    timeout=self.settings.timeout,
                ),
                what="create event",
                attempts=self.settings.attempts,
                max_seconds=self.settings.max_seconds,
            )
        except Exception as e:  # noqa: BLE001 - an event is never worth more than a log line
            with self._lock:
                self.stats.failed += 1
                if self._series.get(key) is s:
                    del self._series[key]
            logger.warning(
                "Unable to write event",
                extra=kv(
                    object=f"{namespace}/{ref['name']}",
                    reason=reason,
                    err=status_message(e) if isinstance(e, ApiException) else str(e)[:300],
                ),
            )
            return
        with self._lock:
            self.stats.written += 1
        logger.log(
            V(5), "Event written", extra=kv(object=f"{namespace}/{ref['name']}", reason=reason, type=type_)
        )

    def _flush_series(self, now: float, *, final: bool) -> None:
        with self._lock:
            due = []
            for key, s in list(self._series.items()):
                if s.count > s.written_count and (
                    final or now - s.last_written >= self.settings.series_interval
                ):
                    due.append((key, s, s.count, s.last_observed))
                elif s.count == s.written_count and now - s.last_observed > self.settings.window:
                    del self._series[key]
        for key, s, count, last_observed in due:
            if not self._patch_series(s, count, last_observed, now):
                with self._lock:
                    if self._series.get(key) is s:
                        del self._series[key]

    def _patch_series(self, s: _Series, count: int, last_observed: float, now: float) -> bool:
        """Write the series count; False when the event is gone (expired after its TTL):
        the next repeat then starts a new event."""
        patch = {"series": {"count": count, "lastObservedTime": micro_time(last_observed)}}
        path = f"/apis/events.k8s.io/v1/namespaces/{s.namespace}/events/{s.name}"
        try:
            call_with_retries(
                lambda: api_request(
                    self.api,
                    "PATCH",
                    path,
                    body=patch,
                    content_type="application/merge-patch+json",
                    timeout=self.settings.timeout,
                ),
                what="patch event series",
                attempts=self.settings.attempts,
                max_seconds=self.settings.max_seconds,
            )
        except Exception as e:  # noqa: BLE001 - an event is never worth more than a log line
            logger.log(
                V(2),
                "Unable to update event series",
                extra=kv(
                    event=f"{s.namespace}/{s.name}",
                    err=status_message(e) if isinstance(e, ApiException) else str(e),
                ),
            )
            with self._lock:
                self.stats.failed += 1
                s.written_count = max(s.written_count, count)
            return getattr(e, "status", None) != 404
        with self._lock:
            s.written_count = max(s.written_count, count)
            s.last_written = now
            self.stats.patched += 1
        return True
