"""The health checks and the answers of /healthz, /livez and /readyz.

A check is a callable returning ``None`` when healthy, or the reason it is not
(an exception counts as a failure too). :class:`HealthChecks` keeps the checks
of each endpoint, ``ping`` first, and answers as k8s.io/apiserver's healthz
handlers do:

- ``/<endpoint>`` runs its checks and answers ``200 ok``. With ``?verbose``
  the body lists every check, ``[+]ping ok`` ... ``healthz check passed``;
  ``?exclude=<name>`` skips a check. If one fails the answer is ``500`` with
  the list, the failed check as ``[-]<name> failed: <reason>``, and
  ``<endpoint> check failed``. Upstream withholds the reason on the aggregate
  endpoint ("reason withheld"); ours are plain status texts, so we show them.
- ``/<endpoint>/<check>`` runs one check: ``ok``, or
  ``500 internal server error: <reason>``.

The checks the application registers:

======================  ==============  ==================================
check                   endpoints       fails when
======================  ==============  ==================================
``leaderElection``      healthz,        leading, but the lease was last
                        readyz          renewed over leaseDuration + 20 s
                                        ago (a wedged leader: restart it);
                                        the leader elector's own check, on
                                        kube-scheduler's endpoints
``shutdown``            readyz          the process is shutting down
``sched-handler-sync``  readyz          informer caches are not synced yet
======================  ==============  ==================================

**Standby replicas.** With leader election on, a replica waiting for the lease
is healthy, live and ready once its caches are synced, exactly as
kube-scheduler (its informers start before it campaigns; the leader-election
check passes when not leading). This matters: if standbys stayed unready, a
rolling update of a two-replica Deployment would wait forever for the new pod,
a standby while the old pod holds the lease. An application that syncs caches
only after winning the lease must therefore make ``sched-handler-sync`` pass
while it waits for the lease.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from urllib.parse import parse_qs

from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

HEALTHZ, LIVEZ, READYZ = "healthz", "livez", "readyz"
ALL_ENDPOINTS = (HEALTHZ, LIVEZ, READYZ)

Check = Callable[[], str | None]
"""``check()`` returns None when healthy, else the reason it is not."""

_OK = "200 OK"
_FAILED = "500 Internal Server Error"
_NOT_FOUND = "404 Not Found"


def ping() -> None:
    """Always healthy: the server answers."""
    return None


def handler_sync_check(synced: Callable[[], bool]) -> Check:
    """kube-scheduler's ``sched-handler-sync``: ready once the informer caches are synced."""
    return lambda: None if synced() else "handlers are not fully synchronized"


def shutdown_check(stopping: Callable[[], bool]) -> Check:
    """The ``shutdown`` readiness check: not ready once shutting down (e.g. ``event.is_set``)."""
    return lambda: "process is shutting down" if stopping() else None


class HealthChecks:
    """The checks of each endpoint, in the order added (``ping`` first), and their answers."""

    def __init__(self) -> None:
        self._checks: dict[str, tuple[tuple[str, Check], ...]] = {e: (("ping", ping),) for e in ALL_ENDPOINTS}
        self._lock = threading.Lock()

    def add(self, name: str, check: Check, endpoints: Iterable[str] = ALL_ENDPOINTS) -> None:
        """Run ``check`` for each of ``endpoints`` (healthz, livez, readyz), after those added before."""
        endpoints = tuple(endpoints)
        if not name or "/" in name:
            raise ValueError(f"invalid check name {name!r}")
        with self._lock:
            for e in endpoints:
                if e not in self._checks:
                    raise ValueError(f"unknown endpoint {e!r}; known: {', '.join(ALL_ENDPOINTS)}")
                if any(n == name for n, _ in self._checks[e]):
                    raise ValueError(f"check {name!r} is already registered for /{e}")
            for e in endpoints:
                self._checks[e] = (*self._checks[e], (name, check))

    def answer(self, path: str, query: str) -> tuple[str, bytes]:
        """The status line and the plain-text body for ``path`` (``404`` when it is no
        endpoint or check) and its query string (see the module docstring)."""
        endpoint, sub, name = path[1:].partition("/")
        checks = self._checks.get(endpoint) if path.startswith("/") else None
        if checks is None or (sub and name not in dict(checks)):
            return _NOT_FOUND, b"404 page not found\n"
        if name:
            reason = _run(dict(checks)[name])
            if reason is None:
                return _OK, b"ok"
            logger.log(V(2), "Health check failed", extra=kv(check=name, endpoint=endpoint, reason=reason))
            return _FAILED, f"internal server error: {reason}\n".encode()

        params = parse_qs(query, keep_blank_values=True)
        excluded = set(params.get("exclude", ()))
        lines, failed = [], []
        for check_name, check in checks:
            if check_name in excluded:
                excluded.discard(check_name)
                lines.append(f"[+]{check_name} excluded: ok")
                continue
            reason = _run(check)
            if reason is None:
                lines.append(f"[+]{check_name} ok")
            else:
                lines.append(f"[-]{check_name} failed: {reason}")
                failed.append(f"{check_name}: {reason}")
        if excluded:
            quoted = ",".join(f'"{n}"' for n in sorted(excluded))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
        if failed:
            logger.log(V(2), "Health check failed", extra=kv(endpoint=endpoint, failed="; ".join(failed)))
            return _FAILED, ("\n".join([*lines, f"{endpoint} check failed"]) + "\n").encode()
        if "verbose" not in params:
            return _OK, b"ok"
        return _OK, ("\n".join([*lines, f"{endpoint} check passed"]) + "\n").encode()


def _run(check: Check) -> str | None:
    try:
        reason = check()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None if reason is None else str(reason)
