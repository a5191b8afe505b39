"""PodInfo: a pod as the API server sent it, with what scheduling reads often precomputed.

A PodInfo is immutable in practice: an update of the pod builds a new one.
Plugins may memoize what they derive from a pod in ``PodInfo.memo`` (keyed by
plugin name), which is therefore always consistent with ``PodInfo.pod``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

from scheduler.core.resources import CPU, MEMORY, Resource, pod_requests

HostPort = tuple[str, str, int]
"""(hostIP, protocol, hostPort) as NodePorts compares them; hostIP "" means 0.0.0.0."""


@lru_cache(maxsize=1024)
def parse_time(value: str | None) -> float:
    """An RFC 3339 API timestamp as epoch seconds (0.0 when absent).

    Cached: timestamps have whole seconds, and pods created together (and the
    many updates of one pod) share them."""
    if not value:
        return 0.0
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _host_ports(spec: dict[str, Any]) -> tuple[HostPort, ...]:
    # kube-scheduler counts the ports of regular containers and of
    # restartable init containers (schedutil.GetHostPorts).
    containers = list(spec.get("containers") or ())
    containers += [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    ports: list[HostPort] = []
    for c in containers:
        for p in c.get("ports") or ():
            hp = p.get("hostPort") or 0
            if hp > 0:
                ip = p.get("hostIP") or "0.0.0.0"
                ports.append((ip, p.get("protocol") or "TCP", hp))
    return tuple(ports)


@dataclass(slots=True, eq=False)
class PodInfo:
    pod: dict[str, Any]
    uid: str
    namespace: str
    name: str
    labels: dict[str, str]
    scheduler_name: str
    node_name: str
    priority: int
    created: float
    """creationTimestamp as epoch seconds."""
    requests: Resource
    """What NodeResourcesFit counts (pod_requests)."""
    non_zero_requests: Resource
    """What the scoring plugins count: zero cpu/memory requests become 100m/200Mi."""
    host_ports: tuple[HostPort, ...]
    has_affinity: bool
    """The pod has a pod affinity or anti-affinity (required or preferred)."""
    has_required_anti_affinity: bool
    memo: dict[Hashable, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def spec(self) -> dict[str, Any]:
        return self.pod["spec"]

    @property
    def terminal(self) -> bool:
        return (self.pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    @property
    def deleting(self) -> bool:
        return bool(self.pod["metadata"].get("deletionTimestamp"))

    @classmethod
    def from_pod(cls, pod: dict[str, Any]) -> PodInfo:
        meta = pod["metadata"]
        spec = pod.get("spec") or {}
        affinity = spec.get("affinity") or {}
        pa = affinity.get("podAffinity") or {}
        paa = affinity.get("podAntiAffinity") or {}
        requests = pod_requests(spec)
        non_zero = requests if _requests_cpu_and_memory(spec) else pod_requests(spec, non_zero=True)
        return cls(
            pod=pod,
            uid=meta.get("uid") or f"{meta.get('namespace')}/{meta['name']}",
            namespace=meta.get("namespace") or "default",
            name=meta["name"],
            labels=meta.get("labels") or {},
            scheduler_name=spec.get("schedulerName") or "default-scheduler",
            node_name=spec.get("nodeName") or "",
            priority=spec.get("priority") or 0,
            created=parse_time(meta.get("creationTimestamp")),
            requests=requests,
            non_zero_requests=non_zero,
            host_ports=_host_ports(spec),
            has_affinity=bool(pa or paa),
            has_required_anti_affinity=bool(paa.get("requiredDuringSchedulingIgnoredDuringExecution")),
        )

    def pvc_keys(self) -> list[str]:
        """``namespace/claim`` of each ``persistentVolumeClaim`` volume (``PodPVCKeys``)."""
        out = []
        for v in self.spec.get("volumes") or ():
            claim = v.get("persistentVolumeClaim")
            if claim is not None:
                out.append(f"{self.namespace}/{claim.get('claimName') or ''}")
        return out

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"


def _requests_cpu_and_memory(spec: dict[str, Any]) -> bool:
    """Whether every container and init container requests both cpu and memory: then the
    scoring view (``non_zero``) adds no defaults and is the requests themselves (one object
    for both; most pods of a cluster are such pods)."""
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or ():
            requests = (c.get("resources") or {}).get("requests")
            if not requests or CPU not in requests or MEMORY not in requests:
                return False
    return True
