"""Waiting with a deadline: poll a condition (scheduler.polling), log its status whenever it changes.

Every wait of the deploy commands is a :func:`poll` of a function returning
``(done, status)``: the status is a short line (``2/3 pods ready``) logged on
change, and part of the error when the deadline passes. A transient API error
(429, 5xx, a dropped connection) counts as "not yet", not as a failure.

Helpers read what the waits look at: pods (:func:`pod_summary` says why a pod
is not ready: its phase, waiting reason, restarts) and the Lease holder.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes.client import ApiClient, AppsV1Api, CoordinationV1Api, CoreV1Api
from kubernetes.client.exceptions import ApiException

from scheduler import polling
from scheduler.cluster.client import api_request
from scheduler.cluster.leases import RESTORING_ANNOTATION
from scheduler.deploy.cmdline import DeployError, api_message
from scheduler.logs import kv

logger = logging.getLogger(__name__)

TRANSIENT = frozenset({429, 500, 502, 503, 504})
KUBE_SCHEDULER_SELECTOR = "component=kube-scheduler"
"""kubeadm's label on the kube-scheduler static pod."""


def poll(what: str, check: Callable[[], tuple[bool, str]], timeout: float, interval: float = 1.0) -> float:
    """Call ``check`` every ``interval`` s until it is done; the seconds it took.

    Raises DeployError after ``timeout`` s, with the last status."""
    start = time.monotonic()
    last: list[str] = [""]

    def attempt() -> bool:
        try:
            done, status = check()
        except ApiException as e:
            if e.status not in TRANSIENT:
                raise DeployError(f"{what}: {api_message(e)}") from None
            done, status = False, f"API server: {api_message(e)}"
        except (urllib3.exceptions.HTTPError, OSError) as e:
            done, status = False, f"API server unreachable: {e}"
        if status != last[0]:
            logger.info(what, extra=kv(status=status, elapsed=f"{time.monotonic() - start:.1f}s"))
            last[0] = status
        return done

    try:
        polling.poll(attempt, timeout, what, interval)
    except polling.PollTimeoutError:
        raise DeployError(f"{what}: not done after {timeout:g}s; last status: {last[0]}") from None
    return time.monotonic() - start


# --- pods --------------------------------------------------------------------------------------


def pod_ready(pod: Any) -> bool:
    conds = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conds)


def pod_summary(pod: Any) -> str:
    """``name: Running, ready`` or ``name: Pending, scheduler: <message>`` or ``name: ImagePullBackOff ...``."""
    st = pod.status
    parts = [st.phase or "Unknown"] if st else ["Unknown"]
    if pod.metadata.deletion_timestamp:
        parts.append("terminating")
    if st and pod_ready(pod):
        parts.append("ready")
    for cs in (st.container_statuses or []) if st else []:
        if cs.state and cs.state.waiting and cs.state.waiting.reason:
            msg = cs.state.waiting.message or ""
            parts.append(f"{cs.name}: {cs.state.waiting.reason}" + (f" ({msg[:160]})" if msg else ""))
        elif cs.state and cs.state.terminated:
            parts.append(
                f"{cs.name}: terminated {cs.state.terminated.reason or ''} "
                f"exit {cs.state.terminated.exit_code}".replace("  ", " ")
            )
        if cs.restart_count:
            parts.append(f"{cs.restart_count} restarts")
    for c in (st.conditions or []) if st else []:
        if c.type == "PodScheduled" and c.status == "False":
            parts.append(f"unschedulable: {(c.message or c.reason or '')[:160]}")
    if pod.spec and pod.spec.node_name:
        parts.append(f"node {pod.spec.node_name}")
    return f"{pod.metadata.name}: " + ", ".join(parts)


def list_pods(api: ApiClient, namespace: str, selector: str) -> list[Any]:
    pods = CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector, _request_timeout=30).items
    return sorted(pods, key=lambda p: p.metadata.name)


def wait_pods_ready(
    api: ApiClient, namespace: str, selector: str, want: int, timeout: float, what: str = "pods ready"
) -> list[Any]:
    """Wait until exactly ``want`` live pods match and all are Ready; returns them."""
    result: list[Any] = []

    def check() -> tuple[bool, str]:
        pods = [p for p in list_pods(api, namespace, selector) if not p.metadata.deletion_timestamp]
        ready = [p for p in pods if pod_ready(p)]
        result[:] = pods
        status = f"{len(ready)}/{want} ready"
        not_ready = [pod_summary(p) for p in pods if not pod_ready(p)]
        if not_ready:
            status += "; " + "; ".join(not_ready)
        return len(ready) == want == len(pods), status

    poll(what, check, timeout)
    return result


def wait_pods_gone(
    api: ApiClient, namespace: str, selector: str, timeout: float, what: str = "pods gone"
) -> None:
    def check() -> tuple[bool, str]:
        pods = list_pods(api, namespace, selector)
        return not pods, f"{len(pods)} left" + (
            ": " + ", ".join(p.metadata.name for p in pods) if pods else ""
        )

    poll(what, check, timeout)


# --- the Lease ---------------------------------------------------------------------------------


def read_lease(api: ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The Lease as plain JSON (what ``leases.annotated_as_ours`` reads), or None."""
    try:
        lease = CoordinationV1Api(api).read_namespaced_lease(name, namespace, _request_timeout=30)
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    return api.sanitize_for_serialization(lease)


def mark_restoring(api: ApiClient, namespace: str, name: str, on: bool) -> bool:
    """Set (or remove) the Lease's ``dynamic-scheduler.io/restoring`` annotation, which keeps our
    replicas from taking the Lease over while ``restore`` gives it back; False if there is no Lease."""
    body = {"metadata": {"annotations": {RESTORING_ANNOTATION: "true" if on else None}}}
    try:
        api_request(
            api,
            "PATCH",
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
            body=body,
            content_type="application/merge-patch+json",
            timeout=(5, 30),
        )
    except ApiException as e:
        if e.status == 404:
            return False
        raise DeployError(
            f"Lease {namespace}/{name}: cannot {'set' if on else 'remove'} the "
            f"{RESTORING_ANNOTATION} annotation: {api_message(e)}"
        ) from None
    logger.info(
        "Marked the Lease as being restored" if on else "Lease no longer marked as being restored",
        extra=kv(lease=f"{namespace}/{name}"),
    )
    return True


def holder(lease: dict[str, Any] | None) -> str:
    return ((lease or {}).get("spec") or {}).get("holderIdentity") or ""


def holder_host(identity: str) -> str:
    """The hostname part of client-go's ``<hostname>_<uuid>`` identity (the pod's name, off the host network)."""
    return identity.rsplit("_", 1)[0] if "_" in identity else identity


def wait_holder(
    api: ApiClient,
    namespace: str,
    name: str,
    wanted: Callable[[dict[str, Any] | None], bool],
    what: str,
    timeout: float,
    interval: float = 1.0,
    detail: Callable[[], str] | None = None,
) -> tuple[str, float]:
    """Wait until the Lease satisfies ``wanted``; (its holder, seconds waited).

    ``detail``, while not yet: more of the status (say, the would-be holder's pod)."""
    seen: list[str] = [""]

    def check() -> tuple[bool, str]:
        lease = read_lease(api, namespace, name)
        seen[0] = holder(lease)
        done = wanted(lease)
        status = f"no Lease {namespace}/{name}" if lease is None else f"held by {seen[0] or 'nobody'}"
        if not done and detail is not None:
            status += f"; {detail()}"
        return done, status

    took = poll(what, check, timeout, interval)
    return seen[0], took


# --- Deployments -------------------------------------------------------------------------------


def rollout_status(dep: Any) -> tuple[bool, str]:
    """kubectl rollout status's verdict on a Deployment: (complete, what it waits for)."""
    spec, st = dep.spec, dep.status
    want = spec.replicas if spec.replicas is not None else 1
    if st is None or (st.observed_generation or 0) < (dep.metadata.generation or 0):
        return False, "waiting for the Deployment's new spec to be observed"
    updated, total, available = st.updated_replicas or 0, st.replicas or 0, st.available_replicas or 0
    if updated < want:
        return False, f"{updated} of {want} replicas updated"
    if total > updated:
        return False, f"{total - updated} old replicas pending termination"
    if available < updated:
        return False, f"{available} of {updated} updated replicas available"
    return True, f"{available}/{want} replicas available"


def wait_rollout(api: ApiClient, namespace: str, name: str, timeout: float) -> tuple[list[Any], float]:
    """Wait for a Deployment's rollout to complete; (its live pods, seconds waited)."""
    apps = AppsV1Api(api)
    pods: list[Any] = []

    def check() -> tuple[bool, str]:
        dep = apps.read_namespaced_deployment(name, namespace, _request_timeout=30)
        done, status = rollout_status(dep)
        labels = (dep.spec.selector.match_labels or {}) if dep.spec.selector else {}
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        pods[:] = [p for p in list_pods(api, namespace, selector) if not p.metadata.deletion_timestamp]
        not_ready = [pod_summary(p) for p in pods if not pod_ready(p)]
        return done, status + ("; " + "; ".join(not_ready) if not_ready else "")

    took = poll(f"Deployment {namespace}/{name}", check, timeout)
    return pods, took
