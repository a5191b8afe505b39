"""The strict dict -> dataclass decoder: keys, types, checks, defaults, encoding back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from scheduler.config.decode import GO_DURATION, between, decode, encode, yaml_field
from scheduler.config.errors import ConfigError


@dataclass(frozen=True)
class Inner:
    name: str = yaml_field()
    weight: int | None = yaml_field(None, check=between(0, 10))


@dataclass(frozen=True)
class Outer:
    max_skew: int = yaml_field(1, check=between(0, 100))
    ratio: float = yaml_field(0.5)
    enabled: bool = yaml_field(True)
    mode: Literal["A", "B"] = yaml_field("A")
    period: float = yaml_field(15.0, codec=GO_DURATION)
    items: tuple[Inner, ...] = yaml_field(factory=tuple)
    inner: Inner | None = yaml_field(None)
    renamed: str = yaml_field("x", key="somethingElse")


def fails(data: object) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        decode(Outer, data, "root")
    return info.value


def test_missing_and_null_values_take_the_defaults() -> None:
    assert decode(Outer, None) == Outer()
    assert decode(Outer, {"maxSkew": None, "items": None}) == Outer()


def test_keys_are_camel_case_unless_renamed() -> None:
    got = decode(Outer, {"maxSkew": 7, "somethingElse": "y", "items": [{"name": "a", "weight": 2}]})
    assert (got.max_skew, got.renamed, got.items) == (7, "y", (Inner("a", 2),))


def test_unknown_key_names_the_path_and_suggests() -> None:
    e = fails({"maxSkw": 1})
    assert e.path == "root.maxSkw"
    assert 'did you mean "maxSkew"' in e.message


def test_unknown_key_in_a_list_item_names_the_index() -> None:
    e = fails({"items": [{"name": "a"}, {"name": "b", "wieght": 1}]})
    assert e.path == "root.items[1].wieght"


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        ({"maxSkew": "x"}, "root.maxSkew", 'expected an integer 0..100, got "x"'),
        ({"maxSkew": 101}, "root.maxSkew", "expected an integer 0..100, got 101"),
        ({"maxSkew": True}, "root.maxSkew", "expected an integer 0..100, got true"),
        ({"maxSkew": 1.5}, "root.maxSkew", "expected an integer 0..100, got 1.5"),
        ({"ratio": "half"}, "root.ratio", 'expected a number, got "half"'),
        ({"enabled": "yes please"}, "root.enabled", 'expected a boolean (true or false), got "yes please"'),
        ({"mode": "C"}, "root.mode", 'expected one of "A", "B", got "C"'),
        ({"items": {"name": "a"}}, "root.items", "expected a list, got a mapping"),
        ({"items": [{"weight": 1}]}, "root.items[0].name", "required; expected a string"),
        ({"inner": "a"}, "root.inner", 'expected a mapping, got "a"'),
        ({"inner": {"name": "a", "weight": 11}}, "root.inner.weight", "expected an integer 0..10, got 11"),
    ],
)
def test_wrong_values_name_path_expectation_and_value(data: object, path: str, message: str) -> None:
    e = fails(data)
    assert (e.path, e.message) == (path, message)


def test_not_a_mapping() -> None:
    e = fails(["a"])
    assert (e.path, e.message) == ("root", "expected a mapping, got a list")


def test_durations_are_go_strings_held_as_seconds() -> None:
    assert decode(Outer, {"period": "1m30s"}).period == 90.0
    e = fails({"period": "90"})
    assert e.path == "root.period"
    assert "missing unit" in e.message
    e = fails({"period": 90})
    assert e.message.startswith('expected a Go duration like "15s"')


def test_encode_gives_back_what_decode_reads() -> None:
    value = decode(
        Outer,
        {
            "maxSkew": 3,
            "period": "2m",
            "items": [{"name": "a"}],
            "inner": {"name": "b"},
            "somethingElse": "z",
        },
    )
    data = encode(value)
    assert data["period"] == "2m0s"
    assert data["somethingElse"] == "z"
    assert "weight" not in data["items"][0]
    assert decode(Outer, data) == value
