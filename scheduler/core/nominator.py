"""Nominated pods: pods that preempted others and wait for the room they made.

A pod is nominated to a node when its preemption chose that node (the loop
nominates it at once, before ``status.nominatedNodeName`` is written, so the
next cycle already sees it), or when the informer delivers an unbound pod
that carries ``status.nominatedNodeName`` (set by an earlier leader, say).
Filter counts the nominated pods of equal or higher priority on their node
(``Profile.run_filters_with_nominated``), so the room a preemption made is
not taken by a lower-priority pod meanwhile.

As kube-scheduler's ``nominator`` (``backend/queue/nominator.go``):

- a nomination ends when the pod is assumed (it is placed), bound, deleted,
  or when an update clears its ``nominatedNodeName``;
- an update that keeps ``nominatedNodeName`` empty on both sides keeps a
  nomination made in memory (the status write may not have arrived yet).
"""

from __future__ import annotations

import threading

from scheduler.core.podinfo import PodInfo


def nominated_node_name(pod: PodInfo) -> str:
    return (pod.pod.get("status") or {}).get("nominatedNodeName") or ""


class Nominator:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}

    def nominate(self, pod: PodInfo, node: str | None = None) -> None:
        """Nominate ``pod`` to ``node``; None takes its ``status.nominatedNodeName``
        (nothing when that is empty); "" ends the nomination."""
        with self._lock:
            self._delete_locked(pod.uid)
            name = nominated_node_name(pod) if node is None else node
            if name and not pod.node_name:
                self._node_of[pod.uid] = name
                self._by_node.setdefault(name, {})[pod.uid] = pod

    def update(self, old: PodInfo, new: PodInfo) -> None:
        """The informer's update of an unbound pod (``UpdateNominatedPod``)."""
        with self._lock:
            node: str | None = None
            if not nominated_node_name(old) and not nominated_node_name(new):
                node = self._node_of.get(old.uid)  # keep a nomination made in memory
            self._delete_locked(old.uid)
            name = nominated_node_name(new) if node is None else node
            if name and not new.node_name:
                self._node_of[new.uid] = name
                self._by_node.setdefault(name, {})[new.uid] = new

    def delete(self, uid: str) -> None:
        with self._lock:
            self._delete_locked(uid)

    def node_of(self, uid: str) -> str:
        with self._lock:
            return self._node_of.get(uid, "")

    def pods_for_node(self, node: str) -> list[PodInfo]:
        with self._lock:
            return list((self._by_node.get(node) or {}).values())

    def snapshot(self) -> dict[str, tuple[PodInfo, ...]]:
        """Node -> its nominated pods, for one scheduling cycle (empty almost always)."""
        with self._lock:
            if not self._by_node:
                return {}
            return {n: tuple(pods.values()) for n, pods in self._by_node.items()}

    def __len__(self) -> int:
        with self._lock:
            return len(self._node_of)

    def _delete_locked(self, uid: str) -> None:
        node = self._node_of.pop(uid, None)
        if node is None:
            return
        pods = self._by_node.get(node)
        if pods is not None:
            pods.pop(uid, None)
            if not pods:
                del self._by_node[node]
