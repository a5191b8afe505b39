"""Go durations: ``time.ParseDuration`` and ``Duration.String`` in Python.

Kubernetes configuration writes durations as Go strings ("15s", "1h2m3.5s",
"300ms"); these functions read and write them with Go's exact rules, so a
value means here what it means to kube-scheduler.

>>> parse_duration("1h2m3.5s")
3723500000000
>>> duration_seconds("300ms")
0.3
>>> format_duration(300_000_000_000)
'5m0s'
"""

from __future__ import annotations

_NANOSECOND = 1
_MICROSECOND = 1000 * _NANOSECOND
_MILLISECOND = 1000 * _MICROSECOND
_SECOND = 1000 * _MILLISECOND
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE

_UNITS = {
    "ns": _NANOSECOND,
    "us": _MICROSECOND,
    "\u00b5s": _MICROSECOND,  # U+00B5 micro sign
    "\u03bcs": _MICROSECOND,  # U+03BC Greek small letter mu
    "ms": _MILLISECOND,
    "s": _SECOND,
    "m": _MINUTE,
    "h": _HOUR,
}

_MAX = 1 << 63  # Go's int64 bound, as uint64 arithmetic checks it
_DIGITS = "0123456789"


class DurationError(ValueError):
    """A string that Go's ``time.ParseDuration`` rejects; the message is Go's."""


def _leading_int(s: str) -> tuple[int, str]:
    i, x = 0, 0
    while i < len(s) and s[i] in _DIGITS:
        if x > _MAX // 10:
            raise OverflowError
        x = x * 10 + ord(s[i]) - 48
        if x > _MAX:
            raise OverflowError
        i += 1
    return x, s[i:]


def _leading_fraction(s: str) -> tuple[int, float, str]:
    i, x, scale, overflow = 0, 0, 1.0, False
    while i < len(s) and s[i] in _DIGITS:
        if not overflow:
            if x > (_MAX - 1) // 10:
                overflow = True
            else:
                y = x * 10 + ord(s[i]) - 48
                if y > _MAX:
                    overflow = True
                else:
                    x = y
                    scale *= 10
        i += 1
    return x, scale, s[i:]


def parse_duration(text: str) -> int:
    """Parse a Go duration string into integer nanoseconds (may be negative).

    Accepts what Go accepts: a sequence of decimal numbers, each with an
    optional fraction and a unit (ns, us, µs, ms, s, m, h), an optional sign,
    and the bare "0". Raises :class:`DurationError` otherwise.
    """
    if not isinstance(text, str):
        raise DurationError(f"time: invalid duration {text!r}")
    orig = text
    quoted = f'"{orig}"'
    s = text
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise DurationError(f"time: invalid duration {quoted}")
    total = 0
    while s:
        if not (s[0] == "." or s[0] in _DIGITS):
            raise DurationError(f"time: invalid duration {quoted}")
        before = len(s)
        try:
            v, s = _leading_int(s)
        except OverflowError:
            raise DurationError(f"time: invalid duration {quoted}") from None
        pre = before != len(s)
        post = False
        f, scale = 0, 1.0
        if s and s[0] == ".":
            s = s[1:]
            before = len(s)
            f, scale, s = _leading_fraction(s)
            post = before != len(s)
        if not pre and not post:
            raise DurationError(f"time: invalid duration {quoted}")
        i = 0
        while i < len(s) and s[i] != "." and s[i] not in _DIGITS:
            i += 1
        if i == 0:
            raise DurationError(f"time: missing unit in duration {quoted}")
        unit_name, s = s[:i], s[i:]
        unit = _UNITS.get(unit_name)
        if unit is None:
            raise DurationError(f'time: unknown unit "{unit_name}" in duration {quoted}')
        if v > _MAX // unit:
            raise DurationError(f"time: invalid duration {quoted}")
        v *= unit
        if f > 0:
            # Go computes the fraction in float64, then truncates to uint64.
            v += int(float(f) * (float(unit) / scale))
            if v > _MAX:
                raise DurationError(f"time: invalid duration {quoted}")
        total += v
        if total > _MAX:
            raise DurationError(f"time: invalid duration {quoted}")
    if neg:
        return -total
    if total > _MAX - 1:
        raise DurationError(f"time: invalid duration {quoted}")
    return total


def duration_seconds(text: str) -> float:
    """Parse a Go duration string into float seconds."""
    return parse_duration(text) / _SECOND


def _frac(u: int, prec: int) -> tuple[str, int]:
    digits = ""
    printed = False
    for _ in range(prec):
        d = u % 10
        printed = printed or d != 0
        if printed:
            digits = str(d) + digits
        u //= 10
    return ("." + digits if printed else ""), u


def format_duration(ns: int) -> str:
    """Format integer nanoseconds as Go's ``Duration.String`` does ("1h2m3.5s", "5m0s", "0s")."""
    neg = ns < 0
    u = -ns if neg else ns
    if u < _SECOND:
        if u == 0:
            return "0s"
        if u < _MICROSECOND:
            out = f"{u}ns"
        elif u < _MILLISECOND:
            frac, whole = _frac(u, 3)
            out = f"{whole}{frac}\u00b5s"
        else:
            frac, whole = _frac(u, 6)
            out = f"{whole}{frac}ms"
    else:
        frac, secs = _frac(u, 9)
        out = f"{secs % 60}{frac}s"
        minutes = secs // 60
        if minutes:
            out = f"{minutes % 60}m{out}"
            hours = minutes // 60
            if hours:
                out = f"{hours}h{out}"
    return "-" + out if neg else out


def format_seconds(seconds: float) -> str:
    """Format float seconds as a Go duration string, to the nanosecond."""
    return format_duration(round(seconds * _SECOND))
