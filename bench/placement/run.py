"""One run of one scenario: every contender on its own copy of the nodes, the same pods created at
the same moments for all, kwok reporting real usage, Prometheus reading it, and where each pod
went recorded as it happens.

The steps: nodes (kwok, tainted, labelled by contender) with a background pod each; Prometheus
started and given time to fill its averages with the background; the contenders started; the
scenario's timeline played (pods, rises, outages); then the figures and a clean cluster.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from bench import kwok, load
from bench import prom as bprom
from bench.placement import contenders as pc
from bench.placement import figures as fig
from bench.placement.kwokconfig import USAGE_CPU, USAGE_MEMORY, metrics_path
from bench.placement.model import NODE_CPU_MILLI, NODE_MEMORY, PodSpec, Scenario
from bench.placement.oracle import Oracle
from bench.procstat import sample
from scheduler.cluster.client import api_request
from scheduler.polling import poll

logger = logging.getLogger(__name__)

GROUP = "bench.dynamic-scheduler.io/placement"
"""Label of a contender's nodes and pods: its name."""
INDEX = "bench.dynamic-scheduler.io/index"
PAUSE = "registry.k8s.io/pause:3.10"
TOLERATIONS = [
    kwok.TOLERATION,
    *(
        {"key": k, "operator": "Exists", "effect": "NoExecute"}
        for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
    ),
]


def node_name(contender: str, i: int) -> str:
    return f"pl-{contender}-{i:02d}"


def namespace(contender: str) -> str:
    return f"placement-{contender}"


def node_body(contender: str, i: int) -> dict[str, Any]:
    name = node_name(contender, i)
    resources = {"cpu": f"{NODE_CPU_MILLI}m", "memory": str(NODE_MEMORY), "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {kwok.ANNOTATION: kwok.ANNOTATION_VALUE, "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {kwok.LABEL: "true", GROUP: contender, "kubernetes.io/hostname": name, "type": "kwok"},
        },
        "spec": {"taints": [kwok.TAINT]},
        "status": {
            "allocatable": resources,
            "capacity": resources,
            "addresses": [
                {"type": "InternalIP", "address": kwok.node_ip(i)},
                {"type": "Hostname", "address": name},
            ],
        },
    }


def usage_pod(name: str, node: str, milli: int, memory: int) -> dict[str, Any]:
    """A pod bound to ``node`` directly, requesting nothing, using ``milli`` CPU: background."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": "placement-background"},
            "annotations": {USAGE_CPU: f"{milli}m", USAGE_MEMORY: str(memory)},
        },
        "spec": {
            "nodeName": node,
            "tolerations": TOLERATIONS,
            "containers": [{"name": "c", "image": PAUSE}],
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
        },
    }


def pod_body(contender: str, spec: PodSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p-{spec.index:04d}",
            "labels": {"app": "placement", GROUP: contender},
            "annotations": {
                USAGE_CPU: f"{spec.usage_milli}m",
                USAGE_MEMORY: str(spec.usage_memory),
                INDEX: str(spec.index),
            },
        },
        "spec": {
            "schedulerName": pc.scheduler_name(contender),
            "nodeSelector": {GROUP: contender},
            "tolerations": TOLERATIONS,
            "containers": [
                {
                    "name": "c",
                    "image": PAUSE,
                    "resources": {
                        "requests": {"cpu": f"{spec.request_milli}m", "memory": str(spec.request_memory)}
                    },
                }
            ],
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
        },
    }


def scrape_configs(kwok_port: int, nodes: Sequence[str]) -> list[dict[str, Any]]:
    """One target per node at kwok's server, its path and ``node``/``instance`` labels set, as the
    shipped configuration labels a kubelet's series."""
    return [
        {
            "job_name": "kwok-nodes",
            "static_configs": [
                {
                    "targets": [f"127.0.0.1:{kwok_port}"],
                    "labels": {"__metrics_path__": metrics_path(n), "node": n, "instance": n},
                }
                for n in nodes
            ],
        }
    ]


@dataclass
class Env:
    """What a run needs from the benchmark."""

    api: ApiClient
    setup: pc.Setup
    prometheus: bprom.LocalPrometheus
    """Not started: each run starts it afresh, scraping that run's nodes (``scrape_configs``)."""
    kwok_port: int
    window: float
    """Seconds for the averages to fill (rate window plus the avg5m window) before a run."""
    say: Callable[[str], None]
    status: Callable[[str], None] = field(default=lambda s: None)


@dataclass
class Result:
    scenario: str
    contender: str
    figures: dict[str, Any]
    placements: list[fig.Placement]
    cpu_seconds: float | None
    decisions: int


def _create(api: ApiClient, path: str, body: dict[str, Any]) -> None:
    try:
        api_request(api, "POST", path, body=body)
    except ApiException as e:
        if e.status != 409:
            raise


def prepare(env: Env, scenario: Scenario, contenders: Sequence[str]) -> None:
    """Namespaces, nodes and their background pods for every contender."""
    jobs: list[tuple[str, dict[str, Any]]] = []
    for c in contenders:
        load.ensure_namespace(env.api, namespace(c))
        for n in scenario.nodes:
            jobs.append(("/api/v1/nodes", node_body(c, n.index)))
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda j: _create(env.api, *j), jobs))
    pods = []
    for c in contenders:
        for n in scenario.nodes:
            name = node_name(c, n.index)
            body = usage_pod(f"bg-{name}", name, n.background_milli, n.background_memory)
            pods.append((f"/api/v1/namespaces/{namespace(c)}/pods", body))
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda j: _create(env.api, *j), pods))
    want = len(scenario.nodes) * len(contenders)

    def ready() -> bool:
        nodes = [
            n for n in kwok.list_bench_nodes(env.api) if n["metadata"]["labels"].get(GROUP) in contenders
        ]
        count = sum(1 for n in nodes if kwok.node_ready(n))
        env.status(f"waiting for kwok nodes: {count}/{want} Ready")
        return count == want

    poll(ready, 300, f"{want} kwok nodes Ready (is the kwok controller running? see its log)", 2)


def cleanup(env: Env, contenders: Sequence[str]) -> None:
    for c in contenders:
        load.delete_pods(env.api, namespace(c))
    for c in contenders:
        items = api_request(env.api, "GET", "/api/v1/nodes", query=[("labelSelector", f"{GROUP}={c}")])[
            "items"
        ]
        for n in items:
            try:
                api_request(env.api, "DELETE", f"/api/v1/nodes/{n['metadata']['name']}")
            except ApiException as e:
                if e.status != 404:
                    raise


def wait_load(env: Env, scenario: Scenario, contenders: Sequence[str]) -> None:
    """Until Prometheus has cpu_usage_avg_5m of every node, then one averaging window more."""
    names = {node_name(c, n.index) for c in contenders for n in scenario.nodes}

    def complete() -> bool:
        have = {r["metric"].get("node") for r in env.prometheus.query("cpu_usage_avg_5m")}
        env.status(f"Prometheus has the load of {len(names & have)}/{len(names)} nodes")
        return names <= have

    poll(complete, 300, "the nodes' load in Prometheus", 2, retry_on=(OSError,))
    time.sleep(env.window)  # the averages fill with the background: a fixed wait by design


def bindings(env: Env, contenders: Sequence[str]) -> dict[tuple[str, int], str]:
    """(contender, pod index) -> node name, for every bound pod of the scenario."""
    out = {}
    for c in contenders:
        items = api_request(
            env.api,
            "GET",
            f"/api/v1/namespaces/{namespace(c)}/pods",
            query=[("labelSelector", "app=placement")],
        )["items"]
        for p in items:
            node = p["spec"].get("nodeName")
            if node:
                out[(c, int(p["metadata"]["annotations"][INDEX]))] = node
    return out


def run(env: Env, scenario: Scenario, contenders: Sequence[str], tag: str) -> list[Result]:
    """Play ``scenario`` for every contender at once; their results."""
    say = env.say
    prepare(env, scenario, contenders)
    env.prometheus.scrape_configs = scrape_configs(
        env.kwok_port, [node_name(c, n.index) for c in contenders for n in scenario.nodes]
    )
    env.prometheus.start()
    procs: dict[str, Any] = {}
    oracle: Oracle | None = None
    try:
        wait_load(env, scenario, contenders)
        procs = {c: pc.start(c, env.setup, tag) for c in contenders if c != "oracle"}
        for r in procs.values():
            r.wait_ready(180)
        cpu0 = {c: (s.cpu_seconds if (s := sample(r.pid)) else None) for c, r in procs.items()}
        start = time.monotonic()

        def clock() -> float:
            return time.monotonic() - start

        if "oracle" in contenders:
            oracle = Oracle(
                env.api,
                scenario,
                namespace("oracle"),
                pc.scheduler_name("oracle"),
                [node_name("oracle", n.index) for n in scenario.nodes],
                clock,
            )
            oracle.start()
        say(
            f"{scenario.name}: {len(scenario.pods)} pods over {scenario.duration:.0f}s, contenders {', '.join(contenders)}"
        )
        bound_at = play(env, scenario, contenders, clock)
        for r in procs.values():
            r.check()
        cpu1 = {c: (s.cpu_seconds if (s := sample(r.pid)) else None) for c, r in procs.items()}
    finally:
        if oracle is not None:
            oracle.stop()
        for r in procs.values():
            r.stop()
        env.prometheus.stop()
    results = []
    for c in contenders:
        placements = [
            fig.Placement(i, int(node.rsplit("-", 1)[1]), at)
            for (cc, i), (node, at) in bound_at.items()
            if cc == c
        ]
        if c == "oracle":
            assert oracle is not None
            cpu, decisions = oracle.cpu_seconds, oracle.decisions
        else:
            a, b = cpu0.get(c), cpu1.get(c)
            cpu, decisions = (b - a if a is not None and b is not None else None), len(placements)
        results.append(
            Result(scenario.name, c, fig.figures(scenario, placements), placements, cpu, decisions)
        )
    cleanup(env, contenders)
    return results


def play(
    env: Env, scenario: Scenario, contenders: Sequence[str], clock: Callable[[], float]
) -> dict[tuple[str, int], tuple[str, float]]:
    """Create the pods, rises and outages at their times; record each bind's node and time (the
    first time it is seen, polled every second)."""
    events: list[tuple[float, int, Any]] = [(p.at, 0, p) for p in scenario.pods]
    events += [(r.at, 1, r) for r in scenario.rises]
    events += [(o.at, 2, o) for o in scenario.outages]
    events += [(o.at + o.seconds, 3, o) for o in scenario.outages]
    events.sort(key=lambda e: (e[0], e[1]))
    bound_at: dict[tuple[str, int], tuple[str, float]] = {}
    next_poll = 0.0
    pool = ThreadPoolExecutor(8)
    try:
        while clock() < scenario.duration:
            now = clock()
            due = [e for e in events if e[0] <= now]
            events = [e for e in events if e[0] > now]
            creations = []
            for _, kind, what in due:
                if kind == 0:
                    creations += [
                        (f"/api/v1/namespaces/{namespace(c)}/pods", pod_body(c, what)) for c in contenders
                    ]
                elif kind == 1:
                    for c in contenders:
                        name = node_name(c, what.node)
                        body = usage_pod(f"rise-{name}", name, what.milli, 0)
                        creations.append((f"/api/v1/namespaces/{namespace(c)}/pods", body))
                elif kind == 2:
                    env.say(f"{scenario.name}: Prometheus stopped at {now:.0f}s")
                    env.prometheus.stop()
                else:
                    env.prometheus.start(keep_data=True)
                    env.say(f"{scenario.name}: Prometheus started again at {now:.0f}s")
            if creations:
                list(pool.map(lambda j: _create(env.api, *j), creations))
            if now >= next_poll:
                next_poll = now + 1.0
                for key, node in bindings(env, contenders).items():
                    bound_at.setdefault(key, (node, round(clock(), 1)))
                env.status(
                    f"{scenario.name} {now:4.0f}/{scenario.duration:.0f}s: bound "
                    + ", ".join(f"{c} {sum(1 for k in bound_at if k[0] == c)}" for c in contenders)
                )
            wait = min([e[0] for e in events] + [next_poll, scenario.duration]) - clock()
            if wait > 0:
                time.sleep(min(wait, 1.0))  # the timeline's own clock: pods are due at set times
    finally:
        pool.shutdown()
    return bound_at
