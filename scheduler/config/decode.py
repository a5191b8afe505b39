"""Strict decoding of parsed YAML into dataclasses, and encoding them back.

A configuration dataclass declares its fields with :func:`yaml_field`; the
YAML key defaults to the camelCase form of the attribute name. :func:`decode`
then reads a mapping the way kube-scheduler's strict decoder does: unknown
keys are errors, every value must have the declared type, and a null or
missing value takes the field's default. Each error is a :class:`ConfigError`
naming the field path and what was expected::

    profiles[0].pluginConfig[1].args.hardPodAffinityWeight: expected an integer 0..100, got "x"

A dataclass may define ``validate(self, path)`` for checks across fields; it
runs after the fields are decoded and raises ``ConfigError`` itself.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from scheduler.config.durations import DurationError, format_seconds, parse_duration
from scheduler.config.errors import ConfigError

T = TypeVar("T")

_KEY = "yaml_key"
_INT64 = "yaml_int64"
_CHECK = "yaml_check"
_DECODE = "yaml_decode"
_ENCODE = "yaml_encode"


@dataclasses.dataclass(frozen=True)
class Check:
    """A condition on a decoded value, and how to say what was expected."""

    expected: str
    ok: Callable[[Any], bool]


def between(lo: int | float, hi: int | float, kind: str = "an integer") -> Check:
    return Check(f"{kind} {lo}..{hi}", lambda v: lo <= v <= hi)


def at_least(lo: int | float, kind: str = "an integer") -> Check:
    return Check(f"{kind} >= {lo}", lambda v: v >= lo)


def greater_than(lo: int | float, kind: str = "a number") -> Check:
    return Check(f"{kind} > {lo}", lambda v: v > lo)


NON_EMPTY = Check("a non-empty string", bool)


@dataclasses.dataclass(frozen=True)
class Codec:
    """A custom YAML representation (e.g. Go durations held as float seconds)."""

    decode: Callable[[Any, str], Any]
    """decode(raw, path) -> value; raises ConfigError."""
    encode: Callable[[Any], Any]


def yaml_field(
    default: Any = dataclasses.MISSING,
    *,
    factory: Callable[[], Any] | None = None,
    key: str | None = None,
    check: Check | None = None,
    codec: Codec | None = None,
    int64: bool = False,
) -> Any:
    """A dataclass field with its YAML key, an optional check and an optional codec.

    Integers are int32 as in kube-scheduler's types, unless ``int64``."""
    metadata = {
        _KEY: key,
        _INT64: int64,
        _CHECK: check,
        _DECODE: codec.decode if codec else None,
        _ENCODE: codec.encode if codec else None,
    }
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def yaml_key(f: dataclasses.Field[Any]) -> str:
    return f.metadata.get(_KEY) or camel(f.name)


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


MAX_SHOWN = 80
"""Characters of a value an error message shows at most."""


def shorten(text: str, limit: int = MAX_SHOWN) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}… ({len(text)} characters)"


def describe(value: Any) -> str:
    """A value as an error message shows it: scalars as JSON (long ones cut), containers by kind."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return json.dumps(shorten(value), ensure_ascii=False)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"an integer of {value.bit_length()} bits"
    if isinstance(value, int | float | bool) or value is None:
        try:
            return json.dumps(value, ensure_ascii=False, allow_nan=True)
        except (TypeError, ValueError):  # pragma: no cover - defensive
            return repr(value)
    return json.dumps(shorten(str(value)), ensure_ascii=False)


def fail(path: str, expected: str, got: Any) -> ConfigError:
    return ConfigError(None, path, f"expected {expected}, got {describe(got)}")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _type_words(tp: Any) -> str:
    origin = get_origin(tp)
    if tp is bool:
        return "a boolean (true or false)"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in get_args(tp))
    if origin in (list, tuple):
        return "a list"
    if origin is dict or tp is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    if origin in (Union, types.UnionType):
        return " or ".join(_type_words(a) for a in get_args(tp) if a is not type(None))
    return "a value"


INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def _decode_value(tp: Any, raw: Any, path: str, check: Check | None, int64: bool = False) -> Any:
    origin = get_origin(tp)
    expected = check.expected if check else _type_words(tp)
    if origin in (Union, types.UnionType):
        arms = [a for a in get_args(tp) if a is not type(None)]
        if raw is None:
            return None
        if len(arms) != 1:  # pragma: no cover - not used by the schema
            raise TypeError(f"unsupported union {tp}")
        return _decode_value(arms[0], raw, path, check, int64)
    if tp is Any:
        value = raw
    elif tp is bool:
        if not isinstance(raw, bool):
            raise fail(path, expected, raw)
        value = raw
    elif tp is int:
        if not isinstance(raw, int) or isinstance(raw, bool):
            raise fail(path, expected, raw)
        lo, hi = INT64 if int64 else INT32
        if not lo <= raw <= hi:
            raise fail(path, f"{expected} ({64 if int64 else 32}-bit)", raw)
        value = raw
    elif tp is float:
        if not isinstance(raw, int | float) or isinstance(raw, bool) or not math.isfinite(raw):
            raise fail(path, expected, raw)
        value = float(raw)
    elif tp is str:
        if not isinstance(raw, str):
            raise fail(path, expected, raw)
        value = raw
    elif origin is Literal:
        if raw not in get_args(tp) or isinstance(raw, bool):
            raise fail(path, expected, raw)
        value = raw
    elif origin is tuple:
        if not isinstance(raw, list):
            raise fail(path, "a list", raw)
        (item,) = [a for a in get_args(tp) if a is not Ellipsis]
        value = tuple(_decode_value(item, v, join(path, i), None) for i, v in enumerate(raw))
    elif origin is dict or tp is dict:
        if not isinstance(raw, dict):
            raise fail(path, "a mapping", raw)
        value = raw
    elif dataclasses.is_dataclass(tp):
        value = decode(typing.cast(type, tp), raw, path)
    else:  # pragma: no cover - not used by the schema
        raise TypeError(f"unsupported field type {tp}")
    if check is not None and not check.ok(value):
        raise fail(path, check.expected, raw)
    return value


def decode(cls: type[T], data: Any, path: str = "") -> T:
    """Build ``cls`` from a parsed YAML mapping (None means all defaults)."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise fail(path, "a mapping", data)
    fields = {yaml_key(f): f for f in dataclasses.fields(typing.cast(Any, cls)) if f.init}
    for key in data:
        if key not in fields:
            known = sorted(fields)
            hint = difflib.get_close_matches(str(key), known, n=1)
            suggestion = f' (did you mean "{hint[0]}"?)' if hint else ""
            raise ConfigError(
                None, join(path, str(key)), f"unknown field{suggestion}; expected one of: {', '.join(known)}"
            )
    hints = _hints(cls)  # type: ignore[arg-type]  # a class is hashable; mypy does not see it for type[T]
    kwargs: dict[str, Any] = {}
    for key, f in fields.items():
        sub = join(path, key)
        raw = data.get(key)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if raw is None and (key not in data or not _allows_none(hints[f.name])):
            if required:
                raise ConfigError(None, sub, f"required; expected {_expected(f, hints[f.name])}")
            continue
        custom = f.metadata.get(_DECODE)
        if custom is not None:
            value = custom(raw, sub)
            check = f.metadata.get(_CHECK)
            if check is not None and not check.ok(value):
                raise fail(sub, check.expected, raw)
        else:
            value = _decode_value(
                hints[f.name], raw, sub, f.metadata.get(_CHECK), f.metadata.get(_INT64, False)
            )
        kwargs[f.name] = value
    obj = cls(**kwargs)
    validate = getattr(obj, "validate", None)
    if validate is not None:
        validate(path)
    return obj


def _allows_none(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType) and type(None) in get_args(tp)


def _expected(f: dataclasses.Field[Any], tp: Any) -> str:
    check = f.metadata.get(_CHECK)
    return check.expected if check else _type_words(tp)


def encode(obj: Any) -> Any:
    """The YAML form of a dataclass built by :func:`decode` (None values omitted)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            if not f.init:
                continue
            value = getattr(obj, f.name)
            if value is None:
                continue
            custom = f.metadata.get(_ENCODE)
            out[yaml_key(f)] = custom(value) if custom is not None else encode(value)
        return out
    if isinstance(obj, list | tuple):
        return [encode(v) for v in obj]
    if isinstance(obj, dict):
        return {k: encode(v) for k, v in obj.items()}
    if isinstance(obj, float) and obj.is_integer():
        return int(obj)
    return obj


def _go_duration(raw: Any, path: str, numbers: bool) -> float:
    if numbers and isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw):
        return float(raw)
    expected = 'a Go duration like "15s" or "1m30s"' + (" or a number of seconds" if numbers else "")
    if not isinstance(raw, str):
        raise fail(path, expected, raw)
    try:
        return parse_duration(raw) / 1e9
    except DurationError as e:
        raise ConfigError(None, path, f"expected {expected}, got {describe(raw)} ({e})") from None


GO_DURATION = Codec(lambda raw, path: _go_duration(raw, path, numbers=False), format_seconds)
"""A Go duration string ("15s"), held as float seconds, written back as Go writes it."""

DURATION_OR_SECONDS = Codec(lambda raw, path: _go_duration(raw, path, numbers=True), format_seconds)
"""A Go duration string or a plain number of seconds, held as float seconds."""
