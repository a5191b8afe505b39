"""Helpers of the API-server tests: identities, objects, and what exists."""

from __future__ import annotations

from typing import Any

from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException

from scheduler.deploy.kube import Cluster
from tests.apiserver import ControlPlane


def service_account_client(cp: ControlPlane, namespace: str, name: str) -> ApiClient:
    """A client authenticated as ServiceAccount ``namespace/name`` (the user and groups its token would give)."""
    return cp.api_client(
        user=f"system:serviceaccount:{namespace}:{name}",
        groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}"),
    )


def existing(admin: ApiClient, objects: list[dict[str, Any]]) -> list[str]:
    """``Kind ns/name`` of those objects that exist and are not being deleted."""
    cluster = Cluster(admin)
    out = []
    for o in objects:
        live = cluster.get(o)
        if live is not None and not live["metadata"].get("deletionTimestamp"):
            meta = o["metadata"]
            out.append(
                f"{o['kind']} {meta.get('namespace', '') + '/' if meta.get('namespace') else ''}{meta['name']}"
            )
    return out


def namespace_state(admin: ApiClient, name: str) -> str:
    """absent, Active or Terminating."""
    try:
        ns = CoreV1Api(admin).read_namespace(name)
    except ApiException as e:
        if e.status == 404:
            return "absent"
        raise
    return "Terminating" if ns.metadata.deletion_timestamp else "Active"


def make_pod(admin: ApiClient, namespace: str, name: str, labels: dict[str, str] | None = None) -> Any:
    """A pod for a scheduler nobody runs, so nothing else touches it."""
    return CoreV1Api(admin).create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {
                "schedulerName": "nobody",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        },
    )
