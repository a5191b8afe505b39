"""Building the configured profiles: the plugins, the handle they read the cluster through,
and which API resources each plugin needs informed.

Shared by the scheduler process (:mod:`scheduler.app`), shadow mode and ``explain``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scheduler.config.effective import Profile as ProfileConfig
from scheduler.config.effective import SchedulerConfig
from scheduler.core.cache import Cache
from scheduler.core.framework import Store
from scheduler.core.nominator import Nominator
from scheduler.core.profile import Observer, Profile
from scheduler.core.queue import SchedulingQueue
from scheduler.logs import kv
from scheduler.plugins.registry import build_plugin
from scheduler.settings import PrometheusSettings

if TYPE_CHECKING:
    from scheduler.cluster.events import EventRecorder

logger = logging.getLogger(__name__)

# What each plugin reads besides pods and nodes.
PLUGIN_RESOURCES = {
    "VolumeBinding": (
        "persistentvolumeclaims",
        "persistentvolumes",
        "storageclasses",
        "csidrivers",
        "csistoragecapacities",
    ),
    "VolumeZone": ("persistentvolumeclaims", "persistentvolumes", "storageclasses"),
    "VolumeRestrictions": ("persistentvolumeclaims",),
    "NodeVolumeLimits": (
        "persistentvolumeclaims",
        "persistentvolumes",
        "storageclasses",
        "csinodes",
        "csidrivers",
        "volumeattachments",
    ),
    "InterPodAffinity": ("namespaces",),
    "DefaultPreemption": ("poddisruptionbudgets",),
    "DynamicResources": ("resourceclaims", "resourceslices", "deviceclasses", "devicetaintrules"),
    # Extended resources that a DeviceClass provides are left to DynamicResources.
    "NodeResourcesFit": ("deviceclasses",),
}
# Plugins that take part only through the queue or the binder (built-in here).
NOT_BUILT = frozenset({"PrioritySort", "SchedulingGates", "DefaultBinder"})
DYNAMIC = "Dynamic"


class Handle:
    """framework.Handle: what plugins may read."""

    def __init__(
        self,
        cache: Cache,
        stores: Mapping[str, Store],
        api_client: Any,
        scheduler_name: str,
        metrics_registry: Any,
        queue: SchedulingQueue | None = None,
        prometheus: PrometheusSettings | None = None,
    ) -> None:
        self.snapshot = cache
        self._queue = queue
        self._stores = stores
        self.api_client = api_client
        self.scheduler_name = scheduler_name
        self.metrics_registry = metrics_registry
        self.prometheus = prometheus or PrometheusSettings()
        """How the Dynamic plugin queries Prometheus."""
        self.framework: Profile | None = None
        """The profile, once built (PostFilter runs its filters)."""
        self.recorder: EventRecorder | None = None
        """Where plugins' events go, once the scheduler has one (not in shadow mode)."""

    def event(self, regarding: dict[str, Any], type_: str, reason: str, action: str, note: str) -> None:
        if self.recorder is not None:
            self.recorder.event(regarding, type_, reason, action, note, self.scheduler_name)

    def move_pods(self, event: str, plugins: frozenset[str]) -> None:
        """Another try for the pods these plugins rejected: what they read changed (``event``)."""
        if self._queue is not None:
            self._queue.move_all(event, plugins)

    def store(self, resource: str) -> Store:
        try:
            return self._stores[resource]
        except KeyError:
            raise KeyError(
                f"no informer for {resource}; add it to scheduler.profiles.PLUGIN_RESOURCES"
            ) from None


def bind_counting(points: Any) -> tuple[list[str], list[str]]:
    """Reserve and PostBind plugins, with Dynamic added where the configuration enables it
    elsewhere only: its hot value counts this scheduler's binds there, and crane-scheduler's
    configurations (filter and score only) leave it out, crane counting Scheduled events."""
    reserves, post_binds = list(points.reserve), list(points.post_bind)
    if DYNAMIC in points.names() and (DYNAMIC not in reserves or DYNAMIC not in post_binds):
        logger.info(
            "Dynamic counts this scheduler's binds for its hot value (at reserve and postBind)",
            extra=kv(plugin=DYNAMIC),
        )
        reserves += [DYNAMIC] if DYNAMIC not in reserves else []
        post_binds += [DYNAMIC] if DYNAMIC not in post_binds else []
    return reserves, post_binds


def resources_needed(cfg: SchedulerConfig) -> set[str]:
    """The API resources (plurals) to inform: pods, nodes, and what the enabled plugins read."""
    needed = {"pods", "nodes"}
    for prof in cfg.profiles:
        for name in prof.plugins.names():
            needed.update(PLUGIN_RESOURCES.get(name, ()))
    return needed


def build_profile(
    cfg: SchedulerConfig,
    prof: ProfileConfig,
    handle: Handle,
    nominator: Nominator,
    observe: Observer | None = None,
) -> Profile:
    points = prof.plugins
    plugins = [
        build_plugin(name, prof.args_for(name), handle) for name in points.names() if name not in NOT_BUILT
    ]
    reserves, post_binds = bind_counting(points)
    profile = Profile(
        prof.scheduler_name,
        plugins,
        pre_enqueues=[n for n in points.pre_enqueue if n not in NOT_BUILT],
        pre_filters=list(points.pre_filter),
        filters=list(points.filter),
        post_filters=list(points.post_filter),
        pre_scores=list(points.pre_score),
        scores=list(prof.scores()),
        reserves=reserves,
        pre_binds=list(points.pre_bind),
        post_binds=post_binds,
        percentage_of_nodes_to_score=cfg.percentage_for(prof),
        observe=observe,
        nominator=nominator,
    )
    handle.framework = profile
    return profile
