"""Waiting on a real cluster: watches and bounded polls, never bare sleeps.

Everything takes an explicit ``timeout`` and fails with what it was waiting
for and what it last saw, so a failing e2e run says why.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

T = TypeVar("T")


class WaitTimeoutError(AssertionError):
    pass


def poll(what: str, fn: Callable[[], T | None], timeout: float, interval: float = 0.5) -> T:
    """Call ``fn`` until it returns something truthy (or ``timeout``); return that."""
    last: Any = None

    class NotYetError(Exception):
        pass

    def attempt() -> T:
        nonlocal last
        last = fn()
        if not last:
            raise NotYetError
        return last

    try:
        for a in Retrying(
            stop=stop_after_delay(timeout),
            wait=wait_fixed(interval),
            retry=retry_if_exception_type((NotYetError, ApiException)),
            reraise=True,
        ):
            with a:
                return attempt()
    except (NotYetError, ApiException) as e:
        raise WaitTimeoutError(
            f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r}; {e!r})"
        ) from None
    raise AssertionError("unreachable")


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
            raise WaitTimeoutError(
                f"timed out after {timeout:.0f}s waiting for pod {ns}/{name} to be {what}; "
                f"last status: {(last or {}).get('status')}"
            )
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


DOCKER = os.environ.get("DOCKER", "docker")


def docker_exec(
    node: str, *cmd: str, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``docker exec <node> cmd...`` (a kind node is a container named like the node)."""
    proc = subprocess.run(
        [DOCKER, "exec", node, *cmd], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"docker exec {node} {' '.join(cmd)} exited {proc.returncode}: "
            f"{proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc
