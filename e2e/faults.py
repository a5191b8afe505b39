"""The fault suites' scenario: ours as default-scheduler, pods created throughout, one fault.

With the lease method deployed (ours holds ``kube-system/kube-scheduler``;
kube-scheduler is a standby), a creator makes one small pod every ``EVERY``
seconds for ``DURATION`` seconds, tolerating the API errors a fault causes (a
pod whose create failed is retried). ``FAULT_AT`` seconds in, the test's fault
is injected (``run_fault``'s ``inject``, which returns its own figures).

After it, checked as the churn suite does (``e2e.podchecks.check_pods``):
every pod bound, exactly once (one nodeName, one Scheduled event; with the
leader cut off, a Binding that landed as the cut began may stay unreported,
and is counted), none where its requests did not fit, none lost (every pod
created is there and bound);
and a scheduler holds the Lease again. What is measured: the gap in binding
(the longest time without a bind from the fault on, pods being created one a
second), the longest wait of a pod that met the fault, who holds the Lease
after, and our restarts. Figures go to ``_artifacts/e2e-metrics/faults.jsonl``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.fit import allocatable
from e2e.lease import annotated_ours, holder, read_lease
from e2e.measure import record
from e2e.podchecks import check_pods, restarts
from e2e.pods import is_bound, list_pods_raw, pod_body
from e2e.schedulers import wait_ours_scheduling
from e2e.watching import PodWatch
from scheduler.polling import poll

SUITE = "faults"
EVERY = float(os.environ.get("DS_E2E_FAULT_EVERY", "1"))
DURATION = float(os.environ.get("DS_E2E_FAULT_SECONDS", "60"))
FAULT_AT = DURATION / 3
MAX_UNBOUND = 90.0
"""No pod may wait longer than this unbound: a lost Lease costs leaseDuration (15 s), a safe wait
and a restart at worst."""
SELECTOR = "app=fault-load"


class Creator:
    """One pod every EVERY seconds for DURATION seconds, retried on errors (the scenario's timer,
    not a synchronisation)."""

    def __init__(self, core: client.CoreV1Api, ns: str, image: str) -> None:
        self.core, self.ns, self.image = core, ns, image
        self.created: list[str] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="fault-load", daemon=True)

    def _run(self) -> None:
        i = 0
        end = time.monotonic() + DURATION
        while time.monotonic() < end and not self.stop.is_set():
            name = f"load-{i:04d}"
            body = pod_body(name, self.image, cpu="5m", memory="8Mi", labels={"app": "fault-load"})
            try:
                self.core.create_namespaced_pod(self.ns, body, _request_timeout=10)
                self.created.append(name)
                i += 1
            except ApiException as e:
                if e.status == 409:  # created, though the answer was lost
                    self.created.append(name)
                    i += 1
                else:
                    self.errors.append(f"{e.status} {e.reason}")
            except Exception as e:  # noqa: BLE001 - the API server is down: try again
                self.errors.append(type(e).__name__)
            self.stop.wait(EVERY)

    def __enter__(self) -> Creator:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(60)


def lease_or_none(api: client.ApiClient) -> dict[str, Any] | None:
    try:
        return read_lease(api)
    except Exception:  # noqa: BLE001 - the API server may be down
        return None


def run_fault(
    api: client.ApiClient,
    core: client.CoreV1Api,
    ns: str,
    image: str,
    name: str,
    inject: Callable[[], dict[str, Any]],
    *,
    may_restart: bool = True,
    unreported_ok: bool = False,
) -> dict[str, Any]:
    """The load, the fault FAULT_AT seconds in, the checks; returns the figures.

    ``may_restart=False``: a fault kube-scheduler rides out without exiting, so ours must too.
    ``unreported_ok``: bound pods without a Scheduled event are counted, not failed (see
    :func:`e2e.podchecks.check_pods`)."""
    wait_ours_scheduling(core, ns, image)
    restarts_before = restarts(core)
    holder_before = holder(read_lease(api))
    fault: dict[str, Any] = {}
    with PodWatch(core, ns, alloc=allocatable(core)) as watch:
        t0 = time.time()
        with Creator(core, ns, image) as creator:
            creator.stop.wait(FAULT_AT)  # the scenario's timer
            fault_at = time.time()
            fault = inject()
            creator.thread.join(DURATION + 120)
        created = set(creator.created)

        def settled() -> bool | None:
            # every pod created is bound, as listed and as the watch saw it (after a restart of
            # kube-apiserver the watch may take its read timeout, 40 s, to resume)
            pods = list_pods_raw(core, ns, label_selector=SELECTOR)
            listed = {p["metadata"]["name"] for p in pods if is_bound(p)}
            seen = {r.name for r in watch.records() if r.bound_seen is not None}
            missing["not bound"] = sorted(created - listed)
            missing["not seen bound by the watch"] = sorted(created - seen)
            missing["watch errors"] = watch.errors[-3:]
            return (created <= listed and created <= seen) or None

        missing: dict[str, list[str]] = {}
        try:
            poll(
                settled,
                MAX_UNBOUND,
                f"every pod of {ns} bound after the fault",
                interval=1,
                retry_on=(ApiException,),
            )
        except AssertionError as e:
            raise AssertionError(f"{e}: {missing}") from None
        lease = poll(
            lambda: (lambda x: x if holder(x) else None)(lease_or_none(api)),
            60,
            "a holder of the Lease",
            interval=0.5,
        )
    watch_errors = len(watch.errors)  # a fault breaks the test's own watch too; it resumes from where it was
    watch.errors.clear()
    figures, problems = check_pods(
        core, ns, watch, t0, [], p99_bound=None, max_unbound=MAX_UNBOUND, unreported_ok=unreported_ok
    )
    figures["test_watch_errors"] = watch_errors
    names = {r.name for r in watch.records()}
    lost = sorted(set(creator.created) - names)
    if lost:
        problems.append(f"pods created but never seen: {lost}")
    recs = watch.records()
    # The pods that met the fault: created from a few seconds before it (in the leader's queue
    # then) on. How long the longest of them waited to be bound, and the longest time without
    # any bind while they were being created one a second.
    met = [r for r in recs if r.seen >= fault_at - 5 and r.bound_seen is not None]
    longest_wait = round(max((r.bound_seen or 0) - r.seen for r in met), 1) if met else None
    binds = sorted(r.bound_seen for r in recs if r.bound_seen is not None and r.bound_seen >= fault_at)
    gap = round(max((b2 - b1 for b1, b2 in zip([fault_at, *binds], binds, strict=False)), default=0), 1)
    restarts_after = restarts(core)
    figures |= fault | {
        "created": len(creator.created),
        "create_errors": len(creator.errors),
        "bind_gap_s": gap,
        "longest_wait_s": longest_wait,
        "holder_before": holder_before,
        "holder_after": holder(lease),
        "ours_after": annotated_ours(lease),
        "our_restarts": {k: restarts_after.get(k, 0) - restarts_before.get(k, 0) for k in restarts_after},
    }
    record(SUITE, f"{name}_bind_gap_s", gap, **figures)
    if not may_restart and any(figures["our_restarts"].values()):
        problems.append(f"ours restarted: {figures['our_restarts']}")
    assert not problems, "\n".join(problems)
    assert binds, f"no pod was bound after the fault: {figures}"
    return figures
