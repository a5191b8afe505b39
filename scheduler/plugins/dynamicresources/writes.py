"""DynamicResources' PreBind: write a claim's allocation and the pod's reservation.

As kube-scheduler's ``bindClaim``: when this scheduler allocated the claim, the
delete-protection finalizer is added first, so the claim cannot go while
devices are allocated to it; then one UpdateStatus sets ``status.allocation``
and adds the pod to ``status.reservedFor``. A claim allocated earlier only gets
the reservation. Both writes carry the claim's resourceVersion; on a conflict
the claim is read again and the checks redone (at most five attempts,
``retry.RetryOnConflict``). A claim deleted, or allocated by someone else,
meanwhile fails the binding.

For a pod's extended resources the claim is first created here
(:func:`create_claim`), and the pod's ``status.extendedResourceClaimStatus``
says which of its requests each container's resource uses. When binding fails
after that, Unreserve takes the pod's reservations back
(:func:`remove_reservation`) and deletes the claim it created
(:func:`delete_claim`).

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
from datetime import UTC, datetime
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
CLAIMS_IN = "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
POD_STATUS = "/api/v1/namespaces/{namespace}/pods/{name}/status"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class ClaimWriteError(Exception):
    """The claim could not be written; the message says why."""


def bind_claim(
    api_client: Any,
    claim: Mapping[str, Any],
    pod: PodInfo,
    allocation: dict[str, Any] | None,
    stopping: threading.Event,
) -> dict[str, Any]:
    """Write ``allocation`` (when this scheduler made it) and reserve the claim for the pod;
    the claim as written."""
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
            return _write(api_client, current, pod, allocation)
        except _ConflictError:
            logger.log(
                V(4), "Conflict writing claim, reading it again", extra=kv(pod=pod.key, claim=f"{ns}/{name}")
            )
            continue
    raise ClaimWriteError(f"claim {ns}/{name}: still conflicting after {ATTEMPTS} attempts")


class _ConflictError(Exception):
    pass


def _write(
    api_client: Any, claim: dict[str, Any], pod: PodInfo, allocation: dict[str, Any] | None
) -> dict[str, Any]:
    meta = claim["metadata"]
    ns, name = meta["namespace"], meta["name"]
    status = claim.setdefault("status", {})
    if meta.get("deletionTimestamp"):
        raise ClaimWriteError(f"claim {ns}/{name} got deleted in the meantime")
    if allocation is not None and status.get("allocation"):
        raise ClaimWriteError(f"claim {ns}/{name} got allocated elsewhere in the meantime")
    if any(r.get("uid") == pod.uid for r in status.get("reservedFor") or ()):
        return claim
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
        # Stamped as kube-scheduler does with binding conditions on (the default): a
        # driver's binding conditions time out from this moment.
        status["allocation"] = {**allocation, "allocationTimestamp": _now()}
    status["reservedFor"] = [
        *(status.get("reservedFor") or ()),
        {"resource": "pods", "name": pod.name, "uid": pod.uid},
    ]
    what = "add allocation and reservation to" if allocation is not None else "add reservation to"
    out = _call(api_client, "PUT", claim, f"{what} claim {ns}/{name}")
    logger.log(
        V(5), "Claim written", extra=kv(pod=pod.key, claim=f"{ns}/{name}", allocated=allocation is not None)
    )
    return out


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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


def create_claim(api_client: Any, claim: Mapping[str, Any]) -> dict[str, Any]:
    """Create the claim for a pod's extended resources (its name generated), as planned in
    Filter; the created claim."""
    if api_client is None:
        raise ClaimWriteError("no API client")
    meta = claim["metadata"]
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {k: v for k, v in meta.items() if k not in ("name", "uid")},
        "spec": claim["spec"],
    }
    try:
        out: dict[str, Any] = api_request(
            api_client, "POST", CLAIMS_IN.format(namespace=meta["namespace"]), body=body
        )
    except ApiException as e:
        raise ClaimWriteError(f"create claim for extended resources: {status_message(e)}") from None
    except OSError as e:
        raise ClaimWriteError(f"create claim for extended resources: {e}") from None
    return out


def delete_claim(api_client: Any, claim: Mapping[str, Any]) -> None:
    """Delete a claim this scheduler created: its finalizer removed first (``deleteClaim``),
    then the claim, guarded by its UID. One already gone is fine."""
    if api_client is None:
        raise ClaimWriteError("no API client")
    meta = claim["metadata"]
    ns, name = meta["namespace"], meta["name"]
    path = CLAIMS.format(namespace=ns, name=name)
    current: Mapping[str, Any] = claim
    for attempt in range(ATTEMPTS):
        try:
            if attempt:
                current = api_request(api_client, "GET", path)
            finalizers = current["metadata"].get("finalizers") or []
            if FINALIZER in finalizers:
                patch = {
                    "metadata": {
                        "finalizers": [f for f in finalizers if f != FINALIZER],
                        "resourceVersion": current["metadata"].get("resourceVersion"),
                    }
                }
                api_request(api_client, "PATCH", path, body=patch, content_type=MERGE_PATCH)
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": meta.get("uid")}}
            api_request(api_client, "DELETE", path, body=body)
            return
        except ApiException as e:
            if e.status == 404:
                return
            if e.status != 409:
                raise ClaimWriteError(f"delete claim {ns}/{name}: {status_message(e)}") from None
        except OSError as e:
            raise ClaimWriteError(f"delete claim {ns}/{name}: {e}") from None
    raise ClaimWriteError(f"delete claim {ns}/{name}: still conflicting after {ATTEMPTS} attempts")


def remove_reservation(api_client: Any, claim: Mapping[str, Any], pod: PodInfo) -> None:
    """Take the pod out of the claim's ``status.reservedFor`` (Unreserve), guarded by the
    claim's UID."""
    if api_client is None:
        raise ClaimWriteError("no API client")
    meta = claim["metadata"]
    patch = {
        "metadata": {"uid": meta.get("uid")},
        "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]},
    }
    path = CLAIMS.format(namespace=meta["namespace"], name=meta["name"]) + "/status"
    try:
        api_request(api_client, "PATCH", path, body=patch, content_type=STRATEGIC_MERGE_PATCH)
    except ApiException as e:
        if e.status != 404:
            raise ClaimWriteError(f"unreserve claim {meta['name']}: {status_message(e)}") from None
    except OSError as e:
        raise ClaimWriteError(f"unreserve claim {meta['name']}: {e}") from None


def set_pod_extended_status(
    api_client: Any, pod: PodInfo, claim_name: str, mappings: list[dict[str, str]]
) -> None:
    """``status.extendedResourceClaimStatus`` of the pod: the claim and, per container and
    resource, its request (``patchPodExtendedResourceClaimStatus``)."""
    if api_client is None:
        raise ClaimWriteError("no API client")
    if not mappings:
        raise ClaimWriteError(f"no request mappings for pod {pod.key}")
    patch = {
        "metadata": {"uid": pod.uid},
        "status": {
            "extendedResourceClaimStatus": {"requestMappings": mappings, "resourceClaimName": claim_name}
        },
    }
    path = POD_STATUS.format(namespace=pod.namespace, name=pod.name)
    try:
        api_request(api_client, "PATCH", path, body=patch, content_type=STRATEGIC_MERGE_PATCH)
    except ApiException as e:
        raise ClaimWriteError(
            f"update pod {pod.key} ExtendedResourceClaimStatus: {status_message(e)}"
        ) from None
    except OSError as e:
        raise ClaimWriteError(f"update pod {pod.key} ExtendedResourceClaimStatus: {e}") from None
