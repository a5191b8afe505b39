"""The pods of one run: created concurrently, watched until bound, read back, deleted.

Timestamps, and which clock each comes from:

- ``created``/``scheduled`` (server side): each pod's ``creationTimestamp`` and
  its ``PodScheduled=True`` condition's ``lastTransitionTime``, set by the API
  server when the pod is created and when its Binding is accepted. Whole
  seconds (metav1.Time), so a latency read from them is an integer ±1 s.
- ``seen``/``bound`` (watch-observed): when a watch on the namespace, run in a
  separate process of the bench (so that the creating threads do not delay
  it), delivered the pod's ADDED event and the first event that shows
  ``spec.nodeName``; ``time.time()`` on receipt, sub-millisecond resolution.
  Both ends pass through the same watch, so its delivery delay mostly cancels.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import queue as queue_mod
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scheduler import logs
from scheduler.cluster.client import ClientOptions, api_request, new_api_client
from scheduler.cluster.informers import Informer
from scheduler.cluster.retry import call_with_retries
from scheduler.cluster.store import Resource
from scheduler.core.podinfo import parse_time
from scheduler.polling import PollTimeoutError, poll

logger = logging.getLogger(__name__)

PART_OF = ("app.kubernetes.io/part-of", "dynamic-scheduler-bench")
"""The label of the bench's namespaces."""


def merge_patch(api: ApiClient, path: str, patch: dict[str, Any], *, what: str) -> None:
    """A JSON merge patch of ``path`` (an object or its ``/status``), retried on the errors
    worth retrying for up to two minutes; ``what`` names the step in the retries' log."""
    call_with_retries(
        lambda: api_request(
            api, "PATCH", path, body=patch, content_type="application/merge-patch+json", timeout=(5, 60)
        ),
        what=what,
        attempts=10,
        max_seconds=120,
    )


# --- namespaces ---------------------------------------------------------------------------------


def ensure_namespace(api: ApiClient, name: str, timeout: float = 300) -> None:
    """The namespace exists (once an earlier one of that name is gone), with its default
    ServiceAccount (pods are refused without it)."""
    deadline = time.monotonic() + timeout
    path = f"/api/v1/namespaces/{name}"

    def created() -> bool:
        """There, and not terminating; else created if gone."""
        ns = _get(api, path)
        if ns is not None:
            return not ns["metadata"].get("deletionTimestamp")
        try:
            api_request(
                api,
                "POST",
                "/api/v1/namespaces",
                body={
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {
                        "name": name,
                        "labels": {PART_OF[0]: PART_OF[1]},
                    },
                },
            )
        except ApiException as e:
            if e.status != 409:
                raise
            return False  # created meanwhile: look again
        return True

    poll(created, timeout, f"namespace {name} (an earlier one of that name is terminating)", 1)
    poll(
        lambda: _get(api, f"{path}/serviceaccounts/default"),
        max(0.0, deadline - time.monotonic()),
        f"the default ServiceAccount of namespace {name}",
        0.5,
    )


def _get(api: ApiClient, path: str) -> dict[str, Any] | None:
    """The object, or None if there is none (404)."""
    try:
        return api_request(api, "GET", path)
    except ApiException as e:
        if e.status != 404:
            raise
        return None


def wait_namespaces_deleted(
    api: ApiClient, *, timeout: float = 900, progress: Callable[[str], None] = lambda s: None
) -> int:
    """Until no namespace of an earlier run is terminating; how many were at first.

    A run leaves thousands of events in each contender's namespace, and deleting them
    keeps the API server and etcd busy for minutes after the namespaces are deleted:
    load that must not fall on the contenders."""
    seen: list[list[str]] = []  # the terminating namespaces, at each look

    def gone() -> bool:
        query = [("labelSelector", "=".join(PART_OF))]
        items = api_request(api, "GET", "/api/v1/namespaces", query=query).get("items") or ()
        terminating = sorted(
            ns["metadata"]["name"] for ns in items if ns["metadata"].get("deletionTimestamp")
        )
        seen.append(terminating)
        if terminating:
            progress(
                f"waiting for {len(terminating)} namespaces of an earlier run to go: {', '.join(terminating)}"
            )
        return not terminating

    try:
        poll(gone, timeout, "the namespaces of an earlier run to go", 2)
    except PollTimeoutError:
        raise TimeoutError(
            f"namespaces still terminating after {timeout:.0f}s: {', '.join(seen[-1])}"
        ) from None
    return len(seen[0])


def delete_namespace(api: ApiClient, name: str) -> None:
    try:
        api_request(api, "DELETE", f"/api/v1/namespaces/{name}")
    except ApiException as e:
        if e.status != 404:
            raise


def count_pods(api: ApiClient, namespace: str) -> int:
    """The pods in the namespace (from a list of one item and its remainingItemCount)."""
    page = api_request(api, "GET", f"/api/v1/namespaces/{namespace}/pods", query=[("limit", 1)])
    items = page.get("items") or []
    meta = page.get("metadata") or {}
    remaining = meta.get("remainingItemCount")
    if remaining is None:
        remaining = 1 if meta.get("continue") else 0
    return len(items) + int(remaining)


def delete_pods(api: ApiClient, namespace: str, *, workers: int = 32, timeout: float = 600) -> float:
    """Delete every pod of the namespace, grace period 0, and wait until they are gone; the
    seconds it took.

    One DELETE per pod from ``workers`` threads: a deletecollection is served by the
    API server's ``--delete-collection-workers`` (1 by default), one pod after the
    other, about 20 pods/s on the development machine; concurrent deletes go
    several times faster. A deletecollection (grace 0) sweeps up what is left.
    """
    start = time.monotonic()
    deadline = start + timeout
    path = f"/api/v1/namespaces/{namespace}/pods"

    def delete(name: str) -> None:
        try:
            call_with_retries(
                lambda: api_request(
                    api, "DELETE", f"{path}/{name}", query=[("gracePeriodSeconds", 0)], timeout=(5, 60)
                ),
                what="delete pod",
                attempts=5,
                max_seconds=120,
            )
        except ApiException as e:
            if e.status != 404:
                raise

    names = [p["metadata"]["name"] for p in list_pods(api, namespace)]
    if names:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="delete") as pool:
            list(pool.map(delete, names))

    def gone() -> bool:
        if not count_pods(api, namespace):
            return True
        call_with_retries(
            lambda: api_request(api, "DELETE", path, query=[("gracePeriodSeconds", 0)], timeout=(5, 300)),
            what="delete pods",
            attempts=5,
            max_seconds=300,
        )
        return False

    try:
        poll(gone, max(0.0, deadline - time.monotonic()), f"the pods of {namespace} to go", 0.5)
    except PollTimeoutError:
        raise TimeoutError(f"pods of {namespace} still there after {timeout:.0f}s") from None
    return time.monotonic() - start


def list_pods(api: ApiClient, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
    """The namespace's pods (of the label selector, when given)."""
    items: list[dict[str, Any]] = []
    cont = None
    while True:
        query: list[tuple[str, Any]] = [("limit", 1000), ("labelSelector", selector)]
        if cont:
            query.append(("continue", cont))
        page = api_request(api, "GET", f"/api/v1/namespaces/{namespace}/pods", query=query, timeout=(5, 120))
        items.extend(page.get("items") or ())
        cont = (page.get("metadata") or {}).get("continue")
        if not cont:
            return items


def scheduled_events(api: ApiClient, namespace: str, since: float, prefix: str = "") -> int:
    """How many ``Scheduled`` events about the namespace's pods (those whose names start with
    ``prefix``: the measured pods of a run) were written at or after ``since`` (epoch seconds,
    whole): what a scheduler reported, next to what it bound."""
    count = 0
    cont = None
    while True:
        query: list[tuple[str, Any]] = [("limit", 1000), ("fieldSelector", "reason=Scheduled")]
        if cont:
            query.append(("continue", cont))
        page = api_request(
            api, "GET", f"/api/v1/namespaces/{namespace}/events", query=query, timeout=(5, 120)
        )
        for ev in page.get("items") or ():
            if not (ev.get("involvedObject") or {}).get("name", "").startswith(prefix):
                continue
            at = ev.get("eventTime") or ev.get("firstTimestamp") or ev["metadata"].get("creationTimestamp")
            if parse_time(at) >= int(since):
                count += 1
        cont = (page.get("metadata") or {}).get("continue")
        if not cont:
            return count


@dataclass(frozen=True)
class ServerTimes:
    created: dict[str, float]
    """Pod name -> creationTimestamp (epoch seconds, whole)."""
    scheduled: dict[str, float]
    """Pod name -> PodScheduled=True lastTransitionTime (bound pods only)."""
    nodes: dict[str, str]
    """Pod name -> node (bound pods only)."""


def server_times(api: ApiClient, namespace: str, selector: str | None = None) -> ServerTimes:
    created: dict[str, float] = {}
    scheduled: dict[str, float] = {}
    nodes: dict[str, str] = {}
    for pod in list_pods(api, namespace, selector):
        name = pod["metadata"]["name"]
        created[name] = parse_time(pod["metadata"].get("creationTimestamp"))
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            continue
        nodes[name] = node
        for c in (pod.get("status") or {}).get("conditions") or ():
            if c.get("type") == "PodScheduled" and c.get("status") == "True":
                scheduled[name] = parse_time(c.get("lastTransitionTime"))
    return ServerTimes(created, scheduled, nodes)


def ensure_priority_classes(api: ApiClient, classes: dict[str, int]) -> None:
    """The PriorityClasses of the workloads (name -> value), created if missing."""
    for name, value in classes.items():
        try:
            api_request(
                api,
                "POST",
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                body={
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name, "labels": {PART_OF[0]: PART_OF[1]}},
                    "value": value,
                    "description": "dynamic-scheduler bench",
                },
            )
        except ApiException as e:
            if e.status != 409:
                raise
    for name in classes:
        _wait_class_admitted(api, name)


def _wait_class_admitted(api: ApiClient, name: str, timeout: float = 60) -> None:
    """Until the API server admits a pod of PriorityClass ``name`` (a dry run in ``default``):
    its Priority admission plugin knows classes from an informer, and refuses a pod naming one
    it has not seen yet with no look-up of its own."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "priority-class-probe"},
        "spec": {"priorityClassName": name, "containers": [{"name": "c", "image": "probe"}]},
    }
    refusal: list[str] = [""]

    def admitted() -> bool:
        try:
            api_request(api, "POST", "/api/v1/namespaces/default/pods", query=[("dryRun", "All")], body=pod)
        except ApiException as e:
            if e.status != 403:
                raise
            refusal[0] = e.body or ""
            return False
        return True

    try:
        poll(admitted, timeout, f"PriorityClass {name} known to admission", 0.1)
    except PollTimeoutError as e:
        raise PollTimeoutError(e.what, timeout, refusal[0]) from None


def wait_running(
    api: ApiClient,
    namespace: str,
    selector: str,
    count: int,
    *,
    timeout: float = 600,
    progress: Callable[[str], None] = lambda s: None,
) -> None:
    """Until ``count`` pods of ``selector`` are Running (kwok's status writes for pods bound at
    creation are over before a contender starts)."""
    running = [0]

    def all_running() -> bool:
        pods = list_pods(api, namespace, selector)
        running[0] = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")
        progress(f"{running[0]}/{count} pods bound before the run are Running")
        return running[0] >= count

    try:
        poll(all_running, timeout, f"{count} pods of {selector} Running", 1)
    except PollTimeoutError:
        raise TimeoutError(
            f"only {running[0]} of {count} pods of {selector} in {namespace} Running after {timeout:.0f}s"
        ) from None


# --- creating -------------------------------------------------------------------------------------


@dataclass
class CreateStats:
    created: int = 0
    failed: int = 0
    started_at: float = 0.0
    """time.time() when the first create was sent."""
    finished_at: float = 0.0
    """time.time() when the last create returned."""
    errors: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        span = self.finished_at - self.started_at
        return self.created / span if span > 0 else 0.0


class Creator:
    """Creates pods 0..count-1 (``body(i)``) from ``workers`` threads through one client whose
    limiter does not limit (QPS and burst 5000), retrying 429/5xx; runs in the background."""

    def __init__(
        self, kubeconfig: str, namespace: str, body: Callable[[int], dict[str, Any]], count: int, workers: int
    ) -> None:
        self.api = new_api_client(
            ClientOptions(kubeconfig=kubeconfig, qps=5000, burst=5000, pool_maxsize=workers + 4)
        )
        self.namespace = namespace
        self.body = body
        self.count = count
        self.workers = workers
        self.stats = CreateStats()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def _create(self, i: int) -> None:
        body = self.body(i)
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        try:
            call_with_retries(
                lambda: api_request(self.api, "POST", path, body=body, timeout=(5, 60)),
                what="create pod",
                attempts=10,
                max_seconds=120,
            )
        except Exception as e:  # noqa: BLE001 - counted and reported
            with self._lock:
                self.stats.failed += 1
                if len(self.stats.errors) < 5:
                    self.stats.errors.append(f"{type(e).__name__}: {str(e)[:200]}")
            return
        with self._lock:
            self.stats.created += 1

    def _run(self) -> None:
        self.stats.started_at = time.time()
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="create") as pool:
            list(pool.map(self._create, range(self.count)))
        self.stats.finished_at = time.time()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="creator", daemon=True)
        self._thread.start()

    def done(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)


# --- watching ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WatchTimes:
    seen: dict[str, float]
    """Pod name -> time.time() when the watch delivered its ADDED event."""
    bound: dict[str, float]
    """Pod name -> time.time() when the watch first delivered it with spec.nodeName."""


def _observe(
    kubeconfig: str,
    namespace: str,
    selector: str,
    event_prefix: str,
    ready: Any,
    stop: Any,
    n_seen: Any,
    n_bound: Any,
    n_events: Any,
    out: Any,
) -> None:
    """The observer process: watch the namespace's pods of ``selector``, and its ``Scheduled``
    events about pods named ``event_prefix...``, until told to stop."""
    logs.setup(warnings_only=True)  # a spawned process: the informers' warnings, with their context
    api = new_api_client(ClientOptions(kubeconfig=kubeconfig, qps=0, burst=1, pool_maxsize=4))
    seen: dict[str, float] = {}
    bound: dict[str, float] = {}

    def on_pod(obj: dict[str, Any]) -> None:
        now = time.time()
        name = obj["metadata"]["name"]
        if name not in seen:
            seen[name] = now
            n_seen.value += 1
        if name not in bound and (obj.get("spec") or {}).get("nodeName"):
            bound[name] = now
            n_bound.value += 1

    resource = Resource("pods", f"/api/v1/namespaces/{namespace}/pods", True, label_selector=selector)
    informer = Informer(api, resource, name=f"bench-{namespace}")
    informer.add_handlers(on_pod, lambda _old, new: on_pod(new), None)
    reported: set[str] = set()

    def on_event(ev: dict[str, Any]) -> None:
        name = (ev.get("involvedObject") or {}).get("name") or ""
        if name.startswith(event_prefix) and name not in reported:
            reported.add(name)
            n_events.value += 1

    events = Informer(
        api,
        Resource("events", f"/api/v1/namespaces/{namespace}/events", True, field_selector="reason=Scheduled"),
        name=f"bench-events-{namespace}",
    )
    events.add_handlers(on_event, lambda _old, new: on_event(new), None)
    informer.start()
    events.start()
    informer.wait_for_sync(60)
    events.wait_for_sync(60)
    ready.set()
    stop.wait()
    informer.stop()
    events.stop()
    out.put({"seen": seen, "bound": bound})


class Observer:
    """The watch of one run's measured pods (``selector``) and of the ``Scheduled`` events about
    them (pods named ``event_prefix...``), in its own process."""

    def __init__(self, kubeconfig: str, namespace: str, selector: str, event_prefix: str) -> None:
        ctx = mp.get_context("spawn")
        self._ready = ctx.Event()
        self._stop = ctx.Event()
        self.n_seen = ctx.Value("i", 0, lock=False)
        self.n_bound = ctx.Value("i", 0, lock=False)
        self.n_events = ctx.Value("i", 0, lock=False)
        self._out: Any = ctx.Queue()
        self._proc = ctx.Process(
            target=_observe,
            name=f"observe-{namespace}",
            daemon=True,
            args=(
                kubeconfig,
                namespace,
                selector,
                event_prefix,
                self._ready,
                self._stop,
                self.n_seen,
                self.n_bound,
                self.n_events,
                self._out,
            ),
        )

    def start(self, timeout: float = 90) -> None:
        self._proc.start()
        if not self._ready.wait(timeout):
            self._proc.kill()
            raise TimeoutError("the watch of the bench namespace did not sync")

    @property
    def bound(self) -> int:
        return self.n_bound.value

    @property
    def events(self) -> int:
        """Pods with a ``Scheduled`` event so far."""
        return self.n_events.value

    @property
    def seen(self) -> int:
        return self.n_seen.value

    def stop(self, timeout: float = 60) -> WatchTimes:
        self._stop.set()
        try:
            data = self._out.get(timeout=timeout)
        except queue_mod.Empty:
            self._proc.kill()
            raise TimeoutError("the bench watch did not report") from None
        self._proc.join(10)
        return WatchTimes(data["seen"], data["bound"])
