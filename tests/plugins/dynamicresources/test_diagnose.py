"""``explain``'s verdict on each claim of a pod on one node."""

from __future__ import annotations

from typing import Any

from scheduler.plugins.dynamicresources.allocator import Allocator, pools_for_node
from scheduler.plugins.dynamicresources.cel import Compiler
from scheduler.plugins.dynamicresources.diagnose import describe
from scheduler.plugins.nodeselector import compile_node_selector_terms
from tests.plugins.dynamicresources.builders import DRIVER, claim, device, device_class, exactly, slice_

CLASSES = {"gpu": device_class("gpu")}
SLICE = slice_("s", [device("g0", numa=0), device("g1", numa=1)])


def verdicts(
    claims: list[dict[str, Any]],
    in_use: set | None = None,
    allocated_here: Any = None,
    selectors: list | None = None,
    pending: list[dict[str, Any]] | None = None,
) -> list[str]:
    pools = pools_for_node([SLICE], "node-a", {})

    def allocator() -> Allocator:
        return Allocator(Compiler(), CLASSES, pools, in_use or set())

    got = describe(
        claims,
        claims if pending is None else pending,
        selectors or [],
        allocated_here,
        allocator,
        "node-a",
        {"zone": "a"},
    )
    assert [g["claim"] for g in got] == [f"default/{c['metadata']['name']}" for c in claims]
    return [g["verdict"] for g in got]


def test_a_request_short_of_free_devices_says_how_short() -> None:
    assert verdicts([claim("c", exactly(count=2))], in_use={(DRIVER, "node-a", "g0")}) == [
        "cannot be allocated: request gpu: wants 2, 2 match, 1 free"
    ]


def test_enough_devices_for_each_request_but_not_under_the_constraints() -> None:
    c = claim("c", exactly(count=2), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    assert verdicts([c]) == [
        "cannot be allocated: enough free devices for each request, not for all at once"
        " (constraints, counters or capacity): request gpu: wants 2, 2 match, 2 free"
    ]


def test_a_claim_that_fits_alone_but_not_beside_the_others() -> None:
    a, b = claim("a", exactly(count=1)), claim("b", exactly(count=2))
    assert verdicts([a, b]) == [
        "can be allocated alone, not beside the pod's other claims",
        "can be allocated alone, not beside the pod's other claims",
    ]


def test_a_selector_that_fails_is_the_verdict() -> None:
    bad = claim("c", exactly(selectors=[f'device.attributes["{DRIVER}"].memory > 1']))
    (verdict,) = verdicts([bad])
    assert verdict.startswith("cannot be allocated: claim default/c: selector #0 on device")
    assert "CEL runtime error" in verdict


def test_what_filter_allocated_is_what_the_node_would_give() -> None:
    c = claim("c", exactly())
    pools = pools_for_node([SLICE], "node-a", {})
    allocation = Allocator(Compiler(), CLASSES, pools, set()).allocate([c])
    assert verdicts([c], allocated_here=allocation) == [f"would get {DRIVER}/node-a/g0"]


def test_an_allocated_claim_names_its_devices_and_whether_its_node_selector_allows_the_node() -> None:
    c = claim("c", exactly())
    c["status"] = {
        "allocation": {"devices": {"results": [{"driver": DRIVER, "pool": "node-a", "device": "g1"}]}}
    }
    elsewhere = compile_node_selector_terms(
        [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]
    )
    here = compile_node_selector_terms(
        [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
    )
    assert verdicts([c], pending=[], selectors=[(c, here)]) == [f"allocated already ({DRIVER}/node-a/g1)"]
    assert verdicts([c], pending=[], selectors=[(c, elsewhere)]) == [
        f"allocated already ({DRIVER}/node-a/g1), for other nodes: its node selector excludes this one"
    ]
