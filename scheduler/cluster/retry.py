"""When and how long to retry an API call (tenacity policies shared by the writers).

Retried: 429 Too Many Requests, 500/502/503/504, and connection failures
(urllib3 errors: refused, reset, timed out). Never retried here: 409 Conflict
and 404 (someone else acted, the caller decides), other 4xx (retrying cannot
help). A ``Retry-After`` header (the API server sends one with most 429s and
with 5xx from overloaded priority levels) sets the least wait.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    stop_when_event_set,
    wait_exponential_jitter,
)

from scheduler.logs import kv

logger = logging.getLogger(__name__)

RETRIABLE_STATUS = frozenset({429, 500, 502, 503, 504})
T = TypeVar("T")


def retriable(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status in RETRIABLE_STATUS
    return isinstance(exc, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError)


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds from the ``Retry-After`` header of an API error, if any (delta-seconds form only,
    the form the API server uses)."""
    headers = getattr(exc, "headers", None)
    if not headers:
        return None
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class WaitRetryAfter:
    """Exponential backoff with jitter, but at least the server's ``Retry-After`` (capped)."""

    def __init__(self, initial: float, maximum: float, retry_after_cap: float) -> None:
        self.fallback = wait_exponential_jitter(multiplier=initial, max=maximum, jitter=initial)
        self.cap = retry_after_cap

    def __call__(self, state: RetryCallState) -> float:
        wait = self.fallback(state)
        ra = retry_after(state.outcome.exception() if state.outcome else None)
        if ra is not None:
            wait = max(wait, min(ra, self.cap))
        return wait


def _log_retry(what: str) -> Callable[[RetryCallState], None]:
    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        status = getattr(exc, "status", None)
        logger.info(
            "Retrying API call",
            extra=kv(
                call=what,
                attempt=state.attempt_number,
                status=status,
                err=type(exc).__name__,
                waitSeconds=round(state.upcoming_sleep, 3),
            ),
        )

    return before_sleep


class CancelledError(Exception):
    """The caller's cancel event was set: no further attempt was made."""


@lru_cache(maxsize=64)
def _policy(
    what: str,
    attempts: int,
    max_seconds: float,
    initial_wait: float,
    max_wait: float,
    retry_after_cap: float,
    cancel: threading.Event | None = None,
) -> Retrying:
    stop = stop_after_attempt(attempts) | stop_after_delay(max_seconds)
    extra: dict[str, Any] = {}
    if cancel is not None:
        # Cancelling wakes a backoff sleep at once, and stops the retries.
        stop = stop | stop_when_event_set(cancel)
        extra["sleep"] = cancel.wait
    return Retrying(
        stop=stop,
        wait=WaitRetryAfter(initial_wait, max_wait, retry_after_cap),
        retry=retry_if_exception(retriable),
        before_sleep=_log_retry(what),
        reraise=True,
        **extra,
    )


def call_with_retries(
    fn: Callable[[], T],
    *,
    what: str,
    attempts: int,
    max_seconds: float,
    initial_wait: float = 0.2,
    max_wait: float = 5.0,
    retry_after_cap: float = 10.0,
    on_attempt: Callable[[int], None] | None = None,
    cancel: threading.Event | None = None,
) -> T:
    """``fn()`` retried on :func:`retriable` errors, at most ``attempts`` times and ``max_seconds``
    (the last error is raised as is). Once ``cancel`` is set no attempt starts: :class:`CancelledError`
    is raised instead (a backoff in progress ends at once).

    One tenacity ``Retrying`` serves every call with the same settings: it keeps
    a run's state per thread and per iteration (tests/cluster/test_retry.py
    runs them concurrently and nested), and building one per call (a
    ``threading.local`` each) was a visible share of the scheduler's CPU per
    binding.
    """
    retrying = _policy(what, attempts, max_seconds, initial_wait, max_wait, retry_after_cap, cancel)
    for attempt in retrying:
        with attempt:
            if cancel is not None and cancel.is_set():
                raise CancelledError(what)
            if on_attempt is not None:
                on_attempt(attempt.retry_state.attempt_number)
            return fn()
    raise AssertionError("unreachable")  # pragma: no cover


def status_message(exc: ApiException) -> str:
    """The ``message`` of the Status body of an API error, else its reason."""
    body: Any = exc.body
    try:
        data = json.loads(body) if body else None
    except (TypeError, ValueError):
        data = None
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])
    return str(exc.reason or exc.status)
