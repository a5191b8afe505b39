"""What the informers keep of an object: the parts scheduling, preemption, events and
``explain`` read, and not what only the kubelet or a person reads.

At Kubernetes' published limits (150 000 pods) the pods are most of the scheduler's memory,
and much of a running pod is status the kubelet writes and spec only the kubelet reads
(probes, commands, environment). Dropping them as each object arrives, before it is stored,
costs a few dict operations; keeping them costs memory for the life of the pod.

Dropped, from every object: ``metadata.managedFields`` (kube-scheduler's pod informer drops
them too, ``newPodInformer``'s transform).

From a pod, besides:

- the ``kubectl.kubernetes.io/last-applied-configuration`` annotation (a copy of the pod);
- ``status.containerStatuses``, ``initContainerStatuses``, ``ephemeralContainerStatuses``
  (the kubelet's report on each container; nothing here reads them), the pod's and host's
  IPs, and every condition but ``PodScheduled`` and ``DisruptionTarget`` (:data:`KEPT_CONDITIONS`:
  the binder, the estimator, preemption and ``explain`` read those; Ready and the others are
  the kubelet's);
- of each container, init container and ephemeral container: the fields that only say
  how the kubelet runs it (:data:`RUNTIME_ONLY`). Kept: name, image, resources, ports,
  volume mounts, restart policy and its rules, security context, resize policy.

From a node: ``status.conditions``, ``daemonEndpoints``, ``nodeInfo``, ``volumesInUse``,
``volumesAttached``, ``config`` (kube-scheduler reads taints, not conditions). Kept: labels,
annotations (crane's load annotations), spec, allocatable, capacity, addresses, images,
declared features.

Any field not named here is kept, so a field a later Kubernetes adds is never lost. A reader
of the stores that needs one of these fields must read the object from the API server.

Shared: the strings of a pod that repeat across pods (namespace, label values, node and
scheduler names, images, quantities, condition types and times, phase) are interned
(:func:`sys.intern`), so that the replicas of an app hold one copy of each; the decoder
already shares dict keys. Strings unique to a pod (its name, uid, IPs) are left as they are.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from scheduler.cluster.store import Obj

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

RUNTIME_ONLY = (
    "args",
    "command",
    "env",
    "envFrom",
    "imagePullPolicy",
    "lifecycle",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "stdin",
    "stdinOnce",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "tty",
    "volumeDevices",
    "workingDir",
)
"""Container fields only the kubelet reads."""

_POD_STATUS = (
    "containerStatuses",
    "initContainerStatuses",
    "ephemeralContainerStatuses",
    "podIP",
    "podIPs",
    "hostIP",
    "hostIPs",
)
KEPT_CONDITIONS = frozenset({"PodScheduled", "DisruptionTarget"})
"""The pod conditions anything here reads."""
_NODE_STATUS = ("conditions", "daemonEndpoints", "nodeInfo", "volumesInUse", "volumesAttached", "config")
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def trimmed(obj: Obj) -> Obj:
    """``obj`` without ``metadata.managedFields`` (in place)."""
    meta = obj.get("metadata")
    if meta is not None:
        meta.pop("managedFields", None)
    return obj


def slim_pod(pod: Obj) -> Obj:
    """``pod`` as the scheduler keeps it (in place); see the module doc."""
    meta = pod.get("metadata")
    if meta is not None:
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if annotations and LAST_APPLIED in annotations:
            del annotations[LAST_APPLIED]
    status = pod.get("status")
    if status:
        for key in _POD_STATUS:
            status.pop(key, None)
        conditions = status.get("conditions")
        if conditions:
            status["conditions"] = [c for c in conditions if c.get("type") in KEPT_CONDITIONS]
    spec = pod.get("spec")
    if spec:
        for kind in _CONTAINER_LISTS:
            for c in spec.get(kind) or ():
                for key in RUNTIME_ONLY:
                    c.pop(key, None)
    _share_pod_strings(pod)
    return pod


_SHARED_META = ("namespace", "creationTimestamp", "generateName")
_SHARED_SPEC = (
    "nodeName",
    "schedulerName",
    "restartPolicy",
    "dnsPolicy",
    "serviceAccountName",
    "serviceAccount",
    "preemptionPolicy",
    "priorityClassName",
)
_SHARED_CONTAINER = ("name", "image")
_SHARED_STATUS = ("phase", "qosClass", "startTime")
_SHARED_CONDITION = ("type", "status", "lastTransitionTime")


def _share(d: Obj, keys: tuple[str, ...]) -> None:
    for key in keys:
        v = d.get(key)
        if type(v) is str:
            d[key] = sys.intern(v)


def _share_values(d: Obj | None) -> None:
    if d:
        for key, v in d.items():
            if type(v) is str:
                d[key] = sys.intern(v)


def _share_pod_strings(pod: Obj) -> None:
    meta = pod.get("metadata")
    if meta:
        _share(meta, _SHARED_META)
        _share_values(meta.get("labels"))
    spec = pod.get("spec")
    if spec:
        _share(spec, _SHARED_SPEC)
        for kind in _CONTAINER_LISTS:
            for c in spec.get(kind) or ():
                _share(c, _SHARED_CONTAINER)
                resources = c.get("resources")
                if resources:
                    _share_values(resources.get("requests"))
                    _share_values(resources.get("limits"))
    status = pod.get("status")
    if status:
        _share(status, _SHARED_STATUS)
        for cond in status.get("conditions") or ():
            _share(cond, _SHARED_CONDITION)


def slim_node(node: Obj) -> Obj:
    """``node`` as the scheduler keeps it (in place); see the module doc."""
    trimmed(node)
    status = node.get("status")
    if status:
        for key in _NODE_STATUS:
            status.pop(key, None)
    return node


def slimmer(plural: str) -> Callable[[Obj], Obj]:
    """The function that slims an object of the resource ``plural`` (in place)."""
    return _BY_RESOURCE.get(plural, trimmed)


_BY_RESOURCE: dict[str, Callable[[Obj], Obj]] = {"pods": slim_pod, "nodes": slim_node}
