"""The allocator: which devices of a node's pools a pod's claims get, as the structured allocator."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.plugins.dynamicresources.allocator import (
    Allocation,
    AllocationError,
    Allocator,
    allocated,
    pools_for_node,
)
from scheduler.plugins.dynamicresources.cel import Compiler
from tests.plugins.dynamicresources.builders import (
    DRIVER,
    claim,
    device,
    device_class,
    exactly,
    first_available,
    slice_,
    sub,
)

CLASSES = {"gpu": device_class("gpu")}
compiler = Compiler()


def allocate(
    slices: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    *,
    node: str = "node-a",
    labels: dict[str, str] | None = None,
    in_use: set | None = None,
    classes: dict[str, Any] | None = None,
) -> list[Allocation] | None:
    pools = pools_for_node(slices, node, labels or {})
    return Allocator(compiler, classes or CLASSES, pools, in_use or set()).allocate(claims)


def devices_of(result: list[Allocation] | None) -> list[list[str]]:
    assert result is not None
    return [[r.device.id[2] for r in a.results] for a in result]


def gpus(n: int, node: str = "node-a", **attrs: Any) -> dict[str, Any]:
    return slice_(f"{node}-gpus", [device(f"gpu-{i}", **attrs) for i in range(n)], node=node)


def test_exact_count_takes_free_devices_in_order() -> None:
    got = allocate([gpus(3)], [claim("c", exactly(count=2))])
    assert devices_of(got) == [["gpu-0", "gpu-1"]]


def test_count_defaults_to_one() -> None:
    assert devices_of(allocate([gpus(3)], [claim("c", exactly())])) == [["gpu-0"]]


def test_devices_in_use_are_not_given_again() -> None:
    in_use = {(DRIVER, "node-a", "gpu-0"), (DRIVER, "node-a", "gpu-1")}
    assert devices_of(allocate([gpus(3)], [claim("c", exactly())], in_use=in_use)) == [["gpu-2"]]
    assert allocate([gpus(2)], [claim("c", exactly())], in_use=in_use) is None


def test_two_claims_of_one_pod_get_different_devices() -> None:
    got = allocate([gpus(2)], [claim("a", exactly()), claim("b", exactly())])
    assert devices_of(got) == [["gpu-0"], ["gpu-1"]]
    assert allocate([gpus(1)], [claim("a", exactly()), claim("b", exactly())]) is None


def test_other_nodes_devices_are_not_available() -> None:
    assert allocate([gpus(2, node="node-b")], [claim("c", exactly())]) is None


def test_all_mode_takes_every_matching_device_and_needs_at_least_one() -> None:
    got = allocate([gpus(3)], [claim("c", exactly(mode="All"))])
    assert devices_of(got) == [["gpu-0", "gpu-1", "gpu-2"]]
    assert allocate([gpus(0)], [claim("c", exactly(mode="All"))]) is None
    # one of them in use: All cannot be met
    assert (
        allocate([gpus(3)], [claim("c", exactly(mode="All"))], in_use={(DRIVER, "node-a", "gpu-1")}) is None
    )


def test_all_mode_with_a_pool_being_updated_is_an_error() -> None:
    partial = slice_("s1", [device("gpu-0")], pool="p", count=2)
    with pytest.raises(AllocationError, match="currently being updated"):
        allocate([partial], [claim("c", exactly(mode="All"))])
    # exact count just skips the incomplete pool
    assert allocate([partial], [claim("c", exactly())]) is None


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    old = slice_("old", [device("gpu-old")], pool="p", generation=1)
    new = slice_("new", [device("gpu-new")], pool="p", generation=2)
    assert devices_of(allocate([old, new], [claim("c", exactly(count=1))])) == [["gpu-new"]]


def test_class_and_request_selectors_both_apply() -> None:
    s = slice_("s", [device("small", memory=8), device("big", memory=80)])
    got = allocate([s], [claim("c", exactly(selectors=[f'device.attributes["{DRIVER}"].memory > 40']))])
    assert devices_of(got) == [["big"]]
    other = {"gpu": device_class("gpu", 'device.driver == "nic.example.com"')}
    assert allocate([s], [claim("c", exactly())], classes=other) is None


def test_a_selector_that_fails_is_an_error_naming_it() -> None:
    s = slice_("s", [device("gpu-0")])
    bad = f'device.attributes["{DRIVER}"].memory > 1'
    with pytest.raises(AllocationError) as e:
        allocate([s], [claim("c", exactly(selectors=[bad]))])
    assert "claim default/c: selector #0 on device gpu.example.com/node-a/gpu-0: CEL runtime error" in str(
        e.value
    )


def test_a_selector_that_does_not_compile_is_an_error() -> None:
    with pytest.raises(AllocationError, match="CEL compile error"):
        allocate([gpus(1)], [claim("c", exactly(selectors=["device.driver =="]))])


def test_an_unknown_class_is_an_error() -> None:
    with pytest.raises(AllocationError, match="device class nope does not exist"):
        allocate([gpus(1)], [claim("c", exactly(cls="nope"))])


def test_first_available_tries_alternatives_in_order_and_scores_earlier_ones_higher() -> None:
    s = slice_("s", [device("small", memory=8), device("big", memory=80)])
    req = first_available(
        "gpu",
        sub("large", selectors=[f'device.attributes["{DRIVER}"].memory > 40']),
        sub("any"),
    )
    got = allocate([s], [claim("c", req)])
    assert got is not None
    assert [(r.request, r.device.id[2]) for r in got[0].results] == [("gpu/large", "big")]
    assert got[0].score == 8
    got = allocate([s], [claim("c", req)], in_use={(DRIVER, "node-a", "big")})
    assert got is not None
    assert [(r.request, r.device.id[2]) for r in got[0].results] == [("gpu/any", "small")]
    assert got[0].score == 7


def test_match_attribute_backtracks_to_devices_that_agree() -> None:
    s = slice_("s", [device("g0", numa=0), device("g1", numa=1), device("g2", numa=1)])
    constraint = [{"requests": [], "matchAttribute": f"{DRIVER}/numa"}]
    got = allocate([s], [claim("c", exactly(count=2), constraints=constraint)])
    assert devices_of(got) == [["g1", "g2"]]
    both = claim("c", exactly("a"), exactly("b"), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    assert devices_of(allocate([s], [both])) == [["g1", "g2"]]


def test_a_constraint_on_one_sub_request_applies_only_to_that_alternative() -> None:
    """Upstream's e2e "chooses the correct subrequest subject to constraints": the first
    alternative cannot meet both constraints, the second is bound by the first only."""

    def dev(name: str, version: str, root: str) -> dict[str, Any]:
        return device(name, **{"dra.example.com/version": version, "dra.example.com/pcieRoot": root})

    one = slice_(
        "one", [dev("d-1-1", "1.0.0", "bar"), dev("d-1-2", "2.0.0", "foo")], driver="one.example.com"
    )
    two = slice_("two", [dev("d-2-1", "1.0.0", "foo")], driver="two.example.com")
    classes = {
        "one": device_class("one", 'device.driver == "one.example.com"'),
        "two": device_class("two", 'device.driver == "two.example.com"'),
    }
    c = claim(
        "c",
        first_available("request-1", sub("sub-request-1", cls="one"), sub("sub-request-2", cls="one")),
        exactly("request-2", cls="two"),
        constraints=[
            {"requests": ["request-1", "request-2"], "matchAttribute": "dra.example.com/version"},
            {
                "requests": ["request-1/sub-request-1", "request-2"],
                "matchAttribute": "dra.example.com/pcieRoot",
            },
        ],
    )
    got = allocate([one, two], [c], classes=classes)
    assert got is not None
    assert [(r.request, r.device.id[2]) for r in got[0].results] == [
        ("request-1/sub-request-2", "d-1-1"),
        ("request-2", "d-2-1"),
    ]


def test_match_attribute_rejects_devices_without_it() -> None:
    s = slice_("s", [device("g0"), device("g1")])
    c = claim("c", exactly(count=2), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    assert allocate([s], [c]) is None


def test_distinct_attribute_wants_different_values() -> None:
    s = slice_("s", [device("g0", numa=0), device("g1", numa=0), device("g2", numa=1)])
    c = claim("c", exactly(count=2), constraints=[{"distinctAttribute": f"{DRIVER}/numa"}])
    assert devices_of(allocate([s], [c])) == [["g0", "g2"]]


def test_a_tainted_device_is_only_for_requests_that_tolerate_it() -> None:
    taint = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}
    s = slice_("s", [device("g0", taints=[taint]), device("g1")])
    assert devices_of(allocate([s], [claim("c", exactly())])) == [["g1"]]
    tolerating = exactly(count=2, tolerations=[{"key": "maintenance", "operator": "Exists"}])
    got = allocate([s], [claim("c", tolerating)])
    assert devices_of(got) == [["g0", "g1"]]
    assert got is not None and got[0].results[0].tolerations == [{"key": "maintenance", "operator": "Exists"}]
    ignored = {"key": "note", "effect": "None"}
    assert devices_of(allocate([slice_("s", [device("g0", taints=[ignored])])], [claim("c", exactly())])) == [
        ["g0"]
    ]


def test_admin_access_may_use_devices_in_use_and_takes_none() -> None:
    in_use = {(DRIVER, "node-a", "gpu-0")}
    c = claim("c", exactly(adminAccess=True))
    got = allocate([gpus(1)], [c], in_use=in_use)
    assert got is not None and got[0].results[0].admin_access
    status = got[0].status(c, CLASSES, "node-a")
    assert status["devices"]["results"][0]["adminAccess"] is True
    assert allocated([{**c, "status": {"allocation": status}}]).devices == set()


def test_the_allocation_of_node_local_devices_is_for_that_node() -> None:
    c = claim("c", exactly())
    got = allocate([gpus(1)], [c])
    assert got is not None
    status = got[0].status(c, CLASSES, "node-a")
    assert status["devices"]["results"] == [
        {"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": "gpu-0"}
    ]
    assert status["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}
        ]
    }
    assert allocated([{**c, "status": {"allocation": status}}]).devices == {(DRIVER, "node-a", "gpu-0")}


def test_network_devices_follow_the_slices_selector_or_none() -> None:
    rack = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]
    }
    s = slice_("s", [device("nic-0")], node=None, pool="net", node_selector=rack)
    c = claim("c", exactly())
    assert allocate([s], [c], labels={"rack": "r2"}) is None
    got = allocate([s], [c], labels={"rack": "r1"})
    assert got is not None and got[0].status(c, CLASSES, "node-a")["nodeSelector"] == rack
    everywhere = slice_("s", [device("nic-0")], node=None, pool="net", all_nodes=True)
    got = allocate([everywhere], [c])
    assert got is not None and "nodeSelector" not in got[0].status(c, CLASSES, "node-a")


def test_config_of_the_class_and_of_the_claim_is_copied() -> None:
    opaque = {"opaque": {"driver": DRIVER, "parameters": {"mode": "shared"}}}
    classes = {"gpu": device_class("gpu", config=[opaque])}
    c = claim("c", exactly("a"), exactly("b"), config=[{"requests": ["a"], **opaque}])
    got = allocate([gpus(2)], [c], classes=classes)
    assert got is not None
    config = got[0].status(c, classes, "node-a")["devices"]["config"]
    assert config == [
        {"source": "FromClass", **opaque},  # every request: no list
        {"source": "FromClaim", "requests": ["a"], **opaque},
    ]


def test_a_device_taint_rule_taints_the_devices_it_selects() -> None:
    rule = {
        "spec": {
            "deviceSelector": {"driver": DRIVER, "device": "gpu-0"},
            "taint": {"key": "broken", "effect": "NoSchedule"},
        }
    }
    pools = pools_for_node([gpus(2)], "node-a", {}, [rule])
    assert devices_of(Allocator(compiler, CLASSES, pools, set()).allocate([claim("c", exactly())])) == [
        ["gpu-1"]
    ]
    every = {"spec": {"deviceSelector": {}, "taint": {"key": "drain", "effect": "NoExecute"}}}
    pools = pools_for_node([gpus(2)], "node-a", {}, [every])
    assert Allocator(compiler, CLASSES, pools, set()).allocate([claim("c", exactly())]) is None
    none = {"spec": {"taint": {"key": "drain", "effect": "NoExecute"}}}  # no selector: no device
    other_pool = {
        "spec": {"deviceSelector": {"pool": "elsewhere"}, "taint": {"key": "x", "effect": "NoSchedule"}}
    }
    pools = pools_for_node([gpus(1)], "node-a", {}, [none, other_pool])
    assert devices_of(Allocator(compiler, CLASSES, pools, set()).allocate([claim("c", exactly())])) == [
        ["gpu-0"]
    ]


def partitioned_gpu() -> list[dict[str, Any]]:
    """One GPU of 40Gi, offered whole or as two halves: all three consume its memory counter."""

    def consuming(name: str, memory: str) -> dict[str, Any]:
        d = device(name)
        d["consumesCounters"] = [{"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]
        return d

    counters = slice_("counters", [], pool="p", count=2)
    del counters["spec"]["devices"]
    counters["spec"]["sharedCounters"] = [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]
    parts = slice_(
        "parts",
        [consuming("whole", "40Gi"), consuming("half-0", "20Gi"), consuming("half-1", "20Gi")],
        pool="p",
        count=2,
    )
    return [counters, parts]


def test_partitions_share_their_devices_counters() -> None:
    slices = partitioned_gpu()
    assert devices_of(allocate(slices, [claim("c", exactly())])) == [["whole"]]
    # the whole GPU taken: no half fits in what is left
    assert allocate(slices, [claim("c", exactly())], in_use={(DRIVER, "p", "whole")}) is None
    # one half taken: the other half fits, the whole does not
    assert devices_of(allocate(slices, [claim("c", exactly())], in_use={(DRIVER, "p", "half-0")})) == [
        ["half-1"]
    ]
    # two claims of one pod: the whole for the first leaves nothing for the second, so the
    # search goes back and gives them a half each
    assert devices_of(allocate(slices, [claim("a", exactly()), claim("b", exactly())])) == [
        ["half-0"],
        ["half-1"],
    ]
    assert allocate(slices, [claim("c", exactly(count=3))]) is None


def test_a_pool_of_another_node_being_updated_does_not_matter_here() -> None:
    elsewhere = slice_("b1", [device("gpu-0")], node="node-b", count=2)
    got = allocate([gpus(2), elsewhere], [claim("c", exactly(mode="All"))])
    assert devices_of(got) == [["gpu-0", "gpu-1"]]
    with pytest.raises(AllocationError, match="being updated"):
        allocate([gpus(2), elsewhere], [claim("c", exactly(mode="All"))], node="node-b")
