"""The informers' first lists run with the cyclic garbage collector off and are frozen after
(``informers.initial_load``); that is safe only while the cached objects form no reference
cycles, so that deleting a pod or a node frees it by reference counting alone."""

from __future__ import annotations

import gc
import uuid
import weakref
from collections.abc import Iterator

import orjson
import pytest

from bench import kwok
from bench.population import Population
from scheduler.cluster.client import decode
from scheduler.cluster.informers import initial_load
from scheduler.cluster.slim import slim_node, slim_pod
from scheduler.core.cache import Cache
from scheduler.core.podinfo import PodInfo


@pytest.fixture
def gc_restored() -> Iterator[None]:
    enabled = gc.isenabled()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
        else:
            gc.disable()


class Node:
    """An object that can be in a reference cycle and be watched for being freed."""

    def __init__(self) -> None:
        self.other: Node | None = None


def test_the_collector_is_off_while_loading_then_what_was_loaded_is_frozen(gc_restored: None) -> None:
    gc.enable()
    with initial_load():
        assert not gc.isenabled()
        loaded = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c"}]}}
        cycle = Node()
        cycle.other = Node()
        cycle.other.other = cycle
        gone = weakref.ref(cycle)
        del cycle  # garbage made while loading, held only by its own cycle
    assert gc.isenabled()
    assert gone() is None  # collected before the freeze, not frozen for ever
    tracked = {id(o) for o in gc.get_objects()}  # the frozen generation is not listed
    assert id(loaded) not in tracked and id(loaded["spec"]["containers"]) not in tracked
    gc.disable()
    with initial_load():
        pass
    assert not gc.isenabled()  # as it was


def test_cached_pods_and_nodes_form_no_reference_cycles(gc_restored: None) -> None:
    gc.collect()
    gc.disable()
    pop = Population(nodes=20, per_node=10)
    cache = Cache()
    for n in range(pop.nodes):
        cache.add_node(slim_node(kwok.node_body(n)))
    store = {}
    for i in range(pop.pods):
        ns, body = pop.pod(i)
        body["metadata"].update(namespace=ns, uid=str(uuid.uuid4()))
        body["status"] = pop.status(i, body, "2026-12-07T00:00:00Z")
        pod = slim_pod(decode(orjson.dumps(body)))
        store[pod["metadata"]["uid"]] = pod
        cache.add_pod(PodInfo.from_pod(pod))
    for uid in list(store)[: pop.pods // 2]:  # deleted pods and a deleted node
        cache.remove_pod(uid)
        del store[uid]
    cache.remove_node(slim_node(kwok.node_body(0)))
    assert gc.collect() == 0  # nothing removed waits for the collector
    del cache, store, pod
    assert gc.collect() == 0
