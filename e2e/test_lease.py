"""Suite 1: the lease method on kind, end to end (``dynamic-scheduler deploy lease``).

Three replicas of ours run as ``default-scheduler`` on kube-scheduler's Lease
``kube-system/kube-scheduler`` and take it with the deterministic takeover:
one of ours holds it at once and leads after the safe wait, kube-scheduler
loses it, exits and waits as a standby after its restart. Then the failures
an operator meets: our leader SIGKILLed (the Lease lapses; another of ours
takes it), our leader deleted normally (SIGTERM: the Lease is released and
taken within a retry period or two), ours scaled to zero (kube-scheduler
takes it back), and ``dynamic-scheduler restore``.

The tests run in order on one deployment (module fixture); each pod they
create lives in the test's own namespace. Figures go to
``_artifacts/e2e-metrics/lease.jsonl``.

Bounds asserted (the issue's): ours binds within 20 s of holding the Lease;
after a SIGKILL of the leader another of ours leads within leaseDuration +
retryPeriod (17 s) of the kill; after a SIGTERM within two retry periods (4 s)
of the release. kube-scheduler, a standby again after its restart, competes
for a lapsed or released Lease too: ours win because a standby of ours
watches the Lease (the expiry counts from the renewal as written; a release
wakes it at once) while kube-scheduler polls. The 5 s "holds after the
replicas are ready" goal is recorded, not asserted.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.conftest import ARTIFACTS
from e2e.deploying import Result, deploy, restore
from e2e.events import Scheduled, assert_bound_by
from e2e.kube import wait_pod
from e2e.lease import LeaseWatch, acquired_at, annotated_ours, holder, holder_host, read_lease, watch_lease
from e2e.measure import record
from e2e.metrics import metrics_reader_token, scheduler_get
from e2e.nodes import control_plane, sigkill
from e2e.pods import pod_log, sleeper, wait_pods_gone
from e2e.schedulers import (
    kube_scheduler_pods,
    our_pods,
    scale_ours,
    started_leading_at,
    wait_leading,
    wait_ours_hold,
)
from scheduler.polling import poll

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]

SUITE = "lease"
# manifests/values.yaml leaderElection (the scheduler's and kube-scheduler's defaults).
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 15.0, 10.0, 2.0
BIND_AFTER_HOLD = 20.0  # the issue: ours binds within 20 s of holding the Lease
HOLD_AFTER_READY_GOAL = 5.0  # the goal, recorded
SIGKILL_FAILOVER = LEASE_DURATION + RETRY_PERIOD  # 17 s
SIGTERM_FAILOVER = 2 * RETRY_PERIOD  # 4 s
SAFE_WAIT = LEASE_DURATION + RETRY_PERIOD  # a takeover's wait before leading: 17 s
OUR_NS = "crane-system"


@dataclass
class Deployed:
    start: float
    result: Result
    lease: dict
    leader: str
    kube_scheduler_restarts: int
    watch: LeaseWatch
    right_after: str
    """A pod created in RIGHT_AFTER_NS the moment ``deploy lease`` returned."""


RIGHT_AFTER_NS = "e2e-lease-right-after-deploy"


def ks_status(core: client.CoreV1Api) -> client.V1ContainerStatus:
    pods = kube_scheduler_pods(core)
    assert len(pods) == 1, f"expected one kube-scheduler pod, got {[p.metadata.name for p in pods]}"
    return pods[0].status.container_statuses[0]


def leading_since(core: client.CoreV1Api, pod: str) -> float:
    at = started_leading_at(core, pod)
    assert at is not None, f"{pod} never logged Started leading"
    return at


def leading_now(api: client.ApiClient, core: client.CoreV1Api) -> tuple[str, str]:
    """The replica of ours that holds the Lease, once it leads: (its pod name, its holder identity)."""
    lease, leader = wait_ours_hold(api, core, 30)
    wait_leading(core, leader, 30)
    return leader, holder(lease)


def wait_rolled_out(api: client.ApiClient, core: client.CoreV1Api, timeout: float = 120) -> None:
    apps = client.AppsV1Api(api)

    def done() -> bool:
        d = apps.read_namespaced_deployment("dynamic-scheduler", OUR_NS)
        pods = core.list_namespaced_pod(
            OUR_NS, label_selector="app.kubernetes.io/name=dynamic-scheduler"
        ).items
        return (d.status.ready_replicas or 0) == d.spec.replicas == len(pods) and all(
            "Attempting to acquire leader lease" in pod_log(core, OUR_NS, p.metadata.name) for p in pods
        )

    poll(
        done,
        timeout,
        "our Deployment rolled out, every replica in the election",
        interval=0.5,
        retry_on=(ApiException,),
    )


def new_pod_bound_by(
    core: client.CoreV1Api, namespace: str, image: str, name: str, hosts: set[str], timeout: float = 60
) -> Scheduled:
    """A pod created now (naming no scheduler) is bound by default-scheduler on one of ``hosts``."""
    sleeper(core, namespace, name, image)
    return assert_bound_by(core, namespace, name, hosts, timeout)


def with_history(deployed: Deployed, since: float, fn, *args):
    """``fn(*args)``; a failure message gets the Lease's holders since ``since``."""
    try:
        return fn(*args)
    except AssertionError as e:
        raise AssertionError(f"{e}\nLease holders:\n{deployed.watch.holders(since)}") from None


@pytest.fixture(scope="module")
def deployed(
    kind_cluster, api: client.ApiClient, core: client.CoreV1Api, test_image: str
) -> Iterator[Deployed]:
    os.environ.setdefault("KUBECONFIG", str(kind_cluster.kubeconfig_path))
    before = read_lease(api)
    assert holder(before) and not annotated_ours(before), (
        f"kube-scheduler should hold the Lease first: {before}"
    )
    restarts = ks_status(core).restart_count
    with watch_lease(api) as lw:
        start = time.time()
        core.create_namespace({"metadata": {"name": RIGHT_AFTER_NS}})
        try:
            res = deploy("lease", "--timeout", "240")
            sleeper(
                core, RIGHT_AFTER_NS, "right-after-deploy", os.environ.get("IMG", "dynamic-scheduler:dev")
            )
            lease, leader = wait_ours_hold(api, core, 30)
            yield Deployed(start, res, lease, leader, restarts, lw, "right-after-deploy")
        finally:
            core.delete_namespace(RIGHT_AFTER_NS, propagation_policy="Background")
            try:
                restore("lease")
            finally:
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                (ARTIFACTS / f"lease-history-{int(start)}.json").write_text(
                    json.dumps(lw.history(), indent=1)
                )


def test_takeover_one_of_ours_holds_the_lease(deployed: Deployed, core: client.CoreV1Api) -> None:
    lease, leader = deployed.lease, deployed.leader
    names = [p.metadata.name for p in our_pods(core)]
    assert len(names) == 3
    assert holder(lease).startswith(leader + "_") and leader in names
    assert lease["metadata"]["annotations"]["dynamic-scheduler.io/holder"] == holder(lease)

    # When the replicas were Ready (their Ready conditions; whole seconds) and when ours took the Lease.
    ready = max(
        c.last_transition_time.timestamp()
        for p in our_pods(core)
        for c in p.status.conditions
        if c.type == "Ready" and c.status == "True"
    )
    took = acquired_at(lease)
    m = re.search(
        r"([\d.]+)s after the replicas were ready, ([\d.]+)s after the apply", deployed.result.stdout
    )
    assert m, deployed.result.stdout
    record(SUITE, "takeover_deploy_to_hold_s", took - deployed.start, leader=leader)
    record(SUITE, "takeover_hold_minus_all_ready_s", took - ready, goal=HOLD_AFTER_READY_GOAL)
    record(SUITE, "takeover_ready_to_hold_s_by_deploy", float(m.group(1)))
    # Whoever held the Lease before is a foreign holder: it is taken once, not lapsed.
    first_ours = deployed.watch.wait_for("ours", lambda c: annotated_ours(c.lease), 1)
    assert first_ours.lease["spec"]["leaseTransitions"] >= 1


def test_deploy_returns_once_ours_schedules_and_a_pod_created_then_is_bound_by_ours(
    deployed: Deployed, core: client.CoreV1Api
) -> None:
    m = re.search(
        r"^(\S+) is scheduling since (\S+): ([\d.]+)s after it held the Lease, ([\d.]+)s after the apply$",
        deployed.result.stdout,
        re.M,
    )
    assert m, deployed.result.stdout
    record(SUITE, "deploy_hold_to_scheduling_s", float(m.group(3)))
    assert_bound_by(core, RIGHT_AFTER_NS, deployed.right_after, {m.group(1)}, 60)


def test_the_secure_port_authenticates_and_authorizes_as_kube_schedulers(
    deployed: Deployed, api: client.ApiClient
) -> None:
    pod = deployed.leader
    code, body = scheduler_get(api, pod, "/metrics")
    assert code == 403, body
    assert json.loads(body)["message"] == 'forbidden: User "system:anonymous" cannot get path "/metrics"'
    assert scheduler_get(api, pod, "/metrics", "not-a-token")[0] == 401
    code, body = scheduler_get(api, pod, "/metrics", metrics_reader_token(api))
    assert code == 200 and "scheduler_pending_pods" in body
    for path in ("/healthz", "/readyz", "/livez"):  # the kubelet's probes: no credentials
        assert scheduler_get(api, pod, path) == (200, "ok"), path


def test_a_pod_created_at_the_takeover_is_bound_within_20s(
    deployed: Deployed, api: client.ApiClient, core: client.CoreV1Api, namespace: str, test_image: str
) -> None:
    """Created as soon as ours holds the Lease: kube-scheduler, the leader until its renewal
    fails (up to retryPeriod + renewDeadline later), may still bind it; else ours does once
    it leads. Either way it waits at most 20 s."""
    sleeper(core, namespace, "at-takeover", test_image)
    node = control_plane(core).metadata.name
    _, instance, at = assert_bound_by(core, namespace, "at-takeover", {deployed.leader, node}, 60)
    bind_after_hold = at - acquired_at(deployed.lease)
    record(
        SUITE,
        "takeover_pod_created_at_hold_bound_after_s",
        bind_after_hold,
        bound=BIND_AFTER_HOLD,
        by="ours" if instance.endswith(deployed.leader) else "kube-scheduler",
    )
    assert bind_after_hold <= BIND_AFTER_HOLD


def ks_exited(core: client.CoreV1Api, restarts_before: int) -> client.V1ContainerStatus | None:
    cs = ks_status(core)
    return cs if cs.restart_count > restarts_before or cs.state.terminated else None


def test_once_kube_scheduler_gave_up_ours_binds_within_20s_of_holding(
    deployed: Deployed, api: client.ApiClient, core: client.CoreV1Api, namespace: str, test_image: str
) -> None:
    poll(
        lambda: ks_exited(core, deployed.kube_scheduler_restarts),
        60,
        "kube-scheduler's exit",
        interval=0.25,
        retry_on=(ApiException,),
    )
    created = time.time()
    at = new_pod_bound_by(core, namespace, test_image, "no-scheduler-name", {deployed.leader}).at
    held = acquired_at(deployed.lease)
    lead_after_hold = leading_since(core, deployed.leader) - held
    record(SUITE, "takeover_lead_after_hold_s", lead_after_hold)
    record(
        SUITE,
        "takeover_bind_after_hold_s",
        at - held,
        bound=BIND_AFTER_HOLD,
        created_after_hold=created - held,
    )
    # Created once the kubelet reported kube-scheduler's exit (seconds late on a loaded machine):
    # bound within 20 s of ours holding the Lease, or of the pod's creation if that came later.
    assert at - max(held, created) <= BIND_AFTER_HOLD


def test_kube_scheduler_exited_before_ours_led_and_stands_by(
    deployed: Deployed, api: client.ApiClient, core: client.CoreV1Api
) -> None:
    # kube-scheduler's renewal fails (ours changed the Lease), it gives up after its
    # renewDeadline and exits 1; the kubelet restarts it and it waits for the Lease.
    def restarted() -> client.V1ContainerStatus | None:
        cs = ks_status(core)
        ok = cs.restart_count > deployed.kube_scheduler_restarts and cs.state.running and cs.ready
        return cs if ok and cs.last_state.terminated else None

    cs = poll(restarted, 90, "kube-scheduler restarted and Ready", interval=0.5, retry_on=(ApiException,))
    term = cs.last_state.terminated
    assert term.exit_code == 1, f"kube-scheduler ended with {term}"
    took = acquired_at(deployed.lease)
    leads = leading_since(core, deployed.leader)
    # finishedAt has whole seconds: the exit happened before finishedAt + 1.
    exited = term.finished_at.timestamp()
    record(SUITE, "kube_scheduler_exit_after_takeover_s", exited - took)
    record(SUITE, "safe_wait_margin_s", leads - (exited + 1))
    assert exited + 1 <= leads, "ours must not lead while kube-scheduler may still schedule"

    pod = kube_scheduler_pods(core)[0]
    assert pod.status.phase == "Running"
    log = pod_log(core, "kube-system", pod.metadata.name)
    assert "Attempting to acquire leader lease" in log
    assert "Successfully acquired lease" not in log
    lease = read_lease(api)
    assert annotated_ours(lease) and holder_host(holder(lease)) == deployed.leader


def test_sigkill_of_the_leader_another_of_ours_takes_over(
    deployed: Deployed, api: client.ApiClient, core: client.CoreV1Api, namespace: str, test_image: str
) -> None:
    leader, old = leading_now(api, core)
    pod = core.read_namespaced_pod(leader, OUR_NS)
    mark = len(deployed.watch.snapshot())
    killed = sigkill(pod)
    last_renew = max((c.renewed or 0) for c in deployed.watch.snapshot() if c.holder == old)
    new = deployed.watch.wait_for(
        "a new holder", lambda c: bool(c.holder) and c.holder != old, 60, after=mark
    )
    new_pod = holder_host(new.holder)
    assert new_pod in {p.metadata.name for p in our_pods(core)}, f"{new.holder} is not one of ours"
    assert annotated_ours(new.lease)
    wait_leading(core, new_pod, 30)
    failover = leading_since(core, new_pod) - killed
    record(
        SUITE, "sigkill_failover_s", failover, bound=SIGKILL_FAILOVER, same_pod_restarted=new_pod == leader
    )
    record(SUITE, "sigkill_kill_to_hold_s", new.acquired - killed)
    record(SUITE, "sigkill_failover_from_last_renew_s", new.acquired - last_renew)

    def restarted() -> client.V1ContainerStatus | None:
        cs = core.read_namespaced_pod(leader, OUR_NS).status.container_statuses[0]
        return cs if cs.restart_count >= 1 and cs.last_state.terminated else None

    cs = poll(restarted, 60, f"{leader} restarted by the kubelet", interval=0.5, retry_on=(ApiException,))
    assert cs.last_state.terminated.exit_code == 137, cs.last_state.terminated  # 128 + SIGKILL

    new_pod_bound_by(core, namespace, test_image, "after-sigkill", {new_pod})
    assert failover <= SIGKILL_FAILOVER, f"another of ours led {failover:.1f}s after the SIGKILL"


def test_sigterm_of_the_leader_releases_and_another_takes_over(
    deployed: Deployed, api: client.ApiClient, core: client.CoreV1Api, namespace: str, test_image: str
) -> None:
    leader, old = leading_now(api, core)
    mark = len(deployed.watch.snapshot())
    deleted = time.time()
    core.delete_namespaced_pod(leader, OUR_NS)  # the pod's grace period: SIGTERM, then the release
    released = deployed.watch.wait_for("released", lambda c: c.holder == "", 30, after=mark)
    assert released.lease["spec"]["leaseDurationSeconds"] == 1
    first = deployed.watch.wait_for(
        "a new holder", lambda c: bool(c.holder) and c.holder != old, 30, after=mark
    )
    bound = SIGTERM_FAILOVER
    if not annotated_ours(first.lease):
        # A released Lease is anyone's: kube-scheduler's standby retry (every retryPeriod) can
        # land within the few milliseconds our watching standby takes. One of ours then takes it
        # over at once, and leads after the safe wait (kube-scheduler has exited by then).
        assert holder_host(first.holder) == control_plane(core).metadata.name, first.holder
        bound = SIGTERM_FAILOVER + SAFE_WAIT
    # Not the old leader's own last renewals, which may come after the mark, before its SIGTERM.
    new = deployed.watch.wait_for(
        "another of ours holding", lambda c: annotated_ours(c.lease) and c.holder != old, 60, after=mark
    )
    new_pod = holder_host(new.holder)
    assert new_pod != leader and new_pod in {p.metadata.name for p in our_pods(core)}
    wait_leading(core, new_pod, 60)
    failover = leading_since(core, new_pod) - released.renewed
    record(SUITE, "sigterm_delete_to_release_s", released.renewed - deleted)
    record(
        SUITE,
        "sigterm_failover_from_release_s",
        failover,
        bound=bound,
        released_to="ours" if first is new else "kube-scheduler, then ours by takeover",
    )
    record(SUITE, "sigterm_release_to_hold_s", new.acquired - released.renewed)
    record(SUITE, "sigterm_failover_from_delete_s", new.acquired - deleted)

    new_pod_bound_by(core, namespace, test_image, "after-sigterm", {new_pod})
    assert failover <= bound, f"another of ours led {failover:.1f}s after the release"


def test_scaled_to_zero_kube_scheduler_takes_the_lease_back(
    deployed: Deployed, api: client.ApiClient, core: client.CoreV1Api, namespace: str, test_image: str
) -> None:
    node = control_plane(core).metadata.name
    lease, _ = wait_ours_hold(api, core, 30)
    # A replica that starts while kube-scheduler holds the Lease takes it over (that is
    # what --leader-elect-takeover is for): scale down only once the replacement of the
    # pod the previous test deleted is up and standing by.
    wait_rolled_out(api, core)
    mark = len(deployed.watch.snapshot())
    at = time.time()
    scale_ours(api, 0)
    back = deployed.watch.wait_for("kube-scheduler", lambda c: holder_host(c.holder) == node, 60, after=mark)
    assert not annotated_ours(back.lease)
    record(SUITE, "scale_to_zero_kube_scheduler_holds_s", back.acquired - at)
    wait_pods_gone(core, OUR_NS, "app.kubernetes.io/name=dynamic-scheduler", 60)

    with_history(deployed, at, new_pod_bound_by, core, namespace, test_image, "after-scale-down", {node}, 120)


def test_restore_gives_the_lease_back_and_removes_ours(
    deployed: Deployed, api: client.ApiClient, core: client.CoreV1Api, namespace: str, test_image: str
) -> None:
    # Ours leading again first, so restore has the Lease to give back.
    scale_ours(api, 3)
    _, leader = wait_ours_hold(api, core, 120)
    wait_leading(core, leader, 60)
    node = control_plane(core).metadata.name

    res = restore("lease")
    assert re.search(rf"kube-system/kube-scheduler is held by {re.escape(node)}_\S+ again", res.stdout), (
        res.stdout
    )
    lease = read_lease(api)
    assert holder_host(holder(lease)) == node and not annotated_ours(lease)
    record(SUITE, "restore_s", res.seconds)

    rbac = client.RbacAuthorizationV1Api(api)
    gone = {
        "ClusterRole dynamic-scheduler": lambda: rbac.read_cluster_role("dynamic-scheduler"),
        "ClusterRoleBinding dynamic-scheduler": lambda: rbac.read_cluster_role_binding("dynamic-scheduler"),
        "Role kube-system/dynamic-scheduler:leader-election": lambda: rbac.read_namespaced_role(
            "dynamic-scheduler:leader-election", "kube-system"
        ),
        "RoleBinding kube-system/dynamic-scheduler:leader-election": lambda: (
            rbac.read_namespaced_role_binding("dynamic-scheduler:leader-election", "kube-system")
        ),
        "Namespace crane-system": lambda: core.read_namespace(OUR_NS),
    }

    remaining: list[str] = []

    def all_gone() -> bool:
        remaining[:] = []
        for what, read in gone.items():
            try:
                read()
                remaining.append(what)
            except client.ApiException as e:
                if e.status != 404:
                    raise
        return not remaining

    try:
        poll(all_gone, 120, "our objects gone", interval=0.5, retry_on=(ApiException,))
    except AssertionError as e:
        raise AssertionError(f"{e}; still there: {', '.join(remaining)}") from None

    with_history(deployed, 0, new_pod_bound_by, core, namespace, test_image, "after-restore", {node}, 120)
    wait_pod(core, namespace, "after-restore", lambda p: p["status"].get("phase") == "Running", "Running", 60)
