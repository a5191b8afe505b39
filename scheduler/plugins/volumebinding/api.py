"""VolumeBinding's PreBind: write the volume decisions, then wait for the claims to be bound.

As kube-scheduler's ``volumeBinder.BindPodVolumes``: for a claim matched to an
existing PV, the PV gets the claim in its ``claimRef`` (guarded by the PV's
resourceVersion, so a PV taken meanwhile is not stolen) and the PV controller
completes the binding; for a claim to provision, the claim gets the
``volume.kubernetes.io/selected-node`` annotation and the provisioner (e.g.
local-path-provisioner) creates a PV on that node. Then the claims are read
back every ``interval`` seconds until all are bound, a provisioner gives up
(it removes the annotation), the pod is deleted, or ``timeout`` passes.

kube-scheduler writes whole objects (Update); here the writes are JSON merge
patches of just those fields. Reads go to the API server, not the informer
stores, so a fresh write is never compared with a stale copy.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.retry import call_with_retries, retriable, status_message
from scheduler.core.framework import Status, error
from scheduler.core.podinfo import PodInfo
from scheduler.logs import V, kv
from scheduler.plugins.volumebinding.volumes import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    annotations_of,
    fully_bound,
    key,
    meta,
    node_affinity_matches,
    spec,
)

logger = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
"""Content type for a dict body: the client would otherwise send it as a JSON patch."""

Getter = Callable[[str], dict[str, Any] | None]


class BindingFailedError(Exception):
    """The claims will not get bound as decided: the pod must be scheduled again."""


def volume_patch(pv: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that writes an assumed PV's claimRef (and bound-by-controller)."""
    body: dict[str, Any] = {
        "metadata": {"resourceVersion": meta(pv).get("resourceVersion")},
        "spec": {"claimRef": spec(pv)["claimRef"]},
    }
    if ANN_BOUND_BY_CONTROLLER in annotations_of(pv):
        body["metadata"]["annotations"] = {
            ANN_BOUND_BY_CONTROLLER: annotations_of(pv)[ANN_BOUND_BY_CONTROLLER]
        }
    return body


def selected_node_patch(node_name: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {ANN_SELECTED_NODE: node_name}}}


def binding_done(
    node_name: str, node_labels: Mapping[str, str], vols: Any, get_pv: Getter, get_pvc: Getter
) -> bool:
    """``checkBindings``: True once every claim is bound to a PV that fits the node.

    Raises :class:`BindingFailedError` when waiting longer cannot help. ``get_pv`` /
    ``get_pvc`` read the current objects (by name / ``namespace/name``; None if gone).
    """
    for pv, pvc, _ in vols.static:
        current = get_pv(key(pv))
        if current is None:
            raise BindingFailedError(f'failed to check binding: pv "{key(pv)}" not found')
        if not node_affinity_matches(current, node_labels, node_name):
            raise BindingFailedError(f'pv "{key(pv)}" node affinity doesn\'t match node "{node_name}"')
        ref = spec(current).get("claimRef") or {}
        if not ref.get("uid"):
            raise BindingFailedError(f'ClaimRef got reset for pv "{key(pv)}"')
        claim = get_pvc(key(pvc))
        if claim is None:
            raise BindingFailedError(f'failed to check binding: persistentvolumeclaim "{key(pvc)}" not found')
        if not fully_bound(claim):
            return False
    for pvc in vols.dynamic:
        claim = get_pvc(key(pvc))
        if claim is None:
            raise BindingFailedError(
                f'failed to check provisioning pvc: persistentvolumeclaim "{key(pvc)}" not found'
            )
        if annotations_of(claim).get(ANN_SELECTED_NODE) != node_name:
            # A provisioner that fails removes the annotation to have the pod rescheduled.
            raise BindingFailedError(f'provisioning failed for PVC "{meta(claim).get("name")}"')
        volume_name = spec(claim).get("volumeName")
        if volume_name:
            pv = get_pv(volume_name)
            if pv is None:
                return False  # not seen yet, or deleted: the claim will be unbound then
            if not node_affinity_matches(pv, node_labels, node_name):
                raise BindingFailedError(
                    f'pv "{volume_name}" node affinity doesn\'t match node "{node_name}"'
                )
        if not fully_bound(claim):
            return False
    return True


class _Reader:
    """GETs of the current objects; a transient failure means "not known yet"."""

    class UnknownError(Exception):
        pass

    def __init__(self, api: CoreV1Api) -> None:
        self.api = api

    def _read(self, fn: Callable[..., Any], *args: str) -> dict[str, Any] | None:
        try:
            resp = fn(*args, _preload_content=False)
        except ApiException as e:
            if e.status == 404:
                return None
            if retriable(e):
                raise self.UnknownError(status_message(e)) from e
            raise BindingFailedError(status_message(e)) from e
        except Exception as e:  # connection errors
            if retriable(e):
                raise self.UnknownError(str(e)) from e
            raise
        return json.loads(resp.data)

    def pv(self, name: str) -> dict[str, Any] | None:
        return self._read(self.api.read_persistent_volume, name)

    def pvc(self, k: str) -> dict[str, Any] | None:
        ns, _, name = k.partition("/")
        return self._read(self.api.read_namespaced_persistent_volume_claim, name, ns)

    def pod(self, ns: str, name: str) -> dict[str, Any] | None:
        return self._read(self.api.read_namespaced_pod, name, ns)


class StoreReader:
    """The informers' view of the same objects (what kube-scheduler waits on): no extra
    requests, and no read access beyond the list/watch the scheduler already has."""

    UnknownError = _Reader.UnknownError

    def __init__(self, pvs: Any, pvcs: Any, pods: Any) -> None:
        self._pvs, self._pvcs, self._pods = pvs, pvcs, pods

    def pv(self, name: str) -> dict[str, Any] | None:
        return self._pvs.get(name)

    def pvc(self, k: str) -> dict[str, Any] | None:
        return self._pvcs.get(k)

    def pod(self, ns: str, name: str) -> dict[str, Any] | None:
        return self._pods.get(f"{ns}/{name}")


def store_reader(handle: Any) -> StoreReader | None:
    """A StoreReader over the handle's informers, or None when it has none (unit tests)."""
    try:
        return StoreReader(
            handle.store("persistentvolumes"), handle.store("persistentvolumeclaims"), handle.store("pods")
        )
    except (AttributeError, KeyError):
        return None


def _write(api: CoreV1Api, node_name: str, vols: Any) -> None:
    for pv, pvc, changed in vols.static:
        if not changed:
            continue
        name, body = key(pv), volume_patch(pv)
        logger.log(V(5), "Updating PersistentVolume: binding to claim", extra=kv(pv=name, pvc=key(pvc)))
        call_with_retries(
            partial(
                api.patch_persistent_volume, name, body, _content_type=MERGE_PATCH, _preload_content=False
            ),
            what="patch persistentvolume",
            attempts=5,
            max_seconds=15.0,
        )
    for pvc in vols.dynamic:
        logger.log(
            V(5), "Updating PersistentVolumeClaim: selected node", extra=kv(pvc=key(pvc), node=node_name)
        )
        call_with_retries(
            partial(
                api.patch_namespaced_persistent_volume_claim,
                meta(pvc).get("name"),
                meta(pvc).get("namespace"),
                selected_node_patch(node_name),
                _content_type=MERGE_PATCH,
                _preload_content=False,
            ),
            what="patch persistentvolumeclaim",
            attempts=5,
            max_seconds=15.0,
        )


def bind_pod_volumes(
    api_client: Any,
    pod: PodInfo,
    node_name: str,
    node_labels: Mapping[str, str],
    vols: Any,
    *,
    timeout: float,
    interval: float,
    stopping: threading.Event,
    reader: Any = None,
) -> Status | None:
    """Write the decisions for ``vols`` and wait until the claims are bound (None on success).

    ``reader`` gives the current pod, claims and volumes (a :class:`StoreReader`
    over the informers); without one they are read from the API server."""
    if api_client is None:
        return error("binding volumes: no API client")
    api = CoreV1Api(api_client)
    try:
        _write(api, node_name, vols)
    except ApiException as e:
        return error(f"binding volumes: {status_message(e)}")
    reader = reader or _Reader(api)
    deadline = time.monotonic() + timeout
    while True:
        try:
            current = reader.pod(pod.namespace, pod.name)
            if current is None or (meta(current).get("uid") or pod.uid) != pod.uid:
                raise BindingFailedError("pod does not exist any more")
            if binding_done(node_name, node_labels, vols, reader.pv, reader.pvc):
                logger.log(V(2), "All PVCs for pod are bound", extra=kv(pod=pod.key, node=node_name))
                return None
        except BindingFailedError as e:
            return error(f"binding volumes: {e}")
        except reader.UnknownError as e:
            logger.log(
                V(4), "Could not read volume binding state, retrying", extra=kv(pod=pod.key, err=str(e))
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return error("binding volumes: context deadline exceeded")
        if stopping.wait(min(interval, remaining)):
            return error("binding volumes: the scheduler is stopping")
