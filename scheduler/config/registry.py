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
    "VolumeBinding": frozenset({"pre_filter", "filter", "pre_score", "score", "reserve", "pre_bind"}),
    "PodTopologySpread": frozenset({"pre_filter", "filter", "pre_score", "score"}),
    "InterPodAffinity": frozenset({"pre_filter", "filter", "pre_score", "score"}),
    "NodeResourcesBalancedAllocation": frozenset({"pre_score", "score"}),
    "DefaultBinder": frozenset({"bind"}),
    "DefaultPreemption": frozenset({"post_filter"}),
    "ImageLocality": frozenset({"score"}),
    "VolumeZone": frozenset({"pre_filter", "filter"}),
    "VolumeRestrictions": frozenset({"pre_filter", "filter"}),
    "NodeVolumeLimits": frozenset({"pre_filter", "filter"}),
    "NodeDeclaredFeatures": frozenset({"pre_filter", "filter"}),
    "DynamicResources": frozenset(
        {"pre_enqueue", "pre_filter", "filter", "post_filter", "score", "reserve", "pre_bind"}
    ),
    "Dynamic": frozenset({"filter", "score", "reserve", "post_bind"}),
}
"""Every plugin this scheduler runs, and the extension points it implements."""

NOT_IMPLEMENTED: frozenset[str] = frozenset(
    {
        "EBSLimits",
        "GCEPDLimits",
        "AzureDiskLimits",
    }
)
"""kube-scheduler plugins a configuration may name; they are dropped with a warning."""

_KUBE_DEFAULTS: tuple[tuple[str, int | None], ...] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeName", None),
    ("NodeUnschedulable", None),
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
    ("DynamicResources", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
    ("NodeDeclaredFeatures", None),
)
"""kube-scheduler v1.37's MultiPoint defaults, in order (``apis/config/v1/default_plugins.go``
with its feature gates at their defaults: DynamicResourceAllocation adds DynamicResources
before DefaultPreemption, NodeDeclaredFeatures appends its plugin; GenericWorkload,
TopologyAwareWorkloadScheduling and InPlacePodVerticalScalingSchedulerPreemption are off)."""

DEFAULT_MULTI_POINT: tuple[PluginRef, ...] = tuple(
    PluginRef(name, weight) for name, weight in _KUBE_DEFAULTS if name not in NOT_IMPLEMENTED
)
"""The defaults this scheduler enables: kube-scheduler's, less the plugins it does not implement."""


_V1BETA2_DEFAULTS: dict[str, tuple[tuple[str, int | None], ...]] = {
    "queue_sort": (("PrioritySort", None),),
    "pre_filter": tuple(
        (n, None)
        for n in (
            "NodeResourcesFit",
            "NodePorts",
            "VolumeRestrictions",
            "PodTopologySpread",
            "InterPodAffinity",
            "VolumeBinding",
            "NodeAffinity",
        )
    ),
    "filter": tuple(
        (n, None)
        for n in (
            "NodeUnschedulable",
            "NodeName",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "VolumeRestrictions",
            "EBSLimits",
            "GCEPDLimits",
            "NodeVolumeLimits",
            "AzureDiskLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
        )
    ),
    "post_filter": (("DefaultPreemption", None),),
    "pre_score": tuple(
        (n, None) for n in ("InterPodAffinity", "PodTopologySpread", "TaintToleration", "NodeAffinity")
    ),
    "score": (
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("InterPodAffinity", 1),
        ("NodeResourcesFit", 1),
        ("NodeAffinity", 1),
        ("PodTopologySpread", 2),
        ("TaintToleration", 1),
    ),
    "reserve": (("VolumeBinding", None),),
    "pre_bind": (("VolumeBinding", None),),
    "bind": (("DefaultBinder", None),),
}
"""kube-scheduler's v1beta2 defaults: per extension point, no MultiPoint, and other score
weights than v1's (``apis/config/v1beta2/default_plugins.go``, last served by 1.25; 1.23 as
crane-scheduler builds it has the same lists with its gates at their defaults)."""


def default_plugins(api_version: str = "") -> Plugins:
    """The default plugins of a configuration of ``api_version`` (v1 and v1beta3 share them).

    v1beta2's have MultiPoint disabled (``"*"``): it had none, and so written out as v1
    (``--write-config-to``) they keep v1's MultiPoint defaults from coming back."""
    if api_version.endswith("/v1beta2"):
        return Plugins(
            multi_point=PluginSet(disabled=(PluginRef("*"),)),
            **{
                point: PluginSet(enabled=tuple(PluginRef(n, w) for n, w in refs if n not in NOT_IMPLEMENTED))
                for point, refs in _V1BETA2_DEFAULTS.items()
            },
        )
    return Plugins(multi_point=PluginSet(enabled=DEFAULT_MULTI_POINT))


def known_plugins() -> str:
    return ", ".join(sorted(PLUGIN_POINTS))
