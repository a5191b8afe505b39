"""scheduler.cluster.leaderelection against a real API server, with short timings.

L/D/R = 2 s / 1.5 s / 0.25 s (lease duration, renew deadline, retry period).
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from datetime import datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge

from scheduler.cluster.client import ClientOptions, api_request, new_api_client
from scheduler.cluster.leaderelection import LeaderElectionConfig, LeaderElector
from scheduler.cluster.leases import (
    HOLDER_ANNOTATION,
    LEADING_ANNOTATION,
    RESTORING_ANNOTATION,
    leading_since,
)
from scheduler.polling import poll
from tests.apiserver import ControlPlane
from tests.cluster.netproxy import TCPProxy

pytestmark = pytest.mark.apiserver

L, D, R = 2.0, 1.5, 0.25
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class Calls:
    def __init__(self) -> None:
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.leaders: list[str] = []

    def kw(self) -> dict[str, Any]:
        return {
            "on_started_leading": self.started.set,
            "on_stopped_leading": self.stopped.set,
            "on_new_leader": self.leaders.append,
        }


def wall(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def gauge() -> Gauge:
    return Gauge("leader_election_master_status", "test", ["name"], registry=CollectorRegistry())


def elector(api, lease: str, calls: Calls | None = None, g: Gauge | None = None, **cfg: Any) -> LeaderElector:
    config = LeaderElectionConfig(
        namespace="default", name=lease, lease_duration=L, renew_deadline=D, retry_period=R, **cfg
    )
    return LeaderElector(api, config, gauge=g or gauge(), **(calls.kw() if calls else {}))


def read_lease(admin, name: str) -> dict[str, Any]:
    return api_request(admin, "GET", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{name}")


@pytest.fixture
def lease() -> str:
    return f"lease-{uuid.uuid4().hex[:8]}"


def test_acquires_an_absent_lease_and_writes_client_go_fields(admin, lease: str) -> None:
    calls, g = Calls(), gauge()
    e = elector(admin, lease, calls, g).start()
    try:
        assert e.leading.wait(5) and calls.started.wait(2)
        spec = read_lease(admin, lease)["spec"]
        assert spec["holderIdentity"] == e.identity and re.match(r"^.+_[0-9a-f-]{36}$", e.identity)
        assert spec["leaseDurationSeconds"] == 2 and spec["leaseTransitions"] == 0
        assert MICRO.match(spec["acquireTime"]) and MICRO.match(spec["renewTime"])
        assert read_lease(admin, lease)["metadata"]["annotations"][HOLDER_ANNOTATION] == e.identity
        # Written by the renew right after leading starts (a moment after `leading` is set).
        since = poll(lambda: leading_since(read_lease(admin, lease)), 2, "the leading-since annotation")
        assert MICRO.match(since)
        assert g.labels(lease)._value.get() == 1
        poll(lambda: e.identity in calls.leaders, 2, "on_new_leader(us)")
        first = spec["renewTime"]
        poll(lambda: read_lease(admin, lease)["spec"]["renewTime"] != first, 2, "a renewal")
        assert read_lease(admin, lease)["spec"]["acquireTime"] == spec["acquireTime"]
    finally:
        e.stop()
    assert calls.stopped.is_set() and not e.lost.is_set() and g.labels(lease)._value.get() == 0


def test_standby_waits_then_acquires_quickly_after_release(admin, lease: str) -> None:
    a = elector(admin, lease).start()
    assert a.leading.wait(5)
    b_calls = Calls()
    b = elector(admin, lease, b_calls).start()
    try:
        # b must not take a lease renewed under its eyes, however long it watches (> L).
        poll(lambda: a.identity in b_calls.leaders, 3, "b to observe a")
        assert not b.leading.wait(L + 4 * R)
        released = time.monotonic()
        a.stop(release=True)
        spec = None
        assert b.leading.wait(3)
        took = time.monotonic() - released
        assert took <= 2.2 * R + 0.5, took  # its next jittered retry, not the lease duration
        spec = read_lease(admin, lease)["spec"]
        assert spec["holderIdentity"] == b.identity and spec["leaseTransitions"] == 1
    finally:
        a.stop(release=False)
        b.stop()


def test_release_writes_an_empty_holder_with_one_second(admin, lease: str) -> None:
    a = elector(admin, lease).start()
    assert a.leading.wait(5)
    a.stop(release=True)
    got = read_lease(admin, lease)
    assert got["spec"]["holderIdentity"] == "" and got["spec"]["leaseDurationSeconds"] == 1
    assert got["spec"]["leaseTransitions"] == 0
    assert LEADING_ANNOTATION not in got["metadata"]["annotations"]


def test_takes_over_an_abandoned_lease_after_it_expires_by_its_own_clock(admin, lease: str) -> None:
    a = elector(admin, lease).start()
    assert a.leading.wait(5)
    b = elector(admin, lease).start()
    try:
        poll(lambda: b.leader() == a.identity, 3, "b to observe a")
        a.stop(release=False)  # a dies: no release, no more renewals
        died = time.monotonic()
        assert b.leading.wait(L + 3)
        took = time.monotonic() - died
        assert L - R <= took <= L + 2.2 * R + 0.5, took
        assert read_lease(admin, lease)["spec"]["leaseTransitions"] == 1
    finally:
        b.stop()


def test_renew_failure_past_the_deadline_signals_loss(apiserver: ControlPlane, admin, lease: str) -> None:
    proxy = TCPProxy(apiserver.port)
    api = new_api_client(
        ClientOptions(
            kubeconfig=str(apiserver.kubeconfig_for("admin", ("system:masters",), server=proxy.url))
        )
    )
    calls, g = Calls(), gauge()
    e = elector(api, lease, calls, g).start()
    try:
        assert e.leading.wait(5)
        proxy.partition("refuse")
        cut = time.monotonic()
        assert e.lost.wait(D + R + 2)
        took = time.monotonic() - cut
        assert D - 0.1 <= took <= D + R + 0.5, took
        assert not e.leading.is_set() and g.labels(lease)._value.get() == 0
        assert calls.stopped.wait(2)
        assert e.done.wait(1)  # the loop ended: no silent re-acquire
    finally:
        e.stop(release=False)
        proxy.close()


def test_takeover_from_a_foreign_holder_waits_until_it_must_have_stopped(admin, lease: str) -> None:
    """The old holder runs client-go's loop (ours, here counted as foreign): after the takeover
    its renewals fail and it gives up within R + D, before the new holder starts leading."""
    old = elector(admin, lease).start()
    assert old.leading.wait(5)
    new = elector(admin, lease, takeover=True, is_ours=lambda _lease: False).start()
    try:
        poll(lambda: new.takeovers == 1, 3, "the takeover")
        taken = time.monotonic()
        got = read_lease(admin, lease)
        spec = got["spec"]
        assert spec["holderIdentity"] == new.identity and spec["leaseTransitions"] == 1
        assert not new.leading.is_set()
        # The old holder's "leading since" went with the takeover: the new one waits.
        assert LEADING_ANNOTATION not in got["metadata"]["annotations"] and leading_since(got) is None
        assert old.lost.wait(R + D + 1)
        lost_after = time.monotonic() - taken
        assert new.leading.wait(5)
        lead_after = time.monotonic() - taken
        wait = max(L, D + R) + R
        assert lead_after >= wait - 0.2 and lost_after < lead_after, (lost_after, lead_after)
        assert new.safe_takeover_wait(L) == pytest.approx(wait)

        # Written by the renew right after leading started, not one retry period later: that
        # renew's renewTime (taken before its write) follows the leading time by far less than R.
        def announced() -> dict[str, Any] | None:
            got = read_lease(admin, lease)
            return got if leading_since(got) else None

        got = poll(announced, 2, "the leading-since annotation")
        since = leading_since(got)
        assert since is not None and MICRO.match(since)
        assert wall(got["spec"]["renewTime"]) - wall(since) < R / 2, (since, got["spec"]["renewTime"])
    finally:
        old.stop(release=False)
        new.stop()


def test_takeover_leaves_a_lease_held_by_one_of_ours(admin, lease: str) -> None:
    ours = elector(admin, lease).start()
    assert ours.leading.wait(5)
    other = elector(admin, lease, takeover=True).start()  # default test: our annotation
    try:
        poll(lambda: other.leader() == ours.identity, 3, "observation")
        # A whole lease duration and four of its retries, renewed all along: no takeover.
        assert not other.leading.wait(L + 4 * R)
        assert other.takeovers == 0 and read_lease(admin, lease)["spec"]["holderIdentity"] == ours.identity
    finally:
        ours.stop(release=False)
        other.stop(release=False)


def test_no_takeover_while_a_restore_gives_the_lease_back(admin, lease: str) -> None:
    """``restore lease`` marks the Lease: a replica of ours still starting must not take it from
    kube-scheduler (here a candidate counted as foreign); once unmarked, takeover works again."""
    kube_scheduler = elector(admin, lease).start()
    assert kube_scheduler.leading.wait(5)
    path = f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{lease}"

    def annotate(value: str | None) -> None:
        body = {"metadata": {"annotations": {RESTORING_ANNOTATION: value}}}
        api_request(admin, "PATCH", path, body=body, content_type="application/merge-patch+json")

    annotate("true")
    ours = elector(admin, lease, takeover=True, is_ours=lambda _lease: False).start()
    try:
        poll(lambda: ours.leader() == kube_scheduler.identity, 3, "observation")
        # A whole lease duration and four of its retries with the mark on: no takeover.
        assert not ours.leading.wait(L + 4 * R)
        assert ours.takeovers == 0 and not kube_scheduler.lost.is_set()
        assert read_lease(admin, lease)["spec"]["holderIdentity"] == kube_scheduler.identity
        annotate(None)
        poll(lambda: ours.takeovers == 1, 3, "the takeover once the mark is gone")
        assert kube_scheduler.lost.wait(R + D + 1)
    finally:
        kube_scheduler.stop(release=False)
        ours.stop()


def test_takeover_is_for_acquiring_only_a_lease_taken_while_leading_is_lost(admin, lease: str) -> None:
    """Two takeover-mode candidates foreign to each other: the one that led and lost the
    lease must give up (as kube-scheduler exits), not take it back and flap."""
    first = elector(admin, lease, takeover=True, is_ours=lambda _lease: False).start()
    assert first.leading.wait(5)
    second = elector(admin, lease, takeover=True, is_ours=lambda _lease: False).start()
    try:
        poll(lambda: second.takeovers == 1, 3, "the takeover")
        assert first.lost.wait(R + D + 1), "the old leader must lose the lease"
        assert first.takeovers == 0
        assert second.leading.wait(max(L, D + R) + R + 2)
        assert read_lease(admin, lease)["spec"]["holderIdentity"] == second.identity
    finally:
        first.stop(release=False)
        second.stop()


def slow_standby(admin, lease: str, calls: Calls | None = None) -> LeaderElector:
    """A standby whose polls are 1-2.2 s apart (R = 1 s), to tell watching from polling."""
    config = LeaderElectionConfig(
        namespace="default", name=lease, lease_duration=L, renew_deadline=D, retry_period=1.0
    )
    return LeaderElector(admin, config, gauge=gauge(), **(calls.kw() if calls else {}))


def test_a_watching_standby_takes_a_dead_leaders_lease_when_it_expires(admin, lease: str) -> None:
    """Its expiry counts from the last renewal as written, not from the poll that saw it
    (a standby polling every 1-2.2 s would take up to L + 2.2 s)."""
    a = elector(admin, lease).start()
    assert a.leading.wait(5)
    b = slow_standby(admin, lease).start()
    try:
        poll(lambda: b.leader() == a.identity, 3, "b to observe a")
        a.stop(release=False)  # a dies: no release, no more renewals
        died = time.monotonic()
        assert b.leading.wait(L + 3)
        took = time.monotonic() - died
        assert L - R - 0.1 <= took <= L + 0.3, took
    finally:
        b.stop()


def test_a_watching_standby_takes_a_released_lease_at_once(admin, lease: str) -> None:
    a = elector(admin, lease).start()
    assert a.leading.wait(5)
    b_calls = Calls()
    b = slow_standby(admin, lease, b_calls).start()
    try:
        # Reported after b's first attempt, as it goes to sleep for its retry period (1-2.2 s).
        poll(lambda: a.identity in b_calls.leaders, 3, "b's first attempt to see a")
        a.stop(release=True)
        released = time.monotonic()
        assert b.leading.wait(3)
        assert time.monotonic() - released <= 0.3
    finally:
        b.stop()
