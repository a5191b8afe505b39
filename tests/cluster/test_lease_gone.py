"""The Lease deleted or handed to another holder under a leader, against a real API server.

A leader stops the moment it learns that the Lease is no longer its own, from its watch or
from a renewal, and never creates it again (client-go goes on leading until its renew
deadline passes, and creates a deleted Lease anew). A replica that creates a Lease it saw
held waits, before leading, for as long as the holder it saw may go on leading.

The leaders here renew every 5 s (R), with a renew deadline of 15 s: learning within R/2 of
the change can only be the watch's doing, and the renewal's within a few R, not D.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from scheduler.cluster.client import api_request
from scheduler.cluster.leaderelection import LeaderElectionConfig, LeaderElector
from scheduler.cluster.leases import LEADING_ANNOTATION
from scheduler.polling import poll
from tests.cluster.test_leaderelection import Calls, gauge, read_lease

pytestmark = pytest.mark.apiserver

LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
SLOW = {"lease_duration": 20.0, "renew_deadline": 15.0, "retry_period": 5.0}


@pytest.fixture
def lease(admin) -> str:
    """A released Lease (no holder): the first candidate takes it at once, with no wait."""
    name = f"lease-{uuid.uuid4().hex[:8]}"
    api_request(
        admin,
        "POST",
        LEASES,
        body={"metadata": {"name": name}, "spec": {"holderIdentity": "", "leaseDurationSeconds": 1}},
    )
    return name


def leader(admin, lease: str, calls: Calls, **cfg: Any) -> LeaderElector:
    """An elector of ours leading ``lease`` and done with its first renewal (the one that says
    it leads): its next renewal is a whole retry period away."""
    config = LeaderElectionConfig(namespace="default", name=lease, **{**SLOW, **cfg})
    e = LeaderElector(admin, config, gauge=gauge(), **calls.kw()).start()
    assert e.leading.wait(10)
    poll(
        lambda: LEADING_ANNOTATION in read_lease(admin, lease)["metadata"].get("annotations", {}),
        10,
        "the leader's announcing renewal",
    )
    return e


def absent(admin, lease: str) -> bool:
    try:
        read_lease(admin, lease)
    except Exception as e:  # noqa: BLE001 - ApiException
        return getattr(e, "status", None) == 404
    return False


def give_to_another(admin, lease: str) -> None:
    """The Lease edited by hand to name another holder."""
    got = read_lease(admin, lease)
    got["spec"]["holderIdentity"] = "someone-else"
    api_request(admin, "PUT", f"{LEASES}/{lease}", body=got)


def test_a_watching_leader_stops_the_moment_its_lease_is_deleted(admin, lease: str) -> None:
    calls = Calls()
    e = leader(admin, lease, calls)
    try:
        api_request(admin, "DELETE", f"{LEASES}/{lease}")
        deleted = time.monotonic()
        assert e.lost.wait(SLOW["renew_deadline"] + 5), "the leader never noticed"
        took = time.monotonic() - deleted
        assert took < SLOW["retry_period"] / 2, f"{took:.2f}s: not from the watch"
        assert not e.leading.is_set() and calls.stopped.wait(2)
        assert e.done.wait(5)
        assert absent(admin, lease), "the old leader created the Lease again"
    finally:
        e.stop(release=False)


def test_a_watching_leader_stops_the_moment_its_lease_names_another(admin, lease: str) -> None:
    calls = Calls()
    e = leader(admin, lease, calls)
    try:
        give_to_another(admin, lease)
        edited = time.monotonic()
        assert e.lost.wait(SLOW["renew_deadline"] + 5), "the leader never noticed"
        took = time.monotonic() - edited
        assert took < SLOW["retry_period"] / 2, f"{took:.2f}s: not from the watch"
        assert calls.stopped.wait(2) and e.done.wait(5)
        assert read_lease(admin, lease)["spec"]["holderIdentity"] == "someone-else"
    finally:
        e.stop(release=False)


@pytest.mark.parametrize("change", ["deleted", "another holder"])
def test_without_its_watch_the_next_renewal_stops_it(admin, lease: str, change: str) -> None:
    calls = Calls()
    e = leader(admin, lease, calls, watch=False)
    try:
        if change == "deleted":
            api_request(admin, "DELETE", f"{LEASES}/{lease}")
        else:
            give_to_another(admin, lease)
        changed = time.monotonic()
        assert e.lost.wait(SLOW["renew_deadline"] + 5), "the leader never noticed"
        took = time.monotonic() - changed
        assert took <= SLOW["retry_period"] + 1, f"{took:.2f}s: not at the next renewal"
        assert calls.stopped.wait(2) and e.done.wait(5)
        if change == "deleted":
            assert absent(admin, lease), "the old leader created the Lease again"
        else:
            assert read_lease(admin, lease)["spec"]["holderIdentity"] == "someone-else"
    finally:
        e.stop(release=False)


def test_a_standby_that_creates_a_deleted_lease_waits_until_its_holder_must_have_stopped(
    admin, lease: str
) -> None:
    """The holder it saw could be kube-scheduler, which goes on leading until its renew deadline:
    the standby holds the Lease at once, and leads only after the takeover's safe wait."""
    fast = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.25}
    a = leader(admin, lease, Calls(), **fast)
    b_calls = Calls()
    b = LeaderElector(
        admin, LeaderElectionConfig(namespace="default", name=lease, **fast), gauge=gauge(), **b_calls.kw()
    ).start()
    try:
        poll(lambda: b.leader() == a.identity, 5, "the standby to see the leader")
        wait = b.safe_takeover_wait(2.0)
        api_request(admin, "DELETE", f"{LEASES}/{lease}")
        deleted = time.monotonic()
        poll(lambda: b.is_leader(), 10, "the standby to create the Lease")
        assert not b.leading.is_set()
        spec = read_lease(admin, lease)
        assert spec["spec"]["holderIdentity"] == b.identity
        assert LEADING_ANNOTATION not in spec["metadata"]["annotations"]
        assert b.leading.wait(wait + 5)
        took = time.monotonic() - deleted
        assert took >= wait, f"led {took:.2f}s after the deletion, before the {wait:g}s wait"
        assert a.lost.is_set()
    finally:
        a.stop(release=False)
        b.stop()
