"""Consumable capacity: one device shared by several allocations, each taking part of its capacity.

A device with ``allowMultipleAllocations`` is not used up by an allocation: each
allocation takes what its request asks of the device's ``capacity`` (or the
capacity's ``requestPolicy.default``, or all of it when the request names
nothing), rounded up to the policy's valid values or range, and the device
stays available while the allocations' sum fits its capacity. Every such
allocation gets a ``shareID`` and records its ``consumedCapacity``. A request
that names a capacity the device does not have never gets it. (The allocator's
``consumable_capacity.go``, DRAConsumableCapacity, beta and on in v1.37.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, NamedTuple

from scheduler.core.resources import QuantityError, parse_quantity

Obj = Mapping[str, Any]
Capacity = dict[str, Decimal]
"""Capacity name -> an amount of it."""


class Share(NamedTuple):
    """What one allocation takes of a device's capacity."""

    amounts: Capacity
    written: dict[str, str]
    """The amounts as ``consumedCapacity`` writes them: in the format (binary or decimal)
    of the quantity each came from, the request's or the device's policy's."""


def consumed(requests: Obj | None, capacity: Obj | None) -> Share | None:
    """What one allocation of a request (``capacity.requests``) takes of a device's capacity:
    every capacity the device has, None when the request names one it does not have or asks
    for an amount its policy does not allow (``CmpRequestOverCapacity``, the part that does
    not depend on other allocations)."""
    requests = requests or {}
    capacity = capacity or {}
    if any(name not in capacity for name in requests):
        return None
    out = Share({}, {})
    for name, cap in capacity.items():
        policy = cap.get("requestPolicy") or None
        asked = requests.get(name)
        if asked is None:
            source = _default(cap)
            amount = _quantity(source)
        else:
            source, amount = asked, _quantity(asked)
            if policy is not None:
                source, amount = _round_up(source, amount, policy)
        if amount < 0 or _violates(amount, policy):
            return None
        out.amounts[name] = amount
        # The result keeps the format of the quantity it copies or builds on
        # (calculateConsumedCapacity and its roundUp helpers).
        out.written[name] = format_quantity(amount, binary=str(source).endswith("i"))
    return out


def fits(take: Capacity, capacity: Obj | None, *held: Mapping[str, Decimal]) -> bool:
    """Whether ``take`` fits beside what other allocations hold of the device."""
    capacity = capacity or {}
    for name, amount in take.items():
        total = amount + sum((h.get(name, Decimal(0)) for h in held), Decimal(0))
        if total > _quantity(capacity[name].get("value", "0")):
            return False
    return True


def add(into: dict[Any, Capacity], key: Any, amount: Mapping[str, Decimal], sign: int = 1) -> None:
    """``into[key] += amount`` (or ``-=``), dropping an entry that comes back to nothing."""
    have = into.setdefault(key, {})
    for name, v in amount.items():
        have[name] = have.get(name, Decimal(0)) + sign * v
    if sign < 0 and not any(have.values()):
        del into[key]


def result_capacity(result: Obj) -> Capacity:
    """The ``consumedCapacity`` of an allocation result."""
    return {name: _quantity(q) for name, q in (result.get("consumedCapacity") or {}).items()}


_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


def format_quantity(value: Decimal, binary: bool = False) -> str:
    """``value`` as the API server writes a quantity of that format (``Quantity.String``):
    the largest suffix that keeps a whole number (``4Gi``, ``1536Mi``, ``2k``), else
    thousandths (``500m``)."""
    if value != value.to_integral_value():
        return f"{math.ceil(value * 1000)}m"
    n = int(value)
    for suffix, unit in _BINARY if binary else _DECIMAL:
        if n and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def _quantity(value: Any) -> Decimal:
    try:
        return parse_quantity(value)
    except QuantityError:
        return Decimal(-1)


def _default(cap: Obj) -> Any:
    """The quantity an allocation takes when its request names none of this capacity."""
    policy = cap.get("requestPolicy") or {}
    if policy.get("default") is not None:
        return policy["default"]
    return cap.get("value", "0")


def _round_up(asked: Any, amount: Decimal, policy: Obj) -> tuple[Any, Decimal]:
    """Up to the policy's next valid value, or to the next step of its range: the amount,
    and the quantity whose format it takes."""
    valid_range = policy.get("validRange")
    if valid_range and valid_range.get("min") is not None:
        low = _quantity(valid_range["min"])
        if amount < low:
            return valid_range["min"], low
        if valid_range.get("step") is None:
            return asked, amount
        step = _quantity(valid_range["step"])
        if step <= 0:
            return asked, amount
        return valid_range["step"], low + step * math.ceil((amount - low) / step)
    for v in policy.get("validValues") or ():
        if amount <= _quantity(v):
            return v, _quantity(v)
    return asked, amount


def _violates(amount: Decimal, policy: Obj | None) -> bool:
    if not policy:
        return False
    if policy.get("default") is not None and amount == _quantity(policy["default"]):
        return False
    valid_range = policy.get("validRange")
    if valid_range:
        if valid_range.get("max") is not None and amount > _quantity(valid_range["max"]):
            return True
        if valid_range.get("step") is not None:
            step = _quantity(valid_range["step"])
            low = _quantity(valid_range.get("min") or "0")
            return step > 0 and (amount - low) % step != 0
        return False
    values = policy.get("validValues")
    if values:
        return all(amount != _quantity(v) for v in values)
    return False
