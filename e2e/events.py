"""Events about pods, and who bound a pod (its ``Scheduled`` event).

- **core/v1** (:func:`events`, :func:`wait_event`): what kube-scheduler and
  ours report, as ``message``; a FailedScheduling message ends with
  :func:`preemption_note` when preemption could not help.
- **events.k8s.io/v1** (:func:`wait_event_v1`): the same events as the
  schedulers write them, with ``note``, ``reportingController`` and
  ``reportingInstance``.
- **Who bound a pod** (:func:`bound_by`): the ``Scheduled`` event's
  ``reportingController`` is the profile's scheduler name, its
  ``reportingInstance`` ``<schedulerName>-<hostname>``: for our lease-method
  replicas the hostname is the pod's name, for kube-scheduler and our static
  pod (host network) the node's name. So an instance
  ``default-scheduler-<one of our pods>`` is ours (:func:`instance_pod`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection
from typing import Any, NamedTuple

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from e2e.kube import wall
from e2e.nodes import control_plane
from e2e.pods import wait_bound
from scheduler.polling import poll

SCHEDULER_NAME = "default-scheduler"


def preemption_note(not_helpful: int, no_victims: int = 0) -> str:
    """The end of a FailedScheduling message when preemption could not help: how many nodes
    removing pods would not help, how many have no pod of lower priority (kube-scheduler's)."""
    parts = []
    if not_helpful:
        parts.append(f"{not_helpful} Preemption is not helpful for scheduling")
    if no_victims:
        parts.append(f"{no_victims} No preemption victims found for incoming pod")
    return f" preemption: 0/{not_helpful + no_victims} nodes are available: {', '.join(sorted(parts))}."


def instance_pod(instance: str) -> str:
    """The hostname part of a default-scheduler event's ``reportingInstance``."""
    prefix = SCHEDULER_NAME + "-"
    return instance[len(prefix) :] if instance.startswith(prefix) else ""


# --- core/v1 ------------------------------------------------------------------------------------


def events(
    core: client.CoreV1Api, namespace: str, *, reason: str | None = None, pod: str | None = None
) -> list[dict[str, Any]]:
    """core/v1 events of the namespace (as JSON), optionally one reason / one pod."""
    selectors = [f"reason={reason}"] if reason else []
    if pod:
        selectors += [f"involvedObject.name={pod}", "involvedObject.kind=Pod"]
    resp = core.list_namespaced_event(
        namespace, field_selector=",".join(selectors) or None, _preload_content=False
    )
    return json.loads(resp.data)["items"]


def wait_event(
    core: client.CoreV1Api,
    namespace: str,
    pod: str,
    reason: str,
    timeout: float,
    match: Callable[[dict[str, Any]], bool] | None = None,
) -> dict[str, Any]:
    """Watch the namespace's events until one of ``reason`` about ``pod`` (and ``match(event)``) arrives."""
    what = f"a {reason} event for pod {namespace}/{pod}"
    deadline = time.monotonic() + timeout
    selector = f"involvedObject.name={pod},reason={reason}"
    seen: list[str] = []
    while True:
        resp = core.list_namespaced_event(namespace, field_selector=selector, _preload_content=False)
        body = json.loads(resp.data)
        for ev in body["items"]:
            seen.append(ev.get("message") or ev.get("note") or "")
            if match is None or match(ev):
                return ev
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; seen: {seen[-3:]}")
        w = watch.Watch()
        for item in w.stream(
            core.list_namespaced_event,
            namespace,
            field_selector=selector,
            resource_version=body["metadata"]["resourceVersion"],
            timeout_seconds=max(1, int(remaining)),
            _request_timeout=remaining + 5,
            deserialize=False,
        ):
            ev = item["object"]
            if item["type"] in ("ADDED", "MODIFIED"):
                seen.append(ev.get("message") or "")
                if match is None or match(ev):
                    w.stop()
                    return ev
        # the watch ended (timeout or a dropped connection): list again, watch again


# --- events.k8s.io/v1 ---------------------------------------------------------------------------


def wait_event_v1(
    core: client.CoreV1Api, namespace: str, pod: str, reason: str, timeout: float = 30
) -> dict[str, Any]:
    """The first events.k8s.io/v1 event of ``reason`` about ``pod``, as the server's JSON; waits
    for it (events are written asynchronously, after what they report)."""
    ev = client.EventsV1Api(core.api_client)

    def find() -> dict[str, Any] | None:
        body = json.loads(
            ev.list_namespaced_event(
                namespace, field_selector=f"regarding.name={pod},reason={reason}", _preload_content=False
            ).data
        )
        items = body.get("items") or []
        return items[0] if items else None

    return poll(
        find, timeout, f"the {reason} event of {namespace}/{pod}", interval=0.25, retry_on=(ApiException,)
    )


# --- who bound a pod ----------------------------------------------------------------------------


class Scheduled(NamedTuple):
    """Who bound a pod, from its ``Scheduled`` event."""

    controller: str
    """``reportingController``: the profile's scheduler name."""
    instance: str
    """``reportingInstance``: ``<schedulerName>-<hostname>``."""
    at: float
    """When (wall clock; whole seconds for a core/v1 event)."""


def bound_by(
    core: client.CoreV1Api, namespace: str, pod: str, timeout: float, *, event_timeout: float = 30
) -> Scheduled:
    """Wait until ``pod`` is bound (``timeout``), then for its ``Scheduled`` event (``event_timeout``):
    who bound it, and when."""
    wait_bound(core, namespace, pod, timeout)
    e = wait_event_v1(core, namespace, pod, "Scheduled", event_timeout)
    controller, instance = e.get("reportingController") or "", e.get("reportingInstance") or ""
    if controller and not instance:
        # kube-scheduler records through the core/v1 recorder when events.k8s.io/v1 was not yet
        # discoverable at its start (often the first kube-scheduler of a new cluster); that
        # recorder's instance is the event source's host, which kube-scheduler leaves empty.
        # Ours always writes the instance, so an empty one is kube-scheduler's, on the control plane.
        instance = f"{controller}-{control_plane(core).metadata.name}"
    # A core/v1 event has no eventTime: its deprecatedFirstTimestamp (whole seconds) instead.
    at = wall(e.get("eventTime")) or wall(e.get("deprecatedFirstTimestamp"))
    assert at, f"the Scheduled event of {namespace}/{pod} has no time: {e}"
    return Scheduled(controller, instance, at)


def assert_bound_by(
    core: client.CoreV1Api,
    namespace: str,
    pod: str,
    hosts: Collection[str],
    timeout: float,
    scheduler: str = SCHEDULER_NAME,
) -> Scheduled:
    """:func:`bound_by`, asserted to be ``scheduler`` running on one of ``hosts`` (our replicas'
    pod names, or a node's name for kube-scheduler and our static pod)."""
    by = bound_by(core, namespace, pod, timeout)
    assert by.controller == scheduler and by.instance in {f"{scheduler}-{h}" for h in hosts}, (
        f"pod {namespace}/{pod} was bound by {by.controller} {by.instance!r}, "
        f"not by {scheduler} on one of {sorted(hosts)}"
    )
    return by
