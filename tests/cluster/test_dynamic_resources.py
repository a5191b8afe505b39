"""DynamicResources against the private API server: claims allocated from ResourceSlices, written
before the bind, and never the same device twice.

No DRA driver or resourceclaim controller runs here: the tests publish ResourceSlices
themselves, and play the controller where a claim comes from a template (a claim owned by
the pod, named in the pod's ``status.resourceClaimStatuses``).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient

from scheduler.cli import main
from scheduler.cluster.client import api_request
from scheduler.polling import poll
from tests.apiserver import ControlPlane
from tests.cluster.util import bound_node, kept_to_nodes_config, make_node, scheduler_running

pytestmark = pytest.mark.apiserver

DRA = "/apis/resource.k8s.io/v1"
FINALIZER = "resource.kubernetes.io/delete-protection"


@dataclass
class World:
    admin: ApiClient
    namespace: str
    scheduler: str
    driver: str
    device_class: str
    node_with_gpus: str
    other_node: str
    app: Any
    config: Path

    def claim(
        self,
        name: str,
        count: int = 1,
        selectors: list[str] = (),  # type: ignore[assignment]
        config: list[dict[str, Any]] | None = None,
        capacity: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        exactly: dict[str, Any] = {"deviceClassName": self.device_class, "count": count}
        if capacity:
            exactly["capacity"] = {"requests": capacity}
        if selectors:
            exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
        devices: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": exactly}]}
        if config:
            devices["config"] = config
        return api_request(
            self.admin,
            "POST",
            f"{DRA}/namespaces/{self.namespace}/resourceclaims",
            body={"metadata": {"name": name}, "spec": {"devices": devices}},
        )

    def pod(self, name: str, claim: str | None = None, template: str | None = None) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": "gpu"}
        if claim:
            entry["resourceClaimName"] = claim
        else:
            entry["resourceClaimTemplateName"] = template
        spec = {
            "schedulerName": self.scheduler,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [entry],
        }
        return api_request(
            self.admin,
            "POST",
            f"/api/v1/namespaces/{self.namespace}/pods",
            body={"metadata": {"name": name}, "spec": spec},
        )

    def read_claim(self, name: str) -> dict[str, Any]:
        return api_request(self.admin, "GET", f"{DRA}/namespaces/{self.namespace}/resourceclaims/{name}")

    def pod_status(self, name: str) -> dict[str, Any]:
        return api_request(self.admin, "GET", f"/api/v1/namespaces/{self.namespace}/pods/{name}")

    def unschedulable_message(self, name: str, words: str, timeout: float = 20) -> str:
        """The pod's PodScheduled=False message, once it says ``words`` (an earlier attempt may
        have seen the claim before the informer did, and said so)."""

        def message() -> str:
            for c in self.pod_status(name).get("status", {}).get("conditions") or ():
                if c["type"] == "PodScheduled" and c["status"] == "False" and words in c.get("message", ""):
                    return c["message"]
            return ""

        return poll(message, timeout, f"{name} unschedulable: {words}")

    def held_back(self, pod: dict[str, Any]) -> None:
        """The pod waits before its cycle (PreEnqueue): no attempt, so no condition written."""
        uid = pod["metadata"]["uid"]
        poll(lambda: self.app.queue.where(uid) == "gated", 20, f"{pod['metadata']['name']} held back")
        assert not self.pod_status(pod["metadata"]["name"]).get("status", {}).get("conditions")

    def publish_slice(self, name: str, devices: list[dict[str, Any]]) -> None:
        """A pool of its own (``name``) of these devices on the node with GPUs; the caller deletes it."""
        api_request(
            self.admin,
            "POST",
            f"{DRA}/resourceslices",
            body={
                "metadata": {"name": name},
                "spec": {
                    "driver": self.driver,
                    "nodeName": self.node_with_gpus,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            },
        )

    def delete_claim(self, name: str) -> None:
        """Delete the claim, and drop its finalizer as the resourceclaim controller would once
        no pod uses it."""
        path = f"{DRA}/namespaces/{self.namespace}/resourceclaims/{name}"
        api_request(self.admin, "DELETE", path)
        api_request(
            self.admin,
            "PATCH",
            path,
            body={"metadata": {"finalizers": None}},
            content_type="application/merge-patch+json",
        )


@pytest.fixture
def world(apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path) -> Iterator[World]:
    """Two nodes, one with two devices of a test driver in a ResourceSlice; a DeviceClass of that
    driver; our scheduler kept to the two nodes."""
    label = f"d{uuid.uuid4().hex[:6]}"
    driver = f"{label}.example.com"
    gpus, other = f"{label}-gpus", f"{label}-none"
    make_node(admin, gpus, {"dra-test": label})
    make_node(admin, other, {"dra-test": label})
    api_request(
        admin,
        "POST",
        f"{DRA}/deviceclasses",
        body={
            "metadata": {"name": label},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        },
    )
    devices = [
        {"name": f"gpu-{i}", "attributes": {"model": {"string": "A100"}, "index": {"int": i}}}
        for i in range(2)
    ]
    api_request(
        admin,
        "POST",
        f"{DRA}/resourceslices",
        body={
            "metadata": {"name": f"{gpus}-{driver}"},
            "spec": {
                "driver": driver,
                "nodeName": gpus,
                "pool": {"name": gpus, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        },
    )
    config = kept_to_nodes_config(apiserver, f"dra-{label}", "dra-test", label)
    try:
        with scheduler_running(config, tmp_path) as app:
            path = tmp_path / "scheduler-config.yaml"  # written by scheduler_running
            yield World(admin, namespace, f"dra-{label}", driver, label, gpus, other, app, path)
    finally:
        api_request(admin, "DELETE", f"{DRA}/resourceslices/{gpus}-{driver}")
        api_request(admin, "DELETE", f"{DRA}/deviceclasses/{label}")
        for node in (gpus, other):
            api_request(admin, "DELETE", f"/api/v1/nodes/{node}")


def allocated_devices(claim: dict[str, Any]) -> list[str]:
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return [r["device"] for r in (alloc.get("devices") or {}).get("results") or ()]


def test_a_pod_gets_its_claim_allocated_and_reserved_and_goes_where_the_device_is(world: World) -> None:
    # Opaque parameters are kept by the API server as the bytes it was sent, and a claim's spec
    # is immutable: a write of the whole claim, re-encoded, would be refused.
    opaque = {"opaque": {"driver": world.driver, "parameters": {"a": "b", "n": [1, 2]}}}
    world.claim("one", config=[opaque])
    pod = world.pod("p", claim="one")
    assert bound_node(world.admin, world.namespace, "p") == world.node_with_gpus
    claim = world.read_claim("one")
    assert allocated_devices(claim) == ["gpu-0"]
    result = claim["status"]["allocation"]["devices"]["results"][0]
    assert (result["driver"], result["pool"], result["request"]) == (
        world.driver,
        world.node_with_gpus,
        "gpu",
    )
    terms = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert terms == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [world.node_with_gpus]}]}
    ]
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
    assert FINALIZER in claim["metadata"]["finalizers"]
    assert claim["status"]["allocation"]["devices"]["config"] == [{"source": "FromClaim", **opaque}]


def test_a_device_is_never_given_twice_and_a_freed_one_goes_to_the_next_pod(world: World) -> None:
    for i in range(3):
        world.claim(f"c{i}")
        world.pod(f"p{i}", claim=f"c{i}")
    bound = {i: bound_node(world.admin, world.namespace, f"p{i}") for i in range(2)}
    assert set(bound.values()) == {world.node_with_gpus}
    world.unschedulable_message("p2", "cannot allocate all claims")
    assert sorted(d for i in range(2) for d in allocated_devices(world.read_claim(f"c{i}"))) == [
        "gpu-0",
        "gpu-1",
    ]
    assert allocated_devices(world.read_claim("c2")) == []
    assert not world.pod_status("p2")["spec"].get("nodeName")

    # the first pod goes, and its claim with it: its device is the third pod's
    freed = allocated_devices(world.read_claim("c0"))
    api_request(world.admin, "DELETE", f"/api/v1/namespaces/{world.namespace}/pods/p0?gracePeriodSeconds=0")
    world.delete_claim("c0")
    assert bound_node(world.admin, world.namespace, "p2") == world.node_with_gpus
    assert allocated_devices(world.read_claim("c2")) == freed


def test_a_claim_that_cannot_be_met_leaves_the_pod_pending_with_kube_schedulers_words(world: World) -> None:
    world.claim("three", count=3)
    world.pod("p", claim="three")
    # both nodes (the shared API server may hold other tests' nodes, which the profile's
    # added affinity keeps it from)
    world.unschedulable_message("p", "2 cannot allocate all claims")
    assert allocated_devices(world.read_claim("three")) == []


def test_explain_says_which_claim_fails_on_which_node_and_why(
    world: World, apiserver: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    world.claim("one")
    world.pod("fits", claim="one")
    assert (
        poll(lambda: bound_node(world.admin, world.namespace, "fits"), 20, "fits bound")
        == world.node_with_gpus
    )
    world.claim("three", count=3)
    world.pod("too-many", claim="three")
    world.unschedulable_message("too-many", "cannot allocate all claims")
    args = ["--config", str(world.config), "--kubeconfig", str(apiserver.kubeconfig)]

    def verdicts(pod: str) -> dict[str, list[dict[str, str]]]:
        assert main(["explain", f"{world.namespace}/{pod}", "-o", "json", *args]) == 0
        doc = json.loads(capsys.readouterr().out)
        return {n["name"]: n["details"]["DynamicResources"]["claims"] for n in doc["nodes"] if "details" in n}

    got = verdicts("too-many")
    claim = f"{world.namespace}/three"
    assert got[world.node_with_gpus] == [
        {"claim": claim, "verdict": "cannot be allocated: request gpu: wants 3, 2 match, 1 free"}
    ]
    assert got[world.other_node] == [
        {"claim": claim, "verdict": "cannot be allocated: request gpu: wants 3, 0 match, 0 free"}
    ]
    # The bound pod's claim is its own: explained as if pending, it is allocated already.
    device = f"{world.driver}/{world.node_with_gpus}/{allocated_devices(world.read_claim('one'))[0]}"
    assert verdicts("fits")[world.node_with_gpus] == [
        {"claim": f"{world.namespace}/one", "verdict": f"allocated already ({device})"}
    ]
    assert main(["explain", f"{world.namespace}/too-many", *args]) == 0
    text = capsys.readouterr().out
    assert "CLAIMS (DynamicResources: each of the pod's ResourceClaims on each node)" in text
    assert re.search(
        rf"^{world.other_node} +{claim} +cannot be allocated: request gpu: wants 3, 0 match, 0 free$",
        text,
        re.M,
    )


def test_a_request_selector_picks_the_device(world: World) -> None:
    world.claim("second", selectors=[f'device.attributes["{world.driver}"].index == 1'])
    world.pod("p", claim="second")
    assert bound_node(world.admin, world.namespace, "p") == world.node_with_gpus
    assert allocated_devices(world.read_claim("second")) == ["gpu-1"]


def test_a_selector_that_fails_is_the_pods_condition(world: World) -> None:
    world.claim("bad", selectors=[f'device.attributes["{world.driver}"].memory > 1'])
    world.pod("p", claim="bad")
    message = world.unschedulable_message("p", "CEL runtime error")
    assert f"claim {world.namespace}/bad: selector #0 on device {world.driver}/" in message, message


def test_a_pod_is_held_back_until_its_claim_exists(world: World) -> None:
    world.held_back(world.pod("p", claim="later"))
    world.claim("later")
    assert bound_node(world.admin, world.namespace, "p") == world.node_with_gpus
    assert allocated_devices(world.read_claim("later")) == ["gpu-0"]


def test_a_claim_from_a_template_is_found_through_the_pods_status(world: World) -> None:
    # A ResourceClaimTemplate, and the claim the resourceclaim controller would make of it.
    api_request(
        world.admin,
        "POST",
        f"{DRA}/namespaces/{world.namespace}/resourceclaimtemplates",
        body={
            "metadata": {"name": "gpu-template"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": world.device_class}}]
                    }
                }
            },
        },
    )
    pod = world.pod("p", template="gpu-template")
    world.held_back(pod)
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "uid": pod["metadata"]["uid"],
        "controller": True,
    }
    api_request(
        world.admin,
        "POST",
        f"{DRA}/namespaces/{world.namespace}/resourceclaims",
        body={
            "metadata": {"name": "p-gpu-x1", "ownerReferences": [owner]},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": world.device_class}}]}
            },
        },
    )
    api_request(
        world.admin,
        "PATCH",
        f"/api/v1/namespaces/{world.namespace}/pods/p/status",
        body={"status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x1"}]}},
        content_type="application/merge-patch+json",
    )
    assert bound_node(world.admin, world.namespace, "p") == world.node_with_gpus
    assert allocated_devices(world.read_claim("p-gpu-x1")) == ["gpu-0"]


def test_pods_sharing_a_claim_share_its_device_and_both_are_reserved(world: World) -> None:
    world.claim("shared")
    pods = [world.pod(f"p{i}", claim="shared") for i in range(2)]
    assert {bound_node(world.admin, world.namespace, f"p{i}") for i in range(2)} == {world.node_with_gpus}
    claim = world.read_claim("shared")
    assert allocated_devices(claim) == ["gpu-0"]
    assert sorted(r["uid"] for r in claim["status"]["reservedFor"]) == sorted(
        p["metadata"]["uid"] for p in pods
    )


def test_a_device_taint_rule_keeps_pods_off_the_device_it_taints(world: World) -> None:
    rule = f"{world.device_class}-gpu-0"
    api_request(
        world.admin,
        "POST",
        f"{DRA}/devicetaintrules",
        body={
            "metadata": {"name": rule},
            "spec": {
                "deviceSelector": {"driver": world.driver, "pool": world.node_with_gpus, "device": "gpu-0"},
                "taint": {"key": "example.com/unhealthy", "effect": "NoSchedule"},
            },
        },
    )
    try:
        store = next(i.store for i in world.app.informers if i.resource.plural == "devicetaintrules")
        poll(lambda: store.get(rule), 20, "the rule in the scheduler's informer")
        world.claim("one")
        world.pod("p", claim="one")
        assert bound_node(world.admin, world.namespace, "p") == world.node_with_gpus
        assert allocated_devices(world.read_claim("one")) == ["gpu-1"]
    finally:
        api_request(world.admin, "DELETE", f"{DRA}/devicetaintrules/{rule}")


def test_an_allocation_that_keeps_the_pod_off_every_node_is_taken_back(world: World) -> None:
    """PostFilter: the claim is allocated on a node the pod cannot go to (cordoned), and no
    other pod uses it: the allocation goes, and the pod is placed once the node is back."""
    claim = world.claim("stuck")
    node_only = {"key": "metadata.name", "operator": "In", "values": [world.node_with_gpus]}
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": world.driver,
                        "pool": world.node_with_gpus,
                        "device": "gpu-1",
                    }
                ]
            },
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [node_only]}]},
        }
    }
    path = f"{DRA}/namespaces/{world.namespace}/resourceclaims/stuck"
    api_request(world.admin, "PUT", f"{path}/status", body=claim)
    cordon = f"/api/v1/nodes/{world.node_with_gpus}"
    merge = "application/merge-patch+json"
    api_request(world.admin, "PATCH", cordon, body={"spec": {"unschedulable": True}}, content_type=merge)
    world.pod("p", claim="stuck")
    poll(
        lambda: not world.read_claim("stuck").get("status", {}).get("allocation"), 20, "the claim deallocated"
    )
    api_request(world.admin, "PATCH", cordon, body={"spec": {"unschedulable": False}}, content_type=merge)
    assert bound_node(world.admin, world.namespace, "p") == world.node_with_gpus
    assert allocated_devices(world.read_claim("stuck")) == ["gpu-0"]


def test_partitions_of_one_device_are_not_given_beyond_its_counters(world: World) -> None:
    """A device offered whole and as two halves, all consuming one counter: once the whole
    is allocated, no half is, and a second pod waits."""
    pool = f"{world.node_with_gpus}-partitioned"
    consumes = [{"counterSet": "gpu", "counters": {"memory": {"value": "40Gi"}}}]
    halves = [{"counterSet": "gpu", "counters": {"memory": {"value": "20Gi"}}}]
    slices = [
        {
            "nodeName": world.node_with_gpus,
            "sharedCounters": [{"name": "gpu", "counters": {"memory": {"value": "40Gi"}}}],
        },
        {
            "nodeName": world.node_with_gpus,
            "devices": [
                {"name": "whole", "consumesCounters": consumes},
                {"name": "half-0", "consumesCounters": halves},
                {"name": "half-1", "consumesCounters": halves},
            ],
        },
    ]
    names = [f"{pool}-{i}" for i in range(2)]
    for name, spec in zip(names, slices, strict=True):
        body = {"driver": world.driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2}}
        api_request(
            world.admin,
            "POST",
            f"{DRA}/resourceslices",
            body={"metadata": {"name": name}, "spec": {**body, **spec}},
        )
    try:
        in_pool = f'device.attributes["{world.driver}"].?index.orValue(-1) == -1'  # not gpu-0/gpu-1
        world.claim("first", selectors=[in_pool])
        world.pod("p0", claim="first")
        assert bound_node(world.admin, world.namespace, "p0") == world.node_with_gpus
        assert allocated_devices(world.read_claim("first")) == ["whole"]
        world.claim("second", selectors=[in_pool])
        world.pod("p1", claim="second")
        world.unschedulable_message("p1", "cannot allocate all claims")
    finally:
        for name in names:
            api_request(world.admin, "DELETE", f"{DRA}/resourceslices/{name}")


def extended_pod(
    world: World, name: str, resource: str, count: int, node: str | None = None
) -> dict[str, Any]:
    """A pod asking for ``count`` of an extended resource in its one container."""
    spec: dict[str, Any] = {
        "schedulerName": world.scheduler,
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {resource: str(count)}, "limits": {resource: str(count)}},
            }
        ],
    }
    if node:
        field = {"key": "metadata.name", "operator": "In", "values": [node]}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [field]}]
                }
            }
        }
    return api_request(
        world.admin,
        "POST",
        f"/api/v1/namespaces/{world.namespace}/pods",
        body={"metadata": {"name": name}, "spec": spec},
    )


def extended_claim(world: World, pod: str) -> dict[str, Any]:
    """The claim the scheduler wrote for the pod's extended resources, as its status names it."""
    status = world.pod_status(pod)["status"]["extendedResourceClaimStatus"]
    return world.read_claim(status["resourceClaimName"])


def test_an_extended_resource_of_a_device_class_is_allocated_through_a_claim_the_scheduler_writes(
    world: World,
) -> None:
    resource = f"{world.device_class}.example.com/gpu"
    api_request(
        world.admin,
        "PATCH",
        f"{DRA}/deviceclasses/{world.device_class}",
        body={"spec": {"extendedResourceName": resource}},
        content_type="application/merge-patch+json",
    )
    pod = extended_pod(world, "p", resource, 2)
    assert bound_node(world.admin, world.namespace, "p") == world.node_with_gpus
    status = world.pod_status("p")["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [
        {"containerName": "c", "resourceName": resource, "requestName": "container-0-request-0"}
    ]
    claim = world.read_claim(status["resourceClaimName"])
    assert claim["metadata"]["name"].startswith("p-extended-resources-")
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert [(o["uid"], o["controller"]) for o in claim["metadata"]["ownerReferences"]] == [
        (pod["metadata"]["uid"], True)
    ]
    assert claim["spec"]["devices"]["requests"] == [
        {
            "name": "container-0-request-0",
            "exactly": {"deviceClassName": world.device_class, "allocationMode": "ExactCount", "count": 2},
        }
    ]
    assert sorted(allocated_devices(claim)) == ["gpu-0", "gpu-1"]
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
    assert FINALIZER in claim["metadata"]["finalizers"]

    # both devices are taken: the next pod waits, under the class's own name as well
    extended_pod(world, "q", f"deviceclass.resource.kubernetes.io/{world.device_class}", 1)
    world.unschedulable_message("q", "cannot allocate all claims")
    # the first pod goes, and its claim with it (the resourceclaim controller's part)
    api_request(world.admin, "DELETE", f"/api/v1/namespaces/{world.namespace}/pods/p?gracePeriodSeconds=0")
    world.delete_claim(claim["metadata"]["name"])
    assert bound_node(world.admin, world.namespace, "q") == world.node_with_gpus
    assert len(allocated_devices(extended_claim(world, "q"))) == 1


def test_a_node_whose_device_plugin_offers_the_resource_needs_no_claim(world: World) -> None:
    resource = f"{world.device_class}.example.com/gpu"
    api_request(
        world.admin,
        "PATCH",
        f"{DRA}/deviceclasses/{world.device_class}",
        body={"spec": {"extendedResourceName": resource}},
        content_type="application/merge-patch+json",
    )
    node = api_request(world.admin, "GET", f"/api/v1/nodes/{world.other_node}")
    node["status"]["capacity"][resource] = "1"
    node["status"]["allocatable"] = {**node["status"].get("allocatable", {}), resource: "1"}
    api_request(world.admin, "PUT", f"/api/v1/nodes/{world.other_node}/status", body=node)
    extended_pod(world, "p", resource, 1, node=world.other_node)
    assert bound_node(world.admin, world.namespace, "p") == world.other_node
    assert not world.pod_status("p")["status"].get("extendedResourceClaimStatus")
    claims = api_request(world.admin, "GET", f"{DRA}/namespaces/{world.namespace}/resourceclaims")["items"]
    assert claims == []
    # the device plugin's one is taken: a second pod for that node does not fit there
    extended_pod(world, "q", resource, 1, node=world.other_node)
    world.unschedulable_message("q", f"Insufficient {resource}")


def test_allocations_share_a_device_while_its_capacity_lasts(world: World) -> None:
    """As upstream's "must allow multiple allocations and consume capacity": 4Gi and 4Gi of an
    8Gi device fit, 8Gi more waits until both are gone."""
    name = f"{world.node_with_gpus}-shared"
    shared = {"name": "shared", "allowMultipleAllocations": True, "capacity": {"memory": {"value": "8Gi"}}}
    world.publish_slice(name, [shared])
    try:
        only_shared = ["device.allowMultipleAllocations"]
        for claim, amount in (("a", "4Gi"), ("b", "8Gi"), ("c", "4Gi")):
            world.claim(claim, selectors=only_shared, capacity={"memory": amount})
        world.pod("pa", claim="a")
        assert bound_node(world.admin, world.namespace, "pa") == world.node_with_gpus
        world.pod("pb", claim="b")
        world.unschedulable_message("pb", "cannot allocate all claims")
        world.pod("pc", claim="c")
        assert bound_node(world.admin, world.namespace, "pc") == world.node_with_gpus
        results = [world.read_claim(c)["status"]["allocation"]["devices"]["results"][0] for c in ("a", "c")]
        assert [r["device"] for r in results] == ["shared", "shared"]
        assert [r["consumedCapacity"] for r in results] == [{"memory": "4Gi"}] * 2
        assert results[0]["shareID"] != results[1]["shareID"]
        for pod, claim in (("pa", "a"), ("pc", "c")):
            api_request(
                world.admin, "DELETE", f"/api/v1/namespaces/{world.namespace}/pods/{pod}?gracePeriodSeconds=0"
            )
            world.delete_claim(claim)
        assert bound_node(world.admin, world.namespace, "pb") == world.node_with_gpus
        assert world.read_claim("b")["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] == {
            "memory": "8Gi"
        }
    finally:
        api_request(world.admin, "DELETE", f"{DRA}/resourceslices/{name}")


def test_the_bind_waits_for_the_binding_conditions_of_a_device(world: World) -> None:
    """A device with a binding condition: the claim is allocated and reserved, and the pod is
    bound only once the driver reports the condition True in the claim's device status."""
    name = f"{world.node_with_gpus}-attached"
    device = {"name": "attached", "bindingConditions": ["Attached"], "bindingFailureConditions": ["Failed"]}
    world.publish_slice(name, [device])
    try:
        world.claim("one", selectors=[f'!has(device.attributes["{world.driver}"].index)'])
        world.pod("p", claim="one")
        reserved = poll(
            lambda: (c := world.read_claim("one")).get("status", {}).get("reservedFor") and c,
            20,
            "the claim allocated and reserved",
        )
        result = reserved["status"]["allocation"]["devices"]["results"][0]
        assert (result["device"], result["bindingConditions"]) == ("attached", ["Attached"])
        assert reserved["status"]["allocation"]["allocationTimestamp"]
        assert not world.pod_status("p")["spec"].get("nodeName")  # waiting for the driver
        # and says so, as kube-scheduler does
        event = poll(
            lambda: next(
                (
                    e
                    for e in api_request(
                        world.admin, "GET", f"/apis/events.k8s.io/v1/namespaces/{world.namespace}/events"
                    )["items"]
                    if e["reason"] == "BindingConditionsPending" and e["regarding"]["name"] == "p"
                ),
                None,
            ),
            20,
            "the BindingConditionsPending event",
        )
        assert (event["type"], event["action"], event["reportingController"]) == (
            "Normal",
            "Scheduling",
            world.scheduler,
        )
        assert event["note"] == f"waiting for binding conditions for device on node {world.node_with_gpus}"
        # the driver reports the device attached
        reserved["status"]["devices"] = [
            {
                "driver": world.driver,
                "pool": name,
                "device": "attached",
                "conditions": [
                    {
                        "type": "Attached",
                        "status": "True",
                        "reason": "Attached",
                        "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            }
        ]
        api_request(
            world.admin, "PUT", f"{DRA}/namespaces/{world.namespace}/resourceclaims/one/status", body=reserved
        )
        assert bound_node(world.admin, world.namespace, "p") == world.node_with_gpus
    finally:
        api_request(world.admin, "DELETE", f"{DRA}/resourceslices/{name}")
