"""Measure how fast 5000 pods are listed and watched, model objects vs raw dicts.

Run by hand (it starts its own API server; a few minutes on 2 cores)::

    .venv/bin/python -m tests.cluster.measure_informer [--pods 5000]

It creates the pods (kube-scheduler-like specs: two containers with requests,
labels, a toleration, node affinity), then times

- LIST: the typed call (``V1PodList`` models), the same call with
  ``_preload_content=False`` + ``json.loads``, and our Informer up to
  ``has_synced``, from a paginated list (500 per page) and from a streamed
  initial state (WatchList);
- WATCH: replaying the first ``--pods`` events (creations, binds, status
  writes) from the resourceVersion before the creation (the watch cache keeps
  them), through ``Watch.stream`` with
  and without ``deserialize``, and through our line reader;
- MEMORY: what the listed pods take as Python objects (tracemalloc): as sent
  (``json.loads``), decoded as the informer decodes (orjson) without managedFields
  only, and as the informer stores them (``slim_pod``).

The pods are running ones: bound to nodes, with a status as a kubelet writes it
(conditions, addresses, a status per container), probes and a command.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import tracemalloc
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import watch
from kubernetes.client import CoreV1Api

from bench.population import running_status
from scheduler.cluster.client import ClientOptions, api_request, decode, new_api_client
from scheduler.cluster.informers import Informer, _lines
from scheduler.cluster.slim import slim_pod, trimmed
from scheduler.cluster.store import PODS
from scheduler.logs import setup
from scheduler.settings import WatchSettings
from tests.apiserver import ControlPlane, measure_on_standalone

logger = logging.getLogger("measure_informer")


def pod_body(i: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"p-{i:05d}",
            "labels": {"app": f"app-{i % 50}", "tier": "web", "idx": str(i)},
            "annotations": {"example.com/owner": "team-a", "example.com/build": uuid.uuid4().hex},
        },
        "spec": {
            "schedulerName": "nobody",
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example.com/team-a/app:1.2.3",
                    "ports": [{"containerPort": 8080, "name": "http"}],
                    "command": ["/app", "--port=8080", "--log-level=info"],
                    "env": [{"name": f"VAR_{k}", "value": f"value-{k}"} for k in range(5)],
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"cpu": "500m", "memory": "256Mi"},
                    },
                },
                {
                    "name": "sidecar",
                    "image": "registry.example.com/infra/proxy:4.5.6",
                    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                },
            ],
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
                                ]
                            }
                        ]
                    }
                }
            },
        },
    }


def host_ip(i: int) -> str:
    return f"10.0.{i // 250 % 250}.{i % 250}"


def pod_ip(i: int) -> str:
    return f"10.244.{i // 250 % 250}.{i % 250}"


def run_pod(api: Any, ns: str, i: int) -> None:
    """Create pod ``i``, bind it and write its status as a kubelet would."""
    pod = api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=pod_body(i))
    name = pod["metadata"]["name"]
    api_request(
        api,
        "POST",
        f"/api/v1/namespaces/{ns}/pods/{name}/binding",
        body={"metadata": {"name": name}, "target": {"kind": "Node", "name": f"node-{i % 100}"}},
    )
    api_request(
        api,
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/{name}/status",
        body={
            "status": running_status(pod, host_ip=host_ip(i), pod_ip=pod_ip(i), now="2026-12-01T10:00:00Z")
        },
        content_type="application/merge-patch+json",
    )


def timed(what: str, fn: Callable[[], int], results: dict[str, Any]) -> None:
    """Wall time and this process' CPU time (the API server runs in another process)."""
    start, cpu = time.perf_counter(), time.process_time()
    n = fn()
    s, c = time.perf_counter() - start, time.process_time() - cpu
    results.setdefault(what, []).append((s, c))
    logger.info(
        "measured",
        extra={
            "kv": {
                "what": what,
                "objects": n,
                "seconds": round(s, 3),
                "clientCPUSeconds": round(c, 3),
                "perSecond": round(n / s) if s else None,
            }
        },
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=5000)
    args = ap.parse_args()
    setup(0)
    return measure_on_standalone(measure, args)


def measure(cp: ControlPlane, args: argparse.Namespace) -> int:
    api = new_api_client(ClientOptions(kubeconfig=cp.kubeconfig, qps=0, pool_maxsize=32))
    ns = "measure"
    api_request(api, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    rv0 = api_request(api, "GET", "/api/v1/pods", query=[("limit", 1)])["metadata"]["resourceVersion"]
    start = time.perf_counter()
    with ThreadPoolExecutor(16) as ex:
        list(
            ex.map(
                lambda i: run_pod(api, ns, i),
                range(args.pods),
            )
        )
    logger.info(
        "created", extra={"kv": {"pods": args.pods, "seconds": round(time.perf_counter() - start, 1)}}
    )
    core = CoreV1Api(api)
    results: dict[str, Any] = {}

    def list_models() -> int:
        return len(core.list_pod_for_all_namespaces(_request_timeout=120).items)

    def list_raw() -> int:
        resp = core.list_pod_for_all_namespaces(_preload_content=False, _request_timeout=120)
        body = resp.data
        results["list bytes"] = [len(body)]
        return len(json.loads(body)["items"])

    def informer_sync(stream: bool) -> Callable[[], int]:
        def run() -> int:
            inf = Informer(api, PODS, settings=WatchSettings(stream_initial_state=stream)).start()
            inf.wait_for_sync(120)
            n = len(inf.store)
            inf.stop()
            return n

        return run

    def watch_stream(deserialize: bool) -> Callable[[], int]:
        def run() -> int:
            w = watch.Watch()
            n = 0
            for _ in w.stream(
                core.list_pod_for_all_namespaces,
                resource_version=rv0,
                timeout_seconds=120,
                deserialize=deserialize,
                _request_timeout=(5, 120),
            ):
                n += 1
                if n == args.pods:
                    w.stop()
                    break
            return n

        return run

    def watch_ours() -> int:
        resp = api.call_api(
            "/api/v1/pods",
            "GET",
            query_params=[
                ("watch", "true"),
                ("resourceVersion", rv0),
                ("timeoutSeconds", 120),
                ("allowWatchBookmarks", "true"),
            ],
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=(5, 120),
        )
        n = 0
        try:
            for line in _lines(resp):
                if json.loads(line)["type"] in ("ADDED", "MODIFIED"):
                    n += 1
                    if n == args.pods:
                        break
        finally:
            resp.close()
            resp.release_conn()
        return n

    for _ in range(3):
        timed("list: typed (models)", list_models, results)
        timed("list: _preload_content=False + json.loads", list_raw, results)
        timed("list: Informer (pages of 500) to synced", informer_sync(False), results)
        timed("list: Informer (streamed, WatchList) to synced", informer_sync(True), results)
        timed("watch: Watch.stream deserialize=True", watch_stream(True), results)
        timed("watch: Watch.stream deserialize=False", watch_stream(False), results)
        timed("watch: our line reader + json.loads", watch_ours, results)
    logger.info(
        "bytes per pod in a list",
        extra={"kv": {"bytes": round(results.pop("list bytes")[0] / args.pods)}},
    )
    body = core.list_pod_for_all_namespaces(_preload_content=False, _request_timeout=120).data

    def held(build: Callable[[], list[Any]]) -> int:
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            objects = build()
            size = tracemalloc.get_traced_memory()[0] - base
        finally:
            tracemalloc.stop()
        return round(size / len(objects))

    logger.info(
        "memory per pod as Python objects",
        extra={
            "kv": {
                "asSent": held(lambda: json.loads(body)["items"]),
                "withoutManagedFields": held(lambda: [trimmed(p) for p in decode(body)["items"]]),
                "stored": held(lambda: [slim_pod(p) for p in decode(body)["items"]]),
            }
        },
    )
    for what, runs in results.items():
        wall = sorted(r[0] for r in runs)[len(runs) // 2]
        cpu = sorted(r[1] for r in runs)[len(runs) // 2]
        logger.info(
            "median",
            extra={"kv": {"what": what, "seconds": round(wall, 2), "clientCPUSeconds": round(cpu, 2)}},
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
