"""The review answers' cache: fresh for its time, least recently used out first."""

from __future__ import annotations

from scheduler.serving.reviewcache import ReviewCache


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_answer_is_fresh_for_its_ttl_only() -> None:
    clock = Clock()
    cache: ReviewCache[str, str | None] = ReviewCache(clock=clock)
    assert cache.get("a") == (False, None)
    cache.put("a", None, 10)  # a rejection is an answer too
    cache.put("b", "bob", 1)
    clock.now = 0.99
    assert cache.get("a") == (True, None) and cache.get("b") == (True, "bob")
    clock.now = 1.0
    assert cache.get("b") == (False, None)
    clock.now = 10.0
    assert cache.get("a") == (False, None)
    assert cache.misses == 2


def test_the_least_recently_used_go_first() -> None:
    cache: ReviewCache[str, int] = ReviewCache(max_entries=2, clock=Clock())
    cache.put("a", 1, 10)
    cache.put("b", 2, 10)
    assert cache.get("a") == (True, 1)  # a is now the most recent
    cache.put("c", 3, 10)
    assert cache.get("b") == (False, None)
    assert cache.get("a") == (True, 1) and cache.get("c") == (True, 3)
