"""Extended resources backed by DRA: ``example.com/gpu: 2`` in a container's requests, met by
devices of a DeviceClass instead of a device plugin.

A DeviceClass stands for the extended resource named in its
``spec.extendedResourceName``, and always for ``deviceclass.resource.kubernetes.io/<class>``.
On a node whose allocatable does not list the resource (no device plugin
offers it), NodeResourcesFit leaves it to DynamicResources, which allocates it
through a ResourceClaim the scheduler writes itself: one per pod, owned by the
pod, with the annotation :data:`ANNOTATION`, and one request per container
and resource (``container-<i>-request-<j>``). The pod's
``status.extendedResourceClaimStatus`` maps each container's resource to its
request. This module holds the pieces of that which are pure logic: which
class a resource name maps to, and the claim's requests and mappings
(kube-scheduler's ``extendeddynamicresources.go``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

from scheduler.core.framework import Store
from scheduler.core.podinfo import PodInfo
from scheduler.core.resources import int_value, is_extended_resource_name

Obj = Mapping[str, Any]

CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
"""The implicit extended resource name of every DeviceClass (``ResourceDeviceClassPrefix``)."""
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
"""Marks the claim the scheduler wrote for a pod's extended resources (value ``"true"``)."""
IN_MEMORY_NAME = "<extended-resources>"
"""The name of that claim before it is written: not a valid name, so it meets no real claim."""


def is_dra_extended_resource_name(name: str) -> bool:
    """``IsDRAExtendedResourceName``: an extended resource name, or a class's implicit one."""
    return is_extended_resource_name(name) or name.startswith(CLASS_PREFIX)


class ClassResolver:
    """Resource name -> the DeviceClass that provides it (``ExtendedResourceCache``).

    Several classes naming the same extended resource: the newest wins (the latest
    ``creationTimestamp``, then the smallest name), as the cache keeps it."""

    __slots__ = ("_by_resource",)

    def __init__(self, classes: Iterable[Obj]) -> None:
        self._by_resource: dict[str, Obj] = {}
        explicit: dict[str, Obj] = {}
        for cls in classes:
            meta = cls.get("metadata") or {}
            self._by_resource[CLASS_PREFIX + meta.get("name", "")] = cls
            name = (cls.get("spec") or {}).get("extendedResourceName")
            if name and (name not in explicit or _newer(cls, explicit[name])):
                explicit[name] = cls
        self._by_resource.update(explicit)

    def get(self, resource: str) -> Obj | None:
        return self._by_resource.get(resource)


RESOLVER_KEY = "DynamicResources/classResolver"


def cycle_resolver(state: MutableMapping[str, Any], classes: Store) -> ClassResolver:
    """The cycle's resolver, built once from the DeviceClass store and kept in the cycle
    state: NodeResourcesFit and DynamicResources both ask it in PreFilter."""
    resolver = state.get(RESOLVER_KEY)
    if resolver is None:
        resolver = state[RESOLVER_KEY] = ClassResolver(classes.list())
    return resolver


def _newer(a: Obj, b: Obj) -> bool:
    ma, mb = a.get("metadata") or {}, b.get("metadata") or {}
    # RFC 3339 in UTC, all of one length: the strings sort as the times do.
    ta, tb = ma.get("creationTimestamp") or "", mb.get("creationTimestamp") or ""
    if ta != tb:
        return ta > tb
    return bool(ma.get("name", "") < mb.get("name", ""))


def backed_requests(pod: PodInfo, resolver: ClassResolver) -> dict[str, int]:
    """The pod's requests (``PodRequests``) of extended resources some DeviceClass provides;
    empty when there are none (the pod's other scalars are NodeResourcesFit's alone)."""
    scalars = pod.requests.scalar
    if not any(q > 0 and resolver.get(n) is not None for n, q in scalars.items()):
        return {}
    return {n: q for n, q in scalars.items() if q > 0 and is_dra_extended_resource_name(n)}


def find_claim(pod: PodInfo, claims: Iterable[Obj]) -> Obj | None:
    """The claim written for the pod's extended resources in an earlier attempt
    (``findExtendedResourceClaim``)."""
    for claim in claims:
        meta = claim.get("metadata") or {}
        if (
            meta.get("namespace") != pod.namespace
            or (meta.get("annotations") or {}).get(ANNOTATION) != "true"
        ):
            continue
        for ref in meta.get("ownerReferences") or ():
            if ref.get("controller") and ref.get("uid") == pod.uid and ref.get("name") == pod.name:
                return claim
    return None


def in_memory_claim(pod: PodInfo) -> dict[str, Any]:
    """The claim to write, without requests yet (each node gets its own): named when it is
    written (``<pod>-extended-resources-<random>``), with a temporary UID meanwhile."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "namespace": pod.namespace,
            "name": IN_MEMORY_NAME,
            "uid": f"in-memory-{uuid.uuid4()}",
            "generateName": f"{pod.name}-extended-resources-",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "controller": True}
            ],
            "annotations": {ANNOTATION: "true"},
        },
        "spec": {},
    }


def requests_and_mappings(
    pod: PodInfo, resources: Mapping[str, int], resolver: ClassResolver
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The claim's device requests for ``resources`` (those this node leaves to DRA) and the
    pod status' request mappings (``createRequestsAndMappings``).

    Containers that run side by side (regular ones, sidecars) each get their own devices.
    A classic init container runs before them: it reuses the devices of the long-running
    containers after it, asks for the rest, and all classic init containers of a
    resource share the largest such request, since they run one at a time."""
    spec = pod.spec
    inits = list(spec.get("initContainers") or ())
    containers = inits + list(spec.get("containers") or ())
    long_lived = [
        i for i, c in enumerate(containers) if i >= len(inits) or c.get("restartPolicy") == "Always"
    ]
    short_lived = [i for i in range(len(inits)) if i not in long_lived]
    requests: list[dict[str, Any]] = []
    mappings: list[dict[str, str]] = []
    for resource in sorted(resources):
        cls = resolver.get(resource)
        if cls is None:
            continue
        class_name = cls["metadata"]["name"]
        long_reqs: list[dict[str, Any] | None] = [None] * len(containers)
        long_maps: list[dict[str, str]] = []
        for i in long_lived:
            req, maps = _container_request(i, containers[i], resource, class_name, [])
            long_reqs[i] = req
            long_maps += maps
        largest: dict[str, Any] | None = None
        short_names: set[str] = set()
        short_maps: list[dict[str, str]] = []
        for i in short_lived:
            req, maps = _container_request(i, containers[i], resource, class_name, long_reqs[i:])
            if req is not None:
                short_names.add(req["name"])
                if largest is None or largest["exactly"]["count"] < req["exactly"]["count"]:
                    largest = req
            short_maps += maps
        if largest is not None and len(short_names) > 1:
            for m in short_maps:
                if m["requestName"] in short_names:
                    m["requestName"] = largest["name"]
        if largest is not None:
            requests.append(largest)
        requests += [r for r in long_reqs if r is not None]
        mappings += long_maps + short_maps
    requests.sort(key=lambda r: str(r["name"]))
    return requests, mappings


def _container_request(
    index: int,
    container: Obj,
    resource: str,
    class_name: str,
    reusable: list[dict[str, Any] | None],
) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    """``createResourceRequestAndMappings``: the container's request for ``resource`` (None
    when the reusable requests already cover it) and its mappings."""
    creqs = (container.get("resources") or {}).get("requests") or {}
    if resource not in creqs:
        return None, []
    want = int_value(creqs[resource])
    if want <= 0:
        return None, []
    cname = container.get("name", "")
    maps: list[dict[str, str]] = []
    have = 0
    for r in reusable:
        if r is None:
            continue
        have += int(r["exactly"]["count"])
        maps.append({"containerName": cname, "resourceName": resource, "requestName": r["name"]})
        if have >= want:
            return None, maps
    # The request's name: the container's index among init and regular containers, then
    # the resource's among the container's sorted request names.
    position = sorted(creqs).index(resource)
    name = f"container-{index}-request-{position}"
    maps.append({"containerName": cname, "resourceName": resource, "requestName": name})
    request = {
        "name": name,
        "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount", "count": want - have},
    }
    return request, maps
