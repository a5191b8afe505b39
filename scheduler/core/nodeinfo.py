"""NodeInfo: a node and the pods the scheduler counts on it, kept up to date incrementally.

Every change bumps ``generation``, so a plugin may cache per-node results and
know when they went stale.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from typing import Any

from scheduler.core.podinfo import HostPort, PodInfo
from scheduler.core.resources import Resource


def node_images(images: Any) -> dict[str, int]:
    """``status.images`` as name -> size; every name of an image (tag and digest) counts, and
    the first image listed under a name gives its size."""
    out: dict[str, int] = {}
    for image in images or ():
        if not isinstance(image, dict):
            continue
        size = image.get("sizeBytes") or 0
        for name in image.get("names") or ():
            if isinstance(name, str):
                out.setdefault(name, size if isinstance(size, int) else 0)
    return out


class NodeInfo:
    __slots__ = (
        "name",
        "node",
        "labels",
        "taints",
        "unschedulable",
        "allocatable",
        "images",
        "pods",
        "requested",
        "non_zero_requested",
        "used_ports",
        "pods_with_affinity",
        "pods_with_required_anti_affinity",
        "generation",
        "free",
        "memo",
        "node_memo",
    )

    def __init__(self, name: str, node: dict[str, Any] | None = None) -> None:
        self.name = name
        self.node: dict[str, Any] | None = None
        self.labels: dict[str, str] = {}
        self.taints: list[dict[str, Any]] = []
        self.unschedulable = False
        self.allocatable = Resource()
        self.images: dict[str, int] = {}
        """Every name of every image on the node (``status.images``) -> its size in bytes."""
        self.pods: dict[str, PodInfo] = {}
        self.requested = Resource()
        self.non_zero_requested = Resource()
        self.used_ports: Counter[HostPort] = Counter()
        self.pods_with_affinity: dict[str, PodInfo] = {}
        self.pods_with_required_anti_affinity: dict[str, PodInfo] = {}
        self.generation = 0
        self.free = (0, 0, 0)
        """(pods, milli-CPU, memory bytes) still allocatable: what NodeResourcesFit checks first."""
        self.memo: dict[Hashable, Any] = {}
        """Per-plugin caches; cleared on every change."""
        self.node_memo: dict[str, Any] = {}
        """Per-plugin caches of what comes from the Node object alone (not its pods); cleared when
        the Node changes."""
        if node is not None:
            self.set_node(node)

    def _changed(self) -> None:
        self.generation += 1
        alloc, used = self.allocatable, self.requested
        self.free = (
            alloc.allowed_pod_number - len(self.pods),
            alloc.milli_cpu - used.milli_cpu,
            alloc.memory - used.memory,
        )
        if self.memo:
            self.memo.clear()

    def set_node(self, node: dict[str, Any]) -> None:
        self.node = node
        self.labels = node["metadata"].get("labels") or {}
        spec = node.get("spec") or {}
        self.taints = spec.get("taints") or []
        self.unschedulable = bool(spec.get("unschedulable"))
        status = node.get("status") or {}
        self.allocatable = Resource.from_list(status.get("allocatable"))
        self.images = node_images(status.get("images"))
        if self.node_memo:
            self.node_memo.clear()
        self._changed()

    def add_pod(self, pi: PodInfo) -> None:
        self.pods[pi.uid] = pi
        self.requested.add(pi.requests)
        self.non_zero_requested.add(pi.non_zero_requests)
        if pi.host_ports:
            self.used_ports.update(pi.host_ports)
        if pi.has_affinity:
            self.pods_with_affinity[pi.uid] = pi
        if pi.has_required_anti_affinity:
            self.pods_with_required_anti_affinity[pi.uid] = pi
        self._changed()

    def remove_pod(self, uid: str) -> PodInfo | None:
        pi = self.pods.pop(uid, None)
        if pi is None:
            return None
        self.requested.sub(pi.requests)
        self.non_zero_requested.sub(pi.non_zero_requests)
        if pi.host_ports:
            self.used_ports.subtract(pi.host_ports)
            self.used_ports = +self.used_ports  # drop zero counts
        self.pods_with_affinity.pop(uid, None)
        self.pods_with_required_anti_affinity.pop(uid, None)
        self._changed()
        return pi

    def clone(self) -> NodeInfo:
        """A copy to add pods to or remove pods from (``NodeInfo.Snapshot``), for what-if runs.

        The Node object and what is derived from it alone (``node_memo``) are shared; the
        pods, their sums and ``memo`` are the copy's own, so nothing done to it reaches the
        cache or the memos of the original."""
        c = NodeInfo.__new__(NodeInfo)
        c.name = self.name
        c.node = self.node
        c.labels = self.labels
        c.taints = self.taints
        c.unschedulable = self.unschedulable
        c.allocatable = self.allocatable
        c.images = self.images
        c.pods = dict(self.pods)
        c.requested = self.requested.copy()
        c.non_zero_requested = self.non_zero_requested.copy()
        c.used_ports = Counter(self.used_ports) if self.used_ports else Counter()
        c.pods_with_affinity = dict(self.pods_with_affinity)
        c.pods_with_required_anti_affinity = dict(self.pods_with_required_anti_affinity)
        c.generation = self.generation
        c.free = self.free
        c.memo = {}
        c.node_memo = self.node_memo
        return c

    def internal_ip(self) -> str:
        for addr in ((self.node or {}).get("status") or {}).get("addresses") or ():
            if addr.get("type") == "InternalIP":
                return addr.get("address", "")
        return ""

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)}, gen={self.generation})"
