"""Pods as the suites make and read them.

- **Bodies.** :func:`pod_body` is the pod every suite creates: one container
  that sleeps (or runs a command) with small requests, stopped at once when
  deleted; :func:`sleeper` creates one.
- **Reading.** Pods as the server's JSON (:func:`list_pods_raw`), whether one
  is bound, its conditions, its log; :func:`wait_bound` watches one until it
  has a node, :func:`wait_pods_gone` polls until none of a selector is left.

What pods hold on their nodes is ``e2e.fit``'s.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.kube import wait_pod
from scheduler.polling import poll

# --- bodies -------------------------------------------------------------------------------------


def pod_body(
    name: str,
    image: str,
    *,
    cpu: str | None = "10m",
    memory: str | None = "16Mi",
    node_name: str | None = None,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    command: list[str] | None = None,
    limits: dict[str, str] | None = None,
    scheduler_name: str | None = None,
) -> dict[str, Any]:
    """A pod that sleeps (or runs ``command``), with these requests (None: none of that resource);
    stops at once when deleted. ``scheduler_name`` None names no scheduler (default-scheduler's)."""
    requests = {key: value for key, value in (("cpu", cpu), ("memory", memory)) if value is not None}
    resources = {**({"requests": requests} if requests else {}), **({"limits": limits} if limits else {})}
    container: dict[str, Any] = {
        "name": "main",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": command or ["sleep", "3600"],
    }
    if resources:
        container["resources"] = resources
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 0, "containers": [container]}
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


def sleeper(core: client.CoreV1Api, ns: str, name: str, image: str, **body: Any) -> None:
    """Create a :func:`pod_body` pod (``body``: its keyword arguments) in ``ns``."""
    core.create_namespaced_pod(ns, pod_body(name, image, **body))


# --- reading ------------------------------------------------------------------------------------


def is_bound(pod: dict[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def condition(pod: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next(
        (c for c in (pod.get("status") or {}).get("conditions") or () if c.get("type") == type_), None
    )


def list_pods_raw(core: client.CoreV1Api, namespace: str | None = None, **kw: Any) -> list[dict[str, Any]]:
    if namespace is None:
        resp = core.list_pod_for_all_namespaces(_preload_content=False, **kw)
    else:
        resp = core.list_namespaced_pod(namespace, _preload_content=False, **kw)
    return json.loads(resp.data)["items"]


def pod_log(core: client.CoreV1Api, ns: str, name: str, **kw: Any) -> str:
    return core.read_namespaced_pod_log(name, ns, _preload_content=False, **kw).data.decode(errors="replace")


def wait_bound(core: client.CoreV1Api, namespace: str, name: str, timeout: float) -> dict[str, Any]:
    """Watch the pod until it has a nodeName; the pod."""
    return wait_pod(core, namespace, name, is_bound, "bound to a node", timeout)


def wait_pods_gone(core: client.CoreV1Api, namespace: str, selector: str, timeout: float) -> None:
    poll(
        lambda: not core.list_namespaced_pod(namespace, label_selector=selector).items or None,
        timeout,
        f"pods {selector} in {namespace} gone",
        interval=0.5,
        retry_on=(ApiException,),
    )
