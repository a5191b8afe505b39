"""Routing informer events to the cache and the queue, as kube-scheduler's eventhandlers.go.

- A bound pod (spec.nodeName set) counts in the cache, whoever scheduled it.
- An unbound pod of one of our scheduler names, not being deleted, is queued.
- Changes that may make an unschedulable pod fit move the unschedulable pods on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from scheduler.core.cache import Cache
from scheduler.core.podinfo import PodInfo
from scheduler.core.queue import SchedulingQueue
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

# Plugins whose verdict an added or changed bound pod can change.
POD_SENSITIVE = frozenset({"InterPodAffinity", "PodTopologySpread"})
# Plugins whose verdict a node's annotations can change (Dynamic reads crane's load annotations).
ANNOTATION_PLUGINS = frozenset({"Dynamic"})
# Plugins whose verdict a PVC, PV, StorageClass, CSINode, CSIDriver or VolumeAttachment change can change.
STORAGE_PLUGINS = frozenset({"VolumeBinding", "VolumeZone", "VolumeRestrictions", "NodeVolumeLimits"})
# Plugins whose verdict a ResourceClaim, ResourceSlice, DeviceClass or DeviceTaintRule change can change.
DRA_PLUGINS = frozenset({"DynamicResources"})
DRA_RESOURCES = frozenset({"resourceclaims", "resourceslices", "deviceclasses", "devicetaintrules"})
# A DeviceClass may also provide an extended resource NodeResourcesFit found missing.
CLASS_PLUGINS = DRA_PLUGINS | {"NodeResourcesFit"}


def _node_fingerprint(node: dict[str, Any]) -> tuple[Any, ...]:
    """What of a node scheduling reads; heartbeats change nothing of it."""
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    return (
        repr(node["metadata"].get("labels")),
        repr(spec.get("taints")),
        bool(spec.get("unschedulable")),
        repr(status.get("allocatable")),
        repr(status.get("addresses")),
    )


class EventHandlers:
    def __init__(self, cache: Cache, queue: SchedulingQueue, scheduler_names: Iterable[str]) -> None:
        self.cache = cache
        self.queue = queue
        self.names = frozenset(scheduler_names)

    def _ours(self, pod: dict[str, Any]) -> bool:
        return ((pod.get("spec") or {}).get("schedulerName") or "default-scheduler") in self.names

    @staticmethod
    def _bound(pod: dict[str, Any]) -> bool:
        return bool((pod.get("spec") or {}).get("nodeName"))

    @staticmethod
    def _gated(pod: dict[str, Any]) -> bool:
        """Scheduling gates hold the pod back until removed (SchedulingGates plugin)."""
        return bool((pod.get("spec") or {}).get("schedulingGates"))

    @staticmethod
    def _finished(pod: dict[str, Any]) -> bool:
        return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    # --- pods ---------------------------------------------------------------------

    def on_pod_add(self, pod: dict[str, Any]) -> None:
        if self._finished(pod):
            return
        if self._bound(pod):
            pi = PodInfo.from_pod(pod)
            self.queue.delete(pi.uid)
            self.cache.add_pod(pi)
            self.queue.move_all("AssignedPodAdd", POD_SENSITIVE)
        elif self._ours(pod) and not pod["metadata"].get("deletionTimestamp") and not self._gated(pod):
            pi = PodInfo.from_pod(pod)
            logger.log(V(5), "Add event for unscheduled pod", extra=kv(pod=pi.key))
            self.queue.add(pi)

    def on_pod_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if self._finished(new):
            self.on_pod_delete(old)
            return
        if self._bound(new):
            pi = PodInfo.from_pod(new)
            if not self._bound(old):
                self.queue.delete(pi.uid)
            self.cache.update_pod(pi)
            if old["metadata"].get("labels") != new["metadata"].get("labels"):
                self.queue.move_all("AssignedPodUpdate", POD_SENSITIVE)
        elif self._ours(new):
            uid = new["metadata"].get("uid")
            if new["metadata"].get("deletionTimestamp") or self._gated(new):
                self.queue.delete(uid)
            elif not self.cache.has_pod(uid):  # skip updates of pods we assumed
                self.queue.update(PodInfo.from_pod(new))

    def on_pod_delete(self, pod: dict[str, Any]) -> None:
        uid = pod["metadata"].get("uid")
        if self.cache.has_pod(uid):
            removed = self.cache.remove_pod(uid)
            if removed is not None and self._bound(pod):
                self.queue.move_all("AssignedPodDelete")
        self.queue.delete(uid)

    # --- nodes --------------------------------------------------------------------

    def on_node_add(self, node: dict[str, Any]) -> None:
        self.cache.add_node(node)
        self.queue.move_all("NodeAdd")

    def on_node_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.cache.update_node(new)
        if _node_fingerprint(old) != _node_fingerprint(new):
            self.queue.move_all("NodeUpdate")
        elif old["metadata"].get("annotations") != new["metadata"].get("annotations"):
            # crane-scheduler-controller's load annotations (kube's UpdateNodeAnnotation event)
            self.queue.move_all("NodeAnnotationUpdate", ANNOTATION_PLUGINS)

    def on_node_delete(self, node: dict[str, Any]) -> None:
        self.cache.remove_node(node)

    # --- other objects the plugins read (PVCs, PVs, classes, namespaces) --------------

    def on_storage_change(self, *objs: dict[str, Any]) -> None:
        self.queue.move_all("StorageChange", STORAGE_PLUGINS)

    def on_dra_change(self, *objs: dict[str, Any]) -> None:
        """A slice, class or taint rule changed: devices may have been published or freed."""
        self.queue.move_all("ResourceSliceChange", DRA_PLUGINS)

    def on_class_change(self, *objs: dict[str, Any]) -> None:
        """A DeviceClass changed: its devices may now be selected, or its extended resource
        provided (NodeResourcesFit's ``isSchedulableAfterDeviceClassEvent``)."""
        self.queue.move_all("DeviceClassChange", CLASS_PLUGINS)

    def on_claim_add(self, claim: dict[str, Any]) -> None:
        """A new claim can only help the pods that name it (``isSchedulableAfterClaimChange``)."""
        self.queue.move_all("ResourceClaimAdd", DRA_PLUGINS, only=_names_claim(claim))

    def on_claim_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Deallocated: its devices are free for anyone. Another status (allocated, reserved):
        the pods that name it. Anything else (a finalizer, labels): no one."""
        before, after = old.get("status") or {}, new.get("status") or {}
        if before.get("allocation") and not after.get("allocation"):
            self.queue.move_all("ResourceClaimDeallocate", DRA_PLUGINS)
        elif before != after:
            self.queue.move_all("ResourceClaimUpdate", DRA_PLUGINS, only=_names_claim(new))

    def on_claim_delete(self, claim: dict[str, Any]) -> None:
        """An allocated claim gone frees its devices; an unallocated one helps no one."""
        if (claim.get("status") or {}).get("allocation"):
            self.queue.move_all("ResourceClaimDelete", DRA_PLUGINS)

    def object_handlers(self, plural: str) -> tuple[Any, Any, Any]:
        """(add, update, delete) for an informer of ``plural`` (not pods or nodes)."""
        if plural == "resourceclaims":
            return self.on_claim_add, self.on_claim_update, self.on_claim_delete
        if plural == "deviceclasses":
            on_change = self.on_class_change
        elif plural in DRA_RESOURCES:
            on_change = self.on_dra_change
        else:
            on_change = self.on_storage_change
        return on_change, lambda old, new: on_change(new), on_change


def _names_claim(claim: dict[str, Any]) -> Any:
    """Whether a pod names the claim: directly, or through a template as its status says."""
    meta = claim.get("metadata") or {}
    ns, name = meta.get("namespace"), meta.get("name")

    def names(pod: PodInfo) -> bool:
        if pod.namespace != ns:
            return False
        if any(e.get("resourceClaimName") == name for e in pod.spec.get("resourceClaims") or ()):
            return True
        statuses = (pod.pod.get("status") or {}).get("resourceClaimStatuses") or ()
        return any(s.get("resourceClaimName") == name for s in statuses)

    return names
