"""What pods hold on their nodes, as the scheduler counts it.

Requests per node are summed over the pods that hold resources on it (bound
and not Succeeded/Failed): a pod's containers, or an init container's if
larger, plus its overhead; held against the nodes' allocatable, that is what
is left to request.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.utils import parse_quantity

from e2e.pods import list_pods_raw
from scheduler.polling import poll


def millicpu(q: Any) -> int:
    return int(parse_quantity(str(q)) * 1000)


def pod_requests(pod: dict[str, Any]) -> tuple[int, int]:
    """(milli-CPU, memory bytes) the pod holds on its node, as the scheduler counts them:
    the sum of its containers, or an init container's if larger, plus its overhead."""
    spec = pod.get("spec") or {}

    def of(containers: Iterable[dict[str, Any]]) -> list[tuple[int, int]]:
        out = []
        for c in containers:
            req = (c.get("resources") or {}).get("requests") or {}
            out.append((millicpu(req.get("cpu", 0)), int(parse_quantity(str(req.get("memory", 0))))))
        return out

    main = of(spec.get("containers") or ())
    cpu, mem = sum(c for c, _ in main), sum(m for _, m in main)
    for c, m in of(spec.get("initContainers") or ()):
        cpu, mem = max(cpu, c), max(mem, m)
    overhead = spec.get("overhead") or {}
    return cpu + millicpu(overhead.get("cpu", 0)), mem + int(parse_quantity(str(overhead.get("memory", 0))))


def holds_resources(pod: dict[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def allocatable(core: client.CoreV1Api) -> dict[str, tuple[int, int]]:
    return {
        n.metadata.name: (
            millicpu(n.status.allocatable["cpu"]),
            int(parse_quantity(n.status.allocatable["memory"])),
        )
        for n in core.list_node().items
    }


def requested(core: client.CoreV1Api, *, exclude_namespace: str | None = None) -> dict[str, tuple[int, int]]:
    """Per node, the (milli-CPU, memory) requested by the pods holding resources on it."""
    out: dict[str, tuple[int, int]] = {}
    for p in list_pods_raw(core):
        if not holds_resources(p) or p["metadata"]["namespace"] == exclude_namespace:
            continue
        c, m = pod_requests(p)
        node = p["spec"]["nodeName"]
        oc, om = out.get(node, (0, 0))
        out[node] = (oc + c, om + m)
    return out


def free_cpu(core: client.CoreV1Api) -> dict[str, int]:
    """Milli-CPU still requestable per node."""
    alloc, used = allocatable(core), requested(core)
    return {n: a[0] - used.get(n, (0, 0))[0] for n, a in alloc.items()}


def wait_no_terminating_pods(core: client.CoreV1Api, nodes: Iterable[str], timeout: float) -> None:
    """Until no pod on these nodes is being deleted: their requests still count, then suddenly not."""
    wanted = set(nodes)

    def none_left() -> Any:
        left = [
            f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in list_pods_raw(core)
            if p["metadata"].get("deletionTimestamp") and (p.get("spec") or {}).get("nodeName") in wanted
        ]
        return not left or None

    poll(none_left, timeout, f"no pod terminating on {sorted(wanted)}", interval=2, retry_on=(ApiException,))
