"""The in-tree volume plugins whose volumes count against a CSI driver's attach limit.

kube-scheduler's NodeVolumeLimits counts an in-tree volume (inline in a pod or
in a PersistentVolume) as the CSI volume it migrates to, for the plugins whose
migration is on (``nodevolumelimits.isCSIMigrationOn``: AWS EBS, GCE PD,
Azure Disk, Cinder, Portworx), through csi-translation-lib. Only two things
of the translation matter for counting: the CSI driver's name, and a volume
handle that is the same for the same disk; these follow the library's formats
(``TranslateInTreePVToCSI``, ``TranslateInTreeInlineVolumeToCSI``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

UNSPECIFIED = "UNSPECIFIED"
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")

IN_TREE_PLUGINS: dict[str, tuple[str, str]] = {
    "kubernetes.io/aws-ebs": ("awsElasticBlockStore", "ebs.csi.aws.com"),
    "kubernetes.io/gce-pd": ("gcePersistentDisk", "pd.csi.storage.gke.io"),
    "kubernetes.io/azure-disk": ("azureDisk", "disk.csi.azure.com"),
    "kubernetes.io/cinder": ("cinder", "cinder.csi.openstack.org"),
    "kubernetes.io/portworx-volume": ("portworxVolume", "pxd.portworx.com"),
}
"""In-tree plugin (a StorageClass's provisioner) -> (its volume source field, its CSI driver)."""
CSI_DRIVER_OF_SOURCE = {field: driver for field, driver in IN_TREE_PLUGINS.values()}


def csi_driver_for_provisioner(provisioner: str) -> str:
    """A StorageClass provisioner as the CSI driver that provisions for it."""
    entry = IN_TREE_PLUGINS.get(provisioner)
    return entry[1] if entry else provisioner


def _ebs_volume_id(volume_id: str) -> str:
    """``aws://us-east-1a/vol-1`` (or ``aws:///vol-1``) -> ``vol-1`` (``KubernetesVolumeIDToEBSVolumeID``)."""
    if volume_id.startswith("aws://"):
        return volume_id.rstrip("/").rsplit("/", 1)[-1]
    return volume_id


def _gce_handle(source: dict[str, Any], labels: Mapping[str, str] | None) -> str:
    pd = source.get("pdName", "")
    zones: list[str] = []
    for key in ZONE_LABELS:
        if labels and labels.get(key):
            zones = [z for z in labels[key].split("__") if z]
            break
    if len(zones) == 1:
        return f"projects/{UNSPECIFIED}/zones/{zones[0]}/disks/{pd}"
    if len(zones) > 1:  # a regional disk: the zones' region (us-central1-a -> us-central1)
        return f"projects/{UNSPECIFIED}/regions/{zones[0].rsplit('-', 1)[0]}/disks/{pd}"
    return f"projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{pd}"


def in_tree_csi(
    source_owner: Mapping[str, Any], labels: Mapping[str, str] | None = None
) -> tuple[str, str] | None:
    """(CSI driver, volume handle) of a volume or PV spec with a migrated in-tree source, or None.

    ``labels``: a PV's labels (GCE PD handles carry its zone); None for inline volumes."""
    for field, driver in CSI_DRIVER_OF_SOURCE.items():
        source = source_owner.get(field)
        if not isinstance(source, dict):
            continue
        if field == "awsElasticBlockStore":
            return driver, _ebs_volume_id(source.get("volumeID", ""))
        if field == "gcePersistentDisk":
            return driver, _gce_handle(source, labels)
        if field == "azureDisk":
            return driver, source.get("diskURI", "")
        return driver, source.get("volumeID", "")  # cinder, portworxVolume
    return None
