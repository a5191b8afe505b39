"""The cluster's two schedulers as the suites see them: our replicas and kube-scheduler.

Ours (lease method) is the Deployment ``crane-system/dynamic-scheduler``;
kube-scheduler is kubeadm's static pod on the control plane. Which of them
schedules is told by the Lease (``e2e.lease``), by who binds a pod
(``e2e.events.bound_by``) and by our replicas' logs ("Started leading").

kube-scheduler exits whenever it loses its Lease (each takeover by ours), and
its kubelet waits longer before each restart (up to 5 minutes); restarting
that kubelet resets the back-off, which :func:`fresh_kube_scheduler` and
:func:`end_kube_scheduler_backoff` do.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.events import bound_by, instance_pod
from e2e.kube import scale
from e2e.lease import LEASE_NS, annotated_ours, holder, holder_host, read_lease
from e2e.nodes import restart_kubelet
from e2e.pods import pod_body, pod_log, wait_bound
from scheduler.polling import PollTimeoutError, poll

OUR_NS = "crane-system"
OUR_DEPLOYMENT = "dynamic-scheduler"
OUR_SELECTOR = "app.kubernetes.io/name=dynamic-scheduler,app.kubernetes.io/component=scheduler"
KUBE_SCHEDULER_SELECTOR = "component=kube-scheduler"


# --- ours ---------------------------------------------------------------------------------------


def our_pods(core: client.CoreV1Api) -> list[client.V1Pod]:
    """Our replicas not being deleted, by name."""
    pods = core.list_namespaced_pod(OUR_NS, label_selector=OUR_SELECTOR).items
    return sorted((p for p in pods if not p.metadata.deletion_timestamp), key=lambda p: p.metadata.name)


def our_pod_names(core: client.CoreV1Api) -> set[str]:
    """The names of all our replicas (being deleted or not)."""
    return {p.metadata.name for p in core.list_namespaced_pod(OUR_NS, label_selector=OUR_SELECTOR).items}


def scale_ours(api: client.ApiClient, replicas: int) -> None:
    scale(client.AppsV1Api(api), OUR_NS, OUR_DEPLOYMENT, replicas)


def log_time(line: str) -> float:
    """The runtime's timestamp of a ``timestamps=True`` log line."""
    stamp = line.split(" ", 1)[0]
    head, _, frac = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00").timestamp()


def started_leading_at(core: client.CoreV1Api, pod: str) -> float | None:
    """When our replica ``pod`` last logged "Started leading", or None."""
    log = pod_log(core, OUR_NS, pod, timestamps=True)
    lines = [ln for ln in log.splitlines() if '"Started leading"' in ln]
    return log_time(lines[-1]) if lines else None


def wait_ours_hold(
    api: client.ApiClient, core: client.CoreV1Api, timeout: float
) -> tuple[dict[str, Any], str]:
    """Until one of our running pods holds the Lease; (the Lease, the pod's name)."""

    def check() -> tuple[dict[str, Any], str] | None:
        lease = read_lease(api)
        names = {p.metadata.name for p in our_pods(core)}
        host = holder_host(holder(lease))
        return (lease, host) if host in names and annotated_ours(lease) else None

    return poll(
        check,
        timeout,
        "one of our pods holding kube-system/kube-scheduler",
        interval=0.25,
        retry_on=(ApiException,),
    )


def wait_leading(core: client.CoreV1Api, pod: str, timeout: float) -> None:
    """Until our pod's log says it leads (after a takeover, only once the safe wait is over)."""
    poll(
        lambda: "Started leading" in pod_log(core, OUR_NS, pod),
        timeout,
        f"{pod} leading",
        interval=0.5,
        retry_on=(ApiException,),
    )


def wait_ours_scheduling(core: client.CoreV1Api, namespace: str, image: str, timeout: float = 120) -> float:
    """Wait until our leader binds pods; the seconds it took.

    Right after a takeover kube-scheduler goes on binding until its renewDeadline passes,
    and our new leader starts only after that (scheduler/cluster/leaderelection.py). So:
    create a probe pod, see who binds it, and again until it is one of ours (each probe
    is deleted)."""
    start = time.monotonic()
    deadline = start + timeout
    seen: list[str] = []

    def probe() -> float | None:
        name = f"probe-{uuid.uuid4().hex[:6]}"
        core.create_namespaced_pod(namespace, pod_body(name, image))
        try:
            wait_bound(core, namespace, name, max(1.0, deadline - time.monotonic()))
            try:
                instance = bound_by(core, namespace, name, 15, event_timeout=15).instance
            except AssertionError:
                # Bound, but no Scheduled event: kube-scheduler bound it and exited on losing
                # the Lease before its event was written (ours always writes one). Probe again.
                instance = "(no Scheduled event)"
        finally:
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        if instance_pod(instance) in our_pod_names(core):
            return time.monotonic() - start
        seen.append(instance)
        return None

    try:
        return poll(probe, timeout, "a probe pod bound by one of ours")
    except PollTimeoutError as e:
        raise AssertionError(f"{e}; bound by {seen}") from None


# --- kube-scheduler -----------------------------------------------------------------------------


def kube_scheduler_pods(core: client.CoreV1Api) -> list[client.V1Pod]:
    return core.list_namespaced_pod(LEASE_NS, label_selector=KUBE_SCHEDULER_SELECTOR).items


def ks_container(
    core: client.CoreV1Api, pods: list[client.V1Pod] | None = None
) -> client.V1ContainerStatus | None:
    """kube-scheduler's container status (of ``pods``, if already listed)."""
    pods = kube_scheduler_pods(core) if pods is None else pods
    statuses = pods[0].status.container_statuses if pods and pods[0].status else None
    return statuses[0] if statuses else None


def fresh_kube_scheduler(api: client.ApiClient, core: client.CoreV1Api, node: str) -> int:
    """kube-scheduler leading, with its restart back-off reset (its kubelet restarted); its
    restart count."""
    restart_kubelet(node)

    def leading() -> int | None:
        cs = ks_container(core)
        lease = read_lease(api)
        ok = (
            cs is not None
            and cs.ready
            and cs.state.running
            and holder_host(holder(lease)) == node
            and not annotated_ours(lease)
        )
        return cs.restart_count + 1 if ok else None  # + 1: 0 restarts is a valid answer

    restarts = poll(
        leading, 420, "kube-scheduler Ready and holding its Lease", interval=1, retry_on=(ApiException,)
    )
    return restarts - 1


def end_kube_scheduler_backoff(core: client.CoreV1Api) -> bool:
    """If kube-scheduler waits out a CrashLoopBackOff, restart its node's kubelet (which resets
    the back-off) and wait until it runs again; whether it had to.

    Every takeover makes kube-scheduler exit, and by the later suites the kubelet waits
    minutes before the next start; a restore would spend them waiting for the Lease to come
    back (what an operator sees is in the README's Troubleshooting)."""
    pods = kube_scheduler_pods(core)
    cs = ks_container(core, pods)
    waiting = cs.state.waiting if cs is not None and cs.state else None
    if waiting is None or waiting.reason != "CrashLoopBackOff":
        return False
    restart_kubelet(pods[0].spec.node_name)
    poll(
        lambda: (c := ks_container(core)) is not None and c.state.running is not None,
        120,
        "kube-scheduler running after the kubelet's restart",
        interval=1,
        retry_on=(ApiException,),
    )
    return True
