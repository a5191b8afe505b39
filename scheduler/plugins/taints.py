"""Taints and tolerations: the effects, and which tolerations tolerate which taints.

The semantics are those of ``v1.Toleration.ToleratesTaint`` and
``v1helper.FindMatchingUntoleratedTaint``, applied to the raw API dicts; the
``Gt``/``Lt`` operators compare values as integers, parsed as Go does.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from scheduler.plugins.labelrequirements import parse_int64

__all__ = [
    "DO_NOT_SCHEDULE_EFFECTS",
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "PREFER_NO_SCHEDULE",
    "find_untolerated_taint",
    "tolerates",
    "tolerates_everything",
    "tolerations_tolerate_taint",
]

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
DO_NOT_SCHEDULE_EFFECTS = frozenset((NO_SCHEDULE, NO_EXECUTE))
"""The effects the Filter plugins enforce (``helper.DoNotScheduleTaintsFilterFunc``)."""


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``v1.Toleration.ToleratesTaint``.

    An empty effect matches every effect and an empty key every key; ``Exists``
    matches any value, ``Equal`` (or no operator) the same value; ``Gt``/``Lt``
    compare the taint's value with the toleration's as integers.
    """
    effect = toleration.get("effect")
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key")
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    if op == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    if op in ("Gt", "Lt"):
        bound = parse_int64(toleration.get("value"))
        actual = parse_int64(taint.get("value"))
        if bound is None or actual is None:
            return False
        return actual > bound if op == "Gt" else actual < bound
    return False


def tolerations_tolerate_taint(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Some toleration tolerates ``taint``."""
    for t in tolerations:  # noqa: SIM110 - cheaper than any() over a generator
        if tolerates(t, taint):
            return True
    return False


def find_untolerated_taint(
    taints: Iterable[Mapping[str, Any]] | None,
    tolerations: Iterable[Mapping[str, Any]] | None,
    effects: Collection[str] | None = DO_NOT_SCHEDULE_EFFECTS,
) -> dict | None:
    """The first taint with one of ``effects`` (None: any) that no toleration tolerates."""
    tols = tuple(tolerations or ())
    for taint in taints or ():
        if effects is not None and taint.get("effect") not in effects:
            continue
        if not tolerations_tolerate_taint(tols, taint):
            return dict(taint)
    return None


def tolerates_everything(
    tolerations: Iterable[Mapping[str, Any]] | None, effects: Collection[str] | None = None
) -> bool:
    """Some toleration tolerates every taint (with one of ``effects``, when given).

    That is ``operator: Exists`` with no key, and no effect or (for a single
    ``effects`` value) that effect.
    """
    for t in tolerations or ():
        if t.get("key") or (t.get("operator") or "Equal") != "Exists":
            continue
        effect = t.get("effect")
        if not effect or (effects is not None and len(effects) == 1 and effect in effects):
            return True
    return False
