"""Device selectors: CEL expressions over a ``device``, compiled once, as Kubernetes evaluates them.

A DeviceClass or a claim's request selects devices with CEL expressions
(``selectors[].cel.expression``) over one variable, ``device``:

* ``device.driver``: the driver's name;
* ``device.attributes[domain][id]``: the device's attributes grouped by the
  domain of their qualified name (an unqualified name is in the driver's
  domain), each an int, bool, string or version (a ``semver``);
* ``device.capacity[domain][id]``: its capacities, as quantities;
* ``device.allowMultipleAllocations``: whether several claims may share it.

(``k8s.io/dynamic-resource-allocation/cel``, ``compile.go``: ``deviceType``,
``Device.Evaluate``.) Kubernetes' extensions the selectors use are added as
functions: ``quantity("1Gi")`` with ``compareTo``, ``isLessThan``,
``isGreaterThan``, ``add``, ``sub``, ``asInteger``, ``asApproximateFloat``,
``sign``, ``isInteger``; ``semver("1.2.3")`` with ``compareTo``, ``isLessThan``,
``isGreaterThan``, ``major``, ``minor``, ``patch``; ``isQuantity`` and
``isSemver``. The strings, optional and bindings extensions come with the
library. A quantity or version is a map holding one private key, so that
``==`` compares values and member calls find them.

The library is ``cel-expr-python`` (Google's cel-cpp): the complete CEL
language with type checking and the optional syntax (``.?``) that Kubernetes'
environment has, at about 5 µs per evaluation. ``cel-python`` (pure Python)
takes about 300 µs and ``common-expression-language`` (cel-rust) lacks the
optional syntax. There is no runtime cost limit: the API server estimates the
cost of every selector when the DeviceClass or claim is written and refuses
one above the limit, so what reaches the scheduler is bounded already.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from scheduler.core.resources import QuantityError, parse_quantity

_QUANTITY = "__k8s_quantity__"
_SEMVER = "__k8s_semver__"
_SEMVER_RE = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


class SelectorError(Exception):
    """A selector that does not compile, fails at run time, or does not give a bool."""

    def __init__(self, expression: str, message: str) -> None:
        super().__init__(f"{message} (expression: {expression})")
        self.expression = expression
        self.message = message


# ---------------------------------------------------------------------------
# Kubernetes' quantity and semver, as tagged maps


def quantity_value(text: str) -> dict[str, str]:
    try:
        value = parse_quantity(text)
    except QuantityError as e:
        raise ValueError(str(e)) from None
    return {_QUANTITY: _canonical(value)}


def _canonical(value: Decimal) -> str:
    return format(value.normalize(), "f") if value else "0"


def _q(v: Mapping[str, Any]) -> Decimal:
    if _QUANTITY not in v:
        raise ValueError("not a quantity")
    return Decimal(v[_QUANTITY])


def semver_value(text: str) -> dict[str, Any]:
    m = _SEMVER_RE.match(text)
    if m is None:
        raise ValueError(f"invalid semver: {text}")
    return {_SEMVER: text}


def _semver_key(v: Mapping[str, Any]) -> tuple[Any, ...]:
    if _SEMVER not in v:
        raise ValueError("not a semver")
    m = _SEMVER_RE.match(v[_SEMVER])
    assert m is not None
    pre = m.group(4)
    # Precedence (semver 2.0.0 §11): a pre-release sorts before its release; numeric
    # identifiers compare as numbers and before alphanumeric ones.
    pre_key: tuple[Any, ...] = (1,)
    if pre:
        pre_key = (0, *((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")))
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)), pre_key)


def _compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
    if _SEMVER in a:
        x, y = _semver_key(a), _semver_key(b)
    else:
        x, y = _q(a), _q(b)  # type: ignore[assignment]
    return (x > y) - (x < y)


def _arith(op: Any) -> Any:
    def impl(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, str]:
        return {_QUANTITY: _canonical(op(_q(a), _q(b)))}

    return impl


def _as_integer(a: Mapping[str, Any]) -> int:
    v = _q(a)
    if v != v.to_integral_value():
        raise ValueError("cannot convert value to integer")
    return int(v)


def _is(pattern: Any) -> Any:
    def impl(text: str) -> bool:
        try:
            pattern(text)
        except ValueError:
            return False
        return True

    return impl


_T = cel.Type
_MAP = _T.Map(_T.STRING, _T.DYN)


def _fn(name: str, ret: Any, params: list[Any], impl: Any, member: bool = False) -> Any:
    kind = "member" if member else "global"
    return cel.FunctionDecl(
        name, [cel.Overload(f"k8s_{kind}_{name}", ret, params, is_member=member, impl=impl)]
    )


_FUNCTIONS = [
    _fn("quantity", _MAP, [_T.STRING], quantity_value),
    _fn("isQuantity", _T.BOOL, [_T.STRING], _is(quantity_value)),
    _fn("semver", _MAP, [_T.STRING], semver_value),
    _fn("isSemver", _T.BOOL, [_T.STRING], _is(semver_value)),
    _fn("compareTo", _T.INT, [_MAP, _MAP], _compare, member=True),
    _fn("isLessThan", _T.BOOL, [_MAP, _MAP], lambda a, b: _compare(a, b) < 0, member=True),
    _fn("isGreaterThan", _T.BOOL, [_MAP, _MAP], lambda a, b: _compare(a, b) > 0, member=True),
    _fn("add", _MAP, [_MAP, _MAP], _arith(lambda x, y: x + y), member=True),
    _fn("sub", _MAP, [_MAP, _MAP], _arith(lambda x, y: x - y), member=True),
    _fn("asInteger", _T.INT, [_MAP], _as_integer, member=True),
    _fn("asApproximateFloat", _T.DOUBLE, [_MAP], lambda a: float(_q(a)), member=True),
    _fn("sign", _T.INT, [_MAP], lambda a: (_q(a) > 0) - (_q(a) < 0), member=True),
    _fn("isInteger", _T.BOOL, [_MAP], lambda a: _q(a) == _q(a).to_integral_value(), member=True),
    _fn("major", _T.INT, [_MAP], lambda a: _semver_key(a)[0], member=True),
    _fn("minor", _T.INT, [_MAP], lambda a: _semver_key(a)[1], member=True),
    _fn("patch", _T.INT, [_MAP], lambda a: _semver_key(a)[2], member=True),
]


# ---------------------------------------------------------------------------
# The device as CEL sees it


def device_view(driver: str, device: Mapping[str, Any]) -> dict[str, Any]:
    """``device`` for the selectors: a ResourceSlice's device with its driver."""
    attributes: dict[str, dict[str, Any]] = {driver: {}}
    for name, attr in (device.get("attributes") or {}).items():
        domain, ident = split_name(name, driver)
        attributes.setdefault(domain, {})[ident] = attribute_value(attr)
    capacity: dict[str, dict[str, Any]] = {driver: {}}
    for name, cap in (device.get("capacity") or {}).items():
        domain, ident = split_name(name, driver)
        capacity.setdefault(domain, {})[ident] = quantity_value(str(cap.get("value", "0")))
    return {
        "driver": driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations")),
    }


def split_name(name: str, driver: str) -> tuple[str, str]:
    """A qualified attribute or capacity name as (domain, id); unqualified is the driver's."""
    domain, sep, ident = name.rpartition("/")
    return (domain, ident) if sep else (driver, name)


def attribute_value(attr: Mapping[str, Any]) -> Any:
    """The one value of a DeviceAttribute (int, bool, string, or version as semver)."""
    if "version" in attr:
        return semver_value(attr["version"])
    for field in ("int", "bool", "string"):
        if field in attr:
            return attr[field]
    return None


# ---------------------------------------------------------------------------
# Compiling and evaluating


_DOMAIN_RE = re.compile(r'device\.(attributes|capacity)\[\s*"([^"\\]+)"\s*\]')
_OPTIONAL_HINT = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check"
    " with has() for optional fields"
)


class Selector:
    """One compiled expression."""

    __slots__ = ("expression", "_program", "_domains")

    def __init__(self, expression: str, program: Any) -> None:
        self.expression = expression
        self._program = program
        self._domains = tuple(set(_DOMAIN_RE.findall(expression)))
        """(field, domain) the expression indexes: a domain the device lacks reads as an empty
        map, as in Kubernetes (``newStringInterfaceMapWithDefault``)."""

    def matches(self, device: Mapping[str, Any]) -> bool:
        """Whether the device (a :func:`device_view`) is selected; SelectorError when the
        expression fails on it (a missing attribute is such a failure, as in Kubernetes)."""
        missing = [(f, d) for f, d in self._domains if d not in device[f]]
        if missing:
            device = {
                **device,
                "attributes": dict(device["attributes"]),
                "capacity": dict(device["capacity"]),
            }
            for f, d in missing:
                device[f][d] = {}
        try:
            value = self._program.eval(data={"device": device})
        except Exception as e:  # the library raises RuntimeError and friends
            raise SelectorError(self.expression, f"CEL runtime error: {e}") from None
        result = value.plain_value()
        if value.type() == _T.ERROR:
            hint = _OPTIONAL_HINT if "Key not found" in str(result) else ""
            raise SelectorError(self.expression, f"CEL runtime error: {result}{hint}")
        if not isinstance(result, bool):
            raise SelectorError(
                self.expression, f"CEL result of type {value.type().name()} could not be converted to bool"
            )
        return result


class Compiler:
    """Compiles each distinct expression once (thread-safe); errors are remembered too."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._env = cel.NewEnv(
            variables={"device": _MAP},
            extensions=[ext_optional.ExtOptional(), ext_strings.ExtStrings(), ext_bindings.ExtBindings()],
            functions=_FUNCTIONS,
        )
        self._cache: dict[str, Selector | SelectorError] = {}
        self._max = max_entries
        self._lock = threading.Lock()

    def compile(self, expression: str) -> Selector:
        """The compiled selector, or SelectorError naming the expression."""
        hit = self._cache.get(expression)
        if hit is None:
            hit = self._compile(expression)
            with self._lock:
                if len(self._cache) >= self._max:
                    self._cache.clear()
                self._cache[expression] = hit
        if isinstance(hit, SelectorError):
            raise hit
        return hit

    def _compile(self, expression: str) -> Selector | SelectorError:
        try:
            program = self._env.compile(expression)
        except Exception as e:
            return SelectorError(expression, f"compilation failed: {e}")
        if program.return_type() not in (_T.BOOL, _T.DYN):
            return SelectorError(
                expression, f"must evaluate to bool or the unknown type, not {program.return_type().name()}"
            )
        return Selector(expression, program)
