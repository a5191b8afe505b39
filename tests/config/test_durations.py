"""Go duration parsing and formatting, checked against the vectors of Go's time_test.go."""

from __future__ import annotations

import pytest

from scheduler.config.durations import (
    DurationError,
    duration_seconds,
    format_duration,
    format_seconds,
    parse_duration,
)

NS, US, MS, S, M, H = 1, 1000, 1000**2, 1000**3, 60 * 1000**3, 3600 * 1000**3

PARSE_OK = [
    ("0", 0),
    ("5s", 5 * S),
    ("30s", 30 * S),
    ("1478s", 1478 * S),
    ("-5s", -5 * S),
    ("+5s", 5 * S),
    ("-0", 0),
    ("+0", 0),
    ("5.0s", 5 * S),
    ("5.6s", 5 * S + 600 * MS),
    ("5.s", 5 * S),
    (".5s", 500 * MS),
    ("1.0s", 1 * S),
    ("1.00s", 1 * S),
    ("1.004s", 1 * S + 4 * MS),
    ("1.0040s", 1 * S + 4 * MS),
    ("100.00100s", 100 * S + 1 * MS),
    ("10ns", 10 * NS),
    ("11us", 11 * US),
    ("12\u00b5s", 12 * US),
    ("12\u03bcs", 12 * US),
    ("13ms", 13 * MS),
    ("14s", 14 * S),
    ("15m", 15 * M),
    ("16h", 16 * H),
    ("3h30m", 3 * H + 30 * M),
    ("10.5s4m", 4 * M + 10 * S + 500 * MS),
    ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
    ("1h2m3s4ms5us6ns", 1 * H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS),
    ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
    ("52763797000ns", 52763797000),
    ("0.3333333333333333333h", 20 * M),
    ("9007199254740993ns", (1 << 53) + 1),
    ("9223372036854775807ns", (1 << 63) - 1),
    ("9223372036854775.807us", (1 << 63) - 1),
    ("9223372036s854ms775us807ns", (1 << 63) - 1),
    ("-9223372036854775808ns", -(1 << 63)),
    ("-9223372036854775.808us", -(1 << 63)),
    ("-9223372036s854ms775us808ns", -(1 << 63)),
    ("-2562047h47m16.854775808s", -(1 << 63)),
    ("0.100000000000000000000h", 6 * M),
    ("0.830103483285477580700h", 49 * M + 48 * S + 372539827 * NS),
]

PARSE_BAD = [
    "",
    "3",
    "-",
    "s",
    ".",
    "-.",
    ".s",
    "+.s",
    "1d",
    "\x85\x85",
    "\ufffd",
    "5 s",
    "1e3s",
    "9223372036854775810ns",
    "9223372036854775808ns",
    "-9223372036854775809ns",
    "9223372036854776us",
    "3000000h",
    "9223372036854775.808us",
    "9223372036854ms775us808ns",
]

FORMAT = [
    ("0s", 0),
    ("1ns", 1 * NS),
    ("1.1\u00b5s", 1100 * NS),
    ("2.2ms", 2200 * US),
    ("3.3s", 3300 * MS),
    ("4m5s", 4 * M + 5 * S),
    ("4m5.001s", 4 * M + 5001 * MS),
    ("5h6m7.001s", 5 * H + 6 * M + 7001 * MS),
    ("8m0.000000001s", 8 * M + 1 * NS),
    ("2562047h47m16.854775807s", (1 << 63) - 1),
    ("-2562047h47m16.854775808s", -(1 << 63)),
]


@pytest.mark.parametrize(("text", "ns"), PARSE_OK)
def test_parse_accepts_what_go_accepts(text: str, ns: int) -> None:
    assert parse_duration(text) == ns


@pytest.mark.parametrize("text", PARSE_BAD)
def test_parse_rejects_what_go_rejects(text: str) -> None:
    with pytest.raises(DurationError, match=r"^time: "):
        parse_duration(text)


def test_parse_error_messages_are_gos() -> None:
    with pytest.raises(DurationError, match='^time: missing unit in duration "3"$'):
        parse_duration("3")
    with pytest.raises(DurationError, match='^time: unknown unit "d" in duration "1d"$'):
        parse_duration("1d")
    with pytest.raises(DurationError, match='^time: invalid duration ""$'):
        parse_duration("")


@pytest.mark.parametrize(("text", "ns"), FORMAT)
def test_format_matches_go_string(text: str, ns: int) -> None:
    assert format_duration(ns) == text


@pytest.mark.parametrize(("text", "_"), PARSE_OK)
def test_format_then_parse_round_trips(text: str, _: int) -> None:
    ns = parse_duration(text)
    assert parse_duration(format_duration(ns)) == ns


def test_seconds_helpers() -> None:
    assert duration_seconds("1h2m3.5s") == 3723.5
    assert duration_seconds("300ms") == pytest.approx(0.3)
    assert format_seconds(15.0) == "15s"
    assert format_seconds(300) == "5m0s"
    assert format_seconds(0.3) == "300ms"
