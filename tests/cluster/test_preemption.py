"""Preemption against the private API server: the scheduler in-process, its writes real.

Each test runs the scheduler (``scheduler.app.App``, no leader election) with
a profile of its own whose ``NodeAffinity.addedAffinity`` keeps it to the
test's own nodes, creates PriorityClasses and pods, and checks what the API
server ends up with: who was bound where, the victims' ``DisruptionTarget``
condition and deletion, the preemptor's ``status.nominatedNodeName``, the
events. No kubelet runs, so a deleted pod that is bound stays terminating
until the test deletes it for good (``gracePeriodSeconds: 0``), which is what
the kubelet would do once its containers stopped.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scheduler.app import App
from scheduler.cluster.client import api_request
from scheduler.polling import poll
from tests.apiserver import ControlPlane
from tests.cluster.util import only_nodes_labelled, scheduler_running

pytestmark = pytest.mark.apiserver

FOO = "example.com/foo"


@dataclass
class World:
    admin: ApiClient
    namespace: str
    scheduler_name: str
    label: str
    classes: dict[str, str]
    app: App

    # --- objects ------------------------------------------------------------------

    def node(self, name: str, foo: int) -> str:
        full = f"{self.label}-{name}"
        api_request(
            self.admin,
            "POST",
            "/api/v1/nodes",
            body={
                "metadata": {"name": full, "labels": {"preemption-test": self.label}},
                "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110", FOO: str(foo)}},
            },
        )
        return full

    def pod(
        self,
        name: str,
        foo: int,
        priority: str,
        *,
        node: str | None = None,
        labels: dict[str, str] | None = None,
        **spec: Any,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {
                "schedulerName": self.scheduler_name,
                "priorityClassName": self.classes[priority],
                # the API server taints new Nodes not-ready, and no kubelet clears it here
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {FOO: str(foo)}, "limits": {FOO: str(foo)}},
                    }
                ],
                **spec,
            },
        }
        if node is not None:
            body["spec"]["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                        ]
                    }
                }
            }
        return api_request(self.admin, "POST", f"/api/v1/namespaces/{self.namespace}/pods", body=body)

    def get(self, name: str) -> dict[str, Any] | None:
        try:
            return api_request(self.admin, "GET", f"/api/v1/namespaces/{self.namespace}/pods/{name}")
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def finish_deleting(self, name: str) -> None:
        """What the kubelet does for a terminating pod once its containers stopped."""
        api_request(
            self.admin,
            "DELETE",
            f"/api/v1/namespaces/{self.namespace}/pods/{name}",
            body={"gracePeriodSeconds": 0},
        )
        poll(lambda: self.get(name) is None, 10, f"{name} gone")

    def delete(self, name: str) -> None:
        api_request(self.admin, "DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{name}")

    def events(self, reason: str) -> list[dict[str, Any]]:
        items = api_request(self.admin, "GET", f"/apis/events.k8s.io/v1/namespaces/{self.namespace}/events")[
            "items"
        ]
        return [e for e in items if e["reason"] == reason]

    # --- waiting ------------------------------------------------------------------

    def bound_to(self, name: str, timeout: float = 20) -> str:
        def node() -> str:
            pod = self.get(name)
            return ((pod or {}).get("spec") or {}).get("nodeName") or ""

        return poll(node, timeout, f"{name} bound")

    def nominated(self, name: str, timeout: float = 20) -> str:
        def nnn() -> str:
            return ((self.get(name) or {}).get("status") or {}).get("nominatedNodeName") or ""

        return poll(nnn, timeout, f"{name} nominated")

    def terminating(self, name: str, timeout: float = 20) -> dict[str, Any]:
        return poll(
            lambda: (p := self.get(name)) is not None and p["metadata"].get("deletionTimestamp") and p,
            timeout,
            f"{name} terminating",
        )

    def failed_with(self, name: str, text: str, timeout: float = 20) -> str:
        def message() -> str:
            for e in self.events("FailedScheduling"):
                if e["regarding"]["name"] == name and text in e["note"]:
                    return e["note"]
            return ""

        return poll(message, timeout, f"FailedScheduling of {name} saying {text!r}")

    def settled(self) -> None:
        """The scheduler has nothing in flight: its queue holds only pods that wait."""
        sched = self.app.scheduler
        assert sched is not None

        def idle() -> bool:
            counts = sched.queue.counts()
            return sched.wait_idle(1) and counts["active"] == 0 and not sched.preempting()

        poll(idle, 20, "the scheduler idle")


@pytest.fixture
def world(apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path) -> Iterator[World]:
    label = f"p{uuid.uuid4().hex[:6]}"
    scheduler_name = f"preemption-{label}"
    classes = {}
    # preemptionPolicy comes from the class (the Priority admission plugin sets it)
    for name, value, policy in (
        ("low", 1, None),
        ("mid", 50, None),
        ("high", 1000, None),
        ("mid-never", 50, "Never"),
        ("high-never", 1000, "Never"),
    ):
        full = f"{label}-{name}"
        body: dict[str, Any] = {"metadata": {"name": full}, "value": value}
        if policy:
            body["preemptionPolicy"] = policy
        api_request(admin, "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body=body)
        classes[name] = full
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(apiserver.kubeconfig), "qps": 200, "burst": 400},
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 4,
        "profiles": [
            {"schedulerName": scheduler_name, "pluginConfig": [only_nodes_labelled("preemption-test", label)]}
        ],
    }
    try:
        with scheduler_running(config, tmp_path) as app:
            yield World(admin, namespace, scheduler_name, label, classes, app)
    finally:
        nodes = api_request(
            admin, "GET", "/api/v1/nodes", query=[("labelSelector", f"preemption-test={label}")]
        )
        for n in nodes["items"]:
            api_request(admin, "DELETE", f"/api/v1/nodes/{n['metadata']['name']}")
        for full in classes.values():
            api_request(admin, "DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{full}")


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions") or () if c["type"] == kind), None)


def test_basic_preemption(world: World) -> None:
    # upstream's "validates basic preemption works", on two nodes
    n1, n2 = world.node("a", 4), world.node("b", 4)
    world.pod("low", 2, "low", node=n1)
    world.pod("mid-1", 2, "mid", node=n1)
    world.pod("mid-2", 2, "mid", node=n2)
    world.pod("mid-3", 2, "mid", node=n2)
    for name in ("low", "mid-1", "mid-2", "mid-3"):
        world.bound_to(name)

    preemptor = world.pod("preemptor", 2, "high")
    victim = world.terminating("low")
    assert world.nominated("preemptor") == n1
    cond = condition(victim, "DisruptionTarget")
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True",
        "PreemptionByScheduler",
        f"{world.scheduler_name}: preempting to accommodate a higher priority pod",
    )
    for name in ("mid-1", "mid-2", "mid-3"):
        assert not world.get(name)["metadata"].get("deletionTimestamp")
    note = world.failed_with("preemptor", "preemption:")
    assert f"2 Insufficient {FOO}" in note, note
    assert note.endswith(
        f" preemption: found a potential placement for pod on node {n1}, preempting 1 victims"
    )
    (ev,) = poll(lambda: world.events("Preempted"), 10, "the Preempted event")
    assert (ev["regarding"]["name"], ev["related"]["name"], ev["action"], ev["type"]) == (
        "low",
        "preemptor",
        "Preempting",
        "Normal",
    )
    assert ev["note"] == f"Preempted by pod {preemptor['metadata']['uid']} on node {n1}"
    assert ev["reportingController"] == world.scheduler_name

    world.finish_deleting("low")
    assert world.bound_to("preemptor") == n1


def test_victims_whose_eviction_a_pdb_forbids_are_spared(world: World) -> None:
    n1, n2 = world.node("a", 1), world.node("b", 1)
    world.pod("guarded", 1, "low", node=n1, labels={"app": "db"})
    world.pod("free", 1, "mid", node=n2)
    world.bound_to("guarded"), world.bound_to("free")
    pdb = api_request(
        world.admin,
        "POST",
        f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets",
        body={
            "metadata": {"name": "db"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        },
    )
    # No controller-manager computes its status here: disruptionsAllowed is 0, as it would be.
    assert not (pdb.get("status") or {}).get("disruptionsAllowed")
    poll(lambda: _pdb_seen(world), 10, "the PDB in the scheduler's cache")

    world.pod("preemptor", 1, "high")
    # The guarded pod has the lower priority, but only the other node violates no PDB.
    assert world.nominated("preemptor") == n2
    world.terminating("free")
    assert not world.get("guarded")["metadata"].get("deletionTimestamp")
    world.finish_deleting("free")
    assert world.bound_to("preemptor") == n2


def _pdb_seen(world: World) -> bool:
    store = next(i.store for i in world.app.informers if i.resource.plural == "poddisruptionbudgets")
    return store.get(f"{world.namespace}/db") is not None


def test_preemption_policy_never(world: World) -> None:
    n1 = world.node("a", 1)
    world.pod("low", 1, "low", node=n1)
    world.bound_to("low")
    world.pod("polite", 1, "high-never")
    note = world.failed_with("polite", "preemption:")
    assert note.endswith("preemption: not eligible due to preemptionPolicy=Never.")
    world.settled()
    assert not world.get("low")["metadata"].get("deletionTimestamp")
    assert not world.get("polite")["status"].get("nominatedNodeName")


def victim_terminating_for(world: World, preemptor: str, priority: str) -> str:
    """A node full with one low-priority pod, ``preemptor`` nominated to it, the victim
    terminating (no kubelet ends it); the node's name."""
    node = world.node("a", 2)
    world.pod("victim", 2, "low", node=node)
    world.bound_to("victim")
    world.pod(preemptor, 2, priority)
    assert world.nominated(preemptor) == node
    world.terminating("victim")
    return node


def test_the_nominated_node_is_kept_for_the_preemptor(world: World) -> None:
    n1 = victim_terminating_for(world, "high", "high")
    # The victim's termination moves no one (NodeResourcesFit waits for its deletion, as
    # kube-scheduler's queueing hint): a node added is a cluster event that does. Tried
    # again while the victim terminates, the preemptor waits for it instead of preempting
    # again, and a lower-priority pod can neither take the room nor preempt for it.
    world.node("b", 0)
    note = world.failed_with("high", "not eligible due to a terminating pod on the nominated node")
    assert "preemption:" in note
    world.pod("mid", 2, "mid-never")
    world.failed_with("mid", "preemption:")
    world.settled()
    world.finish_deleting("victim")
    assert world.bound_to("high") == n1
    world.settled()
    assert not (world.get("mid")["spec"].get("nodeName"))


def test_a_deleted_preemptor_gives_the_room_back(world: World) -> None:
    n1 = victim_terminating_for(world, "high", "high")
    world.pod("mid", 2, "mid-never")
    world.failed_with("mid", "preemption:")
    world.delete("high")
    poll(lambda: world.get("high") is None, 10, "high gone")
    world.finish_deleting("victim")
    # The nomination went with the preemptor: the room is anyone's.
    assert world.bound_to("mid") == n1
    world.settled()
    assert world.app.queue.nominator.snapshot() == {}


def test_lower_priority_nominations_are_cleared(world: World) -> None:
    n1 = victim_terminating_for(world, "mid", "mid")
    world.pod("high", 2, "high")
    # high preempts too (the victim again, already terminating: no second delete) and takes
    # the nomination over; mid's is cleared.
    assert world.nominated("high") == n1
    poll(lambda: not world.get("mid")["status"].get("nominatedNodeName"), 20, "mid's nomination cleared")
    world.finish_deleting("victim")
    assert world.bound_to("high") == n1
    assert len(world.events("Preempted")) == 1
