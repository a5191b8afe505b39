"""VolumeBinding's storage capacity check: the scenarios of kube-scheduler's ``TestCapacity``
(binder_test.go), for a driver that asks for the check and for one that does not."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config.pluginargs import UtilizationShapePoint, VolumeBindingArgs
from scheduler.plugins.volumebinding.plugin import ERR_BIND_CONFLICT, ERR_NOT_ENOUGH_SPACE, VolumeBinding
from tests.plugins.builders import FakeHandle, FakeSnapshot, node_info
from tests.plugins.volumebinding.test_plugin import pod, pvc, run, sc

PROVISIONER = "test-provisioner"
NODE_LABEL = "topology.test/node"
NODES = [node_info(f"node{i}", labels={NODE_LABEL: f"node{i}"}) for i in (1, 2, 3)]


def capacity(
    cls: str, node: str | None, size: str = "", max_size: str = "", name: str = "net"
) -> dict[str, Any]:
    """A CSIStorageCapacity of ``cls``; ``node``: the node its topology selects (None: any)."""
    c: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "kube-system"},
        "storageClassName": cls,
        "nodeTopology": {"matchLabels": {NODE_LABEL: node}} if node else {},
    }
    if size:
        c["capacity"] = size
    if max_size:
        c["maximumVolumeSize"] = max_size
    return c


SCENARIOS: dict[str, tuple[list[dict[str, Any]], tuple[str, ...] | None]] = {
    "network-attached": ([capacity("wait-p", None, "1Gi")], None),
    "local-storage": ([capacity("wait-p", "node1", "1Gi")], None),
    "multiple": (
        [
            capacity("wait-p", None, "1Gi", name="a"),
            capacity("wait-p", "node2", "1Gi", name="b"),
            capacity("wait-p", "node1", "1Gi", name="c"),
        ],
        None,
    ),
    "no-storage": ([], (ERR_NOT_ENOUGH_SPACE,)),
    "wrong-node": ([capacity("wait-p", "node2", "1Gi")], (ERR_NOT_ENOUGH_SPACE,)),
    "wrong-storage-class": ([capacity("wait", "node1", "1Gi")], (ERR_NOT_ENOUGH_SPACE,)),
    "insufficient-storage": ([capacity("wait-p", "node1", "1Mi")], (ERR_NOT_ENOUGH_SPACE,)),
    "insufficient-volume-size": ([capacity("wait-p", "node1", "1Gi", "1Mi")], (ERR_NOT_ENOUGH_SPACE,)),
    "zero-storage": ([capacity("wait-p", "node1", "0Mi")], (ERR_NOT_ENOUGH_SPACE,)),
    "zero-volume-size": ([capacity("wait-p", "node1", "", "0Mi")], (ERR_NOT_ENOUGH_SPACE,)),
    "nil-storage": ([capacity("wait-p", "node1")], (ERR_NOT_ENOUGH_SPACE,)),
    "no-topology": ([{**capacity("wait-p", None, "1Gi"), "nodeTopology": None}], (ERR_NOT_ENOUGH_SPACE,)),
}


def plugin_with(
    capacities: list[dict[str, Any]],
    opt_in: bool | None,
    claims: list[dict[str, Any]] | None = None,
    args: VolumeBindingArgs | None = None,
) -> VolumeBinding:
    """The claim ``wait-p`` (1Gi, class ``wait-p`` of PROVISIONER); the driver asks for capacity
    checks when ``opt_in`` (None: no CSIDriver at all)."""
    drivers = []
    if opt_in is not None:
        drivers.append({"metadata": {"name": PROVISIONER}, "spec": {"storageCapacity": opt_in}})
    handle = FakeHandle(
        FakeSnapshot(NODES),
        stores={
            "persistentvolumeclaims": claims or [pvc("wait-p", cls="wait-p", size="1Gi")],
            "persistentvolumes": [],
            "storageclasses": [sc("wait-p", provisioner=PROVISIONER), sc("wait", provisioner=PROVISIONER)],
            "csidrivers": drivers,
            "csistoragecapacities": capacities,
        },
    )
    return VolumeBinding(args, handle)


@pytest.mark.parametrize("opt_in", [True, False, None])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_capacity(scenario: str, opt_in: bool | None) -> None:
    capacities, reasons = SCENARIOS[scenario]
    _, status, result = run(plugin_with(capacities, opt_in), pod("wait-p"), NODES[:1])
    assert status is None
    assert result["node1"] == (reasons if opt_in else None)


def test_only_nodes_the_capacity_selects_and_the_reason_beside_others() -> None:
    plugin = plugin_with([capacity("wait-p", "node2", "5Gi")], True)
    _, _, result = run(plugin, pod("wait-p"), NODES)
    assert result == {"node1": (ERR_NOT_ENOUGH_SPACE,), "node2": None, "node3": (ERR_NOT_ENOUGH_SPACE,)}


def test_a_claim_without_a_storage_request_needs_no_capacity() -> None:
    claim = pvc("wait-p", cls="wait-p")
    claim["spec"]["resources"] = {}
    _, _, result = run(plugin_with([], True, [claim]), pod("wait-p"), NODES[:1])
    assert result == {"node1": None}


def test_a_class_that_cannot_provision_there_is_a_bind_conflict_first() -> None:
    plugin = plugin_with([], True)
    plugin.handle.store("storageclasses")._objs["wait-p"]["allowedTopologies"] = [
        {"matchLabelExpressions": [{"key": NODE_LABEL, "values": ["node2"]}]}
    ]
    _, _, result = run(plugin, pod("wait-p"), NODES)
    assert result == {
        "node1": (ERR_BIND_CONFLICT,),
        "node2": (ERR_NOT_ENOUGH_SPACE,),
        "node3": (ERR_BIND_CONFLICT,),
    }


POOLS = [
    capacity("wait-p", "node1", "100Gi", name="a"),
    capacity("wait-p", "node2", "50Gi", name="b"),
    capacity("wait-p", "node3", "10Gi", name="c"),
]


def scores(plugin: VolumeBinding, size: str = "10Gi") -> list[int]:
    state, status, result = run(plugin, pod("wait-p"), NODES)
    assert status is None and all(r is None for r in result.values())
    assert plugin.pre_score(state, pod("wait-p"), NODES) is None
    return [plugin.score(state, pod("wait-p"), n) for n in NODES]


def test_the_storage_capacity_score_prefers_room() -> None:
    """kube-scheduler's case "storage capacity score": 10Gi of 100Gi, 50Gi, 10Gi pools."""
    claims = [pvc("wait-p", cls="wait-p", size="10Gi")]
    assert scores(plugin_with(POOLS, True, claims)) == [90, 80, 0]


def test_the_shape_turns_the_score_around() -> None:
    claims = [pvc("wait-p", cls="wait-p", size="10Gi")]
    fill = VolumeBindingArgs(shape=(UtilizationShapePoint(0, 0), UtilizationShapePoint(100, 10)))
    assert scores(plugin_with(POOLS, True, claims, fill)) == [10, 20, 100]


def test_without_capacity_checks_every_node_scores_zero() -> None:
    claims = [pvc("wait-p", cls="wait-p", size="10Gi")]
    assert scores(plugin_with(POOLS, False, claims)) == [0, 0, 0]
