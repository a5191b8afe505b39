"""The plugin registry: every configurable name, lazy loading, clear errors."""

from __future__ import annotations

import pytest

from scheduler.core.framework import Code
from scheduler.plugins.registry import (
    PLUGIN_PATHS,
    REGISTRY,
    PluginNotFoundError,
    PluginUnavailableError,
    PrioritySort,
    SchedulingGates,
    _LazyRegistry,
    build_plugin,
)

from .builders import FakeHandle, pod_info

KUBE_DEFAULTS = [
    "SchedulingGates",
    "PrioritySort",
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeBinding",
    "PodTopologySpread",
    "InterPodAffinity",
    "DefaultPreemption",
    "NodeResourcesBalancedAllocation",
    "DefaultBinder",
]

OURS = [
    "SchedulingGates",
    "PrioritySort",
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "NodeResourcesBalancedAllocation",
    "DefaultPreemption",
    "DefaultBinder",
]


def test_every_default_plugin_and_dynamic_is_registered():
    for name in [*KUBE_DEFAULTS, "Dynamic"]:
        assert name in REGISTRY
    assert len(REGISTRY) == len(PLUGIN_PATHS) == len(list(REGISTRY))


@pytest.mark.parametrize("name", OURS)
def test_builds_each_plugin_with_default_args(name):
    plugin = build_plugin(name, None, FakeHandle())
    assert plugin.name == name
    assert REGISTRY[name] is type(plugin)


def test_unknown_plugin_names_the_known_ones():
    with pytest.raises(PluginNotFoundError, match='unknown plugin "Dynamc"; known plugins: .*Dynamic'):
        build_plugin("Dynamc", None, FakeHandle())
    assert REGISTRY.get("Dynamc") is None
    assert "Dynamc" not in REGISTRY


def test_a_missing_module_fails_when_built_not_when_imported():
    reg = _LazyRegistry(
        {"Ghost": "scheduler.plugins.no_such_module:Ghost", "Typo": "scheduler.plugins.nodename:NodeNam"}
    )
    assert "Ghost" in reg  # listing the names imports nothing
    with pytest.raises(PluginUnavailableError, match='plugin "Ghost" is not available: cannot import'):
        reg["Ghost"]
    with pytest.raises(PluginUnavailableError, match="has no class NodeNam"):
        reg["Typo"]


def test_scheduling_gates_hold_gated_pods():
    gates = SchedulingGates(None, None)
    assert gates.pre_enqueue(pod_info()) is None
    st = gates.pre_enqueue(pod_info(scheduling_gates=["example.com/a", "example.com/b"]))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ("waiting for scheduling gates: [example.com/a example.com/b]",)


def test_priority_sort_orders_by_priority_then_age():
    high = pod_info("high", priority=10, creation_timestamp="2026-01-01T00:00:10Z")
    low_old = pod_info("low-old", priority=0, creation_timestamp="2026-01-01T00:00:00Z")
    low_new = pod_info("low-new", priority=0, creation_timestamp="2026-01-01T00:00:05Z")
    assert PrioritySort.less(high, low_old) and not PrioritySort.less(low_old, high)
    assert PrioritySort.less(low_old, low_new) and not PrioritySort.less(low_new, low_old)
