"""The waits' logic: rollout verdicts, pod summaries, Lease identities, and poll's deadline."""

from __future__ import annotations

import pytest
from kubernetes.client import (
    V1ContainerState,
    V1ContainerStateWaiting,
    V1ContainerStatus,
    V1Deployment,
    V1DeploymentSpec,
    V1DeploymentStatus,
    V1LabelSelector,
    V1ObjectMeta,
    V1Pod,
    V1PodCondition,
    V1PodSpec,
    V1PodStatus,
    V1PodTemplateSpec,
)
from kubernetes.client.exceptions import ApiException

from scheduler.deploy.cmdline import DeployError
from scheduler.deploy.waiting import holder_host, pod_ready, pod_summary, poll, rollout_status


def deployment(
    replicas: int,
    generation: int = 2,
    observed: int = 2,
    updated: int = 0,
    total: int = 0,
    available: int = 0,
) -> V1Deployment:
    return V1Deployment(
        metadata=V1ObjectMeta(name="d", generation=generation),
        spec=V1DeploymentSpec(
            replicas=replicas, selector=V1LabelSelector(match_labels={"a": "b"}), template=V1PodTemplateSpec()
        ),
        status=V1DeploymentStatus(
            observed_generation=observed,
            updated_replicas=updated,
            replicas=total,
            available_replicas=available,
        ),
    )


@pytest.mark.parametrize(
    ("dep", "done", "status"),
    [
        (
            deployment(3, generation=3, observed=2, updated=3, total=3, available=3),
            False,
            "waiting for the Deployment's new spec to be observed",
        ),
        (deployment(3, updated=1, total=3, available=3), False, "1 of 3 replicas updated"),
        (deployment(3, updated=3, total=4, available=3), False, "1 old replicas pending termination"),
        (deployment(3, updated=3, total=3, available=2), False, "2 of 3 updated replicas available"),
        (deployment(3, updated=3, total=3, available=3), True, "3/3 replicas available"),
    ],
)
def test_rollout_status(dep: V1Deployment, done: bool, status: str) -> None:
    assert rollout_status(dep) == (done, status)


def pod(
    name: str, phase: str, ready: bool, waiting: str | None = None, restarts: int = 0, node: str | None = None
) -> V1Pod:
    cs = V1ContainerStatus(
        name="scheduler",
        image="i",
        image_id="",
        ready=ready,
        restart_count=restarts,
        state=V1ContainerState(
            waiting=V1ContainerStateWaiting(reason=waiting, message="back-off") if waiting else None
        ),
    )
    return V1Pod(
        metadata=V1ObjectMeta(name=name),
        spec=V1PodSpec(containers=[], node_name=node),
        status=V1PodStatus(
            phase=phase, container_statuses=[cs], conditions=[V1PodCondition(type="Ready", status=str(ready))]
        ),
    )


def test_pod_summary_says_why_a_pod_is_not_ready() -> None:
    p = pod("ds-1", "Pending", False, waiting="ImagePullBackOff", node="kind-worker")
    assert not pod_ready(p)
    assert pod_summary(p) == "ds-1: Pending, scheduler: ImagePullBackOff (back-off), node kind-worker"
    assert pod_summary(pod("ds-2", "Running", True, restarts=2)) == "ds-2: Running, ready, 2 restarts"


def test_holder_host() -> None:
    assert (
        holder_host("dynamic-scheduler-7d9f_0b6f2a8e-1c1e-4c5e-9a9b-7b1e2f3a4b5c") == "dynamic-scheduler-7d9f"
    )
    assert holder_host("kind-control-plane_abc") == "kind-control-plane"
    assert holder_host("plain") == "plain"


def test_poll_until_done() -> None:
    calls = []

    def check() -> tuple[bool, str]:
        calls.append(1)
        return len(calls) >= 3, f"try {len(calls)}"

    assert poll("thing", check, timeout=5, interval=0.01) < 5
    assert len(calls) == 3


def test_poll_deadline_reports_the_last_status() -> None:
    with pytest.raises(DeployError, match=r"^thing: not done after 0.1s; last status: still waiting$"):
        poll("thing", lambda: (False, "still waiting"), timeout=0.1, interval=0.02)


def test_poll_rides_out_transient_api_errors_only() -> None:
    answers = [ApiException(status=503, reason="Service Unavailable"), (True, "ok")]

    def check() -> tuple[bool, str]:
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    poll("thing", check, timeout=5, interval=0.01)

    def forbidden() -> tuple[bool, str]:
        raise ApiException(status=403, reason="Forbidden")

    with pytest.raises(DeployError, match=r"^thing: 403 Forbidden$"):
        poll("thing", forbidden, timeout=5, interval=0.01)
