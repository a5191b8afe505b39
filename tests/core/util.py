"""Small builders of API-shaped objects for the core tests."""

from __future__ import annotations

import itertools
from typing import Any

from scheduler.core.podinfo import PodInfo

_uid = itertools.count(1)


def pod(
    name: str,
    *,
    ns: str = "default",
    cpu: str | None = None,
    memory: str | None = None,
    node: str = "",
    priority: int = 0,
    scheduler: str = "default-scheduler",
    labels: dict[str, str] | None = None,
    created: str = "2026-01-01T00:00:00Z",
    uid: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    container: dict[str, Any] = {"name": "c", "image": "i"}
    if requests:
        container["resources"] = {"requests": requests}
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": uid or f"uid-{next(_uid)}",
            "labels": labels or {},
            "creationTimestamp": created,
        },
        "spec": {
            "containers": [container],
            "schedulerName": scheduler,
            "priority": priority,
            **({"nodeName": node} if node else {}),
            **spec,
        },
        "status": {"phase": "Pending"},
    }


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or [], **({"unschedulable": True} if unschedulable else {})},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
        },
    }


def pinfo(name: str, **kw: Any) -> PodInfo:
    return PodInfo.from_pod(pod(name, **kw))
