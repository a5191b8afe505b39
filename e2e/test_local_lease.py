"""Our Lease loop and the real Go kube-scheduler share kube-system/kube-scheduler.

The scheduler runs as a local process as ``default-scheduler`` on the default
Lease with ``--leader-elect-takeover``: it takes the Lease from
kube-scheduler, which stops leading (and exits, to wait as a standby after
its restart); ours binds pods that name no scheduler once the old leader must
have stopped; SIGTERM releases the Lease and kube-scheduler takes it back;
a Lease taken by someone else makes ours exit with code 1.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.events import bound_by
from e2e.localscheduler import config, local_scheduler
from e2e.measure import record
from e2e.nodes import control_plane
from e2e.pods import sleeper, wait_bound
from e2e.schedulers import fresh_kube_scheduler
from scheduler.polling import poll

pytestmark = pytest.mark.cluster

LEASE_NS, LEASE = "kube-system", "kube-scheduler"


def holder(coord: client.CoordinationV1Api) -> str:
    try:
        return coord.read_namespaced_lease(LEASE, LEASE_NS).spec.holder_identity or ""
    except client.ApiException as e:
        if e.status == 404:
            return ""
        raise


def kube_scheduler_pod(core: client.CoreV1Api) -> client.V1Pod:
    return core.list_namespaced_pod(LEASE_NS, label_selector="component=kube-scheduler").items[0]


def ours(identity: str) -> bool:
    return identity.startswith(socket.gethostname() + "_")


@pytest.fixture
def lease_back_to_kube_scheduler(
    api: client.ApiClient, core: client.CoreV1Api
) -> Iterator[client.CoordinationV1Api]:
    coord = client.CoordinationV1Api(api)
    # Earlier suites' takeovers leave kube-scheduler in a long restart back-off; reset it, so
    # that it restarts within seconds after losing the Lease here and can take it back.
    fresh_kube_scheduler(api, core, control_plane(core).metadata.name)
    yield coord
    # However the test ended, kube-scheduler must lead again (a deleted Lease is
    # re-created by whichever candidate tries first: only kube-scheduler is left).
    if ours(holder(coord)) or holder(coord).startswith("intruder"):
        coord.delete_namespaced_lease(LEASE, LEASE_NS)
    poll(
        lambda: holder(coord) and not ours(holder(coord)) and not holder(coord).startswith("intruder"),
        120,
        "kube-scheduler holding its Lease again",
        interval=0.5,
        retry_on=(ApiException,),
    )


def unscheduled_pod(core: client.CoreV1Api, ns: str, name: str, image: str) -> None:
    """A pod naming no scheduler, without requests."""
    sleeper(core, ns, name, image, cpu=None, memory=None)


def test_takeover_bind_release(
    kind_cluster, api, core, namespace, test_image, lease_back_to_kube_scheduler
) -> None:
    coord = lease_back_to_kube_scheduler
    before = holder(coord)
    assert before and not ours(before), "kube-scheduler leads before the test"
    restarts = kube_scheduler_pod(core).status.container_statuses[0].restart_count

    cfg = config("default-scheduler", LEASE, LEASE_NS)
    with local_scheduler("takeover", cfg, str(kind_cluster.kubeconfig_path), "--leader-elect-takeover") as s:
        start = time.monotonic()
        s.wait_ready()
        took = poll(
            lambda: ours(holder(coord)) and time.monotonic(),
            30,
            "our process holding the Lease",
            interval=0.5,
            retry_on=(ApiException,),
        )
        record("local-lease", "takeover_lease_held_after_start_s", took - start)
        # kube-scheduler lost its lease: it exits (code 1) and the kubelet restarts it as a standby.
        poll(
            lambda: kube_scheduler_pod(core).status.container_statuses[0].restart_count > restarts,
            60,
            "kube-scheduler restarted after losing its lease",
            interval=0.5,
            retry_on=(ApiException,),
        )
        created = time.monotonic()
        unscheduled_pod(core, namespace, "p", test_image)
        pod = wait_bound(core, namespace, "p", 60)
        record("local-lease", "takeover_pod_bound_after_creation_s", time.monotonic() - created)
        by = bound_by(core, namespace, "p", 60)
        assert by.instance == f"default-scheduler-{socket.gethostname()}", by
        record(
            "local-lease",
            "takeover_first_bind_after_lease_s",
            time.monotonic() - took,
            node=pod["spec"]["nodeName"],
        )

        assert s.terminate() == 0
        released = time.monotonic()
        lease = coord.read_namespaced_lease(LEASE, LEASE_NS)
        assert not ours(lease.spec.holder_identity or ""), "SIGTERM released the lease"
    back = poll(
        lambda: holder(coord) and not ours(holder(coord)) and time.monotonic(),
        30,
        "kube-scheduler taking the released Lease",
        interval=0.5,
        retry_on=(ApiException,),
    )
    record("local-lease", "release_kube_scheduler_leads_after_exit_s", back - released)
    unscheduled_pod(core, namespace, "q", test_image)
    by = bound_by(core, namespace, "q", 60)
    assert by.instance != f"default-scheduler-{socket.gethostname()}", by


def test_exits_1_when_the_lease_is_taken(kind_cluster, api, lease_back_to_kube_scheduler) -> None:
    coord = lease_back_to_kube_scheduler
    cfg = config("default-scheduler", LEASE, LEASE_NS)
    with local_scheduler("loss", cfg, str(kind_cluster.kubeconfig_path), "--leader-elect-takeover") as s:
        s.wait_ready()
        poll(
            lambda: ours(holder(coord)),
            30,
            "our process holding the Lease",
            interval=0.5,
            retry_on=(ApiException,),
        )
        lease = coord.read_namespaced_lease(LEASE, LEASE_NS)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lease.spec.holder_identity = "intruder_0"
        lease.spec.lease_duration_seconds = 60
        lease.spec.renew_time = now
        lease.spec.acquire_time = now
        lease.metadata.annotations = {}
        coord.replace_namespaced_lease(LEASE, LEASE_NS, lease)
        taken = time.monotonic()
        code = s.wait_exit(30)
        assert code == 1, s.tail()
        assert "Leaderelection lost" in s.log.read_text()
        record("local-lease", "loss_exit_after_lease_taken_s", time.monotonic() - taken)
