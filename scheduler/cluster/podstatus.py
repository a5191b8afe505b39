"""The ``PodScheduled=False`` condition of a pod that failed a cycle, written off the loop's thread.

kube-scheduler writes it in its scheduling goroutine (``updatePod`` in
``handleSchedulingFailure``): the write has landed before the pod's next
attempt, and so before its Binding. Here the loop does not wait on the API
server, so the writes run on a few threads of their own, and the same order
is kept another way:

- one pod's writes go one at a time, in order; a failure not yet written is
  replaced by the pod's next one (what it said is superseded; its
  ``nominatedNodeName`` is kept when the next one leaves it as it is);
- ``settle(uid)``, which the bind calls, drops the pod's write still queued
  (the Binding, which sets ``PodScheduled=True``, supersedes it) and waits
  for one under way: a stale ``False`` never lands after the Binding;
- a write that finds the pod bound in the informer's copy is dropped: a bound
  pod is scheduled, whoever bound it.

Under load (a burst of preemptions, each failure of a waiting preemptor a
write) the queue no longer grows without end: a pod has one write pending at
most.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from scheduler.cluster.retry import CancelledError
from scheduler.core.podinfo import PodInfo
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)


class StatusBinder(Protocol):
    def set_unschedulable(
        self, pod: dict[str, Any], message: str, reason: str = ..., nominated_node: str | None = ...
    ) -> bool: ...


class PodStore(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class _Write:
    pod: PodInfo
    message: str
    reason: str
    nominated_node: str | None
    """The node to nominate, "" to clear the nomination, None to leave it as it is."""

    def after(self, older: _Write) -> _Write:
        """This write, replacing ``older`` that was never sent."""
        if self.nominated_node is None and older.nominated_node is not None:
            return _Write(self.pod, self.message, self.reason, older.nominated_node)
        return self


class PodStatusWriter:
    def __init__(self, binder: StatusBinder, pods: PodStore, *, workers: int = 4) -> None:
        self.binder = binder
        self.pods = pods
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pod-status")
        self._cond = threading.Condition()
        self._queued: dict[str, _Write] = {}
        """Per pod uid, the write to send next."""
        self._busy: set[str] = set()
        """Pods a thread is writing (or about to): their next write waits for it."""
        self._closed = False

    def submit(self, pod: PodInfo, message: str, reason: str, nominated_node: str | None) -> None:
        """Write the pod's failure in the background (replacing one of it still queued)."""
        write = _Write(pod, message, reason, nominated_node)
        with self._cond:
            if self._closed:
                return
            older = self._queued.get(pod.uid)
            self._queued[pod.uid] = write if older is None else write.after(older)
            if pod.uid in self._busy:
                return  # its thread takes this one next
            self._busy.add(pod.uid)
        try:
            self._pool.submit(self._run, pod.uid)
        except RuntimeError:  # shut down meanwhile
            with self._cond:
                self._queued.pop(pod.uid, None)
                self._busy.discard(pod.uid)
                self._cond.notify_all()

    def settle(self, uid: str, timeout: float) -> bool:
        """Before the pod's Binding: drop its queued write, and wait until none is under way
        (or ``timeout`` seconds passed, or the writer stopped); whether none is."""
        with self._cond:
            self._queued.pop(uid, None)
            done = self._cond.wait_for(lambda: self._closed or uid not in self._busy, timeout)
            return done and uid not in self._busy

    def halt(self) -> None:
        """Send nothing more (the Lease is lost): queued writes are dropped."""
        with self._cond:
            self._closed = True
            self._queued.clear()
            self._cond.notify_all()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def stop(self) -> None:
        """Write what is queued, then stop."""
        self._pool.shutdown(wait=True, cancel_futures=False)
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _run(self, uid: str) -> None:
        while True:
            with self._cond:
                write = self._queued.pop(uid, None)
                if write is None:
                    self._busy.discard(uid)
                    self._cond.notify_all()
                    return
            self._write(write)

    def _write(self, w: _Write) -> None:
        # The informer's copy: the queued one may predate a nominatedNodeName written since.
        raw = self.pods.get(w.pod.key)
        if raw is None or raw["metadata"].get("uid") != w.pod.uid:
            raw = w.pod.pod
        elif (raw.get("spec") or {}).get("nodeName"):
            logger.log(V(4), "Pod is bound; not writing its failure", extra=kv(pod=w.pod.key))
            return
        start = time.monotonic()
        try:
            self.binder.set_unschedulable(raw, w.message, w.reason, w.nominated_node)
        except CancelledError:
            pass  # halted: the Lease is lost
        except Exception:
            logger.exception(
                "Updating the PodScheduled condition failed",
                extra=kv(pod=w.pod.key, seconds=round(time.monotonic() - start, 3)),
            )
