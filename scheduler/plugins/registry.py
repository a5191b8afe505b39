"""The plugin registry: configuration names to plugin classes.

``REGISTRY`` maps every name a profile may enable to its class. Classes are
imported on first use, so a plugin whose module is missing or broken only
fails when a profile actually builds it, with an error naming the plugin:

    >>> "NodeResourcesFit" in REGISTRY
    True
    >>> plugin = build_plugin("NodeResourcesFit", None, handle)

A few kube-scheduler plugins have nothing to do at the extension points this
scheduler runs: the queue sorts by priority itself, binding is done by the
binder, and preemption is not implemented. They are registered as the small
classes below so that configurations naming them (kube-scheduler's defaults)
load unchanged.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from scheduler.core.framework import Status, unresolvable
from scheduler.core.podinfo import PodInfo


class PluginNotFoundError(KeyError):
    """No plugin is registered under this name (a KeyError, so ``REGISTRY.get`` works)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class PluginUnavailableError(ImportError):
    """The plugin is registered but its module or class cannot be loaded."""


# ---------------------------------------------------------------------------
# Plugins with nothing to do here


class PrioritySort:
    """Queue sort: higher priority first, then the pod that was queued first.

    The scheduling queue implements this order; ``less`` is the same rule over
    PodInfos (with creation time standing in for the time queued).
    """

    name: ClassVar[str] = "PrioritySort"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        pass

    @staticmethod
    def less(a: PodInfo, b: PodInfo) -> bool:
        return a.priority > b.priority or (a.priority == b.priority and a.created < b.created)


class SchedulingGates:
    """PreEnqueue: a pod with ``spec.schedulingGates`` waits until they are all removed."""

    name: ClassVar[str] = "SchedulingGates"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        pass

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        gates = pod.spec.get("schedulingGates") or ()
        if not gates:
            return None
        names = " ".join(g.get("name", "") for g in gates)
        return unresolvable(f"waiting for scheduling gates: [{names}]")


class DefaultBinder:
    """Binding is done by the scheduler's binder (a ``pods/binding`` POST)."""

    name: ClassVar[str] = "DefaultBinder"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        pass


# ---------------------------------------------------------------------------
# The registry

PLUGIN_PATHS: dict[str, str] = {
    "PrioritySort": "scheduler.plugins.registry:PrioritySort",
    "SchedulingGates": "scheduler.plugins.registry:SchedulingGates",
    "NodeUnschedulable": "scheduler.plugins.nodeunschedulable:NodeUnschedulable",
    "NodeName": "scheduler.plugins.nodename:NodeName",
    "TaintToleration": "scheduler.plugins.tainttoleration:TaintToleration",
    "NodeAffinity": "scheduler.plugins.nodeaffinity:NodeAffinity",
    "NodePorts": "scheduler.plugins.nodeports:NodePorts",
    "NodeResourcesFit": "scheduler.plugins.noderesources.fit:NodeResourcesFit",
    "NodeResourcesBalancedAllocation": "scheduler.plugins.noderesources.balancedallocation:NodeResourcesBalancedAllocation",
    "VolumeBinding": "scheduler.plugins.volumebinding.plugin:VolumeBinding",
    "InterPodAffinity": "scheduler.plugins.interpodaffinity.plugin:InterPodAffinity",
    "PodTopologySpread": "scheduler.plugins.podtopologyspread.plugin:PodTopologySpread",
    "DefaultPreemption": "scheduler.plugins.defaultpreemption:DefaultPreemption",
    "ImageLocality": "scheduler.plugins.imagelocality:ImageLocality",
    "VolumeZone": "scheduler.plugins.volumezone:VolumeZone",
    "VolumeRestrictions": "scheduler.plugins.volumerestrictions:VolumeRestrictions",
    "NodeVolumeLimits": "scheduler.plugins.nodevolumelimits:NodeVolumeLimits",
    "NodeDeclaredFeatures": "scheduler.plugins.nodedeclaredfeatures:NodeDeclaredFeatures",
    "DynamicResources": "scheduler.plugins.dynamicresources.plugin:DynamicResources",
    "DefaultBinder": "scheduler.plugins.registry:DefaultBinder",
    "Dynamic": "scheduler.plugins.dynamic.plugin:Dynamic",
}
"""Plugin name -> ``module:Class``."""


class _LazyRegistry(Mapping[str, type]):
    """A read-only mapping of plugin names to classes, importing each on first lookup.

    ``in``, ``len`` and iteration only look at the names; looking a name up
    imports its module and raises :class:`PluginNotFoundError` (a KeyError)
    for an unknown name or :class:`PluginUnavailableError` when the module or
    class cannot be loaded.
    """

    def __init__(self, paths: Mapping[str, str]) -> None:
        self._paths = paths
        self._loaded: dict[str, type] = {}
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> type:
        cls = self._loaded.get(name)
        if cls is not None:
            return cls
        path = self._paths.get(name)
        if path is None:
            raise PluginNotFoundError(
                f'unknown plugin "{name}"; known plugins: {", ".join(sorted(self._paths))}'
            )
        module_name, _, attr = path.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise PluginUnavailableError(
                f'plugin "{name}" is not available: cannot import {module_name}: {e}', name=module_name
            ) from e
        cls = getattr(module, attr, None)
        if not isinstance(cls, type):
            raise PluginUnavailableError(
                f'plugin "{name}" is not available: {module_name} has no class {attr}', name=module_name
            )
        with self._lock:
            self._loaded[name] = cls
        return cls

    def __contains__(self, name: object) -> bool:
        return name in self._paths

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


REGISTRY: Mapping[str, type] = _LazyRegistry(PLUGIN_PATHS)


def build_plugin(name: str, args: Any, handle: Any) -> Any:
    """A new instance of plugin ``name``: ``Class(args, handle)``.

    Raises PluginNotFoundError, PluginUnavailableError, or whatever the
    plugin's constructor raises for bad arguments (ValueError).
    """
    return REGISTRY[name](args, handle)
