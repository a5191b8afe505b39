"""The API server as every suite uses it: one pod watched until a condition holds, a pod run to
completion, a Deployment scaled, the API's timestamps read; a namespace made ready for pods,
and a pod's admission awaited.

Waits take an explicit ``timeout`` and fail with what they were waiting for
and what they last saw, so a failing e2e run says why. Waits that poll use
``scheduler.polling.poll``; the ones here watch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from scheduler.polling import PollTimeoutError, poll


def wall(stamp: str | None) -> float | None:
    """An API time (RFC 3339, with or without fractions) as epoch seconds."""
    if not stamp:
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def wait_pod(
    core: client.CoreV1Api,
    ns: str,
    name: str,
    pred: Callable[[dict[str, Any]], bool],
    what: str,
    timeout: float,
) -> dict[str, Any]:
    """Watch one pod until ``pred(pod)`` holds; returns the pod as a dict."""
    deadline = time.monotonic() + timeout
    last: dict[str, Any] | None = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PollTimeoutError(f"pod {ns}/{name} to be {what}", timeout, (last or {}).get("status"))
        w = watch.Watch()
        for ev in w.stream(
            core.list_namespaced_pod,
            ns,
            field_selector=f"metadata.name={name}",
            timeout_seconds=max(1, int(remaining)),
            _request_timeout=remaining + 5,
            deserialize=False,
        ):
            obj = ev["object"]
            if ev["type"] in ("ADDED", "MODIFIED"):
                last = obj
                if pred(obj):
                    w.stop()
                    return obj
            elif ev["type"] == "DELETED":
                raise AssertionError(f"pod {ns}/{name} was deleted while waiting for it to be {what}")


def phase_is(*phases: str) -> Callable[[dict[str, Any]], bool]:
    return lambda pod: (pod.get("status") or {}).get("phase") in phases


def is_ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def run_pod(
    core: client.CoreV1Api,
    ns: str,
    name: str,
    image: str,
    script: str,
    *,
    node: str | None = None,
    volumes: list[dict[str, Any]] | None = None,
    mounts: list[dict[str, Any]] | None = None,
    timeout: float = 120,
) -> str:
    """Run ``python3 -c script`` in a pod to completion; return its log. Fails on a non-zero exit."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["python3", "-c", script],
                    "volumeMounts": mounts or [],
                }
            ],
            "volumes": volumes or [],
        },
    }
    if node:
        body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    core.create_namespaced_pod(ns, body)
    pod = wait_pod(core, ns, name, phase_is("Succeeded", "Failed"), "finished", timeout)
    # The 36.x client returns the log as the repr of bytes; read the raw body instead.
    log = core.read_namespaced_pod_log(name, ns, _preload_content=False).data.decode()
    if pod["status"]["phase"] != "Succeeded":
        raise AssertionError(f"pod {ns}/{name} failed: {pod['status'].get('containerStatuses')}\n{log}")
    return log


def scale(apps: client.AppsV1Api, namespace: str, name: str, replicas: int) -> None:
    """Set the Deployment's replicas (its scale subresource)."""
    apps.patch_namespaced_deployment_scale(name, namespace, {"spec": {"replicas": replicas}})


def create_namespace(core: client.CoreV1Api, name: str, labels: dict[str, str] | None = None) -> None:
    """Create a namespace, and return once its ``default`` ServiceAccount exists.

    The controller-manager makes that account a moment after the namespace; until then the
    ServiceAccount admission plugin refuses pods, after retrying for about a second only
    (``getServiceAccount`` of plugin/pkg/admission/serviceaccount)."""
    core.create_namespace({"metadata": {"name": name, "labels": labels or {}}})

    def account() -> bool:
        try:
            core.read_namespaced_service_account("default", name)
        except ApiException as e:
            if e.status != 404:
                raise
            return False
        return True

    poll(account, 60, f"the default ServiceAccount of namespace {name}", 0.1)


def wait_admitted(core: client.CoreV1Api, namespace: str, pod: dict[str, Any], timeout: float = 60) -> None:
    """Until the API server's admission would let ``pod`` in (a dry-run create answers yes).

    Admission plugins read what they check from informers: the Priority plugin, for one,
    refuses a pod naming a PriorityClass its cache has not seen yet ("no PriorityClass with
    name ... was found"), with no look-up of its own. A refusal (403) counts as not yet."""
    last: list[str] = [""]

    def admitted() -> bool:
        try:
            core.create_namespaced_pod(namespace, pod, dry_run="All")
        except ApiException as e:
            if e.status != 403:
                raise
            last[0] = e.body or ""
            return False
        return True

    try:
        poll(admitted, timeout, f"pod {namespace}/{pod['metadata']['name']} to be admitted", 0.1)
    except PollTimeoutError as e:
        raise PollTimeoutError(e.what, timeout, last[0]) from None
