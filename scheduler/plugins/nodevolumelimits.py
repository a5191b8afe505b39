"""NodeVolumeLimits: no node gets more volumes of a CSI driver than its CSINode says it can attach.

As kube-scheduler's CSI limits (``nodevolumelimits.CSILimits``). A node's limit
per driver is ``spec.drivers[].allocatable.count`` of its CSINode (a driver
without one, or a node without a CSINode, has no limit). Volumes are counted
by unique ``driver/handle``:

- a claim bound to a PV: the PV's ``spec.csi`` driver and handle, or, for an
  in-tree source whose migration is on, the CSI volume it translates to
  (``csitranslation``); a claim not bound yet (or whose PV is missing): its
  StorageClass's provisioner (translated the same way) and a handle unique to
  the claim;
- a generic ephemeral volume: its claim (``<pod>-<volume>``), which must be the
  pod's own;
- an inline in-tree volume of a migrated plugin, translated.

On the node: the volumes of the pods on it, plus the VolumeAttachments to it
(attacher set, a PV with ``spec.csi``) that no pod there accounts for. The pod's
volumes that are not among them are new; if for some driver the attached plus
the new exceed the limit, the node is rejected with "node(s) exceed max volume
count" (Unschedulable: evicting a pod frees its volumes). The pod's own claims
must exist (a missing one is unresolvable); other pods' missing claims are
skipped. With kube's VolumeLimitScaling (on by default in 1.37), a driver whose
CSIDriver sets ``preventPodSchedulingIfMissing`` and that the node's CSINode
does not list rejects the node: "<driver> CSI driver is not installed on the node".
"""

from __future__ import annotations

import secrets
from collections import Counter
from typing import Any, ClassVar

from scheduler.core.framework import SKIP, CycleState, Snapshot, Status, error, unresolvable, unschedulable
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.csitranslation import CSI_DRIVER_OF_SOURCE, csi_driver_for_provisioner, in_tree_csi
from scheduler.plugins.volumebinding.volumes import claim_class, spec

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
_STATE_KEY = "NodeVolumeLimits"


def _inline_migratable(volume: dict[str, Any]) -> bool:
    return any(isinstance(volume.get(field), dict) for field in CSI_DRIVER_OF_SOURCE)


def _owned_by(pvc: dict[str, Any], pod: PodInfo) -> bool:
    refs = (pvc.get("metadata") or {}).get("ownerReferences") or ()
    return any(r.get("controller") and r.get("uid") == pod.uid for r in refs)


class NodeVolumeLimits:
    name: ClassVar[str] = "NodeVolumeLimits"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        self.handle = handle
        # Handles of claims without a PV: unique per claim, never equal to a real one.
        self._prefix = secrets.token_hex(16)

    def _store(self, resource: str) -> Any:
        return self.handle.store(resource)

    # --- which volumes a pod attaches ----------------------------------------------------------

    def _claim_volume(self, pvc: dict[str, Any], csinode: dict[str, Any] | None) -> tuple[str, str] | None:
        """``getCSIDriverInfo``: (driver, handle) of a claim, or None when it counts for no driver."""
        pv_name = spec(pvc).get("volumeName") or ""
        pv = self._store("persistentvolumes").get(pv_name) if pv_name else None
        if pv is not None:
            csi = spec(pv).get("csi")
            if isinstance(csi, dict):
                return csi.get("driver", ""), csi.get("volumeHandle", "")
            if csinode is None:  # isCSIMigrationOn: no CSINode, no migration
                return None
            return in_tree_csi(spec(pv), (pv.get("metadata") or {}).get("labels") or {})
        class_name = claim_class(pvc)
        klass = self._store("storageclasses").get(class_name) if class_name else None
        if klass is None:
            return None
        provisioner = klass.get("provisioner", "")
        driver = csi_driver_for_provisioner(provisioner)
        if driver != provisioner and csinode is None:
            return None
        meta = pvc.get("metadata") or {}
        return driver, f"{self._prefix}-{meta.get('namespace', '')}/{meta.get('name', '')}"

    def attachable(
        self, pod: PodInfo, csinode: dict[str, Any] | None, new_pod: bool, out: dict[str, str]
    ) -> Status | None:
        """``filterAttachableVolumes``: adds the pod's volumes to ``out`` (``driver/handle`` ->
        driver); a status when the new pod cannot be placed for them."""
        pvcs = self._store("persistentvolumeclaims")
        for v in pod.spec.get("volumes") or ():
            if "persistentVolumeClaim" in v:
                name = (v["persistentVolumeClaim"] or {}).get("claimName") or ""
                ephemeral = False
            elif "ephemeral" in v:
                name = f"{pod.name}-{v.get('name', '')}"
                ephemeral = True
            else:
                if _inline_migratable(v) and csinode is not None:
                    found = in_tree_csi(v)
                    if found and found[1]:
                        out[f"{found[0]}/{found[1]}"] = found[0]
                continue
            if not name:
                return error("PersistentVolumeClaim had no name")
            pvc = pvcs.get(f"{pod.namespace}/{name}")
            if pvc is None:
                if new_pod:
                    return unresolvable(
                        f'looking up PVC {pod.namespace}/{name}: persistentvolumeclaim "{name}" not found'
                    )
                continue
            if ephemeral and not _owned_by(pvc, pod):
                return error(
                    f"PVC {pod.namespace}/{name} was not created for pod {pod.key} (pod is not owner)"
                )
            found = self._claim_volume(pvc, csinode)
            if found and found[0] and found[1]:
                out[f"{found[0]}/{found[1]}"] = found[0]
        return None

    # --- the extension points --------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        for v in pod.spec.get("volumes") or ():
            if "persistentVolumeClaim" in v or "ephemeral" in v or _inline_migratable(v):
                return None
        return SKIP

    def _attachments_by_node(self, state: CycleState) -> dict[str, dict[str, str]]:
        """The VolumeAttachments of every node (``driver/handle`` -> driver), once per cycle."""
        by_node = state.get(_STATE_KEY)
        if by_node is None:
            by_node = {}
            pvs = self._store("persistentvolumes")
            for va in self._store("volumeattachments").list():
                s = spec(va)
                attacher, pv_name = (
                    s.get("attacher") or "",
                    (s.get("source") or {}).get("persistentVolumeName"),
                )
                if not attacher or not pv_name:
                    continue
                pv = pvs.get(pv_name)
                csi = spec(pv).get("csi") if pv is not None else None
                if isinstance(csi, dict):
                    node = s.get("nodeName", "")
                    by_node.setdefault(node, {})[f"{attacher}/{csi.get('volumeHandle', '')}"] = attacher
            state[_STATE_KEY] = by_node
        return by_node

    def _driver_missing(self, driver: str, csinode: dict[str, Any] | None) -> bool:
        """``checkCSIDriverOnNode``, negated."""
        obj = self._store("csidrivers").get(driver)
        if obj is None or not spec(obj).get("preventPodSchedulingIfMissing"):
            return False
        return csinode is None or all(d.get("name") != driver for d in spec(csinode).get("drivers") or ())

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not pod.spec.get("volumes"):
            return None
        csinode = self._store("csinodes").get(node.name)
        new: dict[str, str] = {}
        st = self.attachable(pod, csinode, True, new)
        if st is not None:
            return st
        if not new:
            return None
        for driver in set(new.values()):
            if self._driver_missing(driver, csinode):
                return unschedulable(f"{driver} CSI driver is not installed on the node")
        limits = {
            d.get("name"): (d.get("allocatable") or {}).get("count")
            for d in (spec(csinode).get("drivers") or () if csinode is not None else ())
        }
        limits = {k: v for k, v in limits.items() if isinstance(v, int)}
        if not limits:
            return None
        attached: dict[str, str] = {}
        for other in node.pods.values():
            if other.spec.get("volumes"):
                self.attachable(other, csinode, False, attached)
        counts: Counter[str] = Counter()
        for key, driver in attached.items():
            new.pop(key, None)
            counts[driver] += 1
        for key, driver in self._attachments_by_node(state).get(node.name, {}).items():
            if key not in attached:
                counts[driver] += 1
        for driver, n in Counter(new.values()).items():
            limit = limits.get(driver)
            if limit is not None and counts[driver] + n > limit:
                return unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
        return None
