"""The scheduler's view of nodes and of the pods counted on them.

Fed by the informers (bound pods, nodes) and by the scheduling loop (assumed
pods: a pod counts on its chosen node from the moment it is chosen, before the
bind returns, so the next cycle does not hand the same room to another pod).
An assumed pod is confirmed when the informer delivers it bound, and forgotten
if the bind fails. Like kube-scheduler since 1.24, assumed pods do not expire.

The cache is also the scheduling cycle's snapshot: the loop holds ``lock``
for the few milliseconds of a cycle, so plugins see one consistent state
without copying a thousand NodeInfos per pod. Informer threads wait that long.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)


def _adjust(counts: Counter[str], keys: Iterable[str], delta: int) -> None:
    """Add ``delta`` to each key's count (a key listed twice, twice), dropping counts that reach
    0: the Counter keeps only what is in use, without a pass over all of it."""
    for key in keys:
        n = counts[key] + delta
        if n > 0:
            counts[key] = n
        else:
            counts.pop(key, None)


class Cache:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._nodes: dict[str, NodeInfo] = {}
        self._node_list: list[NodeInfo] | None = None  # nodes with a Node object, rebuilt lazily
        self._pods: dict[str, tuple[PodInfo, str]] = {}  # uid -> (pod, node name)
        self._assumed: set[str] = set()
        # Nodes with pods that have (anti-)affinity, rebuilt lazily when such a pod or a node comes or goes.
        self._with_affinity: list[NodeInfo] | None = None
        self._with_anti_affinity: list[NodeInfo] | None = None
        self._image_nodes: Counter[str] = Counter()
        """Image name -> how many nodes have it (ImageLocality's spread)."""
        self._pvc_refs: Counter[str] = Counter()
        """``namespace/claim`` -> how many pods in the cache (bound or assumed) use it."""

    # --- nodes -------------------------------------------------------------

    def add_node(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        with self.lock:
            ni = self._nodes.get(name)
            if ni is None:
                ni = self._nodes[name] = NodeInfo(name, node)
            else:
                self._count_images(ni, -1)
                ni.set_node(node)  # pods that arrived before their node keep counting
            self._count_images(ni, 1)
            self._nodes_changed()

    update_node = add_node

    def remove_node(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        with self.lock:
            ni = self._nodes.get(name)
            if ni is None:
                return
            if ni.node is not None:
                self._count_images(ni, -1)
                ni.images = {}
            if ni.pods:
                # Keep a ghost entry so the pods still bound there are accounted
                # for until their own deletes arrive; it is not schedulable.
                ni.node = None
                ni.generation += 1
            else:
                del self._nodes[name]
            self._nodes_changed()

    # --- bound pods ----------------------------------------------------------

    def add_pod(self, pi: PodInfo) -> None:
        """A bound pod from the informer (confirms an assumed pod)."""
        with self.lock:
            current = self._pods.get(pi.uid)
            if current is not None:
                self._remove(pi.uid)
                if pi.uid in self._assumed:
                    self._assumed.discard(pi.uid)
                    if current[1] != pi.node_name:
                        logger.warning(
                            "Pod was assumed on one node but is bound to another",
                            extra=kv(pod=pi.key, assumed=current[1], node=pi.node_name),
                        )
            self._add(pi, pi.node_name)

    update_pod = add_pod

    def remove_pod(self, uid: str) -> PodInfo | None:
        with self.lock:
            self._assumed.discard(uid)
            return self._remove(uid)

    # --- assumed pods --------------------------------------------------------

    def assume(self, pi: PodInfo, node_name: str) -> None:
        with self.lock:
            if pi.uid in self._pods:
                raise ValueError(f"pod {pi.key} is already in the cache")
            self._add(pi, node_name)
            self._assumed.add(pi.uid)

    def forget(self, pi: PodInfo) -> None:
        """Undo an assume (bind failed, or a later step of the cycle did)."""
        with self.lock:
            if pi.uid in self._assumed:
                self._assumed.discard(pi.uid)
                self._remove(pi.uid)

    def sizes(self) -> dict[str, int]:
        """How many nodes, pods (bound or assumed) and assumed pods the cache holds, by
        ``scheduler_cache_size``'s ``type``."""
        with self.lock:
            return {"assumed_pods": len(self._assumed), "pods": len(self._pods), "nodes": len(self._nodes)}

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed

    def has_pod(self, uid: str) -> bool:
        return uid in self._pods

    # --- the snapshot interface (framework.Snapshot) ---------------------------

    def list(self) -> list[NodeInfo]:
        nodes = self._node_list
        if nodes is None:
            with self.lock:
                nodes = self._node_list = [ni for ni in self._nodes.values() if ni.node is not None]
        return nodes

    def get(self, name: str) -> NodeInfo | None:
        ni = self._nodes.get(name)
        return ni if ni is not None and ni.node is not None else None

    def have_pods_with_affinity(self) -> builtins.list[NodeInfo]:
        nodes = self._with_affinity
        if nodes is None:
            with self.lock:
                nodes = self._with_affinity = [ni for ni in self.list() if ni.pods_with_affinity]
        return nodes

    def have_pods_with_required_anti_affinity(self) -> builtins.list[NodeInfo]:
        nodes = self._with_anti_affinity
        if nodes is None:
            with self.lock:
                nodes = self._with_anti_affinity = [
                    ni for ni in self.list() if ni.pods_with_required_anti_affinity
                ]
        return nodes

    def is_pvc_used_by_pods(self, key: str) -> bool:
        """Whether a pod in the cache uses the claim ``namespace/name`` (``IsPVCUsedByPods``)."""
        return self._pvc_refs.get(key, 0) > 0

    def image_num_nodes(self, image: str) -> int:
        """How many nodes have ``image`` (by any of its names)."""
        return self._image_nodes.get(image, 0)

    def _count_images(self, ni: NodeInfo, delta: int) -> None:
        _adjust(self._image_nodes, ni.images, delta)

    def _nodes_changed(self) -> None:
        self._node_list = self._with_affinity = self._with_anti_affinity = None

    def _affinity_changed(self, pi: PodInfo) -> None:
        if pi.has_affinity:
            self._with_affinity = None
        if pi.has_required_anti_affinity:
            self._with_anti_affinity = None

    # --- internals -----------------------------------------------------------

    def _add(self, pi: PodInfo, node_name: str) -> None:
        ni = self._nodes.get(node_name)
        if ni is None:
            ni = self._nodes[node_name] = NodeInfo(node_name)  # ghost until the node arrives
        ni.add_pod(pi)
        self._pods[pi.uid] = (pi, node_name)
        self._affinity_changed(pi)
        if pi.spec.get("volumes"):
            _adjust(self._pvc_refs, pi.pvc_keys(), 1)

    def _remove(self, uid: str) -> PodInfo | None:
        entry = self._pods.pop(uid, None)
        if entry is None:
            return None
        pi, node_name = entry
        if pi.spec.get("volumes"):
            _adjust(self._pvc_refs, pi.pvc_keys(), -1)
        ni = self._nodes.get(node_name)
        if ni is not None:
            ni.remove_pod(uid)
            self._affinity_changed(pi)
            if ni.node is None and not ni.pods:
                del self._nodes[node_name]
                self._nodes_changed()
        logger.log(V(10), "Removed pod from cache", extra=kv(pod=pi.key, node=node_name))
        return pi

    def dump(self) -> dict[str, Any]:
        """A summary for debugging and tests."""
        with self.lock:
            return {
                "nodes": {n: sorted(p.key for p in ni.pods.values()) for n, ni in self._nodes.items()},
                "assumed": sorted(self._pods[u][0].key for u in self._assumed),
            }
