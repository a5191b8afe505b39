"""Sharing kube-system/kube-scheduler with the real Go kube-scheduler (v1.37, client-go's elector).

Both sides run with L/D/R = 2 s / 1.5 s / 0.25 s and authenticate as
system:kube-scheduler, so the built-in RBAC role is also what we need.
"""

from __future__ import annotations

import time

import pytest

from scheduler.cluster.client import ClientOptions, api_request, new_api_client
from scheduler.cluster.leaderelection import LeaderElectionConfig, LeaderElector
from scheduler.cluster.leases import HOLDER_ANNOTATION
from scheduler.polling import poll
from tests.apiserver import ControlPlane
from tests.cluster.test_leaderelection import D, L, R, gauge

pytestmark = pytest.mark.apiserver

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler"


def go_config() -> dict:
    return {
        "leaderElection": {
            "leaderElect": True,
            "resourceLock": "leases",
            "resourceName": "kube-scheduler",
            "resourceNamespace": "kube-system",
            "leaseDuration": f"{L}s",
            "renewDeadline": f"{D}s",
            "retryPeriod": f"{int(R * 1000)}ms",
        }
    }


def test_shares_the_lease_with_the_go_kube_scheduler(apiserver: ControlPlane, admin) -> None:
    if not apiserver.kube_scheduler.exists():
        pytest.fail("kube-scheduler binary missing: run make tools first")
    api = new_api_client(ClientOptions(kubeconfig=str(apiserver.kubeconfig_for("system:kube-scheduler"))))

    def ours(**kw) -> LeaderElector:
        return LeaderElector(
            api, LeaderElectionConfig(lease_duration=L, renew_deadline=D, retry_period=R, **kw), gauge=gauge()
        )

    def holder() -> str:
        return api_request(admin, "GET", LEASE)["spec"].get("holderIdentity") or ""

    first = ours().start()
    go = None
    second = None
    try:
        assert first.leading.wait(10)
        go = apiserver.start_kube_scheduler(go_config())
        # The Go scheduler competes but must see our lease as held: it does not acquire.
        assert go.wait_for_log("Attempting to acquire leader lease", 30), go.tail()
        # A whole lease duration and four of its retries, renewed all along: it never acquires.
        assert not go.wait_for_log("Successfully acquired lease", L + 4 * R), go.tail()
        assert go.alive() and holder() == first.identity, go.tail()

        # We release on stop; it takes the lease at its next (jittered) retry.
        first.stop(release=True)
        released = time.monotonic()
        go_id = poll(lambda: (h := holder()) and h != first.identity and h, 3, "the Go scheduler to acquire")
        assert time.monotonic() - released < 2.2 * R + 1.0
        assert go.wait_for_log("Successfully acquired lease", 5)
        lease = api_request(admin, "GET", LEASE)
        # client-go writes back the object it read: our annotation survives, with no identity of its holder.
        assert HOLDER_ANNOTATION in lease["metadata"]["annotations"]
        assert lease["metadata"]["annotations"][HOLDER_ANNOTATION] != go_id

        # Takeover: we take it back at once; the Go scheduler's renewals fail; it exits with
        # code 1 ("Leaderelection lost") before we start leading.
        second = ours(takeover=True).start()
        poll(lambda: second.takeovers == 1, 5, "the takeover")
        taken = time.monotonic()
        assert holder() == second.identity
        code = go.wait(R + D + 3)
        go_exit = time.monotonic() - taken
        assert code == 1, go.tail()
        assert "Leaderelection lost" in go.log.read_text()
        assert second.leading.wait(5)
        lead = time.monotonic() - taken
        assert go_exit < lead, (go_exit, lead)
        assert lead >= max(L, D + R) + R - 0.2
        assert api_request(admin, "GET", LEASE)["spec"]["leaseTransitions"] >= 2
    finally:
        first.stop(release=False)
        if second is not None:
            second.stop()
        if go is not None:
            go.stop()
