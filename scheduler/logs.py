"""klog-style logging: one logger per module, key/value context, -v levels, text or JSON.

Usage in a module::

    logger = logging.getLogger(__name__)
    logger.info("Successfully bound pod", extra=kv(pod=pi.key, node=node))
    logger.log(V(4), "Attempting to schedule pod", extra=kv(pod=pi.key))

``V(n)`` is klog's verbosity: V(0) is always shown, ``-v=4`` shows up to V(4).
Text lines look like klog's::

    I1130 04:12:00.123456   42 loop.py:88] "Successfully bound pod" pod="ns/p" node="kind-worker"
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from datetime import UTC, datetime
from typing import Any

_KV = "kv"


def V(level: int) -> int:  # noqa: N802 - klog's name
    """The logging level of klog verbosity ``level`` (V(0) is INFO)."""
    return logging.INFO - level


def kv(**pairs: Any) -> dict[str, Any]:
    """``extra=`` for a log call with key/value context."""
    return {_KV: pairs}


def _fmt_value(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, float):
        return repr(round(v, 6))
    if v is None or isinstance(v, bool | int):
        return json.dumps(v)
    return json.dumps(str(v))


def error_text(exc: BaseException | None) -> str:
    """One line for ``err=``: the exception's type and the first line of what it says; for an
    API error (the client's ApiException: ``status`` and a Status ``body``), the HTTP status and
    the Status message. The last line of a traceback said nothing for an ApiException, whose
    text ends with its response headers and body."""
    if exc is None:
        return ""
    name = type(exc).__name__
    status = getattr(exc, "status", None)
    if isinstance(status, int):
        body = getattr(exc, "body", None)
        message = ""
        try:
            data = json.loads(body) if body else None
            if isinstance(data, dict):
                message = str(data.get("message") or "")
        except (TypeError, ValueError):
            pass
        reason = getattr(exc, "reason", None) or ""
        return f"{name}: {status} {reason}".rstrip() + (f": {message}" if message else "")
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"{name}: {lines[0]}" if lines else name


class KlogFormatter(logging.Formatter):
    _sev = {
        logging.DEBUG: "I",
        logging.INFO: "I",
        logging.WARNING: "W",
        logging.ERROR: "E",
        logging.CRITICAL: "F",
    }

    def format(self, record: logging.LogRecord) -> str:
        sev = "I" if record.levelno < logging.WARNING else self._sev.get(record.levelno, "E")
        ts = datetime.fromtimestamp(record.created, UTC).strftime("%m%d %H:%M:%S.%f")
        line = f"{sev}{ts} {record.process:>7} {record.filename}:{record.lineno}] {json.dumps(record.getMessage())}"
        pairs = getattr(record, _KV, None)
        if pairs:
            line += " " + " ".join(f"{k}={_fmt_value(v)}" for k, v in pairs.items())
        if record.exc_info and record.levelno >= logging.ERROR:
            line += " err=" + json.dumps(error_text(record.exc_info[1]))
        return line


class JSONFormatter(logging.Formatter):
    """The shape of klog's JSON output: ts, v, msg, caller, then the pairs."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created * 1000, 3),
            "caller": f"{record.filename}:{record.lineno}",
            "msg": record.getMessage(),
        }
        if record.levelno >= logging.WARNING:
            out["level"] = record.levelname.lower()
        else:
            out["v"] = max(0, logging.INFO - record.levelno)
        pairs = getattr(record, _KV, None)
        if pairs:
            for k, v in pairs.items():
                out[k] = v if isinstance(v, str | int | float | bool | type(None) | list | dict) else str(v)
        if record.exc_info and record.levelno >= logging.ERROR:
            out["err"] = error_text(record.exc_info[1])
        return json.dumps(out, default=str)


_configured = threading.Lock()


def setup(verbosity: int = 0, fmt: str = "text", stream: Any = None, warnings_only: bool = False) -> None:
    """Configure the root logger once, from the CLI (never at import time).

    ``warnings_only``: for the programs beside the scheduler (the benchmark) that use its
    modules, whose warnings they show with their context and whose info lines they don't."""
    with _configured:
        root = logging.getLogger()
        for h in list(root.handlers):
            root.removeHandler(h)
        handler = logging.StreamHandler(stream or sys.stderr)
        handler.setFormatter(JSONFormatter() if fmt == "json" else KlogFormatter())
        root.addHandler(handler)
        set_verbosity(verbosity)
        if warnings_only:
            root.setLevel(logging.WARNING)


def set_verbosity(verbosity: int) -> None:
    """klog's ``-v``, now: at setup, and from the secure port's ``/debug/flags/v``."""
    logging.getLogger().setLevel(V(max(0, verbosity)))
    # The client libraries are chatty at our debug levels; keep them at WARNING
    # unless asked for the wire (-v=8 and above, as kubectl's -v=8 shows requests).
    quiet = logging.WARNING if verbosity < 8 else logging.DEBUG
    for name in ("urllib3", "kubernetes"):
        logging.getLogger(name).setLevel(quiet)


_DIGITS = re.compile(r"[0-9]+")


def set_verbosity_from(text: str) -> str:
    """``/debug/flags/v``'s setter, with the answers of component-base's ``GlogSetter``
    (``strconv.ParseUint`` of the body, then klog's int32 level)."""
    quoted = json.dumps(text, ensure_ascii=False)
    if not _DIGITS.fullmatch(text):  # no sign, no spaces, no newline
        raise ValueError(f"strconv.ParseUint: parsing {quoted}: invalid syntax")
    level = int(text)
    if level >= 2**32:
        raise ValueError(f"strconv.ParseUint: parsing {quoted}: value out of range")
    if level >= 2**31:
        raise ValueError(
            f"failed set klog.logging.verbosity {text}: strconv.ParseInt: parsing {quoted}: value out of range"
        )
    set_verbosity(level)
    logging.getLogger(__name__).info("Set the verbosity", extra=kv(v=level))
    return f"successfully set klog.logging.verbosity to {text}"
