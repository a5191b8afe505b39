"""The loop end to end in-process: handlers → queue → profile → assume → bind.

The API server is replaced by ``RecordingIO``, a collaborator that records
what the loop asks of it; what the binding call does on a real API server is
tested in tests/cluster against one.
"""

import contextlib
import threading

import pytest

from scheduler.core.cache import Cache
from scheduler.core.eventhandlers import EventHandlers
from scheduler.core.framework import Code, PostFilterResult, Status, unresolvable, unschedulable
from scheduler.core.loop import BindOutcome, Scheduler
from scheduler.core.podinfo import PodInfo
from scheduler.core.preemption import Preemption
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
        self.nominations: list[tuple[str, str | None]] = []
        self.preemptions: list = []
        self.relaxations: list[tuple[str, str, tuple[str, ...], str]] = []
        self.finish_preemption = None
        self.outcomes = list(outcomes or [])
        self.enqueued: list[tuple[str, str]] = []
        """(queue, event) of every pod that entered a queue (the queue's ``on_enqueue``)."""
        self.changed = threading.Condition()

    def on_enqueue(self, queue: str, event: str) -> None:
        with self.changed:
            self.enqueued.append((queue, event))
            self.changed.notify_all()

    def requeued(self) -> int:
        """How many times a pod came back from its cycle (failed, or held back)."""
        return sum(1 for _, event in self.enqueued if event == "ScheduleAttemptFailure")

    def bind(self, p, node_name):
        outcome = self.outcomes.pop(0) if self.outcomes else (BindOutcome.BOUND, "")
        with self.changed:
            if outcome[0] is BindOutcome.BOUND:
                self.bound[p.key] = node_name
            self.changed.notify_all()
        return outcome

    def scheduled(self, p, node_name, profile):
        pass

    def relaxed(self, p, node_name, profile, plugins, why):
        with self.changed:
            self.relaxations.append((p.key, node_name, plugins, why))
            self.changed.notify_all()

    def unschedulable(self, p, message, profile, reason, nominated_node=""):
        with self.changed:
            self.failures.append((p.key, message, reason))
            self.nominations.append((p.key, nominated_node))
            self.changed.notify_all()

    def preempt(self, preemption, profile, done):
        with self.changed:
            self.preemptions.append(preemption)
            self.changed.notify_all()
        self.finish_preemption = done

    def wait(self, pred, timeout=5.0):
        with self.changed:
            assert self.changed.wait_for(pred, timeout), "condition not reached before the deadline"


@contextlib.contextmanager
def running(cache, queue, prof, io):
    """The loop over ``prof`` in a thread: (cache, queue, handlers, io, scheduler), then stopped."""
    handlers = EventHandlers(cache, queue, {"default-scheduler"})
    sched = Scheduler(cache, queue, {"default-scheduler": prof}, io, bind_workers=4)
    stop = threading.Event()
    t = threading.Thread(target=sched.run, args=(stop,), daemon=True)
    t.start()
    try:
        yield cache, queue, handlers, io, sched
    finally:
        stop.set()
        sched.shutdown(2)
        t.join(5)


@pytest.fixture
def env():
    io = RecordingIO()
    prof = Profile("default-scheduler", [CPUFit()], filters=["CPUFit"])
    with running(Cache(), SchedulingQueue(on_enqueue=io.on_enqueue), prof, io) as parts:
        yield parts


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
    io.wait(lambda: not io.outcomes)  # the bind was sent
    assert sched.wait_idle(5)  # and its cycle is over
    uid = p["metadata"]["uid"]
    assert not cache.has_pod(uid) and queue.where(uid) is None
    assert cache.get("n1").requested.milli_cpu == 0
    # The room is free, and p is not tried again: the next pod gets n1.
    handlers.on_pod_add(pod("next", cpu="1"))
    io.wait(lambda: "default/next" in io.bound)
    assert io.bound == {"default/next": "n1"} and io.failures == []


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
    # A pod of ours, added last, is bound once the loop has been through all before it.
    handlers.on_node_add(node("n1", cpu="1"))
    handlers.on_pod_add(pod("ours", cpu="1"))
    io.wait(lambda: "default/ours" in io.bound)
    assert io.enqueued == [("active", "PodAdd")]  # ours only
    assert io.bound == {"default/ours": "n1"} and io.failures == []
    assert cache.dump()["nodes"] == {"n1": ["default/ours"], "n9": ["default/bound"]}


class EvictLowest:
    """A PostFilter that picks the first node with a pod of lower priority and evicts it
    (the loop's handling of a preemption, apart from DefaultPreemption's choice)."""

    name = "EvictLowest"

    def __init__(self, cache, nominator) -> None:
        self.cache = cache
        self.nominator = nominator

    def post_filter(self, state, p, statuses):
        for ni in self.cache.list():
            lower = [v for v in ni.pods.values() if v.priority < p.priority]
            if lower:
                handed_over = tuple(
                    o for o in self.nominator.pods_for_node(ni.name) if o.priority < p.priority
                )
                preemption = Preemption(p, ni.name, (lower[0],), handed_over)
                return PostFilterResult(ni.name, preemption), Status(Code.SUCCESS, ("preemption: evicting",))
        return PostFilterResult(""), unschedulable("preemption: nothing to evict")


@pytest.fixture
def preempting_env():
    io = RecordingIO()
    cache = Cache()
    queue = SchedulingQueue(initial_backoff=0.05, max_backoff=0.05, on_enqueue=io.on_enqueue)
    prof = Profile(
        "default-scheduler",
        [CPUFit(), EvictLowest(cache, queue.nominator)],
        filters=["CPUFit"],
        post_filters=["EvictLowest"],
        nominator=queue.nominator,
    )
    with running(cache, queue, prof, io) as parts:
        yield parts


def test_preemption_nominates_and_waits_for_its_victims(preempting_env) -> None:
    cache, queue, handlers, io, sched = preempting_env
    handlers.on_node_add(node("n1", cpu="1"))
    low = pod("low", cpu="1", node="n1", priority=1)
    handlers.on_pod_add(low)
    high = pod("high", cpu="1", priority=100)
    handlers.on_pod_add(high)
    io.wait(lambda: io.preemptions)
    (p,) = io.preemptions
    assert (p.preemptor.name, p.node, [v.name for v in p.victims]) == ("high", "n1", ["low"])
    assert io.nominations[-1] == ("default/high", "n1")
    assert io.failures[-1][1] == "0/1 nodes are available: 1 Insufficient cpu. preemption: evicting"
    uid = high["metadata"]["uid"]
    assert queue.nominator.node_of(uid) == "n1"

    # Until the preemption is done, the pod is not tried again, whatever happens: n2 (room
    # for it) moves it on, and the loop puts it back untried.
    requeued = io.requeued()
    handlers.on_node_add(node("n2", cpu="1"))
    queue.flush()
    io.wait(lambda: io.requeued() > requeued or "default/high" in io.bound)
    assert "default/high" not in io.bound and len(io.preemptions) == 1

    # Done: the victim is gone; the pod goes at once, to its nominated node.
    handlers.on_pod_delete(low)
    io.finish_preemption(True)
    io.wait(lambda: "default/high" in io.bound)
    assert io.bound["default/high"] == "n1"
    assert queue.nominator.node_of(uid) == ""


def test_after_its_preemption_the_pod_waits_for_the_victims_deletion(preempting_env) -> None:
    """The evictions returned but the watch has not delivered them: trying the pod now would
    find the victim in the cache (a failure, a backoff), so it waits for the deletion."""
    cache, queue, handlers, io, sched = preempting_env
    handlers.on_node_add(node("n1", cpu="1"))
    low = pod("low", cpu="1", node="n1", priority=1)
    handlers.on_pod_add(low)
    handlers.on_pod_add(pod("high", cpu="1", priority=100))
    io.wait(lambda: io.preemptions)
    failures = len(io.failures)
    io.finish_preemption(True)
    assert queue.where(io.preemptions[0].preemptor.uid) == "unschedulable"
    handlers.on_pod_delete(low)
    io.wait(lambda: "default/high" in io.bound)
    assert len(io.failures) == failures and len(io.preemptions) == 1


def test_a_failed_preemption_tries_the_pod_again_at_once(preempting_env) -> None:
    cache, queue, handlers, io, sched = preempting_env
    handlers.on_node_add(node("n1", cpu="1"))
    handlers.on_pod_add(pod("low", cpu="1", node="n1", priority=1))
    handlers.on_pod_add(pod("high", cpu="1", priority=100))
    io.wait(lambda: io.preemptions)
    io.finish_preemption(False)  # an eviction failed: the victim is still there
    io.wait(lambda: len(io.preemptions) == 2)


def test_lower_priority_nominations_end_with_the_decision(preempting_env) -> None:
    # At once, in memory: the pod's own status write may not have arrived yet.
    cache, queue, handlers, io, sched = preempting_env
    handlers.on_node_add(node("n1", cpu="1"))
    handlers.on_pod_add(pod("low", cpu="1", node="n1", priority=1))
    mid = PodInfo.from_pod(pod("mid", cpu="1", priority=50))
    queue.nominator.nominate(mid, "n1")
    handlers.on_pod_add(pod("high", cpu="1", priority=100))
    io.wait(lambda: io.preemptions)
    assert [o.name for o in io.preemptions[0].clear_nominations] == ["mid"]
    assert queue.nominator.node_of(mid.uid) == ""


def test_a_failure_without_postfilter_result_clears_the_nomination(preempting_env) -> None:
    cache, queue, handlers, io, sched = preempting_env
    handlers.on_node_add(node("n1", cpu="1"))
    handlers.on_pod_add(pod("same", cpu="1", node="n1", priority=5))
    p = pod("p", cpu="1", priority=5)
    p["status"]["nominatedNodeName"] = "n1"  # from an earlier leader, say
    handlers.on_pod_add(p)
    io.wait(lambda: io.failures)
    assert io.failures[-1][1].endswith("preemption: nothing to evict")
    assert io.nominations[-1] == ("default/p", "")
    assert queue.nominator.node_of(p["metadata"]["uid"]) == ""


class OverLimit:
    """A relaxable filter rejecting every node, unless the pass is relaxed (as Dynamic's limits)."""

    name = "Load"
    relaxable = True

    def filter(self, state, p, ni):
        return None if state.relaxed else unresolvable("node(s) had load above 0.65")


def test_a_pod_placed_with_a_filter_relaxed_gets_a_warning_after_its_bind() -> None:
    io = RecordingIO()
    prof = Profile("default-scheduler", [OverLimit(), CPUFit()], filters=["Load", "CPUFit"])
    with running(Cache(), SchedulingQueue(on_enqueue=io.on_enqueue), prof, io) as (_, _, handlers, io, _):
        handlers.on_node_add(node("n1", cpu="2"))
        handlers.on_node_add(node("n2", cpu="1"))
        handlers.on_pod_add(pod("p", cpu="2"))
        io.wait(lambda: io.relaxations)
    assert io.bound == {"default/p": "n1"}
    assert io.relaxations == [
        ("default/p", "n1", ("Load",), "0/2 nodes are available: 2 node(s) had load above 0.65.")
    ]
    assert io.failures == []
