"""The cache of the API server's review answers (TokenReview, SubjectAccessReview).

Upstream caches each kind of answer for its own time (k8s.io/apiserver's cached token
authenticator and the webhook authorizer's cache); this is the one small piece both use:
entries expire ``ttl`` seconds after they were put, and the least recently used go first
beyond ``max_entries``.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MISSING = object()


class ReviewCache(Generic[K, V]):
    def __init__(self, *, max_entries: int = 4096, clock: Callable[[], float] = time.monotonic) -> None:
        self._max = max_entries
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()
        self.misses = 0
        """Answers put (one per review sent)."""

    def get(self, key: K) -> tuple[bool, V | None]:
        """(True, the answer) while it is fresh, else (False, None)."""
        now = self._clock()
        with self._lock:
            hit = self._entries.get(key)
            if hit is None or hit[0] <= now:
                return False, None
            self._entries.move_to_end(key)
            return True, hit[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        with self._lock:
            self.misses += 1
            self._entries[key] = (self._clock() + ttl, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
