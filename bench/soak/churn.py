"""The soak's steady churn: pods created at a rate and deleted after a drawn lifetime, and kwok
nodes turned over (one added, the oldest drained and deleted).

Pods are the bench's (``bench.workloads.pod_body``: the kwok nodes only, never evicted) under
``default-scheduler``, with CPU and memory drawn per pod from :data:`SHAPES`, so that nodes fill
unevenly and a pod may have to wait for room. Nothing here waits on the scheduler.
"""

from __future__ import annotations

import heapq
import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.utils import parse_quantity

from bench import kwok
from bench import workloads as wl
from bench.load import merge_patch
from e2e.fit import millicpu
from scheduler.cluster.client import api_request
from scheduler.cluster.retry import call_with_retries

logger = logging.getLogger(__name__)

NAMESPACE = "bench-soak"
APP = {"app": "bench-soak"}
SHAPES = [("250m", "256Mi"), ("500m", "512Mi"), ("1", "1Gi"), ("2", "2Gi")]
"""(CPU, memory) a soak pod requests, one drawn per pod. At the defaults (2 pods/s living 4 min
on average, 16 nodes of 32 CPUs) the pods request nearly 90 % of the nodes' CPU, so that nodes
fill and a pod sometimes waits for room."""
NODE_ALLOCATABLE = (millicpu(kwok.NODE_CPU), int(parse_quantity(kwok.NODE_MEMORY)), int(kwok.NODE_PODS))
"""(milli-CPU, memory bytes, pods) of every kwok node."""


def soak_pod(name: str, rng: random.Random) -> dict[str, Any]:
    cpu, memory = rng.choice(SHAPES)
    pod = wl.pod_body(name, "default-scheduler", APP, cpu)
    pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = memory
    return pod


@dataclass
class PodStats:
    created: int = 0
    deleted: int = 0
    create_failed: int = 0
    delete_failed: int = 0


@dataclass
class PodChurn:
    """Creates a pod every ``1 / rate`` seconds, each deleted ``life`` seconds later."""

    api: ApiClient
    rate: float
    life: tuple[float, float]
    seed: int = 1
    stats: PodStats = field(default_factory=PodStats)
    _due: list[tuple[float, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="soak-pods", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 60) -> PodStats:
        """No more pods; the live ones stay (the soak's end waits for them to be bound)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        return self.stats

    def _run(self) -> None:
        rng = random.Random(self.seed)
        period = 1.0 / self.rate
        n = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            while self._due and self._due[0][0] <= now:
                _, name = heapq.heappop(self._due)
                self._delete(name)
            if now >= next_at:
                name = f"soak-{n:06d}"
                n += 1
                if self._create(soak_pod(name, rng)):
                    heapq.heappush(self._due, (now + rng.uniform(*self.life), name))
                next_at += period
            wait = min([next_at, *(t for t, _ in self._due[:1])]) - time.monotonic()
            self._stop.wait(max(0.0, wait))

    def _create(self, body: dict[str, Any]) -> bool:
        path = f"/api/v1/namespaces/{NAMESPACE}/pods"
        try:
            call_with_retries(
                lambda: api_request(self.api, "POST", path, body=body, timeout=(5, 30)),
                what="create soak pod",
                attempts=4,
                max_seconds=30,
            )
        except (ApiException, OSError) as e:
            self.stats.create_failed += 1
            logger.warning("creating pod failed pod=%s/%s err=%s", NAMESPACE, body["metadata"]["name"], e)
            return False
        self.stats.created += 1
        return True

    def _delete(self, name: str) -> None:
        if delete_pod(self.api, name):
            self.stats.deleted += 1
        else:
            self.stats.delete_failed += 1


def delete_pod(api: ApiClient, name: str) -> bool:
    """Deleted (or already gone); False when the API kept refusing."""

    def call() -> None:
        try:
            api_request(api, "DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", timeout=(5, 30))
        except ApiException as e:
            if e.status != 404:
                raise

    try:
        call_with_retries(call, what="delete soak pod", attempts=4, max_seconds=30)
    except (ApiException, OSError) as e:
        logger.warning("deleting pod failed pod=%s/%s err=%s", NAMESPACE, name, e)
        return False
    return True


class NodeTurns:
    """The soak's kwok nodes: ``count`` at first; each :meth:`turn` adds the next one and then
    drains (cordon, delete its pods) and deletes the oldest."""

    def __init__(self, api: ApiClient, count: int) -> None:
        self.api = api
        self.live = list(range(count))
        self.next = count
        self.added = self.removed = 0

    def names(self) -> list[str]:
        return [kwok.node_name(i) for i in self.live]

    def turn(self, before_add: Any = None) -> tuple[str, str, int]:
        """(added, removed, pods drained). ``before_add(name)`` runs before the node exists."""
        i, self.next = self.next, self.next + 1
        added = kwok.node_name(i)
        if before_add is not None:
            before_add(added)
        call_with_retries(
            lambda: api_request(self.api, "POST", "/api/v1/nodes", body=kwok.node_body(i), timeout=(5, 30)),
            what="create node",
            attempts=8,
            max_seconds=120,
        )
        self.live.append(i)
        self.added += 1
        oldest = kwok.node_name(self.live.pop(0))
        drained = self.drain(oldest)
        self.removed += 1
        return added, oldest, drained

    def drain(self, name: str) -> int:
        """Cordon ``name``, delete the soak pods on it, delete it; the pods deleted."""
        merge_patch(self.api, f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}}, what="cordon node")
        pods = api_request(
            self.api,
            "GET",
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            query=[("fieldSelector", f"spec.nodeName={name}")],
            timeout=(5, 60),
        )
        names = [p["metadata"]["name"] for p in pods.get("items") or ()]
        for pod in names:
            delete_pod(self.api, pod)

        def delete() -> None:
            try:
                api_request(self.api, "DELETE", f"/api/v1/nodes/{name}", timeout=(5, 30))
            except ApiException as e:
                if e.status != 404:
                    raise

        call_with_retries(delete, what="delete node", attempts=8, max_seconds=120)
        return len(names)
