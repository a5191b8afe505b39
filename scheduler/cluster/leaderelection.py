"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Ours and the Go kube-scheduler can share ``kube-system/kube-scheduler``, so the
loop follows client-go ``tools/leaderelection`` step by step:

- identity ``<hostname>_<uuid4>``; the Lease spec carries ``holderIdentity``,
  ``leaseDurationSeconds``, ``acquireTime``/``renewTime`` (MicroTime, RFC 3339
  with microseconds, ``Z``) and ``leaseTransitions`` (+1 when the holder changes);
- a lease held by another is taken only once it has expired by *our own
  clock*: we note when we last saw the record change and wait
  ``leaseDurationSeconds`` from then (``renewTime`` written by another clock
  is never compared with ours);
- acquiring retries every ``retry_period`` with client-go's jitter (factor 1.2,
  so every 1x..2.2x ``retry_period``), except that a standby never sleeps past
  the moment the lease it saw expires by its own clock: it tries right then.
  client-go tries up to a jittered period later, so a dead leader's lease was
  taken up to ``lease_duration + 2 x 2.2 x retry_period`` after its last
  renewal (one period to see the renewal, one after the expiry); this way at
  most ``lease_duration + 2.2 x retry_period``. A standby that may also
  list and watch the lease (``watch``) sees every change as it is written:
  the expiry then counts from the renewal itself, and a release or deletion
  wakes it at once, so a dead leader's lease is taken ``lease_duration`` after
  its last renewal and a released one within a request's time, before any
  polling candidate (kube-scheduler) can; without that permission it polls
  only; while leading, renew every
  ``retry_period``; a renewal round that finds no success within
  ``renew_deadline`` loses the lease: :attr:`LeaderElector.lost` is set,
  ``on_stopped_leading`` is called and the loop ends (kube-scheduler then exits
  with code 1; the app decides). Every request of a round is cut at the round's
  deadline;
- ours, not client-go's: a holder stops leading the moment it learns that the
  Lease is no longer its own (deleted, or naming another holder), from a
  renewal or from its watch of the Lease (kept while leading; a GET confirms
  what the watch says), and never creates it again: :attr:`lost` is set and
  ``on_stopped_leading`` called at once. client-go goes on leading until its
  renew deadline passes, and creates a deleted Lease anew, so two leaders
  overlapped for seconds;
- ours too: a candidate that creates an absent Lease leads only after the
  takeover's safe wait (``scheduler.cluster.takeover``), unless what it last
  saw of the Lease proves its holder stopped (released, or expired by our
  clock): the holder of a deleted Lease, ours or kube-scheduler, may still be
  leading until its renew deadline passes, and one never seen may have been
  deleted just before we looked;
- every write is a replace guarded by the resourceVersion we read (a 409 means
  someone else wrote: read again);
- :meth:`LeaderElector.stop` with ``release=True`` writes an empty holder and
  ``leaseDurationSeconds: 1`` (client-go's ReleaseOnCancel), guarded by the
  resourceVersion of a fresh read and only if the lease still names us, so a
  standby takes over within a retry period or two.

Why not ``kubernetes.leaderelection``: 36.x has only a ConfigMap lock (on the
global default client), sleeps a fixed period, neither releases nor reports
loss in a way the app can act on.

Our additions live beside this module: the Lease object and its annotations
(``scheduler.cluster.leases``: whose holder is ours, when ours started
leading) and the rules for taking a Lease from a foreign holder and giving it
back (``scheduler.cluster.takeover``). The elector itself is client-go's one
state machine, whose loops share the record it last observed: it is kept whole
in this module.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from prometheus_client import Gauge

from scheduler.cluster import takeover
from scheduler.cluster.informers import Informer
from scheduler.cluster.leases import LeaseClient, annotated_as_ours, micro_time, watch_lease, with_spec
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
EXPIRY_MARGIN = 0.01
"""A standby wakes this long after the lease it saw expires (the test is a strict ``>``)."""

_default_gauge: Gauge | None = None
_gauge_lock = threading.Lock()


def default_gauge() -> Gauge:
    """``leader_election_master_status{name}`` on the default registry, made once."""
    global _default_gauge
    with _gauge_lock:
        if _default_gauge is None:
            _default_gauge = Gauge(
                "leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
                "backup, 1 indicates master. 'name' is the string used to identify the lease.",
                ["name"],
            )
        return _default_gauge


def default_identity() -> str:
    """``<hostname>_<uuid4>``, as kube-scheduler's."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass
class LeaderElectionConfig:
    namespace: str = "kube-system"
    name: str = "kube-scheduler"
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True
    takeover: bool = False
    """Take the lease from a foreign holder at once, then wait (``scheduler.cluster.takeover``)."""
    takeover_wait: float | None = None
    """Seconds between a takeover and leading; None computes the safe wait."""
    is_ours: Callable[[dict[str, Any]], bool] = annotated_as_ours
    """Whether a lease's holder is one of our schedulers (only takeover uses it)."""
    request_timeout: float = 10.0
    """Per-request timeout while acquiring (renewals are cut at their round's deadline)."""
    watch: bool = True
    """Watch the lease too, standing by and holding it (needs list and watch on it; else polls only)."""

    def validate(self) -> None:
        # client-go's NewLeaderElector checks.
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError("renew_deadline must be greater than retry_period*1.2")
        if self.retry_period <= 0 or int(self.lease_duration) < 1:
            raise ValueError("retry_period must be positive and lease_duration at least 1s")
        if not self.identity:
            raise ValueError("identity must not be empty")


class LeaderElector:
    """Runs the election loop on its own thread (:meth:`start`) or the caller's (:meth:`run`).

    Callbacks: ``on_started_leading()`` (on a new thread, as client-go's
    goroutine), ``on_stopped_leading()`` (on the elector's thread, once, after
    leading ended), ``on_new_leader(identity)`` (on a new thread, when the
    observed holder changes, ours included). Signals for the app:
    :attr:`leading` (set while leading), :attr:`lost` (leadership was lost:
    exit with code 1), :attr:`done` (the loop ended).
    """

    def __init__(
        self,
        api_client: ApiClient,
        config: LeaderElectionConfig | None = None,
        *,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        gauge: Gauge | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or LeaderElectionConfig()
        self.config.validate()
        self.api = api_client
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.gauge = (gauge or default_gauge()).labels(self.config.name)
        self.gauge.set(0)
        self.clock = clock
        self.leading = threading.Event()
        self.lost = threading.Event()
        self.done = threading.Event()
        self._stop = threading.Event()
        self._wake = threading.Event()  # the acquire loop's sleep: set by stop() and by a freed lease
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._lease: dict[str, Any] | None = None  # the last object read or written (with its RV)
        self._observed: dict[str, Any] = {}  # the last spec seen
        self._observed_raw = ""
        self._observed_time = 0.0
        self._reported_leader: str | None = None
        self._lead_at: float | None = None  # when to start leading after a takeover
        self._leading_since: str | None = None  # LEADING_ANNOTATION's value, once leading
        self._announced = False  # the Lease written carries it
        self._acquiring = False  # takeover is for acquiring at start only, never once we have led
        self._holding = False  # acquired: from now on the Lease must stay ours, or we have lost it
        self._end_lock = threading.Lock()  # one end of leading: a loss or a stop, whichever first
        self.takeovers = 0
        self.leases = LeaseClient(api_client, self.config.namespace, self.config.name)

    # --- public API ------------------------------------------------------------------

    @property
    def identity(self) -> str:
        return self.config.identity

    def start(self) -> LeaderElector:
        self._thread = threading.Thread(target=self.run, name="leader-election", daemon=True)
        self._thread.start()
        return self

    def stop(self, release: bool | None = None, timeout: float | None = None) -> None:
        """End the loop; release the lease if we hold it (``release_on_cancel`` unless given).

        Returns after the loop ended and the release was written (or ``timeout``)."""
        with self._end_lock:
            self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(
                self.config.renew_deadline + self.config.request_timeout if timeout is None else timeout
            )
        if self.config.release_on_cancel if release is None else release:
            self.release()

    def leader(self) -> str:
        """The holder we last observed ("" when none)."""
        with self._lock:
            return self._observed.get("holderIdentity") or ""

    def is_leader(self) -> bool:
        """We hold the lease by our last observation (also during a takeover's wait)."""
        return self.leader() == self.identity

    def check(self, max_tolerable_expired: float = 20.0) -> str | None:
        """client-go's healthz watchdog: an error when we believe we lead but have not renewed
        for ``lease_duration + max_tolerable_expired`` seconds."""
        if not self.is_leader():
            return None
        with self._lock:
            since = self.clock() - self._observed_time
        if since > self.config.lease_duration + max_tolerable_expired:
            return f"failed election to renew leadership on lease {self.config.name}"
        return None

    def safe_takeover_wait(self, old_lease_duration: float) -> float:
        c = self.config
        return takeover.safe_wait(
            old_lease_duration,
            renew_deadline=c.renew_deadline,
            retry_period=c.retry_period,
            override=c.takeover_wait,
        )

    def run(self) -> None:
        """The election loop; returns when stopped or when leadership was lost."""
        watcher = self._watch_lease() if self.config.watch else None
        if watcher is not None and not watcher.wait_for_sync(self.config.request_timeout):
            # its first list is still to come: a change before it (the Lease deleted just after
            # we took it) would then reach us only through the next renewal
            logger.info("Lease watch not synced yet; acquiring anyway", extra=kv(lock=self._describe()))
        try:
            logger.info(
                "Attempting to acquire leader lease", extra=kv(lock=self._describe(), identity=self.identity)
            )
            if self._acquire():
                self._holding = True
                self._renew_loop()
        finally:
            self._end_leading()
            if watcher is not None:
                watcher.stop(timeout=1.0)
            self.done.set()

    def _end_leading(self) -> None:
        """Leading is over (stopped): ``on_stopped_leading`` once, on this thread."""
        with self._end_lock:
            was = self.leading.is_set()
            self.leading.clear()
        if was:
            self.gauge.set(0)
            self._callback(self.on_stopped_leading, "on_stopped_leading")

    def _lose(self, why: str, **context: Any) -> None:
        """The Lease is no longer ours: stop leading at this moment, write nothing more.

        client-go keeps leading until its renew deadline passes, even once it has read that the
        Lease is gone or names another holder; a standby may lead by then. We stop the moment
        we learn it, from a renewal or from the watch (after a GET confirms what it said).
        :attr:`lost` is set before ``on_stopped_leading`` is called."""
        with self._end_lock:
            if self._stop.is_set():
                return  # stopped (a shutdown, or a loss already): not a loss now
            self._stop.set()
            was = self.leading.is_set()
            self.leading.clear()
        self.gauge.set(0)
        self.lost.set()
        self._wake.set()
        logger.error(
            f"Leader election lost: {why}",
            extra=kv(lock=self._describe(), identity=self.identity, **context),
        )
        if was:
            self._callback(self.on_stopped_leading, "on_stopped_leading")

    def release(self) -> bool:
        """Write an empty holder with ``leaseDurationSeconds: 1`` if the lease names us."""
        deadline = self.clock() + self.config.renew_deadline
        while self.clock() < deadline:
            try:
                lease = self.leases.get(timeout=max(0.1, deadline - self.clock()))
            except ApiException as e:
                if e.status == 404:
                    return True
                logger.warning(
                    "Failed to read lease for release", extra=kv(lock=self._describe(), code=e.status)
                )
                return False
            except Exception as e:  # noqa: BLE001
                logger.warning(
                    "Failed to read lease for release", extra=kv(lock=self._describe(), err=str(e)[:200])
                )
                return False
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return True
            now = micro_time()
            new = self._with_spec(
                lease,
                {
                    "holderIdentity": "",
                    "leaseDurationSeconds": 1,
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": spec.get("leaseTransitions") or 0,
                },
                annotate="",
            )
            try:
                self.leases.put(new, timeout=max(0.1, deadline - self.clock()))
            except ApiException as e:
                if e.status == 409:
                    continue
                logger.warning("Failed to release lease", extra=kv(lock=self._describe(), code=e.status))
                return False
            except Exception as e:  # noqa: BLE001
                logger.warning("Failed to release lease", extra=kv(lock=self._describe(), err=str(e)[:200]))
                return False
            logger.info("Released leader lease", extra=kv(lock=self._describe(), identity=self.identity))
            return True
        return False

    # --- the loops -------------------------------------------------------------------

    def _acquire(self) -> bool:
        self._acquiring = True
        try:
            return self._acquire_loop()
        finally:
            self._acquiring = False

    def _watch_lease(self) -> Informer | None:
        return watch_lease(self.leases, self._watched, self._watched_gone, self.config.request_timeout)

    def _watched(self, lease: dict[str, Any]) -> None:
        holder = (lease.get("spec") or {}).get("holderIdentity") or ""
        if self._holding:
            if holder != self.identity:
                self._confirm_lost(f"held by {holder!r}" if holder else "released by someone else")
            return
        if not self._acquiring or self.is_leader():
            return
        self._observe(lease)
        if not holder:
            self._wake.set()  # released: try now, not a retry period later

    def _watched_gone(self, _lease: dict[str, Any]) -> None:
        if self._holding:
            self._confirm_lost("deleted")
        elif self._acquiring:
            self._wake.set()  # deleted: the next attempt creates it

    def _confirm_lost(self, seen: str) -> None:
        """The watch says the Lease is no longer ours; a GET says whether that is still so (the
        watch may deliver a version older than our last write)."""
        if self._stop.is_set():
            return
        try:
            lease = self.leases.get(timeout=self.config.request_timeout)
        except ApiException as e:
            if e.status == 404:
                self._lose("the lease was deleted", seenBy="watch")
            return  # unknown: the renewals decide
        except Exception:  # noqa: BLE001 - unknown: the renewals decide
            return
        holder = (lease.get("spec") or {}).get("holderIdentity") or ""
        if holder != self.identity:
            self._lose(f"the lease is {seen}", seenBy="watch", holder=holder)

    def _acquire_loop(self) -> bool:
        c = self.config
        while not self._stop.is_set():
            ok = self._try_acquire_or_renew(self.clock() + c.request_timeout)
            self._maybe_report_transition()
            if ok:
                logger.info(
                    "Successfully acquired lease", extra=kv(lock=self._describe(), identity=self.identity)
                )
                return True
            logger.log(V(4), "Failed to acquire lease", extra=kv(lock=self._describe(), holder=self.leader()))
            self._wake.wait(self._acquire_wait())
            self._wake.clear()
        return False

    def _acquire_wait(self) -> float:
        """client-go's jittered retry period, cut short at the expiry of the lease we saw held."""
        wait = self.config.retry_period * (1 + random.random() * JITTER_FACTOR)
        with self._lock:
            held = bool(self._observed.get("holderIdentity"))
            expires = self._observed_time + float(self._observed.get("leaseDurationSeconds") or 0)
        left = expires - self.clock()
        if held and left > 0:
            wait = min(wait, left + EXPIRY_MARGIN)
        return wait

    def _renew_loop(self) -> None:
        c = self.config
        self._maybe_start_leading()
        while not self._stop.is_set():
            deadline = self.clock() + c.renew_deadline
            ok = False
            while not self._stop.is_set():
                ok = self._try_acquire_or_renew(deadline)
                if ok:
                    break
                left = deadline - self.clock()
                if left <= 0:
                    break
                self._stop.wait(min(c.retry_period, left))
                if self.clock() >= deadline:
                    break
            self._maybe_report_transition()
            if self._stop.is_set():
                return
            if not ok:
                self._lose("failed to renew lease", renewDeadline=c.renew_deadline)
                return
            logger.log(V(5), "Successfully renewed lease", extra=kv(lock=self._describe()))
            self._maybe_start_leading()
            wait = 0.0 if self.leading.is_set() and not self._announced else c.retry_period
            if self._lead_at is not None:
                wait = max(0.0, min(wait, self._lead_at - self.clock()))
            self._stop.wait(wait)

    def _maybe_start_leading(self) -> None:
        if self.leading.is_set():
            return
        if self._lead_at is not None and self.clock() < self._lead_at:
            return
        self._lead_at = None
        with self._end_lock:
            if self._stop.is_set():  # lost (or stopped) since the renewal: never lead now
                return
            self._leading_since = micro_time()
            self.leading.set()
            self.gauge.set(1)
        logger.info("Started leading", extra=kv(lock=self._describe(), identity=self.identity))
        if self.on_started_leading is not None:
            threading.Thread(
                target=self._callback,
                args=(self.on_started_leading, "on_started_leading"),
                name="on-started-leading",
                daemon=True,
            ).start()

    # --- one attempt (client-go's tryAcquireOrRenew) ----------------------------------------

    def _try_acquire_or_renew(self, deadline: float) -> bool:
        c = self.config
        now = micro_time()

        def left() -> float:
            return max(0.1, min(c.request_timeout, deadline - self.clock()))

        record = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(c.lease_duration),
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        # Fast path: we lead and the lease is valid: update the object we last wrote.
        if self.is_leader() and self._lease_valid() and self._lease is not None:
            with self._lock:
                record["acquireTime"] = self._observed.get("acquireTime") or now
                record["leaseTransitions"] = self._observed.get("leaseTransitions") or 0
            try:
                self._lease = self.leases.put(self._with_spec(self._lease, record), timeout=left())
                self._set_observed(self._lease)
                self._announced = self._leading_since is not None
                return True
            except Exception as e:  # noqa: BLE001 - fall back to the slow path as client-go
                logger.log(
                    V(2),
                    "Failed to update lease optimistically, falling back to slow path",
                    extra=kv(lock=self._describe(), err=_err(e)),
                )
        if self._stop.is_set():  # never write after stop(): a release may be under way
            return False
        try:
            lease = self.leases.get(timeout=left())
        except ApiException as e:
            if e.status != 404:
                logger.error("Error retrieving lease lock", extra=kv(lock=self._describe(), err=_err(e)))
                return False
            if self._holding:  # client-go creates it again and goes on leading
                self._lose("the lease was deleted", seenBy="renewal")
                return False
            wait = self._created_wait()
            try:
                self._lease = self.leases.create(record, timeout=left())
            except Exception as e2:  # noqa: BLE001
                logger.error(
                    "Error initially creating lease lock", extra=kv(lock=self._describe(), err=_err(e2))
                )
                return False
            self._set_observed(self._lease)
            if wait > 0:
                self._lead_at = self.clock() + wait
                logger.info(
                    "Created the lease; waiting until a holder it may have had must have stopped",
                    extra=kv(lock=self._describe(), waitSeconds=round(wait, 3)),
                )
            return True
        except Exception as e:  # noqa: BLE001
            logger.error("Error retrieving lease lock", extra=kv(lock=self._describe(), err=_err(e)))
            return False
        if self._holding and (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            holder = (lease.get("spec") or {}).get("holderIdentity") or ""
            self._lose(
                f"the lease is held by {holder!r}" if holder else "the lease was released by someone else",
                seenBy="renewal",
                holder=holder,
            )
            return False
        self._lease = lease
        self._observe(lease)
        old = lease.get("spec") or {}
        holder = old.get("holderIdentity") or ""
        taking_over = False
        if holder and self._lease_valid() and not self.is_leader():
            refused = takeover.refusal(
                lease, enabled=c.takeover, acquiring=self._acquiring, is_ours=c.is_ours
            )
            if refused is not None:
                level, message = refused
                logger.log(level, message, extra=kv(lock=self._describe(), holder=holder))
                return False
            taking_over = True
        if self.is_leader():
            record["acquireTime"] = old.get("acquireTime") or now
            record["leaseTransitions"] = old.get("leaseTransitions") or 0
        else:
            record["leaseTransitions"] = (old.get("leaseTransitions") or 0) + 1
        if self._stop.is_set():
            return False
        try:
            self._lease = self.leases.put(self._with_spec(lease, record), timeout=left())
        except Exception as e:  # noqa: BLE001
            logger.error("Failed to update lease", extra=kv(lock=self._describe(), err=_err(e)))
            return False
        self._set_observed(self._lease)
        self._announced = self._leading_since is not None
        if taking_over:
            self.takeovers += 1
            wait = self.safe_takeover_wait(float(old.get("leaseDurationSeconds") or c.lease_duration))
            self._lead_at = self.clock() + wait
            logger.info(
                "Took over the lease from a foreign holder; waiting until it must have stopped",
                extra=kv(lock=self._describe(), previousHolder=holder, waitSeconds=round(wait, 3)),
            )
        return True

    def _created_wait(self) -> float:
        """Seconds between creating the absent Lease and leading: none when what we last saw of
        it proves its holder stopped (released, or expired by our clock); else the takeover's
        safe wait, since a deleted Lease's holder (ours, or a client-go scheduler) may go on
        leading until its renew deadline passes. A Lease never seen may have been deleted
        just before we looked: it waits too."""
        c = self.config
        with self._lock:
            seen = bool(self._observed_raw)
            holder = self._observed.get("holderIdentity") or ""
            duration = float(self._observed.get("leaseDurationSeconds") or c.lease_duration)
            expired = self._observed_time + duration <= self.clock()
        if seen and (not holder or expired):
            return 0.0
        return self.safe_takeover_wait(duration if seen else c.lease_duration)

    # --- observation -------------------------------------------------------------------

    def _observe(self, lease: dict[str, Any]) -> None:
        spec = lease.get("spec") or {}
        raw = json.dumps(spec, sort_keys=True)
        with self._lock:
            if raw != self._observed_raw:
                self._observed, self._observed_raw, self._observed_time = spec, raw, self.clock()

    def _set_observed(self, lease: dict[str, Any]) -> None:
        spec = lease.get("spec") or {}
        with self._lock:
            self._observed, self._observed_raw = spec, json.dumps(spec, sort_keys=True)
            self._observed_time = self.clock()

    def _lease_valid(self) -> bool:
        with self._lock:
            return self._observed_time + float(self._observed.get("leaseDurationSeconds") or 0) > self.clock()

    def _maybe_report_transition(self) -> None:
        holder = self.leader()
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        if holder:
            logger.info(
                "New leader observed",
                extra=kv(lock=self._describe(), leader=holder, us=holder == self.identity),
            )
        if self.on_new_leader is not None:
            threading.Thread(
                target=self._callback,
                args=(self.on_new_leader, "on_new_leader", holder),
                name="on-new-leader",
                daemon=True,
            ).start()

    # --- API calls -----------------------------------------------------------------------

    def _with_spec(
        self, lease: dict[str, Any], spec: dict[str, Any], annotate: str | None = None
    ) -> dict[str, Any]:
        """``lease`` with ``spec``, annotated as ours (``annotate`` names another holder: the release)."""
        if annotate is not None:
            return with_spec(lease, spec, holder=annotate, leading=None)
        return with_spec(lease, spec, holder=spec["holderIdentity"], leading=self._leading_since)

    def _describe(self) -> str:
        return str(self.leases)

    def _callback(self, fn: Callable[..., None] | None, what: str, *args: Any) -> None:
        if fn is None:
            return
        try:
            fn(*args)
        except Exception:
            logger.exception("Leader election callback failed", extra=kv(callback=what))


def _err(e: BaseException) -> str:
    if isinstance(e, ApiException):
        return f"{e.status} {e.reason}"
    return f"{type(e).__name__}: {str(e)[:200]}"
