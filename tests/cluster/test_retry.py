"""call_with_retries: which errors are retried, how often, and one policy shared by many calls."""

from __future__ import annotations

import threading

import pytest
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.retry import call_with_retries

FAST = {"initial_wait": 0.001, "max_wait": 0.002, "max_seconds": 5.0}


class Flaky:
    """Fails with the given statuses in turn, then returns "ok"; counts calls."""

    def __init__(self, *statuses: int) -> None:
        self.statuses = list(statuses)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.statuses:
            raise ApiException(status=self.statuses.pop(0), reason="test")
        return "ok"


def test_retriable_errors_are_retried_until_success() -> None:
    fn = Flaky(429, 503, 500)
    seen: list[int] = []
    assert call_with_retries(fn, what="t", attempts=5, on_attempt=seen.append, **FAST) == "ok"
    assert fn.calls == 4 and seen == [1, 2, 3, 4]


def test_the_last_error_is_raised_after_the_attempts() -> None:
    fn = Flaky(503, 503, 503)
    with pytest.raises(ApiException) as e:
        call_with_retries(fn, what="t", attempts=2, **FAST)
    assert e.value.status == 503 and fn.calls == 2


@pytest.mark.parametrize("status", [404, 409, 422, 403])
def test_other_errors_are_not_retried(status: int) -> None:
    fn = Flaky(status)
    with pytest.raises(ApiException):
        call_with_retries(fn, what="t", attempts=5, **FAST)
    assert fn.calls == 1


def test_consecutive_calls_start_afresh() -> None:
    # The policy is shared: the second call must not inherit the first one's attempts.
    for _ in range(3):
        fn = Flaky(503, 503)
        assert call_with_retries(fn, what="t", attempts=3, **FAST) == "ok"
        assert fn.calls == 3


def test_a_call_nested_in_the_same_policy_keeps_both_counts() -> None:
    inner = Flaky(503, 503)
    outer_calls = 0

    def outer() -> str:
        nonlocal outer_calls
        outer_calls += 1
        got = call_with_retries(inner, what="t", attempts=3, **FAST)
        if outer_calls == 1:
            raise ApiException(status=503, reason="outer")
        return got

    assert call_with_retries(outer, what="t", attempts=3, **FAST) == "ok"
    assert outer_calls == 2 and inner.calls == 4  # 2 failures, success, then success again


def test_threads_share_the_policy_without_sharing_state() -> None:
    results: dict[int, tuple[str, int]] = {}
    start = threading.Barrier(8)

    def worker(i: int) -> None:
        fn = Flaky(*([503] * (i % 3)))
        start.wait(timeout=10)
        results[i] = (call_with_retries(fn, what="t", attempts=4, **FAST), fn.calls)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert results == {i: ("ok", i % 3 + 1) for i in range(8)}
