"""Which node updates give which unschedulable pods another try (scheduler/core/eventhandlers.py)."""

from __future__ import annotations

import copy

from scheduler.core.cache import Cache
from scheduler.core.eventhandlers import EventHandlers
from scheduler.core.queue import SchedulingQueue
from tests.core.util import node, pinfo


def parked(queue: SchedulingQueue, name: str, plugin: str) -> str:
    p = pinfo(name)
    queue.add(p)
    queue.requeue(queue.pop(0), frozenset({plugin}))
    assert queue.where(p.uid) == "unschedulable"
    return p.uid


def test_an_annotation_change_moves_only_the_pods_dynamic_rejected() -> None:
    queue = SchedulingQueue(initial_backoff=0)
    handlers = EventHandlers(Cache(), queue, {"default-scheduler"})
    old = node("n1", cpu="2")
    handlers.on_node_add(old)
    by_load, by_affinity = parked(queue, "load", "Dynamic"), parked(queue, "affinity", "NodeAffinity")

    heartbeat = copy.deepcopy(old)
    heartbeat["metadata"]["resourceVersion"] = "2"
    heartbeat.setdefault("status", {})["conditions"] = [{"type": "Ready", "status": "True"}]
    handlers.on_node_update(old, heartbeat)
    assert queue.where(by_load) == queue.where(by_affinity) == "unschedulable"

    annotated = copy.deepcopy(heartbeat)
    annotated["metadata"]["annotations"] = {"cpu_usage_avg_5m": "0.20000,2026-12-01T10:00:00Z"}
    handlers.on_node_update(heartbeat, annotated)
    assert queue.where(by_load) == "active" and queue.where(by_affinity) == "unschedulable"

    labelled = copy.deepcopy(annotated)
    labelled["metadata"]["labels"] = {"zone": "a"}
    handlers.on_node_update(annotated, labelled)
    assert queue.where(by_affinity) == "active"
