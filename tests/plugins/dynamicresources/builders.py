"""ResourceSlices, DeviceClasses and ResourceClaims as the API server serves them (resource.k8s.io/v1)."""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.example.com"


def device(name: str, taints: list[dict[str, Any]] | None = None, **attributes: Any) -> dict[str, Any]:
    attrs = {}
    for k, v in attributes.items():
        kind = "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "string"
        attrs[k] = {kind: v}
    out: dict[str, Any] = {"name": name, "attributes": attrs}
    if taints:
        out["taints"] = taints
    return out


def slice_(
    name: str,
    devices: list[dict[str, Any]],
    *,
    node: str | None = "node-a",
    pool: str | None = None,
    driver: str = DRIVER,
    generation: int = 1,
    count: int = 1,
    all_nodes: bool = False,
    node_selector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool or node or name, "generation": generation, "resourceSliceCount": count},
        "devices": devices,
    }
    if all_nodes:
        spec["allNodes"] = True
    elif node_selector is not None:
        spec["nodeSelector"] = node_selector
    else:
        spec["nodeName"] = node
    return _object("ResourceSlice", name, spec)


def device_class(
    name: str = "gpu", expression: str | None = None, config: list | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selectors": [{"cel": {"expression": expression or f'device.driver == "{DRIVER}"'}}]
    }
    if config:
        spec["config"] = config
    return _object("DeviceClass", name, spec)


def _object(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def exactly(
    name: str = "gpu",
    cls: str = "gpu",
    count: int | None = None,
    mode: str | None = None,
    selectors: list[str] = (),  # type: ignore[assignment]
    **extra: Any,
) -> dict[str, Any]:
    req: dict[str, Any] = {"deviceClassName": cls}
    if count is not None:
        req["count"] = count
    if mode is not None:
        req["allocationMode"] = mode
    if selectors:
        req["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    req.update(extra)
    return {"name": name, "exactly": req}


def first_available(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def sub(name: str, cls: str = "gpu", count: int | None = None, selectors: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    out: dict[str, Any] = {"name": name, "deviceClassName": cls}
    if count is not None:
        out["count"] = count
    if selectors:
        out["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return out


def claim(
    name: str,
    *requests: dict[str, Any],
    namespace: str = "default",
    constraints: list[dict[str, Any]] | None = None,
    config: list[dict[str, Any]] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}"},
        "spec": {"devices": devices},
    }
