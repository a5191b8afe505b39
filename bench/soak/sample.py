"""The soak's sample of every minute: each replica's RSS and CPU, who leads, the leader's queue
lengths, the pods Pending and whether a node had room for them.

RSS and CPU come from the container runtime of the replica's kind node (``crictl stats``: the
container's ``rssBytes`` and cumulative ``usageCoreNanoSeconds``, CPU being the difference between
two samples), the queue lengths from the leader's ``scheduler_pending_pods`` (its ``/metrics``,
read with a token that may), the pods from the soak's pod watch (``e2e.watching.PodWatch``).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from e2e.fit import holds_resources, pod_requests
from e2e.kube import wall
from e2e.metrics import metrics_reader_token, scheduler_get
from e2e.nodes import docker_exec
from e2e.pods import is_bound
from e2e.schedulers import OUR_NS, OUR_SELECTOR

logger = logging.getLogger(__name__)

CONTAINER = "scheduler"
"""Our replicas' container (manifests/lease/deployment.yaml.j2)."""
KUBE_SCHEDULER = "kube-scheduler"
"""The leader's name in a sample when the Lease is not held by one of our replicas."""
_PENDING = re.compile(r'^scheduler_pending_pods\{queue="([^"]+)"\}\s+(\S+)$')


def container_stats(text: str, container: str = CONTAINER) -> dict[str, tuple[int, int]]:
    """``crictl stats -o json``: pod name -> (RSS bytes, CPU core-nanoseconds so far) of its
    container ``container``."""
    out: dict[str, tuple[int, int]] = {}
    for s in json.loads(text).get("stats") or ():
        labels = (s.get("attributes") or {}).get("labels") or {}
        if labels.get("io.kubernetes.container.name") != container:
            continue
        rss = ((s.get("memory") or {}).get("rssBytes") or {}).get("value")
        cpu = ((s.get("cpu") or {}).get("usageCoreNanoSeconds") or {}).get("value")
        if rss is not None and cpu is not None:
            out[labels["io.kubernetes.pod.name"]] = (int(rss), int(cpu))
    return out


def pending_queues(metrics: str) -> dict[str, float]:
    """``scheduler_pending_pods`` by queue, from a /metrics text."""
    out = {}
    for line in metrics.splitlines():
        m = _PENDING.match(line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def free_room(
    pods: Iterable[dict[str, Any]], allocatable: tuple[int, int, int], nodes: Iterable[str]
) -> dict[str, tuple[int, int, int]]:
    """(milli-CPU, memory bytes, pods) left on each of ``nodes``, as the scheduler counts it."""
    free = {n: allocatable for n in nodes}
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if node in free and holds_resources(p):
            c, m = pod_requests(p)
            fc, fm, fp = free[node]
            free[node] = (fc - c, fm - m, fp - 1)
    return free


def fits_somewhere(requests: tuple[int, int], free: Mapping[str, tuple[int, int, int]]) -> str | None:
    """A node with room for ``requests`` (milli-CPU, memory bytes), or None."""
    return next(
        (n for n, (c, m, p) in free.items() if c >= requests[0] and m >= requests[1] and p >= 1), None
    )


@dataclass
class Replica:
    name: str
    node: str
    started: float
    restarts: int
    terminating: bool


@dataclass
class Sampler:
    api: client.ApiClient
    allocatable: tuple[int, int, int]
    pending_grace_s: float
    _cpu: dict[str, tuple[float, int]] = field(default_factory=dict)
    """pod -> (monotonic time, core-nanoseconds) of its last sample."""

    def replicas(self) -> list[Replica]:
        pods = client.CoreV1Api(self.api).list_namespaced_pod(OUR_NS, label_selector=OUR_SELECTOR).items
        out = []
        for p in pods:
            if not p.spec.node_name or p.status.phase != "Running":
                continue
            out.append(
                Replica(
                    p.metadata.name,
                    p.spec.node_name,
                    p.status.start_time.timestamp() if p.status.start_time else time.time(),
                    sum(cs.restart_count for cs in p.status.container_statuses or ()),
                    p.metadata.deletion_timestamp is not None,
                )
            )
        return out

    def leader(self) -> str:
        """The pod holding kube-system/kube-scheduler (``<pod>_<uuid>``), or '' when none."""
        lease = client.CoordinationV1Api(self.api).read_namespaced_lease("kube-scheduler", "kube-system")
        return (lease.spec.holder_identity or "").rsplit("_", 1)[0]

    def resources(self, replicas: list[Replica]) -> dict[str, dict[str, float | None]]:
        """pod -> {rss_mib, cpu_cores (since its last sample; None at its first)}."""
        out: dict[str, dict[str, float | None]] = {}
        for node in sorted({r.node for r in replicas}):
            try:
                text = docker_exec(
                    node, "crictl", "stats", "-o", "json", "--label", f"io.kubernetes.pod.namespace={OUR_NS}"
                ).stdout
            except Exception as e:  # noqa: BLE001 - a node that does not answer: a gap in the chart
                logger.warning("crictl stats failed node=%s err=%s", node, e)
                continue
            now = time.monotonic()
            for pod, (rss, cpu) in container_stats(text).items():
                last = self._cpu.get(pod)
                cores = (cpu - last[1]) / 1e9 / (now - last[0]) if last and now > last[0] else None
                self._cpu[pod] = (now, cpu)
                out[pod] = {"rss_mib": rss / 2**20, "cpu_cores": cores}
        return out

    def queues(self, leader: str) -> dict[str, float] | None:
        try:
            code, body = scheduler_get(self.api, leader, "/metrics", metrics_reader_token(self.api))
        except Exception as e:  # noqa: BLE001 - the leader going away between the two reads
            # the message of a failed docker exec holds the command, and so the token: cut it off
            logger.warning(
                "reading the leader's metrics failed pod=%s err=%s", leader, str(e).split(" exited ", 1)[-1]
            )
            return None
        return pending_queues(body) if code == 200 else None

    def take(self, t: float, live: list[dict[str, Any]], nodes: list[str]) -> dict[str, Any]:
        """One sample at ``t`` seconds into the soak; ``live``: the live pods of ``namespace`` (the
        only ones on the kwok ``nodes``)."""
        replicas = self.replicas()
        leader = self.leader()
        ours = {r.name for r in replicas}
        stats = self.resources(replicas)
        sample: dict[str, Any] = {
            "t": round(t, 1),
            "leader": leader if leader in ours else KUBE_SCHEDULER,
            "replicas": {
                r.name: {
                    **stats.get(r.name, {"rss_mib": None, "cpu_cores": None}),
                    "age_s": round(time.time() - r.started, 1),
                    "restarts": r.restarts,
                    "terminating": r.terminating,
                }
                for r in replicas
            },
            "queues": self.queues(leader) if leader in ours else None,
        }
        free = free_room(live, self.allocatable, nodes)
        now = time.time()
        pending = [p for p in live if not is_bound(p)]
        stuck = []
        for p in pending:
            if p["metadata"].get("deletionTimestamp"):
                continue
            age = now - (wall(p["metadata"].get("creationTimestamp")) or now)
            room = fits_somewhere(pod_requests(p), free) if age > self.pending_grace_s else None
            if room:
                stuck.append({"pod": p["metadata"]["name"], "age_s": round(age, 1), "room_on": room})
        sample["pending"] = len(pending)
        sample["pending_with_room"] = stuck
        return sample
