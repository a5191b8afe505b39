"""DynamicResources' PreBind: write a claim's allocation and the pod's reservation.

As kube-scheduler's ``bindClaim``: when this scheduler allocated the claim, the
delete-protection finalizer is added first, so the claim cannot go while
devices are allocated to it; then one UpdateStatus sets ``status.allocation``
and adds the pod to ``status.reservedFor``. A claim allocated earlier only gets
the reservation. Both writes carry the claim's resourceVersion; on a conflict
the claim is read again and the checks redone (at most five attempts,
``retry.RetryOnConflict``). A claim deleted, or allocated by someone else,
meanwhile fails the binding.

The finalizer goes in a merge patch of the finalizers alone (kube-scheduler
sends the whole claim): the API server keeps opaque parameters as the bytes it
was sent, and a claim's spec may not change, so the whole claim re-encoded
here (other spacing) would be refused as a change of its spec. The status
subresource ignores the spec.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.cluster.client import api_request
from scheduler.cluster.retry import status_message
from scheduler.core.podinfo import PodInfo
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

FINALIZER = "resource.kubernetes.io/delete-protection"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"
ATTEMPTS = 5
MERGE_PATCH = "application/merge-patch+json"


class ClaimWriteError(Exception):
    """The claim could not be written; the message says why."""


def bind_claim(
    api_client: Any,
    claim: Mapping[str, Any],
    pod: PodInfo,
    allocation: dict[str, Any] | None,
    stopping: threading.Event,
) -> None:
    """Write ``allocation`` (when this scheduler made it) and reserve the claim for the pod."""
    if api_client is None:
        raise ClaimWriteError("no API client")
    meta = claim["metadata"]
    ns, name = meta["namespace"], meta["name"]
    current: dict[str, Any] = copy.deepcopy(dict(claim))
    for attempt in range(ATTEMPTS):
        if stopping.is_set():
            raise ClaimWriteError("the scheduler is stopping")
        if attempt:
            try:
                current = api_request(api_client, "GET", CLAIMS.format(namespace=ns, name=name))
            except (ApiException, OSError) as e:
                why = status_message(e) if isinstance(e, ApiException) else str(e)
                raise ClaimWriteError(f"get updated claim {ns}/{name} after conflict: {why}") from None
        try:
            if _write(api_client, current, pod, allocation):
                return
        except _ConflictError:
            logger.log(
                V(4), "Conflict writing claim, reading it again", extra=kv(pod=pod.key, claim=f"{ns}/{name}")
            )
            continue
    raise ClaimWriteError(f"claim {ns}/{name}: still conflicting after {ATTEMPTS} attempts")


class _ConflictError(Exception):
    pass


def _write(api_client: Any, claim: dict[str, Any], pod: PodInfo, allocation: dict[str, Any] | None) -> bool:
    meta = claim["metadata"]
    ns, name = meta["namespace"], meta["name"]
    status = claim.setdefault("status", {})
    if meta.get("deletionTimestamp"):
        raise ClaimWriteError(f"claim {ns}/{name} got deleted in the meantime")
    if allocation is not None and status.get("allocation"):
        raise ClaimWriteError(f"claim {ns}/{name} got allocated elsewhere in the meantime")
    if any(r.get("uid") == pod.uid for r in status.get("reservedFor") or ()):
        return True
    if allocation is not None and FINALIZER not in (meta.get("finalizers") or ()):
        patch = {
            "metadata": {
                "finalizers": [*(meta.get("finalizers") or ()), FINALIZER],
                "resourceVersion": meta.get("resourceVersion"),
            }
        }
        logger.log(V(5), "Adding finalizer to claim", extra=kv(pod=pod.key, claim=f"{ns}/{name}"))
        claim = _call(api_client, "PATCH", claim, f"add finalizer to claim {ns}/{name}", patch)
        status = claim.setdefault("status", {})
    if allocation is not None:
        status["allocation"] = allocation
    status["reservedFor"] = [
        *(status.get("reservedFor") or ()),
        {"resource": "pods", "name": pod.name, "uid": pod.uid},
    ]
    what = "add allocation and reservation to" if allocation is not None else "add reservation to"
    _call(api_client, "PUT", claim, f"{what} claim {ns}/{name}")
    logger.log(
        V(5), "Claim written", extra=kv(pod=pod.key, claim=f"{ns}/{name}", allocated=allocation is not None)
    )
    return True


def _call(
    api_client: Any, method: str, claim: dict[str, Any], what: str, patch: dict[str, Any] | None = None
) -> dict[str, Any]:
    """PUT the claim's status (the claim as the body), or PATCH the claim with ``patch`` (a merge
    patch). A conflict raises _ConflictError; any other failure ClaimWriteError saying ``what``."""
    meta = claim["metadata"]
    path = CLAIMS.format(namespace=meta["namespace"], name=meta["name"])
    try:
        if patch is None:
            out: dict[str, Any] = api_request(api_client, method, path + "/status", body=claim)
        else:
            out = api_request(api_client, method, path, body=patch, content_type=MERGE_PATCH)
        return out
    except ApiException as e:
        if e.status == 409:
            raise _ConflictError from None
        raise ClaimWriteError(f"{what}: {status_message(e)}") from None
    except OSError as e:  # no answer: TimeoutError, ConnectionError
        raise ClaimWriteError(f"{what}: {e}") from None


def deallocate(api_client: Any, claim: Mapping[str, Any]) -> None:
    """Take the claim's allocation back (PostFilter): no allocation, no consumers, no device
    status; the finalizer stays for the resourceclaim controller. Guarded by the claim's
    resourceVersion: a claim changed meanwhile is left as it is (ClaimWriteError)."""
    if api_client is None:
        raise ClaimWriteError("no API client")
    body: dict[str, Any] = copy.deepcopy(dict(claim))
    status = body.setdefault("status", {})
    for field in ("allocation", "reservedFor", "devices"):
        status.pop(field, None)
    meta = body["metadata"]
    try:
        _call(api_client, "PUT", body, "deallocate claim")
    except _ConflictError:
        raise ClaimWriteError(f"claim {meta['namespace']}/{meta['name']} changed meanwhile") from None
