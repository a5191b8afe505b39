"""The health checks kube-scheduler registers on /healthz, /livez and /readyz.

A check is a callable returning ``None`` when healthy, or the reason it is not
(an exception counts as a failure too); the server runs them
(:meth:`scheduler.serving.SecureServer.add_check`). ``ping`` is built in.
kube-scheduler's set, which the application registers:

======================  ======================  ==================================
check                   endpoints               fails when
======================  ======================  ==================================
``leaderElection``      healthz, livez, readyz  leading, but the lease was last
                                                renewed over leaseDuration + 20 s
                                                ago (a wedged leader: restart it)
``shutdown``            readyz                  the process is shutting down
``sched-handler-sync``  readyz                  informer caches are not synced yet
======================  ======================  ==================================

**Standby replicas.** With leader election on, a replica waiting for the lease
is healthy, live and ready once its caches are synced, exactly as
kube-scheduler (its informers start before it campaigns; the watchdog passes
when not leading). This matters: if standbys stayed unready, a rolling update
of a two-replica Deployment would wait forever for the new pod, a standby
while the old pod holds the lease. An application that syncs caches only
after winning the lease must therefore make ``sched-handler-sync`` pass while
it waits for the lease.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Check = Callable[[], str | None]
"""``check()`` returns None when healthy, else the reason it is not."""


def ping() -> None:
    """Always healthy: the server answers."""
    return None


def leader_election_watchdog(
    is_leader: Callable[[], bool],
    last_renewed: Callable[[], float | None],
    lease_duration: float,
    lease_name: str,
    tolerance: float = 20.0,
    clock: Callable[[], float] = time.monotonic,
) -> Check:
    """client-go's leader-election WatchDog (kube-scheduler registers it as ``leaderElection``).

    Healthy while not leading. While leading, unhealthy once the last successful
    renewal (``last_renewed()``, on ``clock``) is more than ``lease_duration +
    tolerance`` seconds old: the lease has surely expired and the process should
    have stopped leading, so it is wedged and the kubelet should restart it.
    """
    limit = lease_duration + tolerance

    def check() -> str | None:
        if not is_leader():
            return None
        renewed = last_renewed()
        if renewed is None or clock() - renewed > limit:
            return f"failed election to renew leadership on lease {lease_name} (not renewed for {limit:g}s)"
        return None

    return check


def handler_sync_check(synced: Callable[[], bool]) -> Check:
    """kube-scheduler's ``sched-handler-sync``: ready once the informer caches are synced."""
    return lambda: None if synced() else "handlers are not fully synchronized"


def shutdown_check(stopping: Callable[[], bool]) -> Check:
    """The ``shutdown`` readiness check: not ready once shutting down (e.g. ``event.is_set``)."""
    return lambda: "process is shutting down" if stopping() else None
