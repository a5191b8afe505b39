"""Measure the CPU of the scheduler's writes: a Binding and a Scheduled event per pod.

Run by hand (it starts its own API server; about a minute on 2 cores)::

    .venv/bin/python -m tests.cluster.measure_writes [--pods 1000] [--rounds 3]

For each round it creates ``--pods`` pods (not measured), then binds a third of
them and writes an event about each of those through each of three paths: the
generated client (the typed ``create_namespaced_pod_binding`` with
``_preload_content=False``, and ``call_api``), a bare request on the client's
urllib3 pool (JSON by orjson, no ``call_api``), and ``api_request`` (libcurl).
One thread: the CPU per write is the client's alone, the API server runs in
other processes. Prints the medians of the rounds.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from kubernetes.client import ApiClient, CoreV1Api

from scheduler.cluster.binder import binding_body
from scheduler.cluster.client import ClientOptions, api_request, new_api_client
from scheduler.cluster.events import micro_time
from scheduler.logs import kv, setup
from tests.apiserver import ControlPlane, measure_on_standalone

logger = logging.getLogger("measure_writes")
NS = "measure"
NODE = "node-1"


def pod_body(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": "measure"}},
        "spec": {
            "schedulerName": "nobody",
            "containers": [
                {
                    "name": "app",
                    "image": "app:1",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
        },
    }


def event_body(name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": NS},
        "eventTime": micro_time(),
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-measure",
        "action": "Binding",
        "reason": "Scheduled",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": NS, "name": name, "uid": uid},
        "note": f"Successfully assigned {NS}/{name} to {NODE}",
        "type": "Normal",
    }


def generated(api: ApiClient) -> tuple[Callable[[str, str], Any], Callable[[str, str], Any]]:
    core = CoreV1Api(api)

    def bind(name: str, uid: str) -> Any:
        resp = core.create_namespaced_pod_binding(
            name, NS, binding_body(NS, name, uid, NODE), _preload_content=False
        )
        try:
            return json.loads(resp.data)
        finally:
            resp.release_conn()

    def event(name: str, uid: str) -> Any:
        resp = api.call_api(
            f"/apis/events.k8s.io/v1/namespaces/{NS}/events",
            "POST",
            header_params={"Accept": "application/json"},
            body=event_body(name, uid),
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
        try:
            return json.loads(resp.data)
        finally:
            resp.release_conn()

    return bind, event


def bare_urllib3(api: ApiClient) -> tuple[Callable[[str, str], Any], Callable[[str, str], Any]]:
    pool = api.rest_client.pool_manager
    host = api.configuration.host
    headers = {
        "Accept": "application/json",
        "Content-Type": "application/json",
        "User-Agent": api.user_agent,
    }
    token = api.configuration.auth_settings().get("BearerToken")
    if token and token.get("value"):
        headers[token["key"]] = token["value"]

    def post(path: str, body: dict[str, Any]) -> Any:
        resp = pool.request("POST", host + path, body=orjson.dumps(body), headers=headers)
        if resp.status >= 300:
            raise RuntimeError(f"{path}: {resp.status}")
        return orjson.loads(resp.data)

    def bind(name: str, uid: str) -> Any:
        return post(f"/api/v1/namespaces/{NS}/pods/{name}/binding", binding_body(NS, name, uid, NODE))

    def event(name: str, uid: str) -> Any:
        return post(f"/apis/events.k8s.io/v1/namespaces/{NS}/events", event_body(name, uid))

    return bind, event


def ours(api: ApiClient) -> tuple[Callable[[str, str], Any], Callable[[str, str], Any]]:
    def bind(name: str, uid: str) -> Any:
        return api_request(
            api,
            "POST",
            f"/api/v1/namespaces/{NS}/pods/{name}/binding",
            body=binding_body(NS, name, uid, NODE),
        )

    def event(name: str, uid: str) -> Any:
        return api_request(
            api, "POST", f"/apis/events.k8s.io/v1/namespaces/{NS}/events", body=event_body(name, uid)
        )

    return bind, event


def timed(write: Callable[[str, str], Any], pods: list[tuple[str, str]]) -> tuple[float, float]:
    """CPU and wall milliseconds per write."""
    cpu, wall = time.process_time(), time.perf_counter()
    for name, uid in pods:
        write(name, uid)
    n = len(pods)
    return (time.process_time() - cpu) / n * 1e3, (time.perf_counter() - wall) / n * 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    setup(0)
    return measure_on_standalone(measure, args)


def measure(cp: ControlPlane, args: argparse.Namespace) -> int:
    api = new_api_client(ClientOptions(kubeconfig=cp.kubeconfig, qps=0, pool_maxsize=32))
    api_request(api, "POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
    api_request(api, "POST", "/api/v1/nodes", body={"metadata": {"name": NODE}})
    paths = {"generated client": generated(api), "urllib3": bare_urllib3(api), "api_request": ours(api)}
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in range(args.rounds):
        with ThreadPoolExecutor(16) as ex:
            created = list(
                ex.map(
                    lambda i: api_request(
                        api, "POST", f"/api/v1/namespaces/{NS}/pods", body=pod_body(f"p{i}")
                    ),
                    range(r * args.pods, (r + 1) * args.pods),
                )
            )
        pods = [(p["metadata"]["name"], p["metadata"]["uid"]) for p in created]
        third = len(pods) // 3
        parts = (pods[:third], pods[third : 2 * third], pods[2 * third :])
        for (label, (bind, event)), part in zip(paths.items(), parts, strict=True):
            results.setdefault((label, "Binding"), []).append(timed(bind, part))
            results.setdefault((label, "Event"), []).append(timed(event, part))
    for (label, what), runs in results.items():
        logger.info(
            "median",
            extra=kv(
                path=label,
                write=what,
                cpuMsPerWrite=round(statistics.median(c for c, _ in runs), 3),
                wallMsPerWrite=round(statistics.median(w for _, w in runs), 3),
            ),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
