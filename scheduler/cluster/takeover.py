"""Our rules on top of client-go's election: taking the Lease over, and giving it back.

**Takeover** (``LeaderElectionConfig.takeover``). To replace a running Go
kube-scheduler (or any foreign holder) without waiting for its lease to lapse,
we take the Lease at once (a replace guarded by its resourceVersion) when a
*foreign* holder has it, and only then wait before reporting leadership, until
the old holder must have stopped. Whose holder is foreign is decided by the
holder annotation (``scheduler.cluster.leases.annotated_as_ours``) unless the
config names another test. A lease taken from us while we lead is lost, never
taken back: takeover applies only while acquiring at start.

*The safe wait* (:func:`safe_wait`). A client-go leader whose renewal at ``t0``
succeeded (its last one, since ours changed the resourceVersion at
``T >= t0``) starts its next round at ``t0 + R`` and gives up at
``t0 + R + D`` (R = its retryPeriod, D = its renewDeadline), calling
OnStoppedLeading: kube-scheduler exits. We cannot read R and D off the Lease,
but client-go's own safety rests on ``R + D <= L`` (``L`` =
``leaseDurationSeconds`` it wrote: a standby takes the lease ``L`` after its
last change), and we also assume the peer uses no longer timings than ours.
So we report leading after

    wait = max(L_old, renew_deadline + retry_period) + retry_period

from our successful takeover; the final ``retry_period`` covers the latency of
the old leader's last renew response and its exit. Defaults (15/10/2 s): 17 s.
During the wait we hold and renew the lease; losing it then is a loss. Set
``takeover_wait`` to override.

*Giving it back.* ``dynamic-scheduler restore lease`` annotates the Lease
``dynamic-scheduler.io/restoring`` before it stops our replicas, and removes
the annotation once kube-scheduler holds the Lease again. Meanwhile no
takeover happens (:func:`refusal`): a replica not yet stopped would otherwise
take the Lease from kube-scheduler the moment kube-scheduler had it back, and
kube-scheduler would exit (into a restart back-off of up to 5 minutes). A free
or expired Lease is still acquired as usual; the replica gives it up when it
stops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scheduler.cluster.leases import being_restored
from scheduler.logs import V


def safe_wait(
    old_lease_duration: float, *, renew_deadline: float, retry_period: float, override: float | None = None
) -> float:
    """Seconds from a takeover until the old holder must have stopped (see the module docstring)."""
    if override is not None:
        return override
    return max(old_lease_duration, renew_deadline + retry_period) + retry_period


def refusal(
    lease: dict[str, Any], *, enabled: bool, acquiring: bool, is_ours: Callable[[dict[str, Any]], bool]
) -> tuple[int, str] | None:
    """Why a valid Lease held by another may not be taken now, as (log level, message); None
    when it may be taken over."""
    if not (enabled and acquiring and not is_ours(lease)):
        return V(4), "Lease is held and has not yet expired"
    if being_restored(lease):
        return V(2), "Lease is being given back to its holder (restore); not taking it over"
    return None
