"""What the informers watch and keep: the resources (:data:`RESOURCES`), and the store of raw objects.

A :class:`Resource` names a collection the way the informer lists and watches
it (its path, whether it is namespaced, a field selector). The
:class:`ObjectStore` holds its objects as the JSON dicts the API server sent,
keyed ``namespace/name`` (:func:`object_key`); the informer
(``scheduler.cluster.informers``) alone writes it, everyone else reads.
"""

from __future__ import annotations

import builtins
import threading
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """Where to list and watch a resource (cluster-wide), and which objects to keep."""

    plural: str
    path: str
    """The collection's URL path, e.g. ``/api/v1/pods``."""
    namespaced: bool
    field_selector: str | None = None
    label_selector: str | None = None

    def in_namespace(self, namespace: str) -> Resource:
        if not self.namespaced:
            raise ValueError(f"{self.plural} are not namespaced")
        prefix, _, _ = self.path.rpartition("/")
        return Resource(
            self.plural,
            f"{prefix}/namespaces/{namespace}/{self.plural}",
            True,
            self.field_selector,
            self.label_selector,
        )


# kube-scheduler watches all pods except terminal ones (scheduler.go, NewInformerFactory).
PODS = Resource("pods", "/api/v1/pods", True, field_selector="status.phase!=Succeeded,status.phase!=Failed")
NODES = Resource("nodes", "/api/v1/nodes", False)
NAMESPACES = Resource("namespaces", "/api/v1/namespaces", False)
PERSISTENT_VOLUME_CLAIMS = Resource("persistentvolumeclaims", "/api/v1/persistentvolumeclaims", True)
PERSISTENT_VOLUMES = Resource("persistentvolumes", "/api/v1/persistentvolumes", False)
STORAGE_CLASSES = Resource("storageclasses", "/apis/storage.k8s.io/v1/storageclasses", False)
CSI_NODES = Resource("csinodes", "/apis/storage.k8s.io/v1/csinodes", False)
CSI_DRIVERS = Resource("csidrivers", "/apis/storage.k8s.io/v1/csidrivers", False)
CSI_STORAGE_CAPACITIES = Resource(
    "csistoragecapacities", "/apis/storage.k8s.io/v1/csistoragecapacities", True
)
VOLUME_ATTACHMENTS = Resource("volumeattachments", "/apis/storage.k8s.io/v1/volumeattachments", False)
POD_DISRUPTION_BUDGETS = Resource("poddisruptionbudgets", "/apis/policy/v1/poddisruptionbudgets", True)
RESOURCE_CLAIMS = Resource("resourceclaims", "/apis/resource.k8s.io/v1/resourceclaims", True)
RESOURCE_SLICES = Resource("resourceslices", "/apis/resource.k8s.io/v1/resourceslices", False)
DEVICE_CLASSES = Resource("deviceclasses", "/apis/resource.k8s.io/v1/deviceclasses", False)
DEVICE_TAINT_RULES = Resource("devicetaintrules", "/apis/resource.k8s.io/v1/devicetaintrules", False)

RESOURCES = {
    r.plural: r
    for r in (
        PODS,
        NODES,
        NAMESPACES,
        PERSISTENT_VOLUME_CLAIMS,
        PERSISTENT_VOLUMES,
        STORAGE_CLASSES,
        CSI_NODES,
        CSI_DRIVERS,
        CSI_STORAGE_CAPACITIES,
        VOLUME_ATTACHMENTS,
        POD_DISRUPTION_BUDGETS,
        RESOURCE_CLAIMS,
        RESOURCE_SLICES,
        DEVICE_CLASSES,
        DEVICE_TAINT_RULES,
    )
}


def object_key(obj: Obj) -> str:
    """``namespace/name``, or ``name`` for cluster-scoped objects (client-go's MetaNamespaceKeyFunc)."""
    meta = obj["metadata"]
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else meta["name"]


class ObjectStore:
    """The informer's store: key → raw object. Implements ``scheduler.core.framework.Store``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Obj] = {}

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._items.get(key)

    def list(self) -> list[Obj]:
        with self._lock:
            return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    # Written by the informer alone: ------------------------------------------------------

    def set(self, key: str, obj: Obj) -> Obj | None:
        with self._lock:
            old = self._items.get(key)
            self._items[key] = obj
            return old

    def pop(self, key: str) -> Obj | None:
        with self._lock:
            return self._items.pop(key, None)

    def replace(self, items: dict[str, Obj]) -> dict[str, Obj]:
        """The whole content at once (after a list); the old one returned."""
        with self._lock:
            old, self._items = self._items, items
            return old
