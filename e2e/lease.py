"""The Lease ``kube-system/kube-scheduler``: who holds it, and every version of it while watched.

Both schedulers hold it as ``<hostname>_<uuid>`` (client-go's identity): ours
(lease method) runs in a pod, so its hostname is the pod's name;
kube-scheduler and our static pod run on the host network, so theirs is the
node's name. Ours also writes the annotation ``dynamic-scheduler.io/holder``
equal to the holder. The Lease's ``acquireTime``/``renewTime`` are written by
processes on the kind nodes, containers sharing this machine's clock, so they
compare with the test's own ``time.time()`` to the microsecond.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client, watch

from e2e.kube import wall

LEASE_NS, LEASE = "kube-system", "kube-scheduler"
HOLDER_ANNOTATION = "dynamic-scheduler.io/holder"


def read_lease(api: client.ApiClient, name: str = LEASE, ns: str = LEASE_NS) -> dict[str, Any] | None:
    """The Lease as the server's JSON (times as written), or None."""
    try:
        resp = client.CoordinationV1Api(api).read_namespaced_lease(name, ns, _preload_content=False)
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise
    return json.loads(resp.data)


def holder(lease: dict[str, Any] | None) -> str:
    return ((lease or {}).get("spec") or {}).get("holderIdentity") or ""


def holder_host(identity: str) -> str:
    """The hostname of client-go's ``<hostname>_<uuid>`` identity."""
    return identity.rsplit("_", 1)[0] if "_" in identity else identity


def annotated_ours(lease: dict[str, Any] | None) -> bool:
    ann = ((lease or {}).get("metadata") or {}).get("annotations") or {}
    return bool(holder(lease)) and ann.get(HOLDER_ANNOTATION) == holder(lease)


def acquired_at(lease: dict[str, Any] | None) -> float | None:
    return wall(((lease or {}).get("spec") or {}).get("acquireTime"))


@dataclass
class LeaseChange:
    seen: float
    """When the watch delivered it (test clock)."""
    lease: dict[str, Any]

    @property
    def holder(self) -> str:
        return holder(self.lease)

    @property
    def renewed(self) -> float | None:
        return wall(self.lease["spec"].get("renewTime"))

    @property
    def acquired(self) -> float | None:
        return wall(self.lease["spec"].get("acquireTime"))


@dataclass
class LeaseWatch:
    """Every version of one Lease while the context is open (a watch on its own thread)."""

    changes: list[LeaseChange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    cond: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.cond = threading.Condition(self.lock)

    def add(self, lease: dict[str, Any]) -> None:
        with self.cond:
            self.changes.append(LeaseChange(time.time(), lease))
            self.cond.notify_all()

    def snapshot(self) -> list[LeaseChange]:
        with self.lock:
            return list(self.changes)

    def history(self, since: float = 0.0) -> list[dict[str, Any]]:
        """Who held the Lease when (for failure messages and the artifacts)."""
        return [
            {
                "seen": round(c.seen, 3),
                "holder": c.holder,
                "ours": annotated_ours(c.lease),
                "acquireTime": c.lease["spec"].get("acquireTime"),
                "renewTime": c.lease["spec"].get("renewTime"),
                "transitions": c.lease["spec"].get("leaseTransitions"),
            }
            for c in self.snapshot()
            if c.seen >= since
        ]

    def holders(self, since: float = 0.0) -> str:
        """The sequence of distinct holders since ``since``, one per line, with when each first appeared."""
        out, last = [], None
        for h in self.history(since):
            if h["holder"] != last:
                at = datetime.fromtimestamp(h["seen"], UTC).strftime("%H:%M:%S.%f")[:-3]
                out.append(f"  {at} {h['holder'] or '(released)'}" + (" [ours]" if h["ours"] else ""))
                last = h["holder"]
        return "\n".join(out)

    def wait_for(
        self, what: str, pred: Callable[[LeaseChange], bool], timeout: float, after: int = 0
    ) -> LeaseChange:
        """The first change at index >= ``after`` satisfying ``pred``."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for c in self.changes[after:]:
                    if pred(c):
                        return c
                left = deadline - time.monotonic()
                if left <= 0:
                    last = self.changes[-1].holder if self.changes else "nothing"
                    raise AssertionError(
                        f"timed out after {timeout:.0f}s waiting for the Lease: {what} "
                        f"(last holder: {last!r}); holders:\n{self.holders()}"
                    )
                self.cond.wait(min(left, 1.0))


@contextmanager
def watch_lease(api: client.ApiClient, name: str = LEASE, ns: str = LEASE_NS) -> Iterator[LeaseWatch]:
    coord = client.CoordinationV1Api(api)
    lw = LeaseWatch()
    stop = threading.Event()
    first = json.loads(
        coord.list_namespaced_lease(ns, field_selector=f"metadata.name={name}", _preload_content=False).data
    )
    for item in first.get("items") or []:
        lw.add(item)
    rv = [first["metadata"]["resourceVersion"]]
    errors: list[BaseException] = []

    def run() -> None:
        while not stop.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(
                    coord.list_namespaced_lease,
                    ns,
                    field_selector=f"metadata.name={name}",
                    resource_version=rv[0],
                    timeout_seconds=5,
                    deserialize=False,
                    _request_timeout=15,
                ):
                    obj = ev["object"]
                    if ev["type"] == "ERROR":  # 410: list again
                        again = json.loads(
                            coord.list_namespaced_lease(
                                ns, field_selector=f"metadata.name={name}", _preload_content=False
                            ).data
                        )
                        rv[0] = again["metadata"]["resourceVersion"]
                        for item in again.get("items") or []:
                            lw.add(item)
                        break
                    rv[0] = obj["metadata"]["resourceVersion"]
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        lw.add(obj)
                    if stop.is_set():
                        break
            except Exception as e:  # noqa: BLE001 - a dropped watch is retried; kept for the report
                errors.append(e)
                stop.wait(0.2)

    t = threading.Thread(target=run, name="lease-watch", daemon=True)
    t.start()
    try:
        yield lw
    finally:
        stop.set()
        t.join(20)
