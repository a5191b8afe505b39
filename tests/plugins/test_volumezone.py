"""VolumeZone: bound PVs' zone and region labels against the node's (volumezone.VolumeZone)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.core.framework import SKIP, Code
from scheduler.plugins.volumezone import ERR_REASON_CONFLICT, VolumeZone, label_zones

from .builders import FakeHandle, node_info, pod_info

ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"


def pvc(name: str, volume: str = "", klass: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"volumeName": volume} if volume else {}
    if klass is not None:
        spec["storageClassName"] = klass
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


def pv(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {}}


def sc(name: str, mode: str | None) -> dict[str, Any]:
    return {"metadata": {"name": name}, **({"volumeBindingMode": mode} if mode else {})}


def plugin(pvcs=(), pvs=(), classes=()) -> VolumeZone:
    return VolumeZone(
        None,
        FakeHandle(
            stores={
                "persistentvolumeclaims": list(pvcs),
                "persistentvolumes": list(pvs),
                "storageclasses": list(classes),
            }
        ),
    )


def claiming(*claims: str) -> Any:
    p = pod_info("p")
    p.pod["spec"]["volumes"] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return type(p).from_pod(p.pod)


def verdict(pl: VolumeZone, pod: Any, **labels: str) -> Any:
    state: dict[str, Any] = {}
    pre = pl.pre_filter(state, pod, None)
    if pre is SKIP:
        return "skip"
    if pre is not None:
        return pre
    return pl.filter(state, pod, node_info("n", labels=labels))


@pytest.mark.parametrize(
    ("value", "zones"),
    [("a", {"a"}), ("a__b", {"a", "b"}), (" a __ b ", {"a", "b"}), ("a____b", None), ("", None)],
)
def test_label_zones(value: str, zones: set[str] | None) -> None:
    assert label_zones(value) == (frozenset(zones) if zones is not None else None)


ZONAL = plugin([pvc("data", "pv-1")], [pv("pv-1", **{ZONE: "z1__z2", REGION: "r1"})])


@pytest.mark.parametrize(
    ("labels", "ok"),
    [
        ({ZONE: "z1", REGION: "r1"}, True),
        ({ZONE: "z2", REGION: "r1"}, True),
        ({ZONE: "z3", REGION: "r1"}, False),
        ({ZONE: "z1", REGION: "r2"}, False),
        ({ZONE: "z1"}, False),  # the region label is missing on a node with topology labels
        ({BETA_ZONE: "z1", REGION: "r1"}, False),  # a GA PV label is not looked up under beta
        ({}, True),  # no topology label at all: no constraint
        ({"kubernetes.io/hostname": "n"}, True),
    ],
)
def test_bound_pv_zones_restrict_nodes(labels: dict[str, str], ok: bool) -> None:
    got = verdict(ZONAL, claiming("data"), **labels)
    if ok:
        assert got is None
    else:
        assert got.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and got.reasons == (ERR_REASON_CONFLICT,)


def test_a_beta_pv_label_matches_the_nodes_ga_label() -> None:
    pl = plugin([pvc("data", "pv-1")], [pv("pv-1", **{BETA_ZONE: "z1"})])
    assert verdict(pl, claiming("data"), **{ZONE: "z1"}) is None
    assert verdict(pl, claiming("data"), **{ZONE: "z2"}) is not None


def test_pods_without_zonal_volumes_skip() -> None:
    assert verdict(ZONAL, pod_info("p"), **{ZONE: "z9"}) == "skip"
    pl = plugin([pvc("data", "pv-1")], [pv("pv-1")])
    assert verdict(pl, claiming("data"), **{ZONE: "z9"}) == "skip"
    bad = plugin([pvc("data", "pv-1")], [pv("pv-1", **{ZONE: "z1____z2"})])  # unparsable: ignored
    assert verdict(bad, claiming("data"), **{ZONE: "z9"}) == "skip"


@pytest.mark.parametrize(
    ("objects", "reason"),
    [
        (([], [], []), 'persistentvolumeclaim "data" not found'),
        (([pvc("data", "pv-1")], [], []), 'persistentvolume "pv-1" not found'),
        (([pvc("data")], [], []), "PersistentVolumeClaim had no pv name and storageClass name"),
        (([pvc("data", klass="fast")], [], []), 'storageclass.storage.k8s.io "fast" not found'),
        (
            ([pvc("data", klass="fast")], [], [sc("fast", None)]),
            'VolumeBindingMode not set for StorageClass "fast"',
        ),
        (([pvc("data", klass="fast")], [], [sc("fast", "Immediate")]), "PersistentVolume had no name"),
    ],
)
def test_claims_it_cannot_place_are_unresolvable(objects: tuple[list, list, list], reason: str) -> None:
    got = verdict(plugin(*objects), claiming("data"), **{ZONE: "z1"})
    assert got.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and got.reasons == (reason,)


def test_an_unbound_wait_for_first_consumer_claim_is_volume_bindings_business() -> None:
    pl = plugin([pvc("late", klass="wffc")], [], [sc("wffc", "WaitForFirstConsumer")])
    assert verdict(pl, claiming("late"), **{ZONE: "z1"}) == "skip"
