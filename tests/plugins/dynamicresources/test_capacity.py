"""Consumable capacity: what an allocation takes of a shared device, and when it fits
(the allocator's ``consumable_capacity.go``)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from scheduler.plugins.dynamicresources import capacity
from scheduler.plugins.dynamicresources.allocator import Allocator, Held, allocated, pools_for_node
from scheduler.plugins.dynamicresources.cel import Compiler
from tests.plugins.dynamicresources.builders import DRIVER, claim, device_class, exactly, slice_

GI = Decimal(2**30)


def memory(value: str, policy: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"memory": {"value": value}}
    if policy is not None:
        out["memory"]["requestPolicy"] = policy
    return out


@pytest.mark.parametrize(
    ("asked", "policy", "taken", "written"),
    [
        (None, None, 8 * GI, "8Gi"),  # nothing asked: all of it
        (None, {"default": "1Gi"}, GI, "1Gi"),  # nothing asked: the default
        ("4Gi", None, 4 * GI, "4Gi"),
        ("2000000000", None, Decimal(2 * 10**9), "2G"),  # in the request's format, not the device's
        ("3Gi", {"validValues": ["2Gi", "4Gi", "8Gi"]}, 4 * GI, "4Gi"),  # up to the next valid value
        ("9Gi", {"validValues": ["2Gi", "4Gi", "8Gi"]}, None, None),  # above every valid value
        ("500M", {"validRange": {"min": "1Gi"}}, GI, "1Gi"),  # up to the minimum
        ("1200M", {"validRange": {"min": "1Gi", "step": "512Mi"}}, GI + GI / 2, "1536Mi"),  # next step
        ("7Gi", {"validRange": {"min": "1Gi", "max": "6Gi"}}, None, None),  # above the maximum
    ],
)
def test_what_one_allocation_takes(
    asked: str | None, policy: dict[str, Any] | None, taken: Decimal | None, written: str | None
) -> None:
    requests = {"memory": asked} if asked is not None else None
    got = capacity.consumed(requests, memory("8Gi", policy))
    assert (got.amounts["memory"] if got is not None else None) == taken
    assert (got.written["memory"] if got is not None else None) == written


def test_a_request_for_a_capacity_the_device_lacks_never_fits() -> None:
    assert capacity.consumed({"bandwidth": "1"}, memory("8Gi")) is None


def test_shares_fit_while_their_sum_does() -> None:
    cap = memory("8Gi")
    take = {"memory": 4 * GI}
    assert capacity.fits(take, cap, {"memory": 4 * GI})
    assert not capacity.fits(take, cap, {"memory": 2 * GI}, {"memory": 3 * GI})


def test_quantities_are_written_as_the_api_server_writes_them() -> None:
    assert capacity.format_quantity(4 * GI, binary=True) == "4Gi"
    assert capacity.format_quantity(GI + GI / 2, binary=True) == "1536Mi"
    assert capacity.format_quantity(Decimal(2000)) == "2k"
    assert capacity.format_quantity(Decimal(1500)) == "1500"
    assert capacity.format_quantity(Decimal("0.5")) == "500m"


# --- in the allocator -------------------------------------------------------------------

CLASSES = {"gpu": device_class("gpu")}


def shared_gpu(cap: str = "8Gi") -> dict[str, Any]:
    dev = {"name": "gpu-0", "allowMultipleAllocations": True, "capacity": memory(cap)}
    return slice_("node-a-gpus", [dev])


def wants(name: str, amount: str) -> dict[str, Any]:
    return claim(name, exactly(capacity={"requests": {"memory": amount}}))


def allocate(claims: list[dict[str, Any]], held: Held | None = None, cap: str = "8Gi") -> Any:
    held = held or Held()
    pools = pools_for_node([shared_gpu(cap)], "node-a", {})
    return Allocator(Compiler(), CLASSES, pools, held.devices, held.shared).allocate(claims)


def test_claims_share_a_device_while_its_capacity_lasts() -> None:
    got = allocate([wants("a", "4Gi"), wants("b", "4Gi")])
    assert got is not None
    results = [a.results[0] for a in got]
    assert [r.device.id for r in results] == [(DRIVER, "node-a", "gpu-0")] * 2
    assert [r.consumed.amounts for r in results] == [{"memory": 4 * GI}] * 2
    assert results[0].share_id != results[1].share_id
    assert allocate([wants("a", "4Gi"), wants("b", "8Gi")]) is None


def test_what_allocated_claims_take_is_not_given_again() -> None:
    first = allocate([wants("a", "4Gi")])
    status = first[0].status(wants("a", "4Gi"), CLASSES, "node-a")
    entry = status["devices"]["results"][0]
    assert entry["consumedCapacity"] == {"memory": "4Gi"} and entry["shareID"]
    held = allocated([{**wants("a", "4Gi"), "status": {"allocation": status}}])
    assert held.devices == set()  # a shared device is not used up
    assert allocate([wants("b", "8Gi")], held) is None
    assert allocate([wants("c", "4Gi")], held) is not None


def test_an_unshared_device_must_still_have_the_capacity_asked_for() -> None:
    dev = {"name": "gpu-0", "capacity": memory("4Gi")}
    pools = pools_for_node([slice_("node-a-gpus", [dev])], "node-a", {})
    assert Allocator(Compiler(), CLASSES, pools, set()).allocate([wants("a", "8Gi")]) is None
    got = Allocator(Compiler(), CLASSES, pools, set()).allocate([wants("a", "4Gi")])
    assert got is not None and got[0].results[0].share_id is None
