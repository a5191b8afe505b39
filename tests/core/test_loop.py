"""The loop end to end in-process: handlers → queue → profile → assume → bind.

The API server is replaced by ``RecordingIO``, a collaborator that records
what the loop asks of it; what the binding call does on a real API server is
tested in tests/cluster against one.
"""

import threading

import pytest

from scheduler.core.cache import Cache
from scheduler.core.eventhandlers import EventHandlers
from scheduler.core.framework import unschedulable
from scheduler.core.loop import BindOutcome, Scheduler
from scheduler.core.profile import Profile
from scheduler.core.queue import SchedulingQueue
from tests.core.util import node, pod


class CPUFit:
    """Just enough of a resources filter to make pods not fit."""

    name = "CPUFit"

    def filter(self, state, p, ni):
        if ni.requested.milli_cpu + p.requests.milli_cpu > ni.allocatable.milli_cpu:
            return unschedulable("Insufficient cpu")
        return None


class RecordingIO:
    def __init__(self, outcomes=None) -> None:
        self.bound: dict[str, str] = {}
        self.failures: list[tuple[str, str, str]] = []
        self.outcomes = list(outcomes or [])
        self.changed = threading.Condition()

    def bind(self, p, node_name):
        outcome = self.outcomes.pop(0) if self.outcomes else (BindOutcome.BOUND, "")
        with self.changed:
            if outcome[0] is BindOutcome.BOUND:
                self.bound[p.key] = node_name
            self.changed.notify_all()
        return outcome

    def scheduled(self, p, node_name, profile):
        pass

    def unschedulable(self, p, message, profile, reason):
        with self.changed:
            self.failures.append((p.key, message, reason))
            self.changed.notify_all()

    def wait(self, pred, timeout=5.0):
        with self.changed:
            assert self.changed.wait_for(pred, timeout), "condition not reached before the deadline"


@pytest.fixture
def env():
    cache, queue = Cache(), SchedulingQueue()
    handlers = EventHandlers(cache, queue, {"default-scheduler"})
    io = RecordingIO()
    prof = Profile("default-scheduler", [CPUFit()], filters=["CPUFit"])
    sched = Scheduler(cache, queue, {"default-scheduler": prof}, io, bind_workers=4)
    stop = threading.Event()
    t = threading.Thread(target=sched.run, args=(stop,), daemon=True)
    t.start()
    yield cache, queue, handlers, io, sched
    stop.set()
    sched.shutdown(2)
    t.join(5)


def test_binds_and_counts_assumed_pods(env) -> None:
    cache, queue, handlers, io, sched = env
    handlers.on_node_add(node("n1", cpu="2"))
    for i in range(3):
        handlers.on_pod_add(pod(f"p{i}", cpu="1"))
    io.wait(lambda: len(io.bound) == 2 and len(io.failures) == 1)
    assert io.failures[0][1] == "0/1 nodes are available: 1 Insufficient cpu."
    assert io.failures[0][2] == "Unschedulable"
    assert queue.counts()["unschedulable"] == 1


def test_deleting_a_bound_pod_lets_the_parked_pod_in(env) -> None:
    cache, queue, handlers, io, sched = env
    handlers.on_node_add(node("n1", cpu="1"))
    first, second = pod("first", cpu="1"), pod("second", cpu="1")
    handlers.on_pod_add(first)
    io.wait(lambda: "default/first" in io.bound)
    bound = {**first, "spec": {**first["spec"], "nodeName": "n1"}}
    handlers.on_pod_update(first, bound)  # the informer confirms the bind
    handlers.on_pod_add(second)
    io.wait(lambda: io.failures)
    handlers.on_pod_delete(bound)
    io.wait(lambda: "default/second" in io.bound, timeout=15)  # after its 1 s backoff


def test_conflict_drops_the_pod_and_frees_its_room(env) -> None:
    cache, queue, handlers, io, sched = env
    io.outcomes = [(BindOutcome.GONE, "Operation cannot be fulfilled: pod is already assigned")]
    handlers.on_node_add(node("n1", cpu="1"))
    p = pod("p", cpu="1")
    handlers.on_pod_add(p)
    assert sched.wait_idle(5)
    io.wait(lambda: not io.outcomes)
    assert sched.wait_idle(5)
    assert not cache.has_pod(p["metadata"]["uid"]) and len(queue) == 0
    assert cache.get("n1").requested.milli_cpu == 0


def test_failed_bind_forgets_and_retries(env) -> None:
    cache, queue, handlers, io, sched = env
    io.outcomes = [(BindOutcome.FAILED, "the server is currently unable to handle the request")]
    handlers.on_node_add(node("n1", cpu="1"))
    handlers.on_pod_add(pod("p", cpu="1"))
    io.wait(lambda: "default/p" in io.bound, timeout=15)
    assert io.failures[0] == (
        "default/p",
        "binding rejected: the server is currently unable to handle the request",
        "SchedulerError",
    )


def test_pods_of_other_schedulers_and_bound_pods_are_not_queued(env) -> None:
    cache, queue, handlers, io, sched = env
    handlers.on_pod_add(pod("other", scheduler="someone-else"))
    handlers.on_pod_add(pod("bound", node="n9", cpu="1"))
    assert len(queue) == 0
    assert cache.dump()["nodes"] == {"n9": ["default/bound"]}
