"""Extended resources backed by DRA: which DeviceClass provides a resource, and the requests
and mappings of the claim the scheduler writes for a pod (``extendeddynamicresources.go``)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.core.framework import CycleState
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.dynamicresources.allocator import Held
from scheduler.plugins.dynamicresources.claims import Assumed
from scheduler.plugins.dynamicresources.extended import (
    ClassResolver,
    backed_requests,
    cycle_resolver,
    find_claim,
    in_memory_claim,
    is_dra_extended_resource_name,
    requests_and_mappings,
)
from tests.plugins.builders import FakeStore

GPU = "example.com/gpu"
NIC = "example.com/nic"


def device_class(
    name: str, resource: str | None = None, created: str = "2026-01-01T00:00:00Z"
) -> dict[str, Any]:
    spec = {"extendedResourceName": resource} if resource else {}
    return {"metadata": {"name": name, "creationTimestamp": created}, "spec": spec}


def container(name: str, requests: dict[str, int], sidecar: bool = False) -> dict[str, Any]:
    reqs = {k: str(v) for k, v in requests.items()}
    out: dict[str, Any] = {"name": name, "resources": {"requests": reqs, "limits": reqs}}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def pod(containers: list[dict[str, Any]], inits: list[dict[str, Any]] = ()) -> PodInfo:  # type: ignore[assignment]
    return PodInfo.from_pod(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid"},
            "spec": {"containers": containers, "initContainers": list(inits)},
        }
    )


RESOLVER = ClassResolver([device_class("gpus", GPU), device_class("nics", NIC)])


@pytest.mark.parametrize(
    ("name", "dra"),
    [
        (GPU, True),
        ("deviceclass.resource.kubernetes.io/gpus", True),
        ("cpu", False),
        ("kubernetes.io/something", False),
        ("hugepages-2Mi", False),
    ],
)
def test_which_names_dra_may_provide(name: str, dra: bool) -> None:
    assert is_dra_extended_resource_name(name) is dra


def test_a_class_provides_its_extended_resource_and_its_own_name() -> None:
    assert RESOLVER.get(GPU)["metadata"]["name"] == "gpus"  # type: ignore[index]
    assert RESOLVER.get("deviceclass.resource.kubernetes.io/nics")["metadata"]["name"] == "nics"  # type: ignore[index]
    assert RESOLVER.get("example.com/other") is None


def test_of_two_classes_for_one_resource_the_newest_wins_then_the_smaller_name() -> None:
    old = device_class("old", GPU, "2026-01-01T00:00:00Z")
    new = device_class("new", GPU, "2026-02-01T00:00:00Z")
    assert ClassResolver([new, old]).get(GPU) is new
    assert ClassResolver([old, new]).get(GPU) is new
    a, b = device_class("a", GPU), device_class("b", GPU)
    assert ClassResolver([b, a]).get(GPU) is a
    # the older class still provides its own name
    assert ClassResolver([old, new]).get("deviceclass.resource.kubernetes.io/old") is old


def test_one_resolver_per_cycle_from_the_store_as_it_was() -> None:
    store = FakeStore([device_class("gpus", GPU)])
    state = CycleState()
    first = cycle_resolver(state, store)
    assert first.get(GPU) is not None
    store._objs.clear()
    assert cycle_resolver(state, store) is first
    assert cycle_resolver(CycleState(), store).get(GPU) is None


def test_backed_requests_are_empty_unless_a_class_provides_one_of_the_pods_resources() -> None:
    assert backed_requests(pod([container("c", {GPU: 1})]), ClassResolver([])) == {}
    assert backed_requests(pod([container("c", {GPU: 2, "cpu": 1})]), RESOLVER) == {GPU: 2}


def test_one_request_per_container_and_resource_named_by_their_positions() -> None:
    p = pod([container("a", {NIC: 1, GPU: 2}), container("b", {GPU: 1})])
    requests, mappings = requests_and_mappings(p, {GPU: 3, NIC: 1}, RESOLVER)
    assert [(r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in requests] == [
        ("container-0-request-0", "gpus", 2),  # example.com/gpu sorts before example.com/nic
        ("container-0-request-1", "nics", 1),
        ("container-1-request-0", "gpus", 1),
    ]
    assert {(m["containerName"], m["resourceName"], m["requestName"]) for m in mappings} == {
        ("a", GPU, "container-0-request-0"),
        ("b", GPU, "container-1-request-0"),
        ("a", NIC, "container-0-request-1"),
    }


def test_resources_the_node_provides_itself_get_no_request() -> None:
    p = pod([container("a", {NIC: 1, GPU: 2})])
    requests, mappings = requests_and_mappings(p, {GPU: 2}, RESOLVER)
    assert [r["name"] for r in requests] == ["container-0-request-0"]
    assert [m["resourceName"] for m in mappings] == [GPU]


def test_an_init_container_reuses_the_devices_of_the_containers_after_it_and_asks_for_the_rest() -> None:
    p = pod([container("main", {GPU: 1})], inits=[container("init", {GPU: 2})])
    requests, mappings = requests_and_mappings(p, {GPU: 2}, RESOLVER)
    assert [(r["name"], r["exactly"]["count"]) for r in requests] == [
        ("container-0-request-0", 1),
        ("container-1-request-0", 1),
    ]
    assert [(m["containerName"], m["requestName"]) for m in mappings] == [
        ("main", "container-1-request-0"),
        ("init", "container-1-request-0"),
        ("init", "container-0-request-0"),
    ]


def test_init_containers_run_one_at_a_time_and_share_the_largest_request() -> None:
    p = pod([container("main", {"cpu": 1})], inits=[container("i0", {GPU: 1}), container("i1", {GPU: 3})])
    requests, mappings = requests_and_mappings(p, {GPU: 3}, RESOLVER)
    assert [(r["name"], r["exactly"]["count"]) for r in requests] == [("container-1-request-0", 3)]
    assert [(m["containerName"], m["requestName"]) for m in mappings] == [
        ("i0", "container-1-request-0"),
        ("i1", "container-1-request-0"),
    ]


def test_a_sidecar_keeps_its_own_devices() -> None:
    p = pod(
        [container("main", {GPU: 1})],
        inits=[container("side", {GPU: 1}, sidecar=True), container("init", {GPU: 1})],
    )
    requests, mappings = requests_and_mappings(p, {GPU: 2}, RESOLVER)
    # the init container, after the sidecar, reuses the main container's device
    assert [(r["name"], r["exactly"]["count"]) for r in requests] == [
        ("container-0-request-0", 1),
        ("container-2-request-0", 1),
    ]
    assert ("init", "container-2-request-0") in [(m["containerName"], m["requestName"]) for m in mappings]


def test_the_claim_of_an_earlier_attempt_is_found_by_annotation_and_owner() -> None:
    p = pod([container("c", {GPU: 1})])
    planned = in_memory_claim(p)
    assert planned["metadata"]["generateName"] == "p-extended-resources-"
    written = {**planned, "metadata": {**planned["metadata"], "name": "p-extended-resources-x", "uid": "u"}}
    assert find_claim(p, [written]) is written
    foreign = {**written, "metadata": {**written["metadata"], "annotations": {}}}
    assert find_claim(p, [foreign]) is None
    elsewhere = {**written, "metadata": {**written["metadata"], "namespace": "other"}}
    assert find_claim(p, [elsewhere]) is None


def test_an_unwritten_claims_devices_stay_taken_until_it_exists_and_is_allocated() -> None:
    assumed = Assumed()
    dev = ("d", "pool", "gpu-0")
    assumed.add("in-memory-1", Held({dev}), unwritten=True)
    assert assumed.in_use([]).devices == {dev}  # no such claim in the informer: kept all the same
    assumed.rename("in-memory-1", "real")
    claim: dict[str, Any] = {"metadata": {"uid": "real"}, "status": {}}
    assert assumed.in_use([claim]).devices == {dev}
    assert assumed.in_use([]).devices == set()  # a written claim that is gone frees its devices
    assumed.add("real", Held({dev}))
    allocated = {"metadata": {"uid": "real"}, "status": {"allocation": {"devices": {"results": []}}}}
    assert assumed.in_use([allocated]).devices == set()
    assert not assumed.holds("real")
