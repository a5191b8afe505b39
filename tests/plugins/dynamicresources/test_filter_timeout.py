"""``filterTimeout``: Filter's search of one node's devices stops at its deadline, as
kube-scheduler's (DRASchedulerFilterTimeout, beta and on in v1.37)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from scheduler.config.pluginargs import DynamicResourcesArgs
from scheduler.core.framework import Code, CycleState
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.dynamicresources.allocator import AllocationTimeoutError, Allocator, pools_for_node
from scheduler.plugins.dynamicresources.cel import Compiler
from scheduler.plugins.dynamicresources.plugin import DynamicResources
from tests.plugins.builders import FakeHandle, FakeSnapshot, make_pod, node_info
from tests.plugins.dynamicresources.builders import DRIVER, claim, device, device_class, exactly, slice_

SLICE = slice_("s", [device(f"g{i}", numa=i) for i in range(6)])
# Three devices with one numa value: never, and the search tries every combination first.
IMPOSSIBLE = claim("c", exactly(count=3), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])


def test_the_search_stops_at_its_deadline() -> None:
    ticks = itertools.count()
    pools = pools_for_node([SLICE], "node-a", {})
    allocator = Allocator(
        Compiler(), {"gpu": device_class("gpu")}, pools, set(), deadline=5, clock=lambda: next(ticks)
    )
    with pytest.raises(AllocationTimeoutError):
        allocator.allocate([IMPOSSIBLE])
    assert next(ticks) == 7  # checked before each combination tried: gave up at the sixth
    # without a deadline the same search ends, with no allocation
    assert Allocator(Compiler(), {"gpu": device_class("gpu")}, pools, set()).allocate([IMPOSSIBLE]) is None


def filter_with(timeout: float, wanted: dict[str, Any]) -> Any:
    handle = FakeHandle(
        FakeSnapshot(),
        stores={
            "resourceclaims": [wanted],
            "resourceslices": [SLICE],
            "deviceclasses": [device_class("gpu")],
        },
    )
    plugin = DynamicResources(DynamicResourcesArgs(filter_timeout=timeout), handle)
    pod = make_pod("p")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": wanted["metadata"]["name"]}]
    pi, state = PodInfo.from_pod(pod), CycleState()
    assert plugin.pre_filter(state, pi, handle.snapshot) is None
    return plugin.filter(state, pi, node_info("node-a"))


def test_a_node_whose_search_outlasts_filter_timeout_is_an_error_for_the_pod() -> None:
    st = filter_with(1e-9, IMPOSSIBLE)
    assert st is not None and st.code == Code.ERROR
    assert st.message() == "node node-a: timed out trying to allocate devices"
    # With time enough, the same node is searched to the end: the claim cannot be met there.
    assert filter_with(10.0, IMPOSSIBLE).message() == "cannot allocate all claims"
    assert filter_with(0.0, claim("one", exactly())) is None  # 0: no limit
