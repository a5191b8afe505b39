"""The ``coordination.k8s.io/v1`` Lease as our leader election reads and writes it.

The spec is client-go's LeaseLock record: ``holderIdentity``,
``leaseDurationSeconds``, ``acquireTime``/``renewTime`` (MicroTime, RFC 3339
with microseconds, ``Z``) and ``leaseTransitions``. Our annotations ride on
the same object:

- ``dynamic-scheduler.io/holder`` (:data:`HOLDER_ANNOTATION`): every write of
  ours sets it to our identity. The Lease has no field for "kind of holder",
  and ``<hostname>_<uuid>`` looks the same for ours and kube-scheduler's; but
  client-go's LeaseLock sends back the whole object it read, so the annotation
  survives a Go scheduler's writes with *our old identity* in it. A lease is
  ours iff the annotation equals ``spec.holderIdentity``
  (:func:`annotated_as_ours`); a Go holder never matches, and a deleted and
  re-created Lease has no annotation.
- ``dynamic-scheduler.io/leading-since`` (:data:`LEADING_ANNOTATION`): when our
  holder started leading, i.e. scheduling (see :func:`leading_since`).
- ``dynamic-scheduler.io/restoring`` (:data:`RESTORING_ANNOTATION`): set by
  ``dynamic-scheduler restore`` while it gives the Lease back
  (``scheduler.cluster.takeover``).

:class:`LeaseClient` makes the calls on one named Lease, and
:func:`watch_lease` starts the informer an elector uses to see it change (a
standby, to take it the moment it is free; a holder, to stop the moment it is not its own).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.client import api_request
from scheduler.cluster.informers import Informer
from scheduler.cluster.store import Resource
from scheduler.logs import kv
from scheduler.settings import WatchSettings

logger = logging.getLogger(__name__)

HOLDER_ANNOTATION = "dynamic-scheduler.io/holder"
"""Our identity, written by each of our writes: the holder is ours iff it equals ``holderIdentity``."""
LEADING_ANNOTATION = "dynamic-scheduler.io/leading-since"
"""When the holder (ours: see :func:`annotated_as_ours`) started leading, i.e. scheduling: written
by the first renew after it; absent while a holder of ours waits (after a takeover, the safe
wait). ``deploy lease`` waits for it."""
RESTORING_ANNOTATION = "dynamic-scheduler.io/restoring"
"""Set on the Lease by ``dynamic-scheduler restore`` while it gives the Lease back: no takeover then."""

LEASES_API = "/apis/coordination.k8s.io/v1"
LEASE_WATCH = WatchSettings(watch_timeout=60)
"""An elector's watch of the Lease ends every minute or two, so a stuck one is short-lived."""


def micro_time() -> str:
    """metav1.MicroTime of now: RFC 3339 with microseconds, UTC."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _annotations(lease: dict[str, Any]) -> dict[str, Any]:
    return (lease.get("metadata") or {}).get("annotations") or {}


def annotated_as_ours(lease: dict[str, Any] | None) -> bool:
    """The default "is this holder one of us" test (see the module docstring); no Lease: no."""
    if lease is None:
        return False
    holder = (lease.get("spec") or {}).get("holderIdentity") or ""
    return bool(holder) and _annotations(lease).get(HOLDER_ANNOTATION) == holder


def being_restored(lease: dict[str, Any]) -> bool:
    """``restore`` is giving this Lease back to kube-scheduler."""
    return bool(_annotations(lease).get(RESTORING_ANNOTATION))


def leading_since(lease: dict[str, Any] | None) -> str | None:
    """When the Lease's holder, one of ours, started leading (RFC 3339), or None while it waits
    or when the holder is not ours."""
    if lease is None or not annotated_as_ours(lease):
        return None
    value = _annotations(lease).get(LEADING_ANNOTATION)
    return str(value) if value else None


def with_spec(
    lease: dict[str, Any], spec: dict[str, Any], *, holder: str, leading: str | None
) -> dict[str, Any]:
    """``lease`` (its metadata and resourceVersion kept) with ``spec``, annotated with ``holder``
    and, when given, the time we started ``leading`` (dropped otherwise)."""
    meta = dict(lease.get("metadata") or {})
    ann = dict(meta.get("annotations") or {})
    ann[HOLDER_ANNOTATION] = holder
    if leading is not None:
        ann[LEADING_ANNOTATION] = leading
    else:  # acquiring, waiting, or giving the Lease up: not leading (yet)
        ann.pop(LEADING_ANNOTATION, None)
    meta["annotations"] = ann
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}


class LeaseClient:
    """GET, replace and create of one Lease, each with its own timeout."""

    def __init__(self, api: ApiClient, namespace: str, name: str) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.collection = f"{LEASES_API}/namespaces/{namespace}/leases"
        self.path = f"{self.collection}/{name}"

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    def get(self, timeout: float) -> dict[str, Any]:
        return api_request(self.api, "GET", self.path, timeout=timeout)

    def put(self, lease: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Replace, guarded by the resourceVersion ``lease`` carries (409 if someone wrote since)."""
        return api_request(self.api, "PUT", self.path, body=lease, timeout=timeout)

    def create(self, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "annotations": {HOLDER_ANNOTATION: spec["holderIdentity"]},
            },
            "spec": spec,
        }
        return api_request(self.api, "POST", self.collection, body=body, timeout=timeout)


def watch_lease(
    leases: LeaseClient,
    on_change: Callable[[dict[str, Any]], None],
    on_gone: Callable[[dict[str, Any]], None],
    request_timeout: float,
) -> Informer | None:
    """An informer on the one Lease (started), or None when we may not list it (401/403).

    ``on_change`` gets each version as it is written, ``on_gone`` its deletion."""
    res = Resource("leases", leases.collection, True, field_selector=f"metadata.name={leases.name}")
    try:
        api_request(
            leases.api,
            "GET",
            res.path,
            query=[("fieldSelector", res.field_selector), ("limit", 1)],
            timeout=request_timeout,
        )
    except ApiException as e:
        if e.status in (401, 403):
            logger.info(
                "May not watch the lease; standing by with polls only",
                extra=kv(lock=str(leases), code=e.status),
            )
            return None
    except Exception:  # noqa: BLE001 - the informer retries on its own
        pass
    informer = Informer(leases.api, res, name=f"lease-{leases.name}", settings=LEASE_WATCH)
    informer.add_handlers(on_change, lambda _old, new: on_change(new), on_gone)
    return informer.start()
