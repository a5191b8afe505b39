"""VolumeRestrictions: ReadWriteOncePod claims and in-tree disk conflicts (volumerestrictions.go)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.core.cache import Cache
from scheduler.core.framework import SKIP, Code, CycleState
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.volumerestrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_RWOP_CONFLICT,
    VolumeRestrictions,
    disks_conflict,
)

from .builders import FakeHandle, FakeSnapshot, node_info, pod_info


def with_volumes(name: str, *volumes: dict[str, Any], namespace: str = "default") -> PodInfo:
    p = pod_info(name, namespace)
    p.pod["spec"]["volumes"] = [{"name": f"v{i}", **v} for i, v in enumerate(volumes)]
    return PodInfo.from_pod(p.pod)


def claim(name: str) -> dict[str, Any]:
    return {"persistentVolumeClaim": {"claimName": name}}


def pvc(name: str, *modes: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"accessModes": list(modes)}}


GCE = {"gcePersistentDisk": {"pdName": "disk-1"}}
GCE_RO = {"gcePersistentDisk": {"pdName": "disk-1", "readOnly": True}}
EBS = {"awsElasticBlockStore": {"volumeID": "vol-1"}}
EBS_RO = {"awsElasticBlockStore": {"volumeID": "vol-1", "readOnly": True}}
ISCSI = {"iscsi": {"iqn": "iqn.1", "targetPortal": "p", "lun": 0}}
ISCSI_RO = {"iscsi": {"iqn": "iqn.1", "targetPortal": "p", "lun": 0, "readOnly": True}}
RBD = {"rbd": {"monitors": ["m1", "m2"], "pool": "rbd", "image": "img"}}


@pytest.mark.parametrize(
    ("a", "b", "conflict"),
    [
        (GCE, GCE, True),
        (GCE, GCE_RO, True),
        (GCE_RO, GCE_RO, False),
        (GCE, {"gcePersistentDisk": {"pdName": "disk-2"}}, False),
        (EBS, EBS, True),
        (EBS_RO, EBS_RO, True),  # EBS attaches to one node: read-only does not help
        (ISCSI, ISCSI, True),
        (ISCSI_RO, ISCSI_RO, False),
        (RBD, {"rbd": {"monitors": ["m2", "m3"], "pool": "rbd", "image": "img"}}, True),
        (RBD, {"rbd": {"monitors": ["m3"], "pool": "rbd", "image": "img"}}, False),
        (RBD, {"rbd": {"monitors": ["m1"], "pool": "other", "image": "img"}}, False),
        (GCE, EBS, False),
    ],
)
def test_disk_conflicts(a: dict[str, Any], b: dict[str, Any], conflict: bool) -> None:
    assert disks_conflict(a, b) is conflict


def run(pl: VolumeRestrictions, pod: PodInfo, snapshot: FakeSnapshot, node: Any) -> Any:
    state = CycleState()
    pre = pl.pre_filter(state, pod, snapshot)
    if pre is SKIP:
        return "skip"
    return pre if pre is not None else pl.filter(state, pod, node)


def test_a_node_with_a_pod_on_the_same_disk_is_refused_others_are_not() -> None:
    pl = VolumeRestrictions(None, FakeHandle())
    busy = node_info("busy", pods=[with_volumes("there", GCE).pod])
    free = node_info("free", pods=[with_volumes("other", EBS).pod])
    snap = FakeSnapshot([busy, free])
    got = run(pl, with_volumes("p", GCE), snap, busy)
    assert got.code is Code.UNSCHEDULABLE and got.reasons == (ERR_REASON_DISK_CONFLICT,)
    assert run(pl, with_volumes("p", GCE), snap, free) is None
    ro = node_info("ro", pods=[with_volumes("r", GCE_RO).pod])
    assert run(pl, with_volumes("p", GCE_RO), FakeSnapshot([ro]), ro) is None  # both read-only


def test_a_read_write_once_pod_claim_in_use_anywhere_refuses_every_node() -> None:
    handle = FakeHandle(
        stores={"persistentvolumeclaims": [pvc("solo", "ReadWriteOncePod"), pvc("shared", "ReadWriteOnce")]}
    )
    pl = VolumeRestrictions(None, handle)
    holder = node_info("a", pods=[with_volumes("holder", claim("solo"), claim("shared")).pod])
    other = node_info("b")
    snap = FakeSnapshot([holder, other])
    for node in (holder, other):
        got = run(pl, with_volumes("p", claim("solo")), snap, node)
        assert got.code is Code.UNSCHEDULABLE and got.reasons == (ERR_REASON_RWOP_CONFLICT,)
    assert (
        run(pl, with_volumes("p", claim("shared")), snap, other) == "skip"
    )  # ReadWriteOnce: not this plugin's
    assert run(pl, with_volumes("p", claim("solo")), FakeSnapshot([other]), other) == "skip"  # nobody uses it


def test_a_missing_claim_is_unresolvable() -> None:
    got = run(VolumeRestrictions(None, FakeHandle()), with_volumes("p", claim("gone")), FakeSnapshot(), None)
    assert got.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and got.reasons == (
        'persistentvolumeclaim "gone" not found',
    )


def test_preemption_what_if_removing_the_holder_clears_the_conflict() -> None:
    handle = FakeHandle(stores={"persistentvolumeclaims": [pvc("solo", "ReadWriteOncePod")]})
    pl = VolumeRestrictions(None, handle)
    holder_pod = with_volumes("holder", claim("solo"))
    node = node_info("a", pods=[holder_pod.pod])
    pod = with_volumes("p", claim("solo"))
    state = CycleState()
    assert pl.pre_filter(state, pod, FakeSnapshot([node])) is None
    assert pl.filter(state, pod, node) is not None
    what_if = state.clone()
    pl.remove_pod(what_if, pod, holder_pod, node)
    assert pl.filter(what_if, pod, node) is None
    assert pl.filter(state, pod, node) is not None  # the clone's count is its own
    pl.add_pod(what_if, pod, holder_pod, node)
    assert pl.filter(what_if, pod, node) is not None
    elsewhere = with_volumes("holder", claim("solo"), namespace="other")
    pl.remove_pod(state, pod, elsewhere, node)  # another namespace's claim of that name: not ours
    assert pl.filter(state, pod, node) is not None


def test_the_cache_knows_which_claims_pods_use_bound_or_assumed() -> None:
    cache = Cache()
    bound = with_volumes("bound", claim("a"), claim("a"))
    bound.pod["spec"]["nodeName"] = "n"
    bound = PodInfo.from_pod(bound.pod)
    cache.add_pod(bound)
    assert cache.is_pvc_used_by_pods("default/a") and not cache.is_pvc_used_by_pods("other/a")
    assumed = with_volumes("assumed", claim("b"))
    cache.assume(assumed, "n")
    assert cache.is_pvc_used_by_pods("default/b")
    cache.forget(assumed)
    assert not cache.is_pvc_used_by_pods("default/b")
    cache.remove_pod(bound.uid)
    assert not cache.is_pvc_used_by_pods("default/a")
