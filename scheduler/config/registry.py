"""The plugins this scheduler knows: where each can run, and kube-scheduler's default set."""

from __future__ import annotations

from scheduler.config.types import PluginRef, Plugins, PluginSet

PLUGIN_POINTS: dict[str, frozenset[str]] = {
    "SchedulingGates": frozenset({"pre_enqueue"}),
    "PrioritySort": frozenset({"queue_sort"}),
    "NodeUnschedulable": frozenset({"filter"}),
    "NodeName": frozenset({"filter"}),
    "TaintToleration": frozenset({"filter", "pre_score", "score"}),
    "NodeAffinity": frozenset({"pre_filter", "filter", "pre_score", "score"}),
    "NodePorts": frozenset({"pre_filter", "filter"}),
    "NodeResourcesFit": frozenset({"pre_filter", "filter", "pre_score", "score"}),
    "VolumeBinding": frozenset({"pre_filter", "filter", "reserve", "pre_bind"}),
    "PodTopologySpread": frozenset({"pre_filter", "filter", "pre_score", "score"}),
    "InterPodAffinity": frozenset({"pre_filter", "filter", "pre_score", "score"}),
    "NodeResourcesBalancedAllocation": frozenset({"pre_score", "score"}),
    "DefaultBinder": frozenset({"bind"}),
    "DefaultPreemption": frozenset({"post_filter"}),
    "Dynamic": frozenset({"filter", "score", "reserve", "post_bind"}),
}
"""Every plugin this scheduler runs, and the extension points it implements."""

NOT_IMPLEMENTED: frozenset[str] = frozenset(
    {
        "ImageLocality",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "EBSLimits",
        "GCEPDLimits",
        "AzureDiskLimits",
        "VolumeZone",
        "DynamicResources",
    }
)
"""kube-scheduler plugins a configuration may name; they are dropped with a warning."""

_KUBE_DEFAULTS: tuple[tuple[str, int | None], ...] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
)
"""kube-scheduler's MultiPoint defaults, in order (``apis/config/v1/default_plugins.go``)."""

DEFAULT_MULTI_POINT: tuple[PluginRef, ...] = tuple(
    PluginRef(name, weight) for name, weight in _KUBE_DEFAULTS if name not in NOT_IMPLEMENTED
)
"""The defaults this scheduler enables: kube-scheduler's, less the plugins it does not implement."""


def default_plugins() -> Plugins:
    return Plugins(multi_point=PluginSet(enabled=DEFAULT_MULTI_POINT))


def known_plugins() -> str:
    return ", ".join(sorted(PLUGIN_POINTS))
