"""The oracle: perfect, instant knowledge of every pod's real usage, as a reference.

It binds each pod of its schedulerName, oldest first, to the node with the most free real CPU
among the nodes where the pod fits by requests (CPU and pod count). No scheduler can know what
it knows (a pod's usage before it runs, every node's usage without lag), so it bounds what
load-aware placement can reach; it is not a scheduler to ship.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from kubernetes.client import ApiClient

from bench.placement.model import NODE_CPU_MILLI, PodSpec, Scenario
from scheduler.cluster.client import api_request

logger = logging.getLogger(__name__)

MAX_PODS = 110


def choose(
    pod: PodSpec, used: Sequence[float], requested: Sequence[int], counts: Sequence[int]
) -> int | None:
    """The node index with the most free real CPU where ``pod`` fits by requests; None if none.
    Ties go to the lower index."""
    best, best_free = None, float("-inf")
    for i, (u, r, n) in enumerate(zip(used, requested, counts, strict=True)):
        if r + pod.request_milli > NODE_CPU_MILLI or n + 1 > MAX_PODS:
            continue
        free = NODE_CPU_MILLI - u
        if free > best_free:
            best, best_free = i, free
    return best


class Oracle:
    """Binds the scenario's pods of ``namespace`` as they appear (a thread)."""

    def __init__(
        self,
        api: ApiClient,
        scenario: Scenario,
        namespace: str,
        scheduler_name: str,
        node_names: Sequence[str],
        clock: Callable[[], float],
    ) -> None:
        self.api = api
        self.scenario = scenario
        self.namespace = namespace
        self.scheduler_name = scheduler_name
        self.node_names = list(node_names)
        self.clock = clock
        """Seconds since the scenario's start."""
        self.used = [float(n.background_milli) for n in scenario.nodes]
        self.requested = [0] * len(scenario.nodes)
        self.counts = [0] * len(scenario.nodes)
        self.bound: set[str] = set()
        self.decisions = 0
        self.cpu_seconds = 0.0
        self._rises = sorted(scenario.rises, key=lambda r: r.at)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="oracle", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self._once()
            except Exception:  # noqa: BLE001 - a failed list or bind is tried again
                logger.exception("oracle pass failed")

    def _once(self) -> None:
        now = self.clock()
        while self._rises and self._rises[0].at <= now:
            r = self._rises.pop(0)
            self.used[r.node] += r.milli
        items = api_request(
            self.api,
            "GET",
            f"/api/v1/namespaces/{self.namespace}/pods",
            query=[("fieldSelector", "spec.nodeName=")],
        )["items"]
        pending = sorted(
            (p for p in items if p["spec"].get("schedulerName") == self.scheduler_name),
            key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]),
        )
        for pod in pending:
            self._place(pod)

    def _place(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if name in self.bound:
            return
        started = time.thread_time()
        spec = self.scenario.pods[int(pod["metadata"]["annotations"]["bench.dynamic-scheduler.io/index"])]
        i = choose(spec, self.used, self.requested, self.counts)
        self.cpu_seconds += time.thread_time() - started
        if i is None:
            return
        api_request(
            self.api,
            "POST",
            f"/api/v1/namespaces/{self.namespace}/pods/{name}/binding",
            body={"metadata": {"name": name}, "target": {"kind": "Node", "name": self.node_names[i]}},
        )
        self.bound.add(name)
        self.decisions += 1
        self.used[i] += spec.usage_milli
        self.requested[i] += spec.request_milli
        self.counts[i] += 1
