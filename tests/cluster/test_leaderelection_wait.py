"""When a standby tries again, and how long one that creates a deleted Lease waits before
leading (no API server: the elector's clock is a fake one)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Gauge

from scheduler.cluster.leaderelection import EXPIRY_MARGIN, JITTER_FACTOR, LeaderElectionConfig, LeaderElector

L, R = 15.0, 2.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def standby() -> tuple[LeaderElector, Clock]:
    clock = Clock()
    gauge = Gauge("leader_election_master_status", "test", ["name"], registry=CollectorRegistry())
    cfg = LeaderElectionConfig(lease_duration=L, renew_deadline=10.0, retry_period=R)
    return LeaderElector(None, cfg, gauge=gauge, clock=clock), clock  # type: ignore[arg-type]


def lease(holder: str, duration: int = int(L)) -> dict:
    return {"spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": "x"}}


def jittered(wait: float) -> bool:
    return R <= wait <= R * (1 + JITTER_FACTOR)


def test_nothing_seen_yet_waits_the_jittered_retry_period(standby) -> None:
    e, _ = standby
    assert all(jittered(e._acquire_wait()) for _ in range(50))


def test_a_held_lease_far_from_expiry_waits_the_jittered_retry_period(standby) -> None:
    e, clock = standby
    e._observe(lease("leader_1"))
    clock.now += L - R * (1 + JITTER_FACTOR) - 0.1
    assert all(jittered(e._acquire_wait()) for _ in range(50))


def test_a_held_lease_about_to_expire_wakes_the_standby_at_its_expiry(standby) -> None:
    """client-go would sleep up to 2.2 retry periods past the expiry; the standby tries right then."""
    e, clock = standby
    e._observe(lease("leader_1"))
    clock.now += L - 0.5
    assert all(e._acquire_wait() == pytest.approx(0.5 + EXPIRY_MARGIN) for _ in range(50))
    clock.now += 0.5 + EXPIRY_MARGIN
    assert not e._lease_valid()  # what the next attempt checks: it may take the lease


def test_the_expiry_counts_from_when_the_record_last_changed(standby) -> None:
    e, clock = standby
    e._observe(lease("leader_1"))
    clock.now += L - 1
    e._observe(lease("leader_1"))  # the same record again: no renewal seen
    assert e._acquire_wait() == pytest.approx(1 + EXPIRY_MARGIN)
    renewed = lease("leader_1")
    renewed["spec"]["renewTime"] = "y"
    e._observe(renewed)  # a renewal: a full lease duration from now
    assert all(jittered(e._acquire_wait()) for _ in range(50))


@pytest.mark.parametrize("spec", [lease(""), lease("leader_1")])
def test_a_released_or_already_expired_lease_waits_the_jittered_retry_period(standby, spec) -> None:
    e, clock = standby
    e._observe(spec)
    if spec["spec"]["holderIdentity"]:
        clock.now += L + 1  # expired, but the attempt failed (say, a conflict): no busy loop
    assert all(jittered(e._acquire_wait()) for _ in range(50))


# --- creating a Lease found absent ---------------------------------------------------------


def safe(e: LeaderElector, duration: float = L) -> float:
    return e.safe_takeover_wait(duration)


def test_a_lease_never_seen_may_have_been_deleted_under_its_holder(standby) -> None:
    e, _ = standby
    assert e._created_wait() == safe(e) == 17.0  # kube-scheduler's defaults: max(15, 10 + 2) + 2


def test_a_lease_seen_held_waits_by_the_holders_duration(standby) -> None:
    e, clock = standby
    e._observe(lease("leader_1", duration=40))
    clock.now += 1
    assert e._created_wait() == safe(e, 40) == 42.0


def test_a_lease_seen_released_or_expired_needs_no_wait(standby) -> None:
    e, clock = standby
    e._observe(lease(""))
    assert e._created_wait() == 0.0
    e._observe(lease("leader_1"))
    clock.now += L - 0.1
    assert e._created_wait() == safe(e)  # still valid by our clock
    clock.now += 0.1
    assert e._created_wait() == 0.0  # expired by our clock: its holder has stopped
