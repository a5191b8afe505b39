"""scheduler.cluster.podstatus: a failed pod's PodScheduled=False, written off the loop's thread
in the order kube-scheduler's synchronous write gives, and never over a bind."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from scheduler.cluster.binder import Binder
from scheduler.cluster.client import api_request
from scheduler.cluster.podstatus import PodStatusWriter
from scheduler.core.podinfo import PodInfo
from tests.cluster.util import make_node, make_pod


class HeldBinder:
    """Records each write; the first waits until ``release`` is set (a slow API server)."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str, str | None]] = []
        self.release = threading.Event()
        self.started = threading.Event()

    def set_unschedulable(
        self,
        pod: dict[str, Any],
        message: str,
        reason: str = "Unschedulable",
        nominated_node: str | None = None,
    ) -> bool:
        self.started.set()
        assert self.release.wait(10)
        self.writes.append((pod["metadata"]["name"], message, nominated_node))
        return True


def _pod(name: str) -> PodInfo:
    return PodInfo.from_pod(
        {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "spec": {}, "status": {}}
    )


def test_a_pods_unsent_failure_is_replaced_by_its_next() -> None:
    binder = HeldBinder()
    writer = PodStatusWriter(binder, {})
    a = _pod("a")
    writer.submit(a, "first", "Unschedulable", "n1")
    assert binder.started.wait(10)
    # While the first is under way: two more failures, the last leaving the nomination as it is.
    writer.submit(a, "second", "Unschedulable", "n2")
    writer.submit(a, "third", "Unschedulable", None)
    binder.release.set()
    writer.stop()
    assert binder.writes == [("a", "first", "n1"), ("a", "third", "n2")]


def test_before_the_bind_a_queued_failure_is_dropped_and_one_under_way_awaited() -> None:
    binder = HeldBinder()
    writer = PodStatusWriter(binder, {})
    a, b = _pod("a"), _pod("b")
    writer.submit(a, "first", "Unschedulable", "")
    assert binder.started.wait(10)
    writer.submit(a, "second", "Unschedulable", "")
    assert not writer.settle(a.uid, 0.05), "a write is under way"
    assert writer.settle(b.uid, 0.05), "nothing of b's"
    binder.release.set()
    assert writer.settle(a.uid, 10)
    writer.stop()
    assert binder.writes == [("a", "first", "")], "the second was dropped: the Binding supersedes it"


def test_halt_drops_what_is_queued() -> None:
    binder = HeldBinder()
    writer = PodStatusWriter(binder, {}, workers=1)
    writer.submit(_pod("a"), "first", "Unschedulable", "")
    assert binder.started.wait(10)
    writer.submit(_pod("b"), "never", "Unschedulable", "")
    writer.halt()
    binder.release.set()
    writer.submit(_pod("c"), "never either", "Unschedulable", "")
    writer.stop()  # the write under way ends
    assert [w[0] for w in binder.writes] == ["a"]


@pytest.mark.apiserver
def test_a_bound_pods_failure_is_not_written(admin, namespace: str) -> None:
    """The informer has the pod bound (its Binding landed first): PodScheduled stays True."""
    node = make_node(admin)["metadata"]["name"]
    pod = make_pod(admin, namespace)
    name = pod["metadata"]["name"]
    assert Binder(admin).bind(namespace, name, pod["metadata"]["uid"], node).bound
    bound = api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    writer = PodStatusWriter(Binder(admin), {f"{namespace}/{name}": bound})
    writer.submit(PodInfo.from_pod(pod), "0/1 nodes are available: 1 Insufficient cpu.", "Unschedulable", "")
    writer.stop()
    got = api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    cond = next(c for c in got["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["status"] == "True"


@pytest.mark.apiserver
def test_an_unbound_pods_failure_is_written(admin, namespace: str) -> None:
    pod = make_pod(admin, namespace)
    name = pod["metadata"]["name"]
    writer = PodStatusWriter(Binder(admin), {f"{namespace}/{name}": pod})
    writer.submit(PodInfo.from_pod(pod), "0/1 nodes are available: 1 Insufficient cpu.", "Unschedulable", "")
    writer.stop()
    got = api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    cond = next(c for c in got["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (cond["status"], cond["message"]) == ("False", "0/1 nodes are available: 1 Insufficient cpu.")


class SlowStatusBinder(Binder):
    """The real Binder, whose PodScheduled=False writes wait for ``release`` (a slow API
    server), recording the order its writes reach the API server in."""

    def __init__(self, api: Any) -> None:
        super().__init__(api)
        self.release = threading.Event()
        self.started = threading.Event()
        self.order: list[str] = []

    def set_unschedulable(self, pod: dict[str, Any], message: str, *args: Any, **kwargs: Any) -> bool:
        self.started.set()
        assert self.release.wait(10)
        self.order.append(f"status {message}")
        return super().set_unschedulable(pod, message, *args, **kwargs)

    def bind(self, namespace: str, name: str, uid: str | None, node: str) -> Any:
        self.order.append("bind")
        return super().bind(namespace, name, uid, node)


@pytest.mark.apiserver
def test_the_loops_bind_waits_for_a_failure_under_way_and_drops_a_queued_one(admin, namespace: str) -> None:
    """KubeIO.bind, as the scheduling loop calls it: a failure written after the Binding would
    mark a bound pod unschedulable (or be refused), so the bind settles the pod's writes first."""
    from scheduler.app import KubeIO
    from scheduler.cluster.events import EventRecorder
    from scheduler.cluster.preemption import PreemptionExecutor

    node = make_node(admin)["metadata"]["name"]
    pod = make_pod(admin, namespace)
    info = PodInfo.from_pod(pod)
    binder = SlowStatusBinder(admin)
    recorder = EventRecorder(admin)
    io = KubeIO(binder, recorder, PreemptionExecutor(binder, recorder), {info.key: pod})
    try:
        io.unschedulable(info, "0/1 nodes are available: first.", "default-scheduler", "Unschedulable")
        assert binder.started.wait(10)
        io.unschedulable(info, "0/1 nodes are available: second.", "default-scheduler", "Unschedulable")
        bound = threading.Thread(target=io.bind, args=(info, node))
        bound.start()
        bound.join(0.3)
        assert bound.is_alive() and "bind" not in binder.order, "the bind waits for the write under way"
        binder.release.set()
        bound.join(30)
        assert not bound.is_alive()
    finally:
        binder.release.set()
        io.stop()
        recorder.stop()
    assert binder.order == ["status 0/1 nodes are available: first.", "bind"]
    got = api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}")
    assert got["spec"]["nodeName"] == node
    cond = next(c for c in got["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["status"] == "True"
