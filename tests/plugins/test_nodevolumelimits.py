"""NodeVolumeLimits: unique volumes per CSI driver against the CSINode's limits (nodevolumelimits/csi.go)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.core.framework import SKIP, Code, CycleState
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.csitranslation import in_tree_csi
from scheduler.plugins.nodevolumelimits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, NodeVolumeLimits

from .builders import FakeHandle, node_info, pod_info

EBS = "ebs.csi.aws.com"
CSI = "csi.example.com"


def pod(name: str, *volumes: dict[str, Any], uid: str | None = None) -> PodInfo:
    p = pod_info(name)
    p.pod["spec"]["volumes"] = [{"name": f"v{i}", **v} for i, v in enumerate(volumes)]
    if uid:
        p.pod["metadata"]["uid"] = uid
    return PodInfo.from_pod(p.pod)


def claim(name: str) -> dict[str, Any]:
    return {"persistentVolumeClaim": {"claimName": name}}


def pvc(name: str, volume: str = "", klass: str = "", owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if owner:
        meta["ownerReferences"] = [
            {"uid": owner, "controller": True, "kind": "Pod", "name": "p", "apiVersion": "v1"}
        ]
    return {"metadata": meta, "spec": {"volumeName": volume, "storageClassName": klass}}


def csi_pv(name: str, handle: str, driver: str = CSI) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"csi": {"driver": driver, "volumeHandle": handle}}}


def csinode(node: str, **limits: int) -> dict[str, Any]:
    drivers = [
        {"name": d.replace("_", "."), "nodeID": node, "allocatable": {"count": n}} for d, n in limits.items()
    ]
    return {"metadata": {"name": node}, "spec": {"drivers": drivers}}


def plugin(**stores: list[dict[str, Any]]) -> NodeVolumeLimits:
    return NodeVolumeLimits(None, FakeHandle(stores=stores))


def verdict(pl: NodeVolumeLimits, p: PodInfo, node: Any) -> Any:
    state = CycleState()
    if pl.pre_filter(state, p, None) is SKIP:
        return "skip"
    return pl.filter(state, p, node)


def refused(st: Any) -> bool:
    return (
        st is not None
        and st.code is Code.UNSCHEDULABLE
        and st.reasons == (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,)
    )


LIMIT_2 = {"csinodes": [csinode("n", csi_example_com=2)]}
PVS = [csi_pv(f"pv{i}", f"h{i}") for i in range(4)]
PVCS = [pvc(f"c{i}", f"pv{i}") for i in range(4)]


def test_unique_volumes_count_against_the_limit() -> None:
    pl = plugin(persistentvolumes=PVS, persistentvolumeclaims=PVCS, **LIMIT_2)
    node = node_info("n", pods=[pod("a", claim("c0")).pod, pod("b", claim("c0"), claim("c1")).pod])
    assert refused(verdict(pl, pod("p", claim("c2")), node))  # two attached, a third is too many
    assert verdict(pl, pod("p", claim("c1")), node) is None  # already attached
    free = node_info("n", pods=[pod("a", claim("c0")).pod])
    assert verdict(pl, pod("p", claim("c2")), free) is None
    assert refused(verdict(pl, pod("p", claim("c2"), claim("c3")), free))


def test_no_limit_for_other_drivers_or_without_a_csinode() -> None:
    pvs = [csi_pv("o1", "x", driver="other.example.com"), *PVS]
    pl = plugin(persistentvolumes=pvs, persistentvolumeclaims=[*PVCS, pvc("o", "o1")], **LIMIT_2)
    full = node_info("n", pods=[pod("a", claim("c0"), claim("c1")).pod])
    assert verdict(pl, pod("p", claim("o")), full) is None
    assert (
        verdict(plugin(persistentvolumes=PVS, persistentvolumeclaims=PVCS), pod("p", claim("c2")), full)
        is None
    )


def test_volume_attachments_no_pod_accounts_for_count_too() -> None:
    va = {
        "metadata": {"name": "va"},
        "spec": {"attacher": CSI, "nodeName": "n", "source": {"persistentVolumeName": "pv3"}},
    }
    pl = plugin(persistentvolumes=PVS, persistentvolumeclaims=PVCS, volumeattachments=[va], **LIMIT_2)
    node = node_info("n", pods=[pod("a", claim("c0")).pod])
    assert refused(verdict(pl, pod("p", claim("c1")), node))  # c0 and the attachment of pv3
    # The attached volume itself counts twice, as in kube-scheduler: a VolumeAttachment no pod
    # on the node accounts for is attached, and the pod's volume is still new.
    assert refused(verdict(pl, pod("p", claim("c3")), node))
    assert verdict(pl, pod("p", claim("c0")), node) is None


def test_unbound_claims_count_by_their_class_and_in_tree_by_translation() -> None:
    classes = [
        {"metadata": {"name": "fast"}, "provisioner": CSI},
        {"metadata": {"name": "ebs"}, "provisioner": "kubernetes.io/aws-ebs"},
    ]
    stores = {
        "persistentvolumeclaims": [pvc("u1", klass="fast"), pvc("u2", klass="fast"), pvc("e1", klass="ebs")],
        "storageclasses": classes,
        "csinodes": [csinode("n", csi_example_com=1, ebs_csi_aws_com=1)],
    }
    pl = plugin(**stores)
    empty = node_info("n")
    assert verdict(pl, pod("p", claim("u1")), empty) is None
    assert refused(verdict(pl, pod("p", claim("u1"), claim("u2")), empty))  # two claims, two volumes
    inline = {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}
    with_ebs = node_info("n", pods=[pod("a", inline).pod])
    assert refused(verdict(pl, pod("p", claim("e1")), with_ebs))  # the class's provisioner is EBS
    same_disk = {"awsElasticBlockStore": {"volumeID": "vol-1"}}
    assert verdict(pl, pod("p", same_disk), with_ebs) is None  # aws://zone/vol-1 is vol-1


@pytest.mark.parametrize(
    ("volume", "labels", "want"),
    [
        ({"awsElasticBlockStore": {"volumeID": "aws:///vol-9"}}, None, (EBS, "vol-9")),
        (
            {"gcePersistentDisk": {"pdName": "d"}},
            None,
            ("pd.csi.storage.gke.io", "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d"),
        ),
        (
            {"gcePersistentDisk": {"pdName": "d"}},
            {"topology.kubernetes.io/zone": "z1"},
            ("pd.csi.storage.gke.io", "projects/UNSPECIFIED/zones/z1/disks/d"),
        ),
        (
            {"gcePersistentDisk": {"pdName": "d"}},
            {"topology.kubernetes.io/zone": "us-central1-a__us-central1-b"},
            ("pd.csi.storage.gke.io", "projects/UNSPECIFIED/regions/us-central1/disks/d"),
        ),
        ({"azureDisk": {"diskName": "d", "diskURI": "/sub/d"}}, None, ("disk.csi.azure.com", "/sub/d")),
        ({"cinder": {"volumeID": "c"}}, None, ("cinder.csi.openstack.org", "c")),
        ({"hostPath": {"path": "/x"}}, None, None),
    ],
)
def test_in_tree_translation(volume: dict[str, Any], labels: dict[str, str] | None, want: Any) -> None:
    assert in_tree_csi(volume, labels) == want


def test_the_pods_own_missing_claim_is_unresolvable_another_pods_is_skipped() -> None:
    pl = plugin(persistentvolumes=PVS, persistentvolumeclaims=PVCS, **LIMIT_2)
    st = verdict(pl, pod("p", claim("nope")), node_info("n"))
    assert st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ('looking up PVC default/nope: persistentvolumeclaim "nope" not found',)
    node = node_info("n", pods=[pod("a", claim("nope")).pod, pod("b", claim("c0")).pod])
    assert verdict(pl, pod("p", claim("c1")), node) is None


def test_generic_ephemeral_volumes_count_as_their_claim() -> None:
    mine = pvc("p-v0", "pv1", owner="uid-p")
    pl = plugin(
        persistentvolumes=PVS,
        persistentvolumeclaims=[*PVCS, mine],
        csinodes=[csinode("n", csi_example_com=1)],
    )
    eph = {"ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
    node = node_info("n", pods=[pod("a", claim("c0")).pod])
    assert refused(verdict(pl, pod("p", eph, uid="uid-p"), node))
    st = verdict(pl, pod("p", eph, uid="someone-else"), node)
    assert st.code is Code.ERROR and "(pod is not owner)" in st.reasons[0]


def test_a_driver_that_must_be_installed_and_is_not() -> None:
    driver = {"metadata": {"name": CSI}, "spec": {"preventPodSchedulingIfMissing": True}}
    pl = plugin(
        persistentvolumes=PVS,
        persistentvolumeclaims=PVCS,
        csidrivers=[driver],
        csinodes=[csinode("n", other_example_com=5)],
    )
    st = verdict(pl, pod("p", claim("c0")), node_info("n"))
    assert st.code is Code.UNSCHEDULABLE and st.reasons == (f"{CSI} CSI driver is not installed on the node",)
    pl = plugin(persistentvolumes=PVS, persistentvolumeclaims=PVCS, csidrivers=[driver], **LIMIT_2)
    assert verdict(pl, pod("p", claim("c0")), node_info("n")) is None


def test_pods_without_volumes_skip() -> None:
    assert verdict(plugin(), pod("p", {"emptyDir": {}}), node_info("n")) == "skip"
