"""VolumeRestrictions: a ReadWriteOncePod claim is used by one pod only, and in-tree disks
that cannot be shared are not.

As kube-scheduler's (``volumerestrictions.VolumeRestrictions``):

- **ReadWriteOncePod.** PreFilter reads each ``persistentVolumeClaim`` volume's
  claim (a missing one is unresolvable: ``persistentvolumeclaim "x" not
  found``) and counts those with the ``ReadWriteOncePod`` access mode that a
  pod already scheduled (bound or assumed, on any node) uses. If any is,
  every node is rejected with kube-scheduler's reason, as *Unschedulable*:
  removing that pod would help, so preemption may evict it (the
  ``add_pod``/``remove_pod`` extensions keep the count right in its what-if
  runs).
- **Disk conflicts** (``isVolumeConflict``), per node, against the pods on it:
  the same GCE PD unless both are read-only, the same AWS EBS volume, the same
  iSCSI IQN unless both are read-only, the same RBD image in the same pool with
  an overlapping monitor unless both are read-only. Rejected with "node(s) had
  no available disk".

A pod with neither kind of volume skips the plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from scheduler.core.framework import SKIP, CycleState, Snapshot, Status, unresolvable, unschedulable
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use "
    "by another pod"
)
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
_STATE_KEY = "VolumeRestrictions"
IN_TREE_DISKS = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


@dataclass(slots=True)
class _State:
    rwop_claims: frozenset[str]
    """The pod's ReadWriteOncePod claims, as ``namespace/name`` (``PodInfo.pvc_keys``)."""
    conflicts: int
    """How many of them pods already scheduled use."""

    def clone(self) -> _State:
        return _State(self.rwop_claims, self.conflicts)

    def update_with(self, other: PodInfo, sign: int) -> None:
        self.conflicts += sign * sum(key in self.rwop_claims for key in other.pvc_keys())


def _ro(v: dict[str, Any]) -> bool:
    return bool(v.get("readOnly"))


def disks_conflict(volume: dict[str, Any], existing: dict[str, Any]) -> bool:
    """Two pods' volumes that may not be mounted together (``isVolumeConflict``)."""
    a, b = volume.get("gcePersistentDisk"), existing.get("gcePersistentDisk")
    if a is not None and b is not None and a.get("pdName") == b.get("pdName") and not (_ro(a) and _ro(b)):
        return True
    a, b = volume.get("awsElasticBlockStore"), existing.get("awsElasticBlockStore")
    if a is not None and b is not None and a.get("volumeID") == b.get("volumeID"):
        return True
    a, b = volume.get("iscsi"), existing.get("iscsi")
    if a is not None and b is not None and a.get("iqn") == b.get("iqn") and not (_ro(a) and _ro(b)):
        return True
    a, b = volume.get("rbd"), existing.get("rbd")
    return bool(
        a is not None
        and b is not None
        and set(a.get("monitors") or ()) & set(b.get("monitors") or ())
        and a.get("pool", "rbd") == b.get("pool", "rbd")
        and a.get("image") == b.get("image")
        and not (_ro(a) and _ro(b))
    )


def _in_tree(pod: PodInfo) -> list[dict[str, Any]]:
    return [v for v in pod.spec.get("volumes") or () if any(k in v for k in IN_TREE_DISKS)]


class VolumeRestrictions:
    name: ClassVar[str] = "VolumeRestrictions"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        self.handle = handle

    def _rwop_claims(self, pod: PodInfo) -> frozenset[str] | Status:
        keys = set()
        store = self.handle.store("persistentvolumeclaims")
        for key in pod.pvc_keys():
            pvc = store.get(key)
            if pvc is None:
                return unresolvable(f'persistentvolumeclaim "{key.split("/", 1)[1]}" not found')
            if READ_WRITE_ONCE_POD in ((pvc.get("spec") or {}).get("accessModes") or ()):
                keys.add(key)
        return frozenset(keys)

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        claims = self._rwop_claims(pod)
        if isinstance(claims, Status):
            return claims
        used = sum(snapshot.is_pvc_used_by_pods(key) for key in claims)
        if not used and not _in_tree(pod):
            return SKIP
        state[_STATE_KEY] = _State(claims, used)
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        disks = _in_tree(pod)
        if disks:
            for other in node.pods.values():
                others = other.spec.get("volumes") or ()
                if any(disks_conflict(v, e) for v in disks for e in others):
                    return unschedulable(ERR_REASON_DISK_CONFLICT)
        s: _State | None = state.get(_STATE_KEY)
        if s is not None and s.conflicts > 0:
            return unschedulable(ERR_REASON_RWOP_CONFLICT)
        return None

    # --- PreFilterExtensions (preemption's what-if runs) --------------------------------------

    def add_pod(self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo) -> Status | None:
        s: _State | None = state.get(_STATE_KEY)
        if s is not None:
            s.update_with(other, 1)
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo) -> Status | None:
        s: _State | None = state.get(_STATE_KEY)
        if s is not None:
            s.update_with(other, -1)
        return None
