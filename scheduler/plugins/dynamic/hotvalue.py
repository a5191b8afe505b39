"""Hot value: how many pods this scheduler has just placed on each node.

crane-scheduler's controller counts ``Scheduled`` events and publishes the result
in a node annotation minutes later, so a burst of pods still piles onto the node
that looked idlest. Here the plugin records a placement the moment it reserves
it, forgets it if the pod is unreserved, and confirms it after the bind: no
event parsing, no lag.

hot value(node) = Σ over the policy's hotValue rules of
floor(placements on the node within ``time_range`` / ``count``).
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left, bisect_right, insort
from collections import deque
from collections.abc import Callable, Sequence

from scheduler.plugins.dynamic.policy import HotValuePolicy

DEFAULT_MAX_RECORDS = 65536
"""Placements kept at most (crane keeps 1024); the oldest go first beyond it."""


class HotValueTracker:
    """Recent placements per node, pruned past the longest ``time_range``. Thread-safe.

    ``clock`` is a monotonic clock in seconds (placements are this process's own).
    """

    def __init__(
        self,
        rules: Sequence[HotValuePolicy],
        *,
        clock: Callable[[], float] = time.monotonic,
        max_records: int = DEFAULT_MAX_RECORDS,
    ) -> None:
        self._rules = tuple((r.time_range, r.count) for r in rules)
        self._horizon = max((r.time_range for r in rules), default=0.0)
        self._clock = clock
        self._max_records = max_records
        self._lock = threading.Lock()
        self._pods: dict[str, tuple[str, float]] = {}
        """pod uid -> (node, when placed)."""
        self._nodes: dict[str, list[float]] = {}
        """node -> placement times, sorted."""
        self._order: deque[tuple[float, str]] = deque()
        """(when, pod uid) in placement order, for pruning; may hold records since forgotten."""

    def __len__(self) -> int:
        with self._lock:
            return len(self._pods)

    def record(self, pod_uid: str, node: str, ago: float = 0.0) -> None:
        """The pod was just placed on the node (Reserve), or ``ago`` seconds before. Placing
        it again moves it."""
        if not self._rules:
            return
        now = self._clock() - ago
        with self._lock:
            self._prune(now)
            self._drop(pod_uid)
            self._pods[pod_uid] = (node, now)
            insort(self._nodes.setdefault(node, []), now)
            self._order.append((now, pod_uid))
            while len(self._order) > self._max_records:
                when, uid = self._order.popleft()
                if self._pods.get(uid, ("", -1.0))[1] == when:
                    self._drop(uid)

    def forget(self, pod_uid: str) -> None:
        """The placement did not happen (Unreserve)."""
        with self._lock:
            self._drop(pod_uid)

    def confirm(self, pod_uid: str, node: str, ago: float = 0.0) -> None:
        """The pod is bound (PostBind), or was ``ago`` seconds before: keep its record, or add
        one if it was never recorded here."""
        with self._lock:
            known = self._pods.get(pod_uid)
        if known is None or known[0] != node:
            self.record(pod_uid, node, ago)

    def value(self, node: str) -> int:
        """The node's hot value now."""
        if not self._rules:
            return 0
        now = self._clock()
        with self._lock:
            times = self._nodes.get(node)
            return self._hot(times, now) if times else 0

    def values(self) -> dict[str, int]:
        """Every node with a non-zero hot value now (nodes absent from the result have 0)."""
        if not self._rules:
            return {}
        now = self._clock()
        with self._lock:
            self._prune(now)
            out = {}
            for node, times in self._nodes.items():
                hot = self._hot(times, now)
                if hot:
                    out[node] = hot
            return out

    def _hot(self, times: list[float], now: float) -> int:
        total = 0
        n = len(times)
        for time_range, count in self._rules:
            total += (n - bisect_right(times, now - time_range)) // count
        return total

    def _drop(self, pod_uid: str) -> None:
        known = self._pods.pop(pod_uid, None)
        if known is None:
            return
        node, when = known
        times = self._nodes[node]
        del times[bisect_left(times, when)]
        if not times:
            del self._nodes[node]

    def _prune(self, now: float) -> None:
        cutoff = now - self._horizon
        order = self._order
        while order and order[0][0] <= cutoff:
            when, uid = order.popleft()
            if self._pods.get(uid, ("", -1.0))[1] == when:
                self._drop(uid)
