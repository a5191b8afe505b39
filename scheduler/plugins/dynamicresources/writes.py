"""DynamicResources' PreBind: write a claim's allocation and the pod's reservation.

As kube-scheduler's ``bindClaim``: when this scheduler allocated the claim, the
delete-protection finalizer is added first (an Update of the claim), so the
claim cannot go while devices are allocated to it; then one UpdateStatus sets
``status.allocation`` and adds the pod to ``status.reservedFor``. A claim
allocated earlier only gets the reservation. Both writes carry the claim's
resourceVersion; on a conflict the claim is read again and the checks redone
(at most five attempts, ``retry.RetryOnConflict``). A claim deleted, or
allocated by someone else, meanwhile fails the binding.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Mapping
from typing import Any

from kubernetes.client import CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.retry import status_message
from scheduler.core.podinfo import PodInfo
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

FINALIZER = "resource.kubernetes.io/delete-protection"
GROUP, VERSION, PLURAL = "resource.k8s.io", "v1", "resourceclaims"
ATTEMPTS = 5


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
    api = CustomObjectsApi(api_client)
    meta = claim["metadata"]
    ns, name = meta["namespace"], meta["name"]
    current: dict[str, Any] = copy.deepcopy(dict(claim))
    for attempt in range(ATTEMPTS):
        if stopping.is_set():
            raise ClaimWriteError("the scheduler is stopping")
        if attempt:
            try:
                current = api.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)
            except ApiException as e:
                raise ClaimWriteError(
                    f"get updated claim {ns}/{name} after conflict: {status_message(e)}"
                ) from None
        try:
            if _write(api, current, pod, allocation):
                return
        except _ConflictError:
            logger.log(
                V(4), "Conflict writing claim, reading it again", extra=kv(pod=pod.key, claim=f"{ns}/{name}")
            )
            continue
    raise ClaimWriteError(f"claim {ns}/{name}: still conflicting after {ATTEMPTS} attempts")


class _ConflictError(Exception):
    pass


def _write(
    api: CustomObjectsApi, claim: dict[str, Any], pod: PodInfo, allocation: dict[str, Any] | None
) -> bool:
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
        meta["finalizers"] = [*(meta.get("finalizers") or ()), FINALIZER]
        logger.log(V(5), "Adding finalizer to claim", extra=kv(pod=pod.key, claim=f"{ns}/{name}"))
        claim = _call(api.replace_namespaced_custom_object, claim, f"add finalizer to claim {ns}/{name}")
        status = claim.setdefault("status", {})
    if allocation is not None:
        status["allocation"] = allocation
    status["reservedFor"] = [
        *(status.get("reservedFor") or ()),
        {"resource": "pods", "name": pod.name, "uid": pod.uid},
    ]
    what = "add allocation and reservation to" if allocation is not None else "add reservation to"
    _call(api.replace_namespaced_custom_object_status, claim, f"{what} claim {ns}/{name}")
    logger.log(
        V(5), "Claim written", extra=kv(pod=pod.key, claim=f"{ns}/{name}", allocated=allocation is not None)
    )
    return True


def _call(fn: Any, claim: dict[str, Any], what: str) -> dict[str, Any]:
    meta = claim["metadata"]
    try:
        out: dict[str, Any] = fn(GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], claim)
        return out
    except ApiException as e:
        if e.status == 409:
            raise _ConflictError from None
        raise ClaimWriteError(f"{what}: {status_message(e)}") from None
