"""Our view of the cluster from one list of each resource, no watch: the cache, the plugins'
stores, and the configured profiles built on them, as the scheduler process builds them.

Only reads. The Dynamic plugin starts its Prometheus queries when built; the view waits
for their first answers. Its hot value, which the scheduler keeps in memory, is rebuilt
from the pods' ``PodScheduled`` times.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from scheduler.cluster.informers import Informer
from scheduler.cluster.store import RESOURCES, ObjectStore
from scheduler.config.effective import SchedulerConfig
from scheduler.core.cache import Cache
from scheduler.core.eventhandlers import EventHandlers
from scheduler.core.nominator import Nominator
from scheduler.core.podinfo import parse_time
from scheduler.core.profile import Profile
from scheduler.core.queue import SchedulingQueue
from scheduler.logs import V, kv
from scheduler.profiles import Handle, build_profile, resources_needed

logger = logging.getLogger(__name__)

PROMETHEUS_WAIT = 10.0
"""Seconds the view waits for Dynamic's first Prometheus answers."""


@dataclass
class ClusterView:
    cache: Cache
    stores: dict[str, ObjectStore]
    profiles: dict[str, Profile]
    failing_metrics: dict[str, list[str]] = field(default_factory=dict)
    """Per profile, the Dynamic metrics Prometheus did not answer."""

    def close(self) -> None:
        for p in self.profiles.values():
            p.stop()


def load_view(api: Any, cfg: SchedulerConfig, *, prometheus_wait: float = PROMETHEUS_WAIT) -> ClusterView:
    """List every resource the configuration's plugins read, fill a cache, build the profiles."""
    cache = Cache()
    # No scheduler name: nothing is queued, bound pods and nodes go to the cache.
    handlers = EventHandlers(cache, SchedulingQueue(1.0, 10.0), ())
    stores: dict[str, ObjectStore] = {}
    for plural in sorted(resources_needed(cfg), key=lambda p: p != "nodes"):
        informer = Informer(api, RESOURCES[plural])
        if plural == "pods":
            informer.add_handlers(handlers.on_pod_add)
        elif plural == "nodes":
            informer.add_handlers(handlers.on_node_add)
        started = time.monotonic()
        informer.list_once()
        logger.log(
            V(2),
            "Listed",
            extra=kv(
                resource=plural, items=len(informer.store), seconds=round(time.monotonic() - started, 2)
            ),
        )
        stores[plural] = informer.store
    registry = CollectorRegistry()
    profiles = {
        prof.scheduler_name: build_profile(
            cfg, prof, Handle(cache, stores, api, prof.scheduler_name, registry), Nominator()
        )
        for prof in cfg.profiles
    }
    view = ClusterView(cache, stores, profiles)
    for name, profile in profiles.items():
        for plugin in profile.plugins.values():
            source = getattr(plugin, "source", None)
            if source is not None and hasattr(source, "wait_answered"):
                failing = source.wait_answered(prometheus_wait)
                if failing:
                    view.failing_metrics[name] = failing
            if hasattr(plugin, "note_bound"):
                seed_placements(plugin, stores["pods"].list())
    return view


def seed_placements(plugin: Any, pods: list[dict[str, Any]], now: float | None = None) -> int:
    """Tell ``plugin`` (``note_bound``) where each bound pod went and how long ago, from its
    ``PodScheduled`` condition; how many were told."""
    now = time.time() if now is None else now
    told = 0
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            continue
        for cond in (pod.get("status") or {}).get("conditions") or ():
            if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
                when = parse_time(cond.get("lastTransitionTime"))
                if when > 0:
                    plugin.note_bound(pod["metadata"].get("uid", ""), node, max(0.0, now - when))
                    told += 1
                break
    return told
