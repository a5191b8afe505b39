"""Label requirements (``labels.Requirement``): parsing, validation, and compiling them to functions.

A requirement is ``key In (values)``, ``key NotIn (values)``, ``Exists``,
``DoesNotExist`` or, in node selectors only, ``Gt``/``Lt`` an integer.
:func:`parse_expressions` reads a ``matchExpressions`` list with the checks of
``labels.NewRequirement``; :class:`Codegen` turns requirements into the
source of one Python function, which :mod:`scheduler.plugins.labelselector`
and :mod:`scheduler.plugins.nodeselector` compile once per distinct selector.

A compiled selector is one generated function: ``lambda L, N: L.get(k0) in v0
and k1 not in L ...`` over the node's labels ``L`` and name ``N``. Only
generated identifiers appear in the source; keys and values are bound as
constants, so nothing from the API object is ever evaluated. Matching a node
is then one call and a few dict lookups, which matters: it runs for every
node of every cycle.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "IN",
    "LABEL_OPERATORS",
    "NODE_OPERATORS",
    "Codegen",
    "Requirement",
    "SelectorError",
    "parse_expressions",
    "parse_int64",
    "requirement",
    "valid_label_key",
    "valid_label_value",
]


class SelectorError(ValueError):
    """A selector the API machinery would refuse to parse."""


# Requirement operators, compiled to small ints so matching is a few comparisons.
IN, _NOT_IN, _EXISTS, _NOT_EXISTS, _GT, _LT = range(6)
LABEL_OPERATORS = {"In": IN, "NotIn": _NOT_IN, "Exists": _EXISTS, "DoesNotExist": _NOT_EXISTS}
"""The operators of a ``metav1.LabelSelector``'s ``matchExpressions``."""
NODE_OPERATORS = {**LABEL_OPERATORS, "Gt": _GT, "Lt": _LT}
"""The operators of a ``v1.NodeSelectorTerm``'s ``matchExpressions``."""

_INT64 = re.compile(r"[+-]?[0-9]+\Z")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_int64(text: Any) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: an int, or None when Go would fail."""
    if not isinstance(text, str) or not _INT64.match(text):
        return None
    v = int(text)
    return v if _INT64_MIN <= v <= _INT64_MAX else None


Requirement = tuple[int, str, Any]
"""(operator, key, argument): a frozenset of values for In/NotIn, an int for Gt/Lt."""


_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def valid_label_key(key: Any) -> bool:
    """``validation.IsQualifiedName``: ``[prefix/]name``, name of at most 63 characters."""
    if not isinstance(key, str):
        return False
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or "/" in prefix or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME.match(name))


def valid_label_value(value: Any) -> bool:
    """``validation.IsValidLabelValue``: empty, or at most 63 name characters."""
    return isinstance(value, str) and (value == "" or (len(value) <= 63 and bool(_NAME.match(value))))


def requirement(key: str, op: int, values: list[Any], opname: str) -> Requirement:
    """``labels.NewRequirement``: the key and every value must be valid, and the
    number of values must suit the operator (``opname`` names it in errors)."""
    if not valid_label_key(key):
        raise SelectorError(f"invalid label key {key!r}")
    for v in values:
        if not valid_label_value(v):
            raise SelectorError(f"{key}: invalid label value {v!r}")
    if op in (IN, _NOT_IN):
        if not values:
            raise SelectorError(f"{key}: for 'in', 'notin' operators, values set can't be empty")
        return (op, key, frozenset(values))
    if op in (_EXISTS, _NOT_EXISTS):
        if values:
            raise SelectorError(f"{key}: values set must be empty for exists and does not exist")
        return (op, key, None)
    if len(values) != 1:
        raise SelectorError(f"{key}: for '{opname}' operator, exactly one value is required")
    bound = parse_int64(values[0])
    if bound is None:
        raise SelectorError(f"{key}: for 'Gt', 'Lt' operators, the value must be an integer")
    return (op, key, bound)


def parse_expressions(
    exprs: Iterable[Mapping[str, Any]], operators: Mapping[str, int], kind: str
) -> list[Requirement]:
    """``matchExpressions`` as requirements; ``operators`` are those a ``kind`` accepts."""
    reqs = []
    for e in exprs:
        opname = e.get("operator")
        op = operators.get(opname) if isinstance(opname, str) else None
        if op is None or not isinstance(opname, str):
            raise SelectorError(f"{opname!r} is not a valid {kind} operator")
        reqs.append(requirement(e.get("key", ""), op, list(e.get("values") or ()), opname))
    return reqs


def _gt(value: str | None, bound: int) -> bool:
    v = parse_int64(value)
    return v is not None and v > bound


def _lt(value: str | None, bound: int) -> bool:
    v = parse_int64(value)
    return v is not None and v < bound


class Codegen:
    """The source of one matcher function over the labels ``L`` (and node name ``N``)."""

    def __init__(self) -> None:
        self.ns: dict[str, Any] = {"_gt": _gt, "_lt": _lt}

    def const(self, value: Any) -> str:
        """A generated name bound to ``value``."""
        name = f"c{len(self.ns)}"
        self.ns[name] = value
        return name

    @staticmethod
    def all_of(parts: list[str]) -> str:
        """The conjunction of the expressions ``parts`` (true when there are none)."""
        return " and ".join(f"({p})" for p in parts) if parts else "True"

    def requirements(self, reqs: tuple[Requirement, ...]) -> str:
        """All requirements hold (``labels.Requirement.Matches``, ANDed)."""
        parts = []
        for op, key, arg in reqs:
            k = self.const(key)
            if op == IN:  # an absent label (None) is in no set
                parts.append(f"L.get({k}) in {self.const(arg)}")
            elif op == _NOT_IN:
                parts.append(f"L.get({k}) not in {self.const(arg)}")
            elif op == _EXISTS:
                parts.append(f"{k} in L")
            elif op == _NOT_EXISTS:
                parts.append(f"{k} not in L")
            else:  # Gt / Lt: the label must exist and parse as an integer
                parts.append(f"{'_gt' if op == _GT else '_lt'}(L.get({k}), {self.const(arg)})")
        return self.all_of(parts)

    def function(self, expr: str) -> Callable[..., Any]:
        """``expr`` as a function of the labels and, optionally, the node name."""
        return eval(f"lambda L, N='': {expr}", self.ns)  # noqa: S307 - generated source, see module doc
