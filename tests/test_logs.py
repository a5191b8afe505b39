"""scheduler.logs: what ``err=`` says of an exception; what ``setup`` lets through (tests/conftest.py
gives the root logger back after each test)."""

from __future__ import annotations

import io
import json
import logging
import sys

from kubernetes.client.exceptions import ApiException

from scheduler.logs import JSONFormatter, KlogFormatter, error_text, kv, setup


def _api_error(status: int, reason: str, message: str) -> ApiException:
    e = ApiException(status=status, reason=reason)
    e.body = json.dumps({"kind": "Status", "status": "Failure", "message": message, "code": status})
    return e


def test_an_api_error_says_its_status_and_message() -> None:
    e = _api_error(429, "Too Many Requests", "too many requests, please try again later")
    assert str(e).endswith("\n"), "the client's text ends in its headers and body"
    assert error_text(e) == "ApiException: 429 Too Many Requests: too many requests, please try again later"


def test_other_errors_say_their_type_and_first_line() -> None:
    assert (
        error_text(TimeoutError("timed out: PATCH /api/v1/x")) == "TimeoutError: timed out: PATCH /api/v1/x"
    )
    assert error_text(ValueError("first\n\nsecond")) == "ValueError: first"
    assert error_text(RuntimeError()) == "RuntimeError"


def test_both_formats_carry_it() -> None:
    try:
        raise _api_error(500, "Internal Server Error", "etcdserver: request timed out")
    except ApiException:
        record = logging.LogRecord("t", logging.ERROR, "f.py", 1, "Updating failed", None, sys.exc_info())
    want = "ApiException: 500 Internal Server Error: etcdserver: request timed out"
    assert KlogFormatter().format(record).endswith(" err=" + json.dumps(want))
    assert json.loads(JSONFormatter().format(record))["err"] == want


def test_warnings_only_shows_warnings_with_their_context() -> None:
    out = io.StringIO()
    setup(stream=out, warnings_only=True)
    log = logging.getLogger("scheduler.cluster.informers")
    log.info("Watch expired, relisting", extra=kv(informer="pods"))
    log.warning(
        "Watch or list failed; retrying", extra=kv(informer="pods", err="TimeoutError: read timed out")
    )
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("W")
    assert lines[0].endswith(
        '"Watch or list failed; retrying" informer="pods" err="TimeoutError: read timed out"'
    )


def test_verbosity_zero_shows_info() -> None:
    out = io.StringIO()
    setup(stream=out)
    logging.getLogger("scheduler.app").info("Caches are synced", extra=kv(pods=3))
    assert out.getvalue().startswith("I") and out.getvalue().rstrip().endswith('"Caches are synced" pods=3')
