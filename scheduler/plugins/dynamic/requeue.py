"""When pods that Dynamic rejected get another try.

A pod the Dynamic filter rejected waits among the unschedulable pods. The
informers' events (a node changed, a pod deleted) do not tell when the load
changed, so without this it would wait for an unrelated event or the queue's
5-minute flush, however soon the node cooled down. Two things can make such a
pod schedulable, and each moves the pods Dynamic rejected (and only those)
back to the queue, as kube-scheduler's QueueingHints do for its own plugins:

- ``DynamicLoadRefreshed``: a source published new values (a Prometheus
  refresh; crane's annotations come with Node updates, which move pods anyway);
- ``DynamicLoadStale``: a value behind a rejection went stale, so the node now
  counts as having no data (it passes under FailOpen).

One daemon thread waits for the next of the two (the source's refresh signal,
or the earliest expiry among the rejecting verdicts) and calls ``move``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

REFRESHED, STALE = "DynamicLoadRefreshed", "DynamicLoadStale"
MAX_WAIT = 1.0
"""Longest single wait: how soon a stop is noticed, and a rejection made since."""


class LoadRequeuer:
    def __init__(
        self,
        move: Callable[[str], None],
        generation: Callable[[], int],
        rejection_expiries: Callable[[], list[float]],
        source: Any = None,
        clock: Callable[[], float] = time.time,
        max_wait: float = MAX_WAIT,
    ) -> None:
        """``move(event)`` moves the rejected pods; ``generation()`` is the sources' data
        generation; ``rejection_expiries()`` the times (``clock``) at which the values behind
        current rejections go stale; ``source`` (optional) has ``generation`` and
        ``wait_refreshed(after, timeout)``."""
        self._move, self._generation, self._expiries = move, generation, rejection_expiries
        self._source, self._clock, self._max_wait = source, clock, max_wait
        self._stop = threading.Event()
        self._handled_until = -math.inf
        """Expiries up to this time have moved their pods already."""
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dynamic-requeue", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _next_expiry(self) -> float:
        return min((t for t in self._expiries() if t > self._handled_until), default=math.inf)

    def step(self, seen: int) -> int:
        """Wait for the next refresh or expiry (at most ``max_wait``), move the pods if one came;
        returns the generation now seen."""
        wait = min(self._max_wait, max(0.01, self._next_expiry() - self._clock()))
        if self._generation() != seen:
            pass  # refreshed since the last step: no wait
        elif self._source is not None:
            self._source.wait_refreshed(self._source.generation, wait)
        else:
            self._stop.wait(wait)
        if self._stop.is_set():
            return seen
        now_gen = self._generation()
        now = self._clock()
        if now_gen != seen:
            self._handled_until = now
            self._move(REFRESHED)
            logger.log(
                V(4), "Load data refreshed: pods rejected for it queued again", extra=kv(event=REFRESHED)
            )
        elif self._next_expiry() <= now:
            self._handled_until = now
            self._move(STALE)
            logger.log(
                V(4), "Load values went stale: pods rejected for them queued again", extra=kv(event=STALE)
            )
        return now_gen

    def _run(self) -> None:
        seen = self._generation()
        while not self._stop.is_set():
            try:
                seen = self.step(seen)
            except Exception:  # a bug must not end the thread silently
                logger.exception("Requeueing pods for their load failed unexpectedly")
                self._stop.wait(self._max_wait)
