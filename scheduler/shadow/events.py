"""The informer events in shadow mode: the cache is fed as in the scheduler, nothing is queued,
and each bind of the active scheduler is judged before the cache counts the pod."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scheduler.core.cache import Cache
from scheduler.core.eventhandlers import EventHandlers
from scheduler.core.podinfo import PodInfo
from scheduler.core.queue import SchedulingQueue
from scheduler.shadow.judge import Judge


class ShadowEventHandlers(EventHandlers):
    def __init__(self, cache: Cache, queue: SchedulingQueue, scheduler_names: Iterable[str]) -> None:
        super().__init__(cache, queue, ())  # no scheduler name of ours: nothing is queued
        self.watched = frozenset(scheduler_names)
        self.judge: Judge | None = None
        """Set once the profiles are built; binds before that (the first list) are not judged."""
        self.bound_plugins: list[Any] = []
        """Plugins told of every bind (``note_bound``: Dynamic's hot value)."""

    def on_pod_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if self._bound(new) and not self._bound(old) and not self._finished(new):
            node = new["spec"]["nodeName"]
            uid = new["metadata"].get("uid", "")
            name = (old.get("spec") or {}).get("schedulerName") or "default-scheduler"
            if self.judge is not None and name in self.watched:
                self.judge.bound(PodInfo.from_pod(old), node)
                self.judge.forget(uid)
            for plugin in self.bound_plugins:
                plugin.note_bound(uid, node)
        super().on_pod_update(old, new)

    def on_pod_delete(self, pod: dict[str, Any]) -> None:
        if self.judge is not None:
            self.judge.forget(pod["metadata"].get("uid", ""))
        super().on_pod_delete(pod)
