"""Binding conditions: when a claim's devices are ready for the pod's binding
(``isClaimReadyForBinding``, ``isClaimTimeout``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from scheduler.plugins.dynamicresources import binding

RESULT = {
    "request": "r",
    "driver": "d",
    "pool": "p",
    "device": "dev",
    "bindingConditions": ["Attached"],
    "bindingFailureConditions": ["Failed"],
}


def claim(conditions: dict[str, str] | None, stamp: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    status: dict[str, Any] = {"allocation": {"devices": {"results": [RESULT]}, "allocationTimestamp": stamp}}
    if conditions is not None:
        status["devices"] = [
            {
                "driver": "d",
                "pool": "p",
                "device": "dev",
                "conditions": [{"type": t, "status": v, "reason": "why"} for t, v in conditions.items()],
            }
        ]
    return {"metadata": {"name": "c"}, "status": status}


def test_ready_once_every_binding_condition_is_true() -> None:
    assert binding.waits(claim(None))
    assert not binding.ready(claim(None))  # the driver reported nothing yet
    assert not binding.ready(claim({"Attached": "False"}))
    assert binding.ready(claim({"Attached": "True"}))


def test_a_failure_condition_fails_the_binding() -> None:
    with pytest.raises(binding.BindingFailedError, match="claim=c, reason=why"):
        binding.ready(claim({"Attached": "False", "Failed": "True"}))
    assert binding.over(claim({"Failed": "True"}), timeout=600)


def test_the_wait_is_over_after_the_timeout_from_the_allocation() -> None:
    now = datetime(2026, 1, 1, 0, 10, 1, tzinfo=UTC)
    assert binding.timed_out(claim(None), 600, now)
    assert not binding.timed_out(claim(None), 601, now)
    assert not binding.timed_out(
        {"status": {"allocation": {"devices": {"results": [{"device": "x"}]}}}}, 0, now
    )


def test_devices_without_binding_conditions_need_no_wait() -> None:
    plain = {
        "status": {"allocation": {"devices": {"results": [{"driver": "d", "pool": "p", "device": "x"}]}}}
    }
    assert not binding.waits(plain)
    assert binding.ready(plain)
    assert not binding.over(plain, timeout=0)
