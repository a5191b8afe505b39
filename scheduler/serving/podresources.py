"""``/metrics/resources``: every pod's requests and limits, as kube-scheduler serves them.

kube-scheduler serves, on the leader only, two gauges computed from its pod informer when
scraped (``pkg/scheduler/metrics/resources``), which capacity dashboards read instead of
summing container specs themselves:

- ``kube_pod_resource_request`` and ``kube_pod_resource_limit``, labelled ``namespace``,
  ``pod``, ``node`` (empty while unscheduled), ``scheduler``, ``priority`` (empty without
  one), ``resource`` and ``unit`` (``cores`` for cpu; ``bytes`` for memory, storage,
  ephemeral storage and huge pages; ``integer`` for attachable volumes; else empty);
- the values are the pod's effective requests and limits (``resourcehelper.PodRequests`` and
  ``PodLimits``: sidecars, init containers, pod-level resources, overhead); a zero value is
  left out, and so is a pod bound to a node that has finished (Succeeded or Failed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric

from scheduler.core.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    HUGEPAGES_PREFIX,
    MEMORY,
    Resource,
    pod_limits,
    pod_requests,
)

REQUEST = "kube_pod_resource_request"
LIMIT = "kube_pod_resource_limit"
LABELS = ("namespace", "pod", "node", "scheduler", "priority", "resource", "unit")
_SUFFIX = (
    " on the cluster, broken down by pod. This shows the resource usage the scheduler and kubelet "
    "expect per pod for resources along with the unit for the resource if any."
)
REQUEST_HELP = "[STABLE] Resources requested by workloads" + _SUFFIX
LIMIT_HELP = "[STABLE] Resources limit for workloads" + _SUFFIX
_FINISHED = ("Succeeded", "Failed")


def unit(resource: str) -> str:
    """The ``unit`` label of a resource name."""
    if resource == CPU:
        return "cores"
    if resource in (MEMORY, "storage", EPHEMERAL_STORAGE) or resource.startswith(HUGEPAGES_PREFIX):
        return "bytes"
    if resource.startswith("attachable-volumes-"):
        return "integer"
    return ""


def _values(res: Resource) -> Iterator[tuple[str, float]]:
    """(resource name, value in the unit of the label) of each non-zero resource."""
    if res.milli_cpu:
        # As Quantity.AsApproximateFloat64 of a milli-scaled sum (base × 10^-3), to the last bit.
        yield CPU, res.milli_cpu * 0.001
    if res.memory:
        yield MEMORY, float(res.memory)
    if res.ephemeral_storage:
        yield EPHEMERAL_STORAGE, float(res.ephemeral_storage)
    for name, value in res.scalar.items():
        if value:
            yield name, float(value)


class PodResourcesCollector:
    """The two gauges over ``pods()`` (the pod informer's objects), computed when collected."""

    def __init__(self, pods: Callable[[], Iterable[dict[str, Any]]]) -> None:
        self._pods = pods

    def describe(self) -> list[Metric]:
        return list(self._families())

    def collect(self) -> Iterator[Metric]:
        requests, limits = self._families()
        for pod in self._pods():
            spec = pod.get("spec") or {}
            node = spec.get("nodeName") or ""
            if node and (pod.get("status") or {}).get("phase") in _FINISHED:
                continue
            meta = pod.get("metadata") or {}
            priority = spec.get("priority")
            labels = [
                meta.get("namespace", ""),
                meta.get("name", ""),
                node,
                spec.get("schedulerName") or "",
                "" if priority is None else str(priority),
            ]
            for family, res in ((requests, pod_requests(spec)), (limits, pod_limits(spec))):
                for name, value in _values(res):
                    family.add_metric([*labels, name, unit(name)], value)
        yield from (requests, limits)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(REQUEST, REQUEST_HELP, labels=LABELS),
            GaugeMetricFamily(LIMIT, LIMIT_HELP, labels=LABELS),
        )


def pod_resources_registry(pods: Callable[[], Iterable[dict[str, Any]]]) -> CollectorRegistry:
    """A registry of its own holding only the two gauges, as kube-scheduler's handler has."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PodResourcesCollector(pods))
    return registry
