"""VolumeBinding decisions (PreFilter, Filter, Reserve/Unreserve) over dict-backed stores, with
cases from kube-scheduler's volume_binding_test.go and binder_test.go; and PreBind's check of
the binding progress, over objects given as test data. PreBind's API writes are tested against
a real API server elsewhere."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from scheduler.core.framework import SKIP, Code, CycleState, Status
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.volumebinding.api import (
    BindingFailedError,
    binding_done,
    selected_node_patch,
    volume_patch,
)
from scheduler.plugins.volumebinding.plugin import (
    ERR_BIND_CONFLICT,
    ERR_NODE_CONFLICT,
    ERR_PV_NOT_EXIST,
    ERR_UNBOUND_IMMEDIATE,
    PodVolumes,
    VolumeBinding,
)
from scheduler.plugins.volumebinding.volumes import ANN_BIND_COMPLETED, ANN_SELECTED_NODE
from tests.plugins.builders import FakeHandle, FakeSnapshot, make_pod, node_info

UR = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
HOSTNAME = "kubernetes.io/hostname"

# --- test data -----------------------------------------------------------------------------


def sc(
    name: str,
    mode: str = "WaitForFirstConsumer",
    provisioner: str = "rancher.io/local-path",
    allowed: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    c: dict[str, Any] = {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode}
    if allowed is not None:
        c["allowedTopologies"] = allowed
    return c


def pvc(
    name: str,
    cls: str = "standard",
    size: str = "1Gi",
    *,
    volume: str = "",
    modes: tuple = ("ReadWriteOnce",),
    annotations: dict[str, str] | None = None,
    ns: str = "default",
    rv: str = "1",
    **extra: Any,
) -> dict[str, Any]:
    ann = dict(annotations or {})
    if volume and "prebound" not in extra:
        ann[ANN_BIND_COMPLETED] = "yes"
    extra.pop("prebound", None)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "uid": f"uid-{name}",
        "resourceVersion": rv,
        "annotations": ann,
        **extra,
    }
    spec: dict[str, Any] = {
        "storageClassName": cls,
        "accessModes": list(modes),
        "resources": {"requests": {"storage": size}},
    }
    if volume:
        spec["volumeName"] = volume
    return {"metadata": meta, "spec": spec, "status": {"phase": "Bound" if volume else "Pending"}}


def host_affinity(*hosts: str) -> dict[str, Any]:
    return {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": list(hosts)}]}
            ]
        }
    }


def pv(
    name: str,
    cls: str = "local",
    size: str = "1Gi",
    *,
    hosts: tuple[str, ...] = (),
    claim: dict | None = None,
    modes: tuple = ("ReadWriteOnce",),
    phase: str = "Available",
    labels: dict[str, str] | None = None,
    rv: str = "1",
    **spec_extra: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "storageClassName": cls,
        "capacity": {"storage": size},
        "accessModes": list(modes),
        **spec_extra,
    }
    if hosts:
        spec["nodeAffinity"] = host_affinity(*hosts)
    if claim is not None:
        spec["claimRef"] = claim
    return {
        "metadata": {"name": name, "resourceVersion": rv, "labels": labels or {}},
        "spec": spec,
        "status": {"phase": phase},
    }


def pod(*claims: str, ephemeral: tuple[str, ...] = (), name: str = "web-0", uid: str = "pod-uid") -> PodInfo:
    vols: list[dict[str, Any]] = [{"name": "token", "projected": {"sources": []}}]
    vols += [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    vols += [{"name": e, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}} for e in ephemeral]
    return PodInfo.from_pod(make_pod(name, volumes=vols, uid=uid))


NODES = [
    node_info("node-a", labels={"zone": "a"}),
    node_info("node-b", labels={"zone": "b"}),
    node_info("node-c", labels={"zone": "b"}),
]
DEFAULT_CLASSES = [
    sc("standard"),
    sc("local", provisioner="kubernetes.io/no-provisioner"),
    sc("fast", mode="Immediate"),
]


def setup(
    pvcs: list[dict],
    pvs: list[dict] = (),
    classes: list[dict] = DEFAULT_CLASSES,
    nodes: list[NodeInfo] = NODES,
) -> tuple[VolumeBinding, FakeHandle]:
    handle = FakeHandle(
        FakeSnapshot(nodes),
        stores={"persistentvolumeclaims": pvcs, "persistentvolumes": list(pvs), "storageclasses": classes},
    )
    return VolumeBinding(None, handle), handle


def run(
    plugin: VolumeBinding, p: PodInfo, nodes: list[NodeInfo] = NODES
) -> tuple[CycleState, Status | None, dict[str, tuple[str, ...] | None]]:
    state = CycleState()
    st = plugin.pre_filter(state, p, plugin.handle.snapshot)
    if st is not None:
        return state, st, {}
    out = {}
    for n in nodes:
        s = plugin.filter(state, p, n)
        out[n.name] = None if s is None else s.reasons
        assert s is None or s.code == UR
    return state, None, out


def feasible(result: dict[str, tuple[str, ...] | None]) -> list[str]:
    return sorted(n for n, r in result.items() if r is None)


# --- PreFilter ---------------------------------------------------------------------------


def test_pod_without_claims_skips() -> None:
    plugin, _ = setup([])
    assert run(plugin, pod())[1] is SKIP


def test_missing_claims() -> None:
    plugin, _ = setup([pvc("pvc-a", volume="pv-a")], [pv("pv-a")])
    assert run(plugin, pod("pvc-b"))[1] == Status(UR, ('persistentvolumeclaim "pvc-b" not found',))
    assert run(plugin, pod("pvc-a", "pvc-b"))[1] == Status(UR, ('persistentvolumeclaim "pvc-b" not found',))


def test_lost_and_terminating_claims() -> None:
    lost = pvc("lost", volume="gone")
    lost["status"]["phase"] = "Lost"
    plugin, _ = setup([lost, pvc("dying", deletionTimestamp="2026-01-01T00:00:00Z")])
    assert run(plugin, pod("lost"))[1].reasons == (
        'persistentvolumeclaim "lost" bound to non-existent persistentvolume "gone"',
    )
    assert run(plugin, pod("dying"))[1].reasons == ('persistentvolumeclaim "dying" is being deleted',)


def test_ephemeral_volume_claims() -> None:
    plugin, _ = setup([])
    assert run(plugin, pod(ephemeral=("scratch",)))[1].reasons == (
        'waiting for ephemeral volume controller to create the persistentvolumeclaim "web-0-scratch"',
    )
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "web-0", "uid": "pod-uid", "controller": True}
    plugin, _ = setup([pvc("web-0-scratch", ownerReferences=[owner])])
    assert feasible(run(plugin, pod(ephemeral=("scratch",)))[2]) == ["node-a", "node-b", "node-c"]
    # The same name, but made for an earlier pod of that name.
    assert run(plugin, pod(ephemeral=("scratch",), uid="other"))[1].reasons == (
        "PVC default/web-0-scratch was not created for pod default/web-0 (pod is not owner)",
    )


def test_unbound_immediate_claims_are_unresolvable() -> None:
    plugin, _ = setup([pvc("data", "fast"), pvc("nocls", ""), pvc("ghost", "missing-class")])
    for claim in ("data", "nocls", "ghost"):
        assert run(plugin, pod(claim))[1] == Status(UR, (ERR_UNBOUND_IMMEDIATE,))
    # A claim naming a volume that is not bound yet is treated the same, whatever its class.
    plugin, _ = setup([pvc("pre", "standard", volume="pv-x", prebound=True)])
    assert run(plugin, pod("pre"))[1] == Status(UR, (ERR_UNBOUND_IMMEDIATE,))


# --- Filter: bound claims --------------------------------------------------------------------


def test_bound_claims_follow_their_volumes_node_affinity() -> None:
    plugin, _ = setup(
        [pvc("a", volume="pv-a"), pvc("b", volume="pv-b")],
        [pv("pv-a", hosts=("node-a", "node-b")), pv("pv-b")],
    )
    assert feasible(run(plugin, pod("b"))[2]) == ["node-a", "node-b", "node-c"]
    _, _, got = run(plugin, pod("a", "b"))
    assert got == {"node-a": None, "node-b": None, "node-c": (ERR_NODE_CONFLICT,)}


def test_bound_claim_whose_volume_is_gone() -> None:
    plugin, _ = setup([pvc("a", volume="pv-missing")])
    assert set(run(plugin, pod("a"))[2].values()) == {(ERR_PV_NOT_EXIST,)}


# --- Filter: WaitForFirstConsumer --------------------------------------------------------


def test_dynamic_provisioning_fits_every_node() -> None:
    """kind's default: class `standard`, local-path-provisioner, WaitForFirstConsumer, no PVs."""
    plugin, _ = setup([pvc("data")])
    state, st, got = run(plugin, pod("data"))
    assert st is None and feasible(got) == ["node-a", "node-b", "node-c"]


def test_allowed_topologies_limit_provisioning() -> None:
    zone_a = [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]
    plugin, _ = setup([pvc("data", "zonal")], classes=[sc("zonal", allowed=zone_a)])
    got = run(plugin, pod("data"))[2]
    assert got == {"node-a": None, "node-b": (ERR_BIND_CONFLICT,), "node-c": (ERR_BIND_CONFLICT,)}


def test_class_without_provisioner_needs_a_matching_volume() -> None:
    plugin, _ = setup([pvc("data", "local")])
    assert set(run(plugin, pod("data"))[2].values()) == {(ERR_BIND_CONFLICT,)}
    plugin, _ = setup([pvc("data", "local")], [pv("pv-b", hosts=("node-b",))])
    assert feasible(run(plugin, pod("data"))[2]) == ["node-b"]


def test_bound_and_unbound_both_unsatisfied() -> None:
    bound_pv = pv(
        "pv-a",
        hosts=("node-a",),
        phase="Bound",
        claim={"namespace": "default", "name": "bound", "uid": "uid-bound"},
    )
    plugin, _ = setup([pvc("bound", volume="pv-a"), pvc("data", "local")], [bound_pv])
    got = run(plugin, pod("bound", "data"))[2]
    assert got["node-b"] == (ERR_NODE_CONFLICT, ERR_BIND_CONFLICT)
    assert got["node-a"] == (ERR_BIND_CONFLICT,)


@pytest.mark.parametrize(
    "volume,fits",
    [
        (pv("small", size="500Mi"), False),
        (pv("exact", size="1Gi"), True),
        (pv("other-class", cls="slow"), False),
        (pv("read-only", modes=("ReadOnlyMany",)), False),
        (pv("superset", modes=("ReadWriteOnce", "ReadOnlyMany")), True),
        (pv("block", volumeMode="Block"), False),
        (pv("released", phase="Released"), False),
        (pv("taken", claim={"namespace": "default", "name": "other", "uid": "x"}), False),
        (pv("prebound-bound-phase", phase="Bound", claim={"namespace": "default", "name": "data"}), True),
        (pv("deleting", deletionTimestamp="2026-01-01T00:00:00Z"), False),
    ],
    ids=lambda v: v["metadata"]["name"] if isinstance(v, dict) else str(v),
)
def test_static_volume_matching(volume: dict[str, Any], fits: bool) -> None:
    if "deletionTimestamp" in volume["spec"]:
        volume["metadata"]["deletionTimestamp"] = volume["spec"].pop("deletionTimestamp")
    plugin, _ = setup([pvc("data", "local")], [volume])
    got = run(plugin, pod("data"))[2]
    assert (feasible(got) == ["node-a", "node-b", "node-c"]) is fits


def test_claim_selector_picks_volumes_by_label() -> None:
    claim = pvc("data", "local")
    claim["spec"]["selector"] = {"matchLabels": {"tier": "gold"}}
    plugin, _ = setup(
        [claim],
        [pv("silver", labels={"tier": "silver"}), pv("gold", hosts=("node-c",), labels={"tier": "gold"})],
    )
    assert feasible(run(plugin, pod("data"))[2]) == ["node-c"]


def test_smallest_fitting_volume_is_chosen() -> None:
    plugin, _ = setup(
        [pvc("data", "local", "1Gi")],
        [pv("big", size="10Gi"), pv("snug", size="2Gi"), pv("tiny", size="100Mi")],
    )
    state, _, _ = run(plugin, pod("data"))
    assert plugin.reserve(state, pod("data"), "node-a") is None
    ((volume, claim, changed),) = state["VolumeBinding"].chosen.static
    assert volume["metadata"]["name"] == "snug" and changed
    assert volume["spec"]["claimRef"]["name"] == "data" and volume["spec"]["claimRef"]["uid"] == "uid-data"


def test_two_claims_never_get_the_same_volume() -> None:
    plugin, _ = setup(
        [pvc("a", "local"), pvc("b", "local")],
        [pv("pv-1", hosts=("node-a", "node-b")), pv("pv-2", hosts=("node-b",))],
    )
    assert feasible(run(plugin, pod("a", "b"))[2]) == ["node-b"]


def test_smaller_claims_choose_first() -> None:
    # kube-scheduler matches claims in order of increasing request, whatever the pod's order.
    plugin, _ = setup(
        [pvc("big", "local", "2Gi"), pvc("small", "local", "1Gi")],
        [pv("pv-2g", size="2Gi"), pv("pv-3g", size="3Gi")],
    )
    state, _, _ = run(plugin, pod("big", "small"))
    plugin.reserve(state, pod("big", "small"), "node-a")
    chosen = {
        c["metadata"]["name"]: v["metadata"]["name"] for v, c, _ in state["VolumeBinding"].chosen.static
    }
    assert chosen == {"small": "pv-2g", "big": "pv-3g"}


def test_unmatched_claims_fall_back_to_provisioning() -> None:
    plugin, _ = setup([pvc("data")], [pv("small", cls="standard", size="1Mi")])
    state, _, got = run(plugin, pod("data"))
    assert feasible(got) == ["node-a", "node-b", "node-c"]
    assert plugin.reserve(state, pod("data"), "node-b") is None
    chosen = state["VolumeBinding"].chosen
    assert not chosen.static and [c["metadata"]["name"] for c in chosen.dynamic] == ["data"]


def test_claim_being_provisioned_only_fits_its_selected_node() -> None:
    plugin, _ = setup([pvc("data", annotations={ANN_SELECTED_NODE: "node-c"})])
    assert run(plugin, pod("data"))[2] == {
        "node-a": (ERR_BIND_CONFLICT,),
        "node-b": (ERR_BIND_CONFLICT,),
        "node-c": None,
    }


# --- Reserve / Unreserve: the assumptions ---------------------------------------------------


def test_reserved_provisioning_steers_pods_sharing_the_claim() -> None:
    plugin, handle = setup([pvc("shared")])
    state, _, _ = run(plugin, pod("shared", name="p1"))
    assert plugin.reserve(state, pod("shared", name="p1"), "node-b") is None
    chosen = state["VolumeBinding"].chosen
    assert chosen.dynamic[0]["metadata"]["annotations"][ANN_SELECTED_NODE] == "node-b"
    assert handle.store("persistentvolumeclaims").get("default/shared")["metadata"]["annotations"] == {}

    # The next pod's cycle runs before the informer delivers the annotated claim.
    assert feasible(run(plugin, pod("shared", name="p2"))[2]) == ["node-b"]
    plugin.unreserve(state, pod("shared", name="p1"), "node-b")
    assert feasible(run(plugin, pod("shared", name="p2"))[2]) == ["node-a", "node-b", "node-c"]


def test_reserved_volume_is_not_offered_again() -> None:
    plugin, _ = setup([pvc("a", "local"), pvc("b", "local")], [pv("only")])
    state, _, _ = run(plugin, pod("a", name="p1"))
    assert plugin.reserve(state, pod("a", name="p1"), "node-a") is None
    assert set(run(plugin, pod("b", name="p2"))[2].values()) == {(ERR_BIND_CONFLICT,)}
    plugin.unreserve(state, pod("a", name="p1"), "node-a")
    assert feasible(run(plugin, pod("b", name="p2"))[2]) == ["node-a", "node-b", "node-c"]


def test_newer_store_object_replaces_the_assumption() -> None:
    plugin, handle = setup([pvc("shared")])
    state, _, _ = run(plugin, pod("shared", name="p1"))
    plugin.reserve(state, pod("shared", name="p1"), "node-b")
    # The provisioner gave up: the claim came back (newer version) without the annotation.
    handle.store("persistentvolumeclaims")._objs["default/shared"] = pvc("shared", rv="7")
    assert feasible(run(plugin, pod("shared", name="p2"))[2]) == ["node-a", "node-b", "node-c"]
    plugin.unreserve(state, pod("shared", name="p1"), "node-b")  # nothing left to forget


def test_reserve_with_everything_bound_needs_no_prebind() -> None:
    plugin, _ = setup([pvc("a", volume="pv-a")], [pv("pv-a")])
    state, _, _ = run(plugin, pod("a"))
    assert plugin.reserve(state, pod("a"), "node-a") is None
    assert plugin.pre_bind(state, pod("a"), "node-a") is None  # no API client needed


def test_prebind_without_api_client_fails() -> None:
    plugin, _ = setup([pvc("data")])
    state, _, _ = run(plugin, pod("data"))
    plugin.reserve(state, pod("data"), "node-a")
    st = plugin.pre_bind(state, pod("data"), "node-a")
    assert st is not None and st.code == Code.ERROR


def test_bind_timeout_from_args() -> None:
    assert VolumeBinding().bind_timeout == 600
    assert VolumeBinding(SimpleNamespace(bind_timeout_seconds=30)).bind_timeout == 30


def test_static_matches_score_by_how_much_of_the_pv_the_claim_takes() -> None:
    """kube-scheduler's case "zonal volumes with close capacity are preferred": 50Gi on a 200Gi
    PV scores 75, on a 100Gi PV 50 (the default shape); a node with no PV is filtered out."""
    plugin, _ = setup(
        [pvc("claim", cls="local", size="50Gi")],
        [pv("big", size="200Gi", hosts=("node-a",)), pv("small", size="100Gi", hosts=("node-b",))],
    )
    state, status, result = run(plugin, pod("claim"))
    assert status is None and feasible(result) == ["node-a", "node-b"]
    assert plugin.pre_score(state, pod("claim"), NODES) is None
    assert [plugin.score(state, pod("claim"), n) for n in NODES] == [75, 50, 0]


def test_pods_with_nothing_to_bind_skip_the_score() -> None:
    plugin, _ = setup(
        [pvc("done", volume="pv-1")], [pv("pv-1", claim={"name": "done", "namespace": "default"})]
    )
    state, status, _ = run(plugin, pod("done"))
    assert status is None
    assert plugin.pre_score(state, pod("done"), NODES) is SKIP
    state, status, _ = run(plugin, pod())
    assert status is SKIP and plugin.pre_score(state, pod(), NODES) is SKIP


# --- PreBind: writes and the wait for binding ---------------------------------------------------


def test_volume_patch_writes_claim_ref_guarded_by_resource_version() -> None:
    plugin, _ = setup([pvc("data", "local")], [pv("pv-1", rv="42")])
    state, _, _ = run(plugin, pod("data"))
    plugin.reserve(state, pod("data"), "node-a")
    ((volume, _, _),) = state["VolumeBinding"].chosen.static
    assert volume_patch(volume) == {
        "metadata": {"resourceVersion": "42", "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": "default",
                "name": "data",
                "uid": "uid-data",
                "resourceVersion": "1",
            }
        },
    }
    assert selected_node_patch("node-a") == {"metadata": {"annotations": {ANN_SELECTED_NODE: "node-a"}}}


def progress(
    vols: PodVolumes,
    pvs: list[dict],
    pvcs: list[dict],
    node: str = "node-a",
    labels: dict[str, str] | None = None,
) -> bool:
    by_name = {p["metadata"]["name"]: p for p in pvs}
    by_key = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": c for c in pvcs}
    return binding_done(node, labels or {HOSTNAME: node}, vols, by_name.get, by_key.get)


def test_provisioning_progress() -> None:
    asked = pvc("data", annotations={ANN_SELECTED_NODE: "node-a"})
    vols = PodVolumes([], [asked])
    assert progress(vols, [], [asked]) is False  # not provisioned yet
    bound = pvc("data", volume="pvc-123", annotations={ANN_SELECTED_NODE: "node-a"})
    assert progress(vols, [], [bound]) is False  # the PV is not visible yet
    assert progress(vols, [pv("pvc-123", "standard", hosts=("node-a",))], [bound]) is True
    with pytest.raises(BindingFailedError, match="node affinity"):
        progress(vols, [pv("pvc-123", "standard", hosts=("node-b",))], [bound])
    with pytest.raises(BindingFailedError, match='provisioning failed for PVC "data"'):
        progress(vols, [], [pvc("data")])  # the provisioner removed the annotation
    with pytest.raises(BindingFailedError, match="not found"):
        progress(vols, [], [])


def test_static_binding_progress() -> None:
    claim = pvc("data", "local")
    ref = {"namespace": "default", "name": "data", "uid": "uid-data"}
    vols = PodVolumes([(pv("pv-1", claim=ref), claim, True)], [])
    assert progress(vols, [pv("pv-1", claim=ref)], [claim]) is False
    assert progress(vols, [pv("pv-1", claim=ref)], [pvc("data", "local", volume="pv-1")]) is True
    with pytest.raises(BindingFailedError, match="ClaimRef got reset"):
        progress(vols, [pv("pv-1")], [claim])
    with pytest.raises(BindingFailedError, match="node affinity"):
        progress(vols, [pv("pv-1", hosts=("node-b",), claim=ref)], [claim])
