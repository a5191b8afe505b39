"""The resident pods of the scale benchmark: a cluster's running workloads, bound before a
scheduler starts, so that its caches hold what a large cluster's do.

Pods are created bound (``spec.nodeName``), ``per_node`` on each kwok node, and kwok runs
them. They come in apps of ``APP_REPLICAS`` replicas, a Deployment's worth, spread over
``namespaces`` namespaces; an app's replicas go to consecutive nodes, as a spreading
scheduler would put them. What varies by app, so that the plugins' caches hold the shapes
of real workloads: a sidecar container, a preferred anti-affinity to its own replicas by
node, a topology spread by zone, a required node affinity to some zones, a toleration, and
probes, environment and a command (which the scheduler keeps no copy of).

No ``ownerReferences``: the garbage collector deletes a pod whose owner does not exist, and
a real ReplicaSet would manage its pods. The population is deterministic: pod ``i`` is the
same in every run, so an interrupted population resumes (a pod already there counts).

Each pod's status is written Running and Ready right after its creation, as a kubelet's first
status update would be, and kwok leaves pods of ``RESIDENT_LABEL`` alone
(``bench.kwok.UNMANAGED_LABEL``): kwok's own pod stages write about 28 pods a second on two
cores, so 150 000 pods would take it 90 minutes, and its queue of writes would still load the
API server while the contenders run.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from bench import kwok
from bench.load import merge_patch
from scheduler.cluster.client import api_request
from scheduler.cluster.retry import call_with_retries

logger = logging.getLogger(__name__)

APP_REPLICAS = 10
RESIDENT_LABEL = kwok.UNMANAGED_LABEL
IMAGES = tuple(f"registry.example.com/team-{t}/service-{s}:1.{t}.{s}" for t in range(8) for s in range(5))
"""40 images: the nodes' image lists stay empty (kwok), so ImageLocality scores them all alike."""
SIDECAR_IMAGE = "registry.example.com/infra/proxy:2.4.1"


@dataclass(frozen=True)
class Population:
    nodes: int
    per_node: int = 30
    namespaces: int = 150
    namespace_prefix: str = "resident"

    @property
    def pods(self) -> int:
        return self.nodes * self.per_node

    @property
    def apps(self) -> int:
        return -(-self.pods // APP_REPLICAS)

    def namespace_of(self, app: int) -> str:
        return f"{self.namespace_prefix}-{app % self.namespaces:03d}"

    def namespace_names(self) -> list[str]:
        return sorted({self.namespace_of(a) for a in range(min(self.apps, self.namespaces))})

    def pod(self, i: int) -> tuple[str, dict[str, Any]]:
        """Pod ``i``: its namespace and its body."""
        app = i // APP_REPLICAS
        name = f"app-{app:05d}"
        template_hash = hashlib.sha256(name.encode()).hexdigest()[:10]
        labels = {
            "app": name,
            "pod-template-hash": template_hash,
            "tier": ("web", "api", "worker", "cache")[app % 4],
            "team": f"team-{app % 8}",
            RESIDENT_LABEL[0]: RESIDENT_LABEL[1],
        }
        image = IMAGES[app % len(IMAGES)]
        main = {
            "name": "app",
            "image": image,
            "command": ["/srv/app", f"--name={name}", "--port=8080"],
            "env": [{"name": f"SETTING_{k}", "value": f"{name}-{k}"} for k in range(6)],
            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
            "resources": {
                "requests": {
                    "cpu": ("50m", "100m", "200m")[app % 3],
                    "memory": ("64Mi", "128Mi", "256Mi")[app % 3],
                },
                "limits": {"memory": ("128Mi", "256Mi", "512Mi")[app % 3]},
            },
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
        }
        containers = [main]
        if app % 2 == 0:
            containers.append(
                {
                    "name": "proxy",
                    "image": SIDECAR_IMAGE,
                    "args": ["--upstream=127.0.0.1:8080"],
                    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                }
            )
        spec: dict[str, Any] = {
            "nodeName": kwok.node_name(i % self.nodes),
            "containers": containers,
            "tolerations": [kwok.TOLERATION],
            "terminationGracePeriodSeconds": 30,
        }
        selector = {"matchLabels": {"app": name}}
        affinity: dict[str, Any] = {}
        if app % 3 == 0:
            affinity["podAntiAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": selector,
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        if app % 10 == 2:
            zones = [kwok.zone_of(z) for z in range(kwok.ZONES)]
            affinity["nodeAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": kwok.ZONE_LABEL, "operator": "In", "values": zones}]}
                    ]
                }
            }
        if affinity:
            spec["affinity"] = affinity
        if app % 4 == 1:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": kwok.ZONE_LABEL,
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": selector,
                }
            ]
        if app % 5 == 3:
            spec["tolerations"] = [
                *spec["tolerations"],
                {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"},
            ]
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{template_hash[:5]}-{i % APP_REPLICAS}", "labels": labels},
            "spec": spec,
        }
        return self.namespace_of(app), body

    def status(self, i: int, body: dict[str, Any], now: str) -> dict[str, Any]:
        """Pod ``i``'s status once it runs (``body``: its ``pod(i)``, or the pod as created;
        ``now``: an RFC 3339 time), with a host IP and a pod IP of its own."""
        return running_status(body, host_ip=kwok.node_ip(i % self.nodes), pod_ip=_pod_ip(i), now=now)


def running_status(pod: dict[str, Any], *, host_ip: str, pod_ip: str, now: str) -> dict[str, Any]:
    """What a kubelet (v1.37) writes of ``pod`` once its containers run: Running and Ready,
    and a status per container with the IDs a container runtime reports (derived from the
    pod's name, so the same pod gets the same status) and the container's mounts (those the
    API server added at creation, the service account token's, when ``pod`` is the created
    object). The QoS class is left to the API server, which set it at creation."""
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    name = pod["metadata"]["name"]
    containers = []
    for c in pod["spec"]["containers"]:
        digest = hashlib.sha256(f"{name}/{c['name']}".encode()).hexdigest()
        image = c["image"]
        containers.append(
            {
                "name": c["name"],
                "state": {"running": {"startedAt": now}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": image,
                "imageID": image.rsplit(":", 1)[0] + "@sha256:" + hashlib.sha256(image.encode()).hexdigest(),
                "containerID": "containerd://" + digest,
                "started": True,
                "volumeMounts": [
                    {
                        "name": m["name"],
                        "mountPath": m["mountPath"],
                        "readOnly": bool(m.get("readOnly")),
                        "recursiveReadOnly": "Disabled",
                    }
                    for m in c.get("volumeMounts") or ()
                ],
            }
        )
    return {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": now,
        "containerStatuses": containers,
    }


def _pod_ip(i: int) -> str:
    """A distinct pod IP per resident pod, from 10.160.0.0/12: apart from kwok's ``POD_CIDR``
    and the nodes' IPs, unrouted (nothing connects to it)."""
    return kwok.address(160, i)


@dataclass
class Populated:
    created: int = 0
    existed: int = 0
    """Already there (an earlier, interrupted population)."""
    failed: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    """The first few failures."""


def populate(
    api: ApiClient,
    population: Population,
    *,
    workers: int = 32,
    progress: Callable[[str], None] = lambda _: None,
) -> Populated:
    """Create the population's pods (its namespaces must exist) and write each one's Running
    status; a pod already there counts as existing (its status is written again). Reports
    progress every few seconds."""
    out = Populated()
    lock = threading.Lock()
    started = time.monotonic()

    def create(i: int) -> None:
        namespace, body = population.pod(i)
        path = f"/api/v1/namespaces/{namespace}/pods"
        existed, created = False, body
        try:
            try:
                created = call_with_retries(
                    lambda: api_request(api, "POST", path, body=body, timeout=(5, 60)),
                    what="create resident pod",
                    attempts=10,
                    max_seconds=120,
                )
            except ApiException as e:
                if e.status != 409:
                    raise
                existed = True
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            status = {"status": population.status(i, created, now)}
            merge_patch(
                api, f"{path}/{body['metadata']['name']}/status", status, what="write resident pod status"
            )
        except Exception as e:  # noqa: BLE001 - counted and reported
            with lock:
                out.failed += 1
                if len(out.errors) < 5:
                    why = (
                        f"{e.status} {e.reason}"
                        if isinstance(e, ApiException)
                        else f"{type(e).__name__}: {e}"
                    )
                    out.errors.append(f"{namespace}/{body['metadata']['name']}: {why}"[:300])
            return
        with lock:
            if existed:
                out.existed += 1
            else:
                out.created += 1

    stop = threading.Event()

    def report() -> None:
        while not stop.wait(5.0):
            with lock:
                done = out.created + out.existed + out.failed
            elapsed = time.monotonic() - started
            progress(f"resident pods: {done}/{population.pods} ({done / elapsed:.0f}/s)")

    reporter = threading.Thread(target=report, name="population-progress", daemon=True)
    reporter.start()
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="populate") as pool:
            list(pool.map(create, range(population.pods)))
    finally:
        stop.set()
    out.seconds = time.monotonic() - started
    return out
