"""churn's timer, on a fake clock (no API server)."""

from __future__ import annotations

import pytest

from scheduler.deploy import churn


@pytest.mark.parametrize(("round_seconds", "waits"), [(0.5, [1.5, 1.5]), (3.0, [0.0, 0.0])])
def test_every_is_the_time_between_the_starts_of_two_rounds(
    monkeypatch: pytest.MonkeyPatch, round_seconds: float, waits: list[float]
) -> None:
    """A round that takes time (30 deletes under load) shortens the wait; a round longer than
    --every is followed by the next at once. A fake clock: no API server, no real waiting."""
    now = [100.0]
    waited: list[float] = []

    class Stop:
        def is_set(self) -> bool:
            return False

        def wait(self, seconds: float) -> bool:
            waited.append(round(seconds, 6))
            now[0] += seconds
            return False

    def slow_round(api: object, namespace: str, selector: str | None, number: int) -> churn.Round:
        now[0] += round_seconds
        return churn.Round(number, [], 0)

    monkeypatch.setattr(churn.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(churn, "delete_round", slow_round)
    assert (
        churn.churn(
            None,
            "ns",
            None,
            every=2.0,
            count=3,
            duration=None,
            stop=Stop(),  # type: ignore[arg-type]
            report=lambda r: None,
        )
        == 3
    )
    assert waited == waits
