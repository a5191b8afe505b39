import copy
import threading
from typing import Any

import pytest

from scheduler.core.podinfo import PodInfo
from scheduler.core.queue import ACTIVE, BACKOFF, UNSCHEDULABLE, SchedulingQueue
from tests.core.util import pinfo


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def q(clock: Clock) -> SchedulingQueue:
    return SchedulingQueue(initial_backoff=1.0, max_backoff=10.0, unschedulable_timeout=300.0, clock=clock)


def test_pops_by_priority_then_queue_time(q: SchedulingQueue, clock: Clock) -> None:
    low = pinfo("low", priority=0)
    q.add(low)
    clock.now += 1
    high = pinfo("high", priority=100)
    q.add(high)
    clock.now += 1
    low2 = pinfo("low2", priority=0)
    q.add(low2)
    assert [q.pop(0).pod.name for _ in range(3)] == ["high", "low", "low2"]
    assert q.pop(timeout=0) is None


def test_backoff_doubles_and_caps(q: SchedulingQueue) -> None:
    assert [q.backoff_duration(n) for n in (1, 2, 3, 4, 5, 6)] == [1, 2, 4, 8, 10, 10]


def test_unschedulable_waits_for_a_cluster_change(q: SchedulingQueue, clock: Clock) -> None:
    q.add(pinfo("p"))
    qp = q.pop(0)
    q.requeue(qp, frozenset({"NodeResourcesFit"}))
    assert q.where(qp.pod.uid) == UNSCHEDULABLE
    clock.now += 60
    q.flush()
    assert q.pop(timeout=0) is None, "nothing changed: the pod stays parked"
    q.move_all("NodeAdd")
    assert q.pop(0).pod.uid == qp.pod.uid


def test_move_during_backoff_goes_to_backoff_first(clock: Clock) -> None:
    q = SchedulingQueue(initial_backoff=1.0, max_backoff=10.0, clock=clock, pop_from_backoff=False)
    q.add(pinfo("p"))
    qp = q.pop(0)
    q.requeue(qp, frozenset({"NodeResourcesFit"}))
    q.move_all("NodeAdd")  # still within its 1 s backoff
    assert q.where(qp.pod.uid) == BACKOFF
    assert q.pop(timeout=0) is None
    clock.now += 1.0
    q.flush()
    assert q.pop(0) is qp


def test_change_while_in_flight_sends_failure_to_backoff(q: SchedulingQueue, clock: Clock) -> None:
    q.add(pinfo("p"))
    qp = q.pop(0)
    q.move_all("NodeUpdate")  # the cluster changed while the pod was being scheduled
    q.requeue(qp, frozenset({"NodeResourcesFit"}))
    assert q.where(qp.pod.uid) == BACKOFF


def test_unschedulable_timeout_retries_after_five_minutes(q: SchedulingQueue, clock: Clock) -> None:
    q.add(pinfo("p"))
    qp = q.pop(0)
    q.requeue(qp, frozenset({"X"}))
    clock.now += 299
    q.flush()
    assert q.where(qp.pod.uid) == UNSCHEDULABLE
    clock.now += 1
    q.flush()
    assert q.where(qp.pod.uid) == ACTIVE


def test_errors_back_off_exponentially(q: SchedulingQueue, clock: Clock) -> None:
    q.add(pinfo("p"))
    expiries = []
    for _ in range(4):
        qp = q.pop(0)
        assert qp is not None
        q.requeue(qp, error=True)
        expiries.append(qp.backoff_expiry - clock.now)
        clock.now = qp.backoff_expiry
        q.flush()
    assert expiries == [1, 2, 4, 8]


def test_move_all_can_target_plugins(q: SchedulingQueue) -> None:
    a, b = pinfo("a"), pinfo("b")
    q.add(a)
    q.add(b)
    qa, qb = q.pop(0), q.pop(0)
    q.requeue(qa, frozenset({"InterPodAffinity"}))
    q.requeue(qb, frozenset({"NodeResourcesFit"}))
    q.move_all("AssignedPodAdd", frozenset({"InterPodAffinity", "PodTopologySpread"}))
    assert q.where(qa.pod.uid) == BACKOFF
    assert q.where(qb.pod.uid) == UNSCHEDULABLE


def test_update_and_delete(q: SchedulingQueue) -> None:
    p = pinfo("p", priority=1)
    q.add(p)
    q.update(pinfo("p", priority=5, uid=p.uid))
    assert len(q) == 1
    got = q.pop(0)
    assert got.pod.priority == 5
    assert q.pop(timeout=0) is None, "the stale heap entry must not pop twice"
    q.requeue(got, frozenset({"X"}))
    q.delete(p.uid)
    assert len(q) == 0 and q.where(p.uid) is None
    q.move_all("NodeAdd")
    assert q.pop(timeout=0) is None


def test_delete_while_in_flight_drops_the_pod(q: SchedulingQueue) -> None:
    p = pinfo("p")
    q.add(p)
    qp = q.pop(0)
    q.delete(p.uid)
    q.requeue(qp, error=True)
    assert len(q) == 0


def test_update_while_in_flight_is_retried_with_the_new_pod(q: SchedulingQueue) -> None:
    p = pinfo("p", cpu="8")
    q.add(p)
    qp = q.pop(0)
    q.update(pinfo("p", cpu="1", uid=p.uid))
    q.requeue(qp, frozenset({"NodeResourcesFit"}))
    again = q.pop(0)
    assert again.pod.requests.milli_cpu == 1000 and again.attempts == 2


def test_counts_track_every_move(q: SchedulingQueue, clock: Clock) -> None:
    seen = []
    q2 = SchedulingQueue(clock=clock, on_change=seen.append)
    for i in range(3):
        q2.add(pinfo(f"p{i}"))
    assert q2.counts() == {"active": 3, "backoff": 0, "unschedulable": 0, "gated": 0}
    qp = q2.pop(0)
    q2.requeue(qp, frozenset({"X"}))
    assert q2.counts()["unschedulable"] == 1 and q2.counts()["active"] == 2
    assert seen[-1] == q2.counts()


def test_pop_blocks_until_a_pod_arrives_or_close(q: SchedulingQueue) -> None:
    got = []
    t = threading.Thread(target=lambda: got.append(q.pop()))
    t.start()
    q.add(pinfo("p"))
    t.join(5)
    assert got and got[0].pod.name == "p"
    t = threading.Thread(target=lambda: got.append(q.pop()))
    t.start()
    q.close()
    t.join(5)
    assert not t.is_alive() and got[-1] is None


def _with(p: PodInfo, **changes: Any) -> PodInfo:
    """A copy of ``p`` (same uid) with metadata or status changed."""
    raw = copy.deepcopy(p.pod)
    for path, value in changes.items():
        section, _, key = path.partition("__")
        raw.setdefault(section, {})[key] = value
    return PodInfo.from_pod(raw)


def test_a_status_only_update_leaves_an_unschedulable_pod_where_it_is(q: SchedulingQueue) -> None:
    p = pinfo("p")
    q.add(p)
    q.requeue(q.pop(0), frozenset({"NodeAffinity"}))
    assert q.where(p.uid) == "unschedulable"
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    q.update(_with(p, status__conditions=[condition], metadata__resourceVersion="99"))
    q.update(_with(p, metadata__annotations={"note": "x"}))
    assert q.where(p.uid) == "unschedulable" and q.pop(timeout=0) is None
    q.update(_with(p, metadata__labels={"app": "web"}))  # a label may change a verdict
    assert q.where(p.uid) == "backoff"  # on its way back (its backoff has not expired yet)


def test_every_pod_entering_a_queue_is_counted_by_event(clock: Clock) -> None:
    seen: list[tuple[str, str]] = []
    q = SchedulingQueue(clock=clock, on_enqueue=lambda queue, event: seen.append((queue, event)))
    p = pinfo("p")
    q.add(p)
    q.requeue(q.pop(0), frozenset({"Dynamic"}))
    q.move_all("NodeAdd", frozenset({"NodeAffinity"}))  # not its plugin: stays
    q.move_all("DynamicLoadRefreshed", frozenset({"Dynamic"}))
    clock.now += 60
    q.flush()
    assert seen == [
        ("active", "PodAdd"),
        ("unschedulable", "ScheduleAttemptFailure"),
        ("backoff", "DynamicLoadRefreshed"),
        ("active", "BackoffComplete"),
    ]


def failed_once_then_moved(q: SchedulingQueue, name: str, priority: int = 0, error: bool = False) -> Any:
    q.add(pinfo(name, priority=priority))
    qp = q.pop(0)
    q.requeue(qp, frozenset({"NodeResourcesFit"}), error=error)
    q.move_all("NodeAdd")
    return qp


def test_an_idle_queue_pops_an_unschedulable_pod_before_its_backoff_ends(q: SchedulingQueue) -> None:
    """SchedulerPopFromBackoffQ: nothing active, so the pod in backoff goes now."""
    qp = failed_once_then_moved(q, "p")
    assert q.where(qp.pod.uid) == BACKOFF
    assert q.pop(timeout=0) is qp
    assert q.pop(timeout=0) is None


def test_an_active_pod_goes_first_and_an_error_backoff_is_waited_out(
    q: SchedulingQueue, clock: Clock
) -> None:
    err = failed_once_then_moved(q, "err", error=True)
    assert q.where(err.pod.uid) == BACKOFF
    q.add(pinfo("new"))
    assert q.pop(0).pod.name == "new"
    assert q.pop(timeout=0) is None, "an error's backoff is not cut short"
    clock.now += 1.0
    q.flush()
    assert q.pop(0) is err


def test_backoff_pops_by_whole_second_of_expiry_then_priority(q: SchedulingQueue, clock: Clock) -> None:
    failed_once_then_moved(q, "first", priority=0)  # backoff ends at 1001.0
    clock.now += 1.2
    failed_once_then_moved(q, "low", priority=0)  # ends at 1002.2
    clock.now += 0.1
    failed_once_then_moved(q, "high", priority=10)  # ends at 1002.3: the same second, higher priority
    assert [q.pop(0).pod.name for _ in range(3)] == ["first", "high", "low"]


def test_a_pod_that_failed_queues_behind_pods_added_meanwhile(q: SchedulingQueue, clock: Clock) -> None:
    """AddUnschedulableIfNotPresent refreshes the timestamp: a pod that keeps failing takes
    its turn after the pods that came while it was tried, not before them forever."""
    q.add(pinfo("old"))
    old = q.pop(0)
    clock.now += 1
    q.add(pinfo("new"))
    clock.now += 1
    q.requeue(old, frozenset({"NodeResourcesFit"}))
    clock.now += 5  # past its backoff
    q.move_all("NodeAdd")
    assert [q.pop(0).pod.name for _ in range(2)] == ["new", "old"]


def test_a_gated_pod_keeps_its_attempts_and_backoff_and_waits_to_be_activated(
    q: SchedulingQueue, clock: Clock
) -> None:
    """DefaultPreemption's PreEnqueue: held back while its preemption is carried out, which is
    no scheduling attempt."""
    q.add(pinfo("p"))
    qp = q.pop(0)
    q.requeue(qp, frozenset({"NodeResourcesFit"}), nominate="n1")
    expiry, queued_at = qp.backoff_expiry, qp.timestamp
    q.move_all("AssignedPodDelete")
    assert q.pop(0) is qp and qp.attempts == 2
    clock.now += 0.5
    q.requeue(qp, frozenset({"DefaultPreemption"}), nominate=None, gated=True)
    assert qp.attempts == 1
    assert (qp.backoff_expiry, qp.timestamp) == (expiry, queued_at)
    assert q.where(qp.pod.uid) == "gated"
    assert q.counts()["gated"] == 1 and q.counts()[UNSCHEDULABLE] == 0
    assert q.nominator.node_of(qp.pod.uid) == "n1"
    q.move_all("AssignedPodDelete")  # a cluster change does not lift the gate
    q.move_all("StorageChange", frozenset({"VolumeBinding"}))  # nor another plugin's event
    assert q.pop(timeout=0) is None
    q.activate(qp.pod.uid, "DefaultPreemption")
    assert q.counts()["gated"] == 0
    assert q.pop(0) is qp and qp.attempts == 2


def test_a_pod_a_plugin_held_back_moves_on_that_plugins_events_only(q: SchedulingQueue, clock: Clock) -> None:
    """DynamicResources' PreEnqueue: a pod whose claim does not exist yet waits, with no
    attempt, until a claim event moves it; other cluster changes leave it there."""
    q.add(pinfo("p"))
    qp = q.pop(0)
    q.requeue(qp, frozenset({"DynamicResources"}), gated=True)
    assert q.where(qp.pod.uid) == "gated" and qp.attempts == 0
    q.move_all("NodeAdd")
    q.move_all("StorageChange", frozenset({"VolumeBinding"}))
    assert q.pop(timeout=0) is None
    q.move_all("ResourceClaimChange", frozenset({"DynamicResources"}))
    assert q.counts()["gated"] == 0
    assert q.pop(0) is qp
