"""Kubernetes quantities and pod resource requests, counted as kube-scheduler counts them.

Objects arrive as the API server's JSON (plain dicts), so quantities are strings
such as ``"250m"``, ``"1.5Gi"`` or ``"1e3"``. CPU is kept in millicores and
everything else in whole base units (bytes, counts), rounded up as
``resource.Quantity.MilliValue()``/``Value()`` round.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
HUGEPAGES_PREFIX = "hugepages-"

# kube-scheduler's defaults for containers that request nothing, used by the
# scoring plugins only (pkg/scheduler/util/pod_resources.go).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


def is_extended_resource_name(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``: a ``domain/name`` outside ``kubernetes.io``."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


@lru_cache(maxsize=4096)
def parse_quantity(value: str | int | float) -> Decimal:
    """The exact value of a Kubernetes quantity (``"100m"`` is ``Decimal("0.1")``)."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    text = value.strip()
    if not text:
        raise QuantityError("empty quantity")
    try:
        if text[-2:] in _BINARY:
            return Decimal(text[:-2]) * _BINARY[text[-2:]]
        if text[-1:] in _DECIMAL and not text[-1:].isdigit():
            return Decimal(text[:-1]) * _DECIMAL[text[-1:]]
        return Decimal(text)  # plain number or exponent form ("1e3", "1E3")
    except InvalidOperation:
        raise QuantityError(f"not a quantity: {value!r}") from None


def milli_value(value: str | int | float) -> int:
    """``Quantity.MilliValue()``: thousandths, rounded up."""
    return math.ceil(parse_quantity(value) * 1000)


def int_value(value: str | int | float) -> int:
    """``Quantity.Value()``: whole units, rounded up."""
    return math.ceil(parse_quantity(value))


@dataclass(slots=True)
class Resource:
    """A vector of resources: cpu in millicores, the rest in base units."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    allowed_pod_number: int = 0
    scalar: dict[str, int] = field(default_factory=dict)
    """Extended resources (``nvidia.com/gpu``, ``hugepages-2Mi``, ...)."""

    @classmethod
    def from_list(cls, resources: dict[str, Any] | None) -> Resource:
        """A ``ResourceList`` (``{"cpu": "500m", ...}``) as a Resource."""
        res = cls()
        if resources:
            for name, q in resources.items():
                res.set(name, q)
        return res

    def set(self, name: str, q: str | int | float) -> None:
        if name == CPU:
            self.milli_cpu = milli_value(q)
        elif name == MEMORY:
            self.memory = int_value(q)
        elif name == EPHEMERAL_STORAGE:
            self.ephemeral_storage = int_value(q)
        elif name == PODS:
            self.allowed_pod_number = int_value(q)
        else:
            self.scalar[name] = int_value(q)

    def get(self, name: str) -> int:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        if name == PODS:
            return self.allowed_pod_number
        return self.scalar.get(name, 0)

    def add(self, other: Resource) -> None:
        self.milli_cpu += other.milli_cpu
        self.memory += other.memory
        self.ephemeral_storage += other.ephemeral_storage
        self.allowed_pod_number += other.allowed_pod_number
        if other.scalar:
            for k, v in other.scalar.items():
                self.scalar[k] = self.scalar.get(k, 0) + v

    def sub(self, other: Resource) -> None:
        self.milli_cpu -= other.milli_cpu
        self.memory -= other.memory
        self.ephemeral_storage -= other.ephemeral_storage
        self.allowed_pod_number -= other.allowed_pod_number
        if other.scalar:
            for k, v in other.scalar.items():
                self.scalar[k] = self.scalar.get(k, 0) - v

    def set_max(self, other: Resource) -> None:
        self.milli_cpu = max(self.milli_cpu, other.milli_cpu)
        self.memory = max(self.memory, other.memory)
        self.ephemeral_storage = max(self.ephemeral_storage, other.ephemeral_storage)
        self.allowed_pod_number = max(self.allowed_pod_number, other.allowed_pod_number)
        for k, v in other.scalar.items():
            if v > self.scalar.get(k, 0):
                self.scalar[k] = v

    def copy(self) -> Resource:
        return Resource(
            self.milli_cpu, self.memory, self.ephemeral_storage, self.allowed_pod_number, dict(self.scalar)
        )

    def is_zero(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral_storage or any(self.scalar.values()))


def _container_requests(container: dict[str, Any], non_zero: bool) -> Resource:
    requests = (container.get("resources") or {}).get("requests") or {}
    res = Resource.from_list(requests)
    if non_zero:
        if CPU not in requests:
            res.milli_cpu = DEFAULT_MILLI_CPU_REQUEST
        if MEMORY not in requests:
            res.memory = DEFAULT_MEMORY_REQUEST
    return res


def _container_limits(container: dict[str, Any]) -> Resource:
    return Resource.from_list((container.get("resources") or {}).get("limits"))


def _aggregate(spec: dict[str, Any], of: Callable[[dict[str, Any]], Resource]) -> Resource:
    """The containers' resources (``of`` each) as the pod needs them
    (``aggregateContainerResourcesByFn``): regular containers and restartable init containers
    ("sidecars") run together, so they add up; each classic init container runs alone, beside
    the sidecars started before it, so the pod needs the largest of those moments."""
    total = Resource()
    for c in spec.get("containers") or ():
        total.add(of(c))
    sidecars = Resource()
    init_max = Resource()
    for c in spec.get("initContainers") or ():
        cr = of(c)
        if c.get("restartPolicy") == "Always":
            sidecars.add(cr)
            total.add(cr)
            moment = sidecars.copy()
        else:
            moment = sidecars.copy()
            moment.add(cr)
        init_max.set_max(moment)
    total.set_max(init_max)
    return total


def is_pod_level_resource(name: str) -> bool:
    """Whether pod-level ``spec.resources`` may set ``name`` (``IsSupportedPodLevelResource``)."""
    return name in (CPU, MEMORY) or name.startswith(HUGEPAGES_PREFIX)


def pod_requests(spec: dict[str, Any], non_zero: bool = False) -> Resource:
    """What a pod asks of its node, as ``resourcehelper.PodRequests`` computes it: the
    containers' requests (``_aggregate``); pod-level ``spec.resources`` requests, where set,
    replace that sum for the resources they name; pod overhead on top.

    ``non_zero`` gives the scoring view: a container without a cpu or memory
    request counts as 100m / 200Mi (kube-scheduler's ``GetNonzeroRequests``).
    """
    reqs = _aggregate(spec, lambda c: _container_requests(c, non_zero))
    pod_level = ((spec.get("resources") or {}).get("requests")) or {}
    for name, q in pod_level.items():
        if is_pod_level_resource(name):
            reqs.set(name, q)
    overhead = spec.get("overhead")
    if overhead:
        reqs.add(Resource.from_list(overhead))
    return reqs


def pod_limits(spec: dict[str, Any]) -> Resource:
    """A pod's limits, as ``resourcehelper.PodLimits`` computes them: the containers' limits
    (``_aggregate``); pod-level limits, when the pod sets pod-level resources, replace them
    for the resources they name; the overhead is added to the limits that are set (a resource
    without a limit stays unlimited)."""
    limits = _aggregate(spec, _container_limits)
    pod_level = spec.get("resources") or {}
    if any(is_pod_level_resource(n) for part in ("requests", "limits") for n in pod_level.get(part) or {}):
        for name, q in (pod_level.get("limits") or {}).items():
            if is_pod_level_resource(name):
                limits.set(name, q)
    for name, q in (spec.get("overhead") or {}).items():
        if limits.get(name):
            limits.add(Resource.from_list({name: q}))
    return limits
