"""What the scheduling suites look at: nodes and their free resources, pods and who bound them.

Used by every suite; the replacement suites add e2e/replacing.py.

- **Who bound a pod.** The ``Scheduled`` event's ``reportingInstance`` is
  ``<schedulerName>-<hostname>``: for our lease-method replicas the hostname is
  the pod's name, for kube-scheduler (host network) the node's name. So an
  instance ``default-scheduler-<one of our pods>`` is ours.
- **When.** :class:`PodWatch` watches a namespace's pods in the background and
  keeps, per pod UID, when it was created (the API's ``creationTimestamp`` and
  the moment the watch saw it), when it was bound (the ``PodScheduled=True``
  condition's ``lastTransitionTime`` and the moment the watch first saw a
  ``nodeName``), and every ``nodeName`` it ever had. The API's times have
  one-second resolution; the watch's are this process's wall clock, so they
  include the watch's delivery delay (they can only overstate a latency).
- **Fit.** Requests per node are summed over the pods that hold resources on
  it (bound and not Succeeded/Failed), as the scheduler counts them.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from kubernetes.utils import parse_quantity

from e2e.kube import docker_exec, poll, wait_pod

OUR_NS = "crane-system"
OUR_DEPLOYMENT = "dynamic-scheduler"
OUR_SELECTOR = "app.kubernetes.io/name=dynamic-scheduler,app.kubernetes.io/component=scheduler"
SCHEDULER_NAME = "default-scheduler"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
HOSTNAME_LABEL = "kubernetes.io/hostname"


def wall(stamp: str | None) -> float | None:
    """An API time (RFC 3339, with or without fractions) as epoch seconds."""
    if not stamp:
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))  # ceil(n * p / 100), at least 1
    return ordered[int(rank) - 1]


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 3),
        "p99": round(percentile(values, 99), 3),
        "max": round(max(values), 3),
    }


# --- nodes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Nodes:
    control_plane: str
    workers: tuple[str, ...]

    @property
    def all(self) -> tuple[str, ...]:
        return (self.control_plane, *self.workers)


def preemption_note(not_helpful: int, no_victims: int = 0) -> str:
    """The end of a FailedScheduling message when preemption could not help: how many nodes
    removing pods would not help, how many have no pod of lower priority (kube-scheduler's)."""
    parts = []
    if not_helpful:
        parts.append(f"{not_helpful} Preemption is not helpful for scheduling")
    if no_victims:
        parts.append(f"{no_victims} No preemption victims found for incoming pod")
    return f" preemption: 0/{not_helpful + no_victims} nodes are available: {', '.join(sorted(parts))}."


def cluster_nodes(core: client.CoreV1Api) -> Nodes:
    nodes = core.list_node().items
    cps = sorted(n.metadata.name for n in nodes if CONTROL_PLANE_LABEL in (n.metadata.labels or {}))
    workers = sorted(n.metadata.name for n in nodes if CONTROL_PLANE_LABEL not in (n.metadata.labels or {}))
    assert len(cps) == 1 and len(workers) == 2, (
        f"expected kind-config.yaml's 1 control plane + 2 workers: {cps} {workers}"
    )
    return Nodes(cps[0], tuple(workers))


def millicpu(q: Any) -> int:
    return int(parse_quantity(str(q)) * 1000)


def pod_requests(pod: dict[str, Any]) -> tuple[int, int]:
    """(milli-CPU, memory bytes) the pod holds on its node, as the scheduler counts them:
    the sum of its containers, or an init container's if larger, plus its overhead."""
    spec = pod.get("spec") or {}

    def of(containers: Iterable[dict[str, Any]]) -> list[tuple[int, int]]:
        out = []
        for c in containers:
            req = (c.get("resources") or {}).get("requests") or {}
            out.append((millicpu(req.get("cpu", 0)), int(parse_quantity(str(req.get("memory", 0))))))
        return out

    main = of(spec.get("containers") or ())
    cpu, mem = sum(c for c, _ in main), sum(m for _, m in main)
    for c, m in of(spec.get("initContainers") or ()):
        cpu, mem = max(cpu, c), max(mem, m)
    overhead = spec.get("overhead") or {}
    return cpu + millicpu(overhead.get("cpu", 0)), mem + int(parse_quantity(str(overhead.get("memory", 0))))


def holds_resources(pod: dict[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def allocatable(core: client.CoreV1Api) -> dict[str, tuple[int, int]]:
    return {
        n.metadata.name: (
            millicpu(n.status.allocatable["cpu"]),
            int(parse_quantity(n.status.allocatable["memory"])),
        )
        for n in core.list_node().items
    }


def list_pods_raw(core: client.CoreV1Api, namespace: str | None = None, **kw: Any) -> list[dict[str, Any]]:
    if namespace is None:
        resp = core.list_pod_for_all_namespaces(_preload_content=False, **kw)
    else:
        resp = core.list_namespaced_pod(namespace, _preload_content=False, **kw)
    return json.loads(resp.data)["items"]


def requested(core: client.CoreV1Api, *, exclude_namespace: str | None = None) -> dict[str, tuple[int, int]]:
    """Per node, the (milli-CPU, memory) requested by the pods holding resources on it."""
    out: dict[str, tuple[int, int]] = {}
    for p in list_pods_raw(core):
        if not holds_resources(p) or p["metadata"]["namespace"] == exclude_namespace:
            continue
        c, m = pod_requests(p)
        node = p["spec"]["nodeName"]
        oc, om = out.get(node, (0, 0))
        out[node] = (oc + c, om + m)
    return out


def free_cpu(core: client.CoreV1Api) -> dict[str, int]:
    """Milli-CPU still requestable per node."""
    alloc, used = allocatable(core), requested(core)
    return {n: a[0] - used.get(n, (0, 0))[0] for n, a in alloc.items()}


def wait_no_terminating_pods(core: client.CoreV1Api, nodes: Iterable[str], timeout: float) -> None:
    """Until no pod on these nodes is being deleted: their requests still count, then suddenly not."""
    wanted = set(nodes)

    def none_left() -> Any:
        left = [
            f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in list_pods_raw(core)
            if p["metadata"].get("deletionTimestamp") and (p.get("spec") or {}).get("nodeName") in wanted
        ]
        return not left or None

    poll(f"no pod terminating on {sorted(wanted)}", none_left, timeout, interval=2)


# --- pods --------------------------------------------------------------------------------------


def pod_body(
    name: str,
    image: str,
    *,
    cpu: str = "10m",
    memory: str = "16Mi",
    node_name: str | None = None,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    command: list[str] | None = None,
    limits: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod that sleeps (or runs ``command``), with these requests; stops at once when deleted."""
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": command or ["sleep", "3600"],
                "resources": {
                    "requests": {"cpu": cpu, "memory": memory},
                    **({"limits": limits} if limits else {}),
                },
            }
        ],
    }
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


def is_bound(pod: dict[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def condition(pod: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next(
        (c for c in (pod.get("status") or {}).get("conditions") or () if c.get("type") == type_), None
    )


def our_pod_names(core: client.CoreV1Api) -> set[str]:
    return {p.metadata.name for p in core.list_namespaced_pod(OUR_NS, label_selector=OUR_SELECTOR).items}


def instance_pod(instance: str) -> str:
    """The hostname part of a ``Scheduled`` event's ``reportingInstance``."""
    prefix = SCHEDULER_NAME + "-"
    return instance[len(prefix) :] if instance.startswith(prefix) else ""


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
    core: client.CoreV1Api, namespace: str, pod: str, reason: str, timeout: float, match: Any = None
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


def control_plane(core: client.CoreV1Api) -> client.V1Node:
    return core.list_node(label_selector=CONTROL_PLANE_LABEL).items[0]


def scheduled_event(core: client.CoreV1Api, namespace: str, pod: str, timeout: float = 30) -> dict[str, Any]:
    """The pod's ``Scheduled`` event (events.k8s.io/v1) as the server's JSON; waits for it
    (events are written asynchronously, after the bind)."""
    ev = client.EventsV1Api(core.api_client)

    def find() -> dict[str, Any] | None:
        body = json.loads(
            ev.list_namespaced_event(
                namespace, field_selector=f"regarding.name={pod},reason=Scheduled", _preload_content=False
            ).data
        )
        items = body.get("items") or []
        return items[0] if items else None

    return poll(f"the Scheduled event of {namespace}/{pod}", find, timeout, interval=0.25)


class Scheduled(NamedTuple):
    """Who bound a pod, from its ``Scheduled`` event."""

    controller: str
    """``reportingController``: the profile's scheduler name."""
    instance: str
    """``reportingInstance``: ``<schedulerName>-<hostname>``."""
    at: float
    """When (wall clock; whole seconds for a core/v1 event)."""


def bound_by(core: client.CoreV1Api, namespace: str, pod: str, timeout: float) -> Scheduled:
    """Wait until ``pod`` is bound (``timeout``), then for its ``Scheduled`` event (30 s)."""
    wait_bound(core, namespace, pod, timeout)
    return scheduled_by(core, namespace, pod)


def scheduled_by(core: client.CoreV1Api, namespace: str, pod: str, timeout: float = 30) -> Scheduled:
    """Who bound ``pod`` (bound already), from its ``Scheduled`` event; waits ``timeout`` for it."""
    e = scheduled_event(core, namespace, pod, timeout)
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


def wait_bound(core: client.CoreV1Api, namespace: str, name: str, timeout: float) -> dict[str, Any]:
    return wait_pod(core, namespace, name, is_bound, "bound to a node", timeout)


def wait_ours_scheduling(core: client.CoreV1Api, namespace: str, image: str, timeout: float = 120) -> float:
    """Wait until our leader binds pods; the seconds it took.

    Right after a takeover kube-scheduler goes on binding until its renewDeadline passes,
    and our new leader starts only after that (scheduler/cluster/leaderelection.py). So:
    create a probe pod, see who binds it, and again until it is one of ours (each probe
    is deleted)."""
    start = time.monotonic()
    deadline = start + timeout
    seen: list[str] = []
    while True:
        name = f"probe-{uuid.uuid4().hex[:6]}"
        core.create_namespaced_pod(namespace, pod_body(name, image))
        try:
            wait_bound(core, namespace, name, max(1.0, deadline - time.monotonic()))
            try:
                instance = scheduled_by(core, namespace, name, 15).instance
            except AssertionError:
                # Bound, but no Scheduled event: kube-scheduler bound it and exited on losing
                # the Lease before its event was written (ours always writes one). Probe again.
                instance = "(no Scheduled event)"
        finally:
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        if instance_pod(instance) in our_pod_names(core):
            return time.monotonic() - start
        seen.append(instance)
        if time.monotonic() > deadline:
            raise AssertionError(
                f"no probe pod was bound by one of ours within {timeout:.0f}s; bound by {seen}"
            )


def wait_pods_gone(core: client.CoreV1Api, namespace: str, selector: str, timeout: float) -> None:
    poll(
        f"pods {selector} in {namespace} gone",
        lambda: not core.list_namespaced_pod(namespace, label_selector=selector).items or None,
        timeout,
    )


def scale(apps: client.AppsV1Api, namespace: str, name: str, replicas: int) -> None:
    apps.patch_namespaced_deployment_scale(name, namespace, {"spec": {"replicas": replicas}})


# --- watching a namespace's pods ---------------------------------------------------------------


@dataclass
class PodRecord:
    uid: str
    name: str
    created: float | None
    """creationTimestamp (whole seconds)."""
    seen: float
    """When the watch first saw the pod (this process's clock, epoch seconds)."""
    requests: tuple[int, int] = (0, 0)
    node: str = ""
    nodes: list[str] = field(default_factory=list)
    """Every distinct nodeName the pod had, in order: more than one is a second binding."""
    bound_seen: float | None = None
    """When the watch first saw a nodeName."""
    scheduled_at: float | None = None
    """lastTransitionTime of PodScheduled=True (whole seconds)."""
    deleted_seen: float | None = None
    phase: str = ""
    reason: str = ""

    def api_latency(self) -> float | None:
        if self.created is None or self.scheduled_at is None:
            return None
        return self.scheduled_at - self.created

    def watch_latency(self) -> float | None:
        return None if self.bound_seen is None else self.bound_seen - self.seen


class PodWatch:
    """Records every pod of ``namespace`` (see the module doc) while running, and checks fit.

    It watches the pods of every namespace, so that after every change on a node the
    requests of all the pods holding resources there can be held against the node's
    ``alloc``atable: ``overcommits`` lists any moment they did not fit, ``peak`` the
    highest (milli-CPU, memory) requested per node."""

    def __init__(
        self, core: client.CoreV1Api, namespace: str, *, alloc: dict[str, tuple[int, int]] | None = None
    ) -> None:
        self.core = core
        self.namespace = namespace
        self.alloc = alloc or {}
        self.pods: dict[str, PodRecord] = {}
        self.live: dict[str, dict[str, Any]] = {}
        """Every namespace's pods, by UID."""
        self.overcommits: list[str] = []
        self.peak: dict[str, tuple[int, int]] = {}
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"podwatch-{namespace}", daemon=True)

    def __enter__(self) -> PodWatch:
        self._thread.start()
        if not self._synced.wait(30):
            raise AssertionError(f"the pod watch of {self.namespace} did not start")
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(70)

    def records(self) -> list[PodRecord]:
        with self._lock:
            return list(self.pods.values())

    def ours(self) -> list[dict[str, Any]]:
        """The live pods of the namespace."""
        with self._lock:
            return [p for p in self.live.values() if p["metadata"]["namespace"] == self.namespace]

    def unbound_live(self) -> list[str]:
        return sorted(p["metadata"]["name"] for p in self.ours() if not is_bound(p))

    def binds_after(self, t: float) -> list[PodRecord]:
        """Pods first seen bound after ``t`` (epoch seconds), in order."""
        with self._lock:
            return sorted(
                (r for r in self.pods.values() if r.bound_seen is not None and r.bound_seen > t),
                key=lambda r: r.bound_seen or 0,
            )

    def _run(self) -> None:
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    body = json.loads(
                        self.core.list_pod_for_all_namespaces(
                            _preload_content=False, _request_timeout=30
                        ).data
                    )
                    now = time.time()
                    with self._lock:
                        self.live = {}
                        for p in body["items"]:
                            self._observe("ADDED", p, now)
                    rv = body["metadata"]["resourceVersion"]
                    self._synced.set()
                w = watch.Watch()
                for ev in w.stream(
                    self.core.list_pod_for_all_namespaces,
                    resource_version=rv,
                    timeout_seconds=30,
                    _request_timeout=40,
                    deserialize=False,
                    allow_watch_bookmarks=True,
                ):
                    obj = ev["object"]
                    if ev["type"] == "ERROR":
                        rv = ""  # 410 Gone: list again
                        break
                    rv = obj["metadata"].get("resourceVersion") or rv
                    if ev["type"] != "BOOKMARK":
                        with self._lock:
                            self._observe(ev["type"], obj, time.time())
                    if self._stop.is_set():
                        w.stop()
                        break
            except ApiException as e:
                if e.status == 410:
                    rv = ""
                else:
                    self.errors.append(f"{e.status} {e.reason}")
                    self._stop.wait(1)
            except KeyError as e:
                # the client's stream with deserialize=False fails on an ERROR event (an expired
                # resourceVersion, as after a kube-apiserver restart): list again
                self.errors.append(repr(e)[:200])
                rv = ""
                self._stop.wait(1)
            except Exception as e:  # noqa: BLE001 - a dropped connection: watch again from rv
                self.errors.append(repr(e)[:200])
                self._stop.wait(1)

    def _observe(self, type_: str, pod: dict[str, Any], now: float) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        if type_ == "DELETED":
            self.live.pop(uid, None)
        else:
            self.live[uid] = pod
        node = (pod.get("spec") or {}).get("nodeName") or ""
        if meta["namespace"] == self.namespace:
            rec = self.pods.get(uid)
            if rec is None:
                rec = self.pods[uid] = PodRecord(
                    uid, meta["name"], wall(meta.get("creationTimestamp")), now, pod_requests(pod)
                )
            if node and (not rec.nodes or rec.nodes[-1] != node):
                rec.nodes.append(node)
            if node and rec.bound_seen is None:
                rec.bound_seen = now
            rec.node = node or rec.node
            cond = condition(pod, "PodScheduled")
            if cond and cond.get("status") == "True" and rec.scheduled_at is None:
                rec.scheduled_at = wall(cond.get("lastTransitionTime"))
            status = pod.get("status") or {}
            rec.phase, rec.reason = status.get("phase") or "", status.get("reason") or rec.reason
            if type_ == "DELETED":
                rec.deleted_seen = now
        if node and self.alloc and self._synced.is_set():
            self._check_fit(node)

    def _check_fit(self, node: str) -> None:
        cpu = mem = 0
        for p in self.live.values():
            if holds_resources(p) and p["spec"]["nodeName"] == node:
                c, m = pod_requests(p)
                cpu, mem = cpu + c, mem + m
        pc, pm = self.peak.get(node, (0, 0))
        self.peak[node] = (max(pc, cpu), max(pm, mem))
        ac, am = self.alloc.get(node, (0, 0))
        if cpu > ac or mem > am:
            self.overcommits.append(f"{node}: requests {cpu}m/{mem}B > allocatable {ac}m/{am}B")


# --- the scheduler's own metrics ---------------------------------------------------------------


METRICS_READER = "dynamic-scheduler-e2e:metrics-reader"
"""A ClusterRole, and the ServiceAccount in kube-system bound to it, that may get /metrics."""


def metrics_reader_token(api: client.ApiClient) -> str:
    """A short-lived token of a ServiceAccount that may get /metrics (made when missing)."""
    rbac, core = client.RbacAuthorizationV1Api(api), client.CoreV1Api(api)
    name = METRICS_READER.replace(":", "-")
    for create, body in (
        (
            rbac.create_cluster_role,
            {
                "metadata": {"name": METRICS_READER},
                "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
            },
        ),
        (
            rbac.create_cluster_role_binding,
            {
                "metadata": {"name": METRICS_READER},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": METRICS_READER,
                },
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "kube-system"}],
            },
        ),
        (lambda b: core.create_namespaced_service_account("kube-system", b), {"metadata": {"name": name}}),
    ):
        try:
            create(body)
        except ApiException as e:
            if e.status != 409:
                raise
    req = core.create_namespaced_service_account_token(
        name, "kube-system", {"spec": {"expirationSeconds": 600}}
    )
    return req.status.token


def scheduler_get(api: client.ApiClient, pod: str, path: str, token: str | None = None) -> tuple[int, str]:
    """(HTTP status, body) of a GET on one of our replicas' secure port (10259), by curl on the
    pod's node: the API server's pod proxy would drop the caller's credentials."""
    p = client.CoreV1Api(api).read_namespaced_pod(pod, OUR_NS)
    auth = ["-H", f"Authorization: Bearer {token}"] if token else []
    url = f"https://{p.status.pod_ip}:10259{path}"
    out = docker_exec(
        p.spec.node_name, "curl", "-sSk", "--max-time", "20", "-w", "\n%{http_code}", *auth, url
    )
    body, _, code = out.stdout.rpartition("\n")
    return int(code), body


def scheduler_metrics(api: client.ApiClient, pod: str) -> str:
    """/metrics of one of our replicas, read with a token that may (see :func:`scheduler_get`)."""
    code, body = scheduler_get(api, pod, "/metrics", metrics_reader_token(api))
    assert code == 200, f"GET /metrics of {pod}: {code} {body[:300]}"
    return body


def histogram(text: str, name: str) -> dict[float, float]:
    """Cumulative bucket counts of a histogram (summed over its labels): upper bound -> count."""
    out: dict[float, float] = {}
    prefix = name + "_bucket{"
    for line in text.splitlines():
        if line.startswith(prefix):
            labels, value = line[len(prefix) :].rsplit("} ", 1)
            le = next(
                part.split("=", 1)[1].strip('"') for part in labels.split(",") if part.startswith("le=")
            )
            bound = float("inf") if le == "+Inf" else float(le)
            out[bound] = out.get(bound, 0.0) + float(value)
    return out


def histogram_quantiles(before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """Observations between two scrapes: their count and the bucket upper bounds of p50 and p99."""
    delta = {le: after.get(le, 0.0) - before.get(le, 0.0) for le in sorted(after)}
    total = delta.get(float("inf"), 0.0)
    out: dict[str, Any] = {"n": int(total)}
    for q, key in ((0.5, "p50_le"), (0.99, "p99_le")):
        if total:
            out[key] = next(le for le, c in delta.items() if c >= q * total)
    return out
