"""A clock the test moves by hand, for time windows and staleness."""

from __future__ import annotations


class ManualClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
