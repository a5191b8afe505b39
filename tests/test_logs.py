"""scheduler.logs: what ``err=`` says of an exception."""

from __future__ import annotations

import json
import logging
import sys

from kubernetes.client.exceptions import ApiException

from scheduler.logs import JSONFormatter, KlogFormatter, error_text


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
