"""Binding conditions: devices that need their driver's word before the pod may be bound.

A device may list ``bindingConditions`` (and ``bindingFailureConditions``); its
allocation result carries them, and the driver reports them as conditions of
the device in the claim's ``status.devices``. PreBind waits until every binding
condition is True, fails the binding when a failure condition is, and gives up
``bindingTimeout`` after the allocation (``allocationTimestamp``); a claim
whose wait is over (failed, or timed out) is not available on any node, so
PostFilter may take its allocation back (kube-scheduler's
``isClaimReadyForBinding``, ``isClaimTimeout``, DRADeviceBindingConditions, beta
and on by default in v1.37).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

Obj = Mapping[str, Any]


class BindingFailedError(Exception):
    """A failure condition of a device is True."""


def waits(claim: Obj) -> bool:
    """Whether the claim's allocation has devices with binding conditions."""
    return any(r.get("bindingConditions") for r in _results(claim))


def ready(claim: Obj) -> bool:
    """Every binding condition of the claim's devices is True; BindingFailedError when a
    failure condition is."""
    if not (claim.get("status") or {}).get("allocation"):
        return False
    for result in _results(claim):
        if not result.get("bindingConditions"):
            continue
        conditions = _device_conditions(claim, result)
        if conditions is None:
            return False
        for name in result.get("bindingFailureConditions") or ():
            c = conditions.get(name)
            if c is not None and c.get("status") == "True":
                meta = claim.get("metadata") or {}
                raise BindingFailedError(
                    f"claim={meta.get('name')}, reason={c.get('reason', '')}, message={c.get('message', '')!r}"
                )
        if any((conditions.get(name) or {}).get("status") != "True" for name in result["bindingConditions"]):
            return False
    return True


def timed_out(claim: Obj, timeout: float, now: datetime | None = None) -> bool:
    """The binding conditions were not met within ``timeout`` seconds of the allocation."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    stamp = alloc.get("allocationTimestamp")
    if not stamp or not waits(claim):
        return False
    try:
        at = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return False
    return ((now or datetime.now(UTC)) - at).total_seconds() > timeout


def over(claim: Obj, timeout: float) -> bool:
    """Failed or timed out: the claim's allocation will never be ready for binding."""
    try:
        return not ready(claim) and timed_out(claim, timeout)
    except BindingFailedError:
        return True


def _results(claim: Obj) -> list[Obj]:
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return list((alloc.get("devices") or {}).get("results") or ())


def _device_conditions(claim: Obj, result: Obj) -> dict[str, Obj] | None:
    """The conditions the driver reported for the result's device, by type; None before it
    reported any (``getAllocatedDeviceStatus``)."""
    for d in (claim.get("status") or {}).get("devices") or ():
        same = all(d.get(k) == result.get(k) for k in ("driver", "pool", "device"))
        if same and d.get("shareID") == result.get("shareID"):
            return {c.get("type", ""): c for c in d.get("conditions") or ()}
    return None
