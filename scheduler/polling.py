"""Waiting with a deadline: the one polling loop of the package, its tests and e2e suites.

:func:`poll` calls a check until it returns something truthy and returns that;
a check that raises one of ``retry_on`` counts as "not yet". At the deadline it
raises :class:`PollTimeoutError`, which names what was awaited and the last
value (or error) the check gave, so a failed wait says where it stood.
``scheduler.deploy.waiting.poll`` builds the deploy commands' waits on it
(status lines, transient API errors); tests and e2e suites call it directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

T = TypeVar("T")


class PollTimeoutError(AssertionError):
    """The deadline passed. An AssertionError, so pytest reports it as a failed expectation."""

    def __init__(self, what: str, timeout: float, last: Any) -> None:
        super().__init__(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")
        self.what = what
        self.timeout = timeout
        self.last = last


def poll(
    check: Callable[[], T],
    timeout: float,
    what: str,
    interval: float = 0.05,
    *,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``check`` every ``interval`` s until it returns something truthy; return that.

    An exception of a type in ``retry_on`` counts as not yet (and is the last
    value reported if the wait times out); any other propagates at once."""
    last: list[Any] = [None]

    def attempt() -> T | None:
        try:
            got = check()
        except retry_on as e:
            last[0] = e
            return None
        last[0] = got
        return got

    retrying = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_fixed(interval),
        retry=retry_if_result(lambda got: not got),
    )
    try:
        return retrying(attempt)  # type: ignore[return-value]
    except RetryError:
        raise PollTimeoutError(what, timeout, last[0]) from None
