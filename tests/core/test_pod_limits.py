"""A pod's limits and its pod-level resources, as component-helpers' ``PodLimits`` and
``PodRequests`` compute them (the cases of its ``helpers_test.go`` that apply to specs)."""

from __future__ import annotations

from typing import Any

from scheduler.core.resources import Resource, pod_limits, pod_requests


def c(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, **extra: Any) -> dict:
    return {"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}, **extra}


SIDECAR = {"restartPolicy": "Always"}


def test_limits_add_up_over_containers_and_sidecars_and_take_the_largest_init_moment() -> None:
    spec = {
        "initContainers": [
            c(limits={"cpu": "200m", "memory": "1Gi"}, **SIDECAR),
            c(limits={"cpu": "2", "memory": "100Mi"}),  # beside the sidecar: 2.2 cpu at that moment
        ],
        "containers": [c(limits={"cpu": "300m"}), c(limits={"cpu": "100m", "example.com/foo": "1"})],
    }
    limits = pod_limits(spec)
    assert limits.milli_cpu == 2200
    assert limits.memory == 2**30 + 100 * 2**20  # sidecar + the init container's moment beats 1Gi alone
    assert limits.scalar == {"example.com/foo": 1}


def test_overhead_is_added_to_the_limits_that_are_set_only() -> None:
    spec = {
        "containers": [c({"cpu": "100m", "memory": "32Mi"}, {"cpu": "200m"})],
        "overhead": {"cpu": "50m", "memory": "10Mi"},
    }
    assert pod_limits(spec) == Resource(milli_cpu=250)
    assert pod_requests(spec) == Resource(milli_cpu=150, memory=42 * 2**20)


def test_pod_level_resources_replace_the_containers_for_what_they_name() -> None:
    spec = {
        "resources": {"requests": {"cpu": "1", "hugepages-2Mi": "4Mi"}, "limits": {"memory": "512Mi"}},
        "containers": [c({"cpu": "100m", "memory": "64Mi"}, {"cpu": "300m", "memory": "128Mi"})],
    }
    assert pod_requests(spec) == Resource(
        milli_cpu=1000, memory=64 * 2**20, scalar={"hugepages-2Mi": 4 * 2**20}
    )
    assert pod_limits(spec) == Resource(milli_cpu=300, memory=512 * 2**20)


def test_pod_level_limits_count_only_for_pod_level_resources() -> None:
    """Pod-level limits apply when the pod sets any pod-level resource; a name that is not one
    (ephemeral storage) is not taken from there."""
    spec = {
        "resources": {"limits": {"cpu": "2", "ephemeral-storage": "1Gi"}},
        "containers": [c(limits={"cpu": "300m", "ephemeral-storage": "2Gi"})],
    }
    assert pod_limits(spec) == Resource(milli_cpu=2000, ephemeral_storage=2 * 2**30)
    assert pod_requests(spec) == Resource()


def test_a_pod_without_limits_has_none() -> None:
    assert pod_limits({"containers": [c({"cpu": "1"})], "overhead": {"cpu": "50m"}}).is_zero()
