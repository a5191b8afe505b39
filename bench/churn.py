"""The ``churn`` workload's churn: objects deleted and created anew while the contender runs.

As scheduler_perf's ``churn`` op in ``recreate`` mode: every ``interval``, each
kind of object created at the tick before is deleted, and one new of each is
created. Here the kinds are a kwok node (no bench label: the measured pods
never go there), a pod that fits no node (high priority, twice a node's CPU,
so every scheduler tries and fails to preempt for it) and a pod that fits
(scheduled, then deleted under the scheduler a second later). Every object
carries ``CHURN_LABEL``, so :func:`clean_up` finds what a run left behind.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from bench import kwok
from bench import workloads as wl
from scheduler.cluster.client import ClientOptions, api_request, new_api_client

logger = logging.getLogger(__name__)

CHURN_LABEL = ("bench.dynamic-scheduler.io/churn", "true")
NODE_PREFIX = "kwok-churn-"


def churn_node(name: str) -> dict[str, Any]:
    """A kwok node as the bench's, but without ``kwok.LABEL``: kwok makes it Ready, no
    measured pod selects it."""
    body = kwok.node_body(0)
    body["metadata"]["name"] = name
    labels = body["metadata"]["labels"]
    del labels[kwok.LABEL]
    labels["kubernetes.io/hostname"] = name
    labels[CHURN_LABEL[0]] = CHURN_LABEL[1]
    body["status"]["addresses"] = [{"type": "Hostname", "address": name}]
    return body


def churn_pod(name: str, scheduler_name: str, fits: bool) -> dict[str, Any]:
    pod = wl.pod_body(name, scheduler_name, wl.CHURN_APP, wl.POD_CPU if fits else wl.HUGE_CPU)
    pod["metadata"]["labels"][CHURN_LABEL[0]] = CHURN_LABEL[1]
    if not fits:
        pod["spec"]["priorityClassName"] = "bench-high"
    return pod


@dataclass
class ChurnStats:
    ticks: int = 0
    created: int = 0
    deleted: int = 0
    failed: int = 0


class Churner:
    """Recreates a node and two pods in ``namespace`` every ``interval`` seconds, in the background."""

    def __init__(
        self, kubeconfig: str, namespace: str, scheduler_name: str, prefix: str, interval: float = 1.0
    ) -> None:
        self.api = new_api_client(ClientOptions(kubeconfig=kubeconfig, qps=5000, burst=5000, pool_maxsize=8))
        self.namespace = namespace
        self.scheduler_name = scheduler_name
        self.prefix = prefix
        self.interval = interval
        self.stats = ChurnStats()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: list[str] = []
        """API paths of the objects the last tick created."""

    def _objects(self, n: int) -> list[tuple[str, str, dict[str, Any]]]:
        """(collection path, object path, body) of tick ``n``'s objects."""
        pods = f"/api/v1/namespaces/{self.namespace}/pods"
        node = f"{NODE_PREFIX}{self.prefix}-{n:05d}"
        fits, huge = f"churn-{self.prefix}-{n:05d}", f"churn-{self.prefix}-huge-{n:05d}"
        return [
            ("/api/v1/nodes", f"/api/v1/nodes/{node}", churn_node(node)),
            (pods, f"{pods}/{huge}", churn_pod(huge, self.scheduler_name, fits=False)),
            (pods, f"{pods}/{fits}", churn_pod(fits, self.scheduler_name, fits=True)),
        ]

    def _call(self, method: str, path: str, body: Any = None) -> bool:
        try:
            api_request(self.api, method, path, body=body, query=_grace0(method), timeout=(5, 30))
        except (ApiException, OSError) as e:
            if isinstance(e, ApiException) and e.status == 404 and method == "DELETE":
                return True
            self.stats.failed += 1
            logger.warning("churn %s %s failed: %s", method, path, e)
            return False
        return True

    def _tick(self, n: int, pool: ThreadPoolExecutor) -> None:
        deletes = [pool.submit(self._call, "DELETE", path) for path in self._last]
        self.stats.deleted += sum(1 for f in deletes if f.result())
        objects = self._objects(n)
        creates = [pool.submit(self._call, "POST", coll, body) for coll, _, body in objects]
        self._last = [path for (_, path, _), f in zip(objects, creates, strict=True) if f.result()]
        self.stats.created += len(self._last)
        self.stats.ticks += 1

    def _run(self) -> None:
        with ThreadPoolExecutor(max_workers=3, thread_name_prefix="churn") as pool:
            n = 0
            while not self._stop.is_set():
                self._tick(n, pool)
                n += 1
                self._stop.wait(self.interval)  # the churn's own period, as scheduler_perf's ticker
            deletes = [pool.submit(self._call, "DELETE", path) for path in self._last]
            self.stats.deleted += sum(1 for f in deletes if f.result())

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="churner", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 60) -> ChurnStats:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        return self.stats


def _grace0(method: str) -> list[tuple[str, Any]] | None:
    return [("gracePeriodSeconds", 0)] if method == "DELETE" else None


def clean_up(api: ApiClient) -> int:
    """Delete the churn nodes a run left (an interrupted one); how many. Churn pods go with
    their namespace's pods."""
    selector = "=".join(CHURN_LABEL)
    nodes = api_request(api, "GET", "/api/v1/nodes", query=[("labelSelector", selector)]).get("items") or ()
    for n in nodes:
        try:
            api_request(api, "DELETE", f"/api/v1/nodes/{n['metadata']['name']}")
        except ApiException as e:
            if e.status != 404:
                raise
    return len(nodes)
