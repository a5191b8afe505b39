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


def test_a_claim_event_moves_the_pods_that_name_it_and_a_freed_device_moves_all() -> None:
    """DynamicResources' queueing hints: a claim created or changed helps only the pods that
    name it; a claim deallocated or an allocated one deleted frees devices for any of them."""
    queue = SchedulingQueue(initial_backoff=0)
    handlers = EventHandlers(Cache(), queue, {"default-scheduler"})
    uids = {}
    for name, claim in (("wants-a", "a"), ("wants-b", "b")):
        p = pinfo(name)
        p.spec["resourceClaims"] = [{"name": "dev", "resourceClaimName": claim}]
        queue.add(p)
        queue.requeue(queue.pop(0), frozenset({"DynamicResources"}), gated=True)
        uids[name] = p.uid
    claim_a = {"metadata": {"namespace": "default", "name": "a"}, "spec": {}}
    handlers.on_claim_add(claim_a)
    assert queue.where(uids["wants-a"]) == "active" and queue.where(uids["wants-b"]) == "gated"
    queue.requeue(queue.pop(0), frozenset({"DynamicResources"}))

    allocated = {**claim_a, "status": {"allocation": {"devices": {"results": []}}}}
    finalized = {**allocated, "metadata": {**claim_a["metadata"], "finalizers": ["x"]}}
    handlers.on_claim_update(allocated, finalized)  # no status change: no one moves
    assert queue.where(uids["wants-a"]) == "unschedulable"
    handlers.on_claim_delete(claim_a)  # never allocated: frees nothing
    assert queue.where(uids["wants-b"]) == "gated"
    handlers.on_claim_update(allocated, claim_a)  # deallocated: every pod DRA held may fit now
    assert queue.where(uids["wants-a"]) == queue.where(uids["wants-b"]) == "active"
