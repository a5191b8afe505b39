"""Load-aware placement with a real Prometheus: the ``Dynamic`` plugin on kind.

Prometheus is installed for the module with the project's own command
(``dynamic-scheduler deploy prometheus``) and short windows (10 s scrapes, the
policy's metric ``cpu_usage_avg_5m`` averaged over 30 s, not 5 m); each test
deploys ours with the lease method (``deploy lease``) and a policy that reads
that one metric every 5 s, with its own threshold (``maxLimitPecent``) and
crane's default hot value. ``restore lease`` after each test, ``restore
prometheus`` after the module.

- **A burst spreads.** With both workers far under the threshold, pods created
  at once go to both: every placement raises the node's hot value (two within a
  minute cost it 10 points, times the score weight), so the node that looked idlest stops
  looking so after a couple of pods. Without it they would all go to the node
  with the lower load.
- **A loaded worker is avoided.** A CPU burner (one busy thread, pinned with
  ``nodeName``) runs on worker A. Once Prometheus shows A clearly above B, ours
  is deployed with the threshold between the two; once A reads over it and B
  under it, and our scheduler has queried Prometheus since, new pods land on B
  and a pod that may only go to A, where no node passes every filter, goes there with a
  ``FilterRelaxed`` warning that gives the plugin's reason (``relaxWhenNothingFits``).

A kind node is a container on this machine: its kubelet reports the node
container's own CPU time and cAdvisor the machine's cores, so a busy thread on
a worker reads as the share of the machine it gets. Figures go to
``_artifacts/e2e-metrics/load_aware.jsonl``.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.deploying import SHORT_PROMETHEUS_WINDOWS, deploy, restore
from e2e.events import assert_bound_by, instance_pod, wait_event
from e2e.kube import is_ready, wait_pod
from e2e.measure import record
from e2e.metrics import scheduler_metrics
from e2e.nodes import HOSTNAME_LABEL, cluster_nodes
from e2e.pods import pod_body, wait_bound, wait_pods_gone
from e2e.schedulers import our_pod_names, wait_leading, wait_ours_hold
from scheduler.deploy.prometheus import kubelet_address, prometheus_get, query
from scheduler.polling import poll

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

SUITE = "load_aware"
PROM_NS = "crane-system"
METRIC = "cpu_usage_avg_5m"
BURST = 8
BURST_THRESHOLD = 0.65
"""crane's default maxLimitPecent, for the burst: neither worker is near it."""
GAP = 0.06
"""How far apart the burner's worker and the other one must read before the threshold is set between."""
MARGIN = 0.02
"""How far from the threshold both must then stay while the pods are placed (samples wobble)."""
FULL_WINDOW = 60.0
"""Seconds from the burner's start until METRIC is all burner time: the 30 s rate, then the 30 s average."""
REFRESH = "5s"
CONTROL_PLANE_TAINT = "node(s) had untolerated taint(s)"


def scheduler_values(threshold: float) -> dict[str, Any]:
    """Ours reading METRIC every 5 s, rejecting a node above ``threshold``, crane's hot value; the
    Prometheus values, so that the estimate of pods just placed follows this suite's windows."""
    return {
        **SHORT_PROMETHEUS_WINDOWS,
        # One replica: the leader is the one that schedules, standbys would only add load to the nodes.
        "replicas": 1,
        "dynamic": {
            "metricsUpdatePeriod": REFRESH,
            "policy": {
                "spec": {
                    "syncPolicy": [{"name": METRIC, "period": REFRESH}],
                    "predicate": [{"name": METRIC, "maxLimitPecent": threshold}],
                    "priority": [{"name": METRIC, "weight": 1}],
                    "hotValue": [{"timeRange": "5m", "count": 5}, {"timeRange": "1m", "count": 2}],
                }
            },
        },
    }


# --- Prometheus and the scheduler's view of it ---------------------------------------------------


def prom_query(api: client.ApiClient, promql: str) -> dict[str, float]:
    """An instant query through the API server's service proxy: value by ``node`` label."""
    return {
        r["metric"]["node"]: float(r["value"][1])
        for r in query(api, PROM_NS, promql)
        if "node" in r["metric"]
    }


def wait_loads(
    api: client.ApiClient, what: str, pred: Callable[[dict[str, float]], bool], timeout: float
) -> tuple[dict[str, float], float]:
    """Poll METRIC until ``pred(loads)``; (the loads, the time.time() they were read)."""
    seen: list[dict[str, float]] = []

    def check() -> tuple[dict[str, float], float] | None:
        loads = {n: round(v, 3) for n, v in prom_query(api, METRIC).items()}
        seen[:] = [*seen[-4:], loads]
        return (loads, time.time()) if pred(loads) else None

    try:
        return poll(check, timeout, what, interval=2, retry_on=(ApiException,))
    except AssertionError as e:
        raise AssertionError(f"{e}\nlast {METRIC} values: {seen}") from None


def scheduler_refreshed_at(api: client.ApiClient, pod: str) -> float:
    """When (time.time()) our scheduler last read METRIC: now minus its metric age gauge."""
    text = scheduler_metrics(api, pod)
    now = time.time()
    m = re.search(rf'^dynamic_scheduler_metric_age_seconds\{{metric="{METRIC}"\}} (\S+)$', text, re.M)
    assert m, f"no dynamic_scheduler_metric_age_seconds for {METRIC} in {pod}'s /metrics"
    return now - float(m.group(1))


def wait_scheduler_read_after(api: client.ApiClient, pod: str, after: float, timeout: float) -> float:
    """Until our scheduler's latest query of METRIC is newer than ``after``; when it was."""
    return poll(
        lambda: (lambda t: t if t > after else None)(scheduler_refreshed_at(api, pod)),
        timeout,
        f"{pod} querying {METRIC} again",
        interval=1,
        retry_on=(ApiException,),
    )


# --- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prometheus(kind_cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Prometheus with this suite's windows, for the module; restored after. Yields a folder for values."""
    os.environ.setdefault("KUBECONFIG", str(kind_cluster.kubeconfig_path))
    folder = tmp_path_factory.mktemp("load-aware")
    values = folder / "prometheus.yaml"
    values.write_text(yaml.safe_dump(SHORT_PROMETHEUS_WINDOWS, sort_keys=False))
    try:
        res = deploy("prometheus", "-f", str(values), "--timeout", "400")
        record(SUITE, "deploy_prometheus_s", res.seconds)
        yield folder
    finally:
        restore("prometheus")


@pytest.fixture
def ours(prometheus: Path, api: client.ApiClient, core: client.CoreV1Api) -> Iterator[Callable[[float], str]]:
    """Deploys ours (lease method) with a policy threshold, waits until it leads and returns the
    leader's pod name; ``restore lease`` after."""
    deployed: list[float] = []

    def start(threshold: float) -> str:
        values = prometheus / f"scheduler-{threshold:g}.yaml"
        values.write_text(yaml.safe_dump(scheduler_values(threshold), sort_keys=False))
        deployed.append(threshold)
        res = deploy("lease", "-f", str(values), "--timeout", "300")
        record(SUITE, "deploy_lease_s", res.seconds, threshold=threshold)
        # Once ours leads (after the takeover's safe wait, when kube-scheduler can no longer
        # bind), every pod is bound by it.
        _, leader = wait_ours_hold(api, core, 60)
        wait_leading(core, leader, 120)
        names = our_pod_names(core)
        assert names == {leader}, f"expected one replica of ours, the leader {leader}: {sorted(names)}"
        return leader

    yield start
    if deployed:
        restore("lease")


@pytest.fixture
def burner(core: client.CoreV1Api, namespace: str, test_image: str) -> Iterator[Callable[[str], str]]:
    """Starts a CPU burner pinned to a node (``nodeName``: no scheduler involved); deleted after,
    and waited for, so that no later test inherits its load."""
    started: list[str] = []

    def start(node: str) -> str:
        name = f"burner-{node}"
        burn = ["python3", "-c", "while True: pass"]
        core.create_namespaced_pod(
            namespace, pod_body(name, test_image, node_name=node, command=burn, labels={"app": "burner"})
        )
        started.append(name)
        wait_pod(core, namespace, name, is_ready, "Ready (burning)", 120)
        return name

    yield start
    for name in started:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    if started:
        wait_pods_gone(core, namespace, "app=burner", 120)


# --- helpers ---------------------------------------------------------------------------------------


def create_at_once(core: client.CoreV1Api, ns: str, image: str, prefix: str, n: int) -> list[str]:
    names = [f"{prefix}-{i}" for i in range(n)]
    for name in names:
        core.create_namespaced_pod(ns, pod_body(name, image, labels={"app": prefix}))
    return names


# --- the tests -------------------------------------------------------------------------------------


def test_prometheus_scrapes_each_kubelet_directly(
    api: client.ApiClient, core: client.CoreV1Api, prometheus: Path
) -> None:
    """Both jobs, every node, up: at the node's own address and kubelet port, not through the API
    server's node proxy; and Prometheus's ClusterRole has no nodes/proxy."""
    nodes = {n.metadata.name: kubelet_address(n) for n in core.list_node().items}
    want = sorted(
        (job, node, node, f"https://{address}/metrics/{path}", "up")
        for job, path in (("kubelet-resource", "resource"), ("kubelet-cadvisor", "cadvisor"))
        for node, address in nodes.items()
    )
    seen: list[Any] = []

    def targets() -> bool:
        seen[:] = prometheus_get(api, PROM_NS, "/api/v1/targets")["data"]["activeTargets"]
        return want == sorted(
            (t["labels"]["job"], t["labels"]["node"], t["labels"]["instance"], t["scrapeUrl"], t["health"])
            for t in seen
            if t["labels"]["job"].startswith("kubelet-")
        )

    try:
        poll(targets, 60, "every kubelet target up", interval=2, retry_on=(ApiException,))
    except AssertionError as e:
        raise AssertionError(
            f"{e}\nwanted {want}\ngot {[(t['scrapeUrl'], t['health'], t.get('lastError')) for t in seen]}"
        ) from None
    role = client.RbacAuthorizationV1Api(api).read_cluster_role("dynamic-scheduler:prometheus")
    resources = {r for rule in role.rules for r in rule.resources or []}
    assert "nodes/metrics" in resources and "nodes/proxy" not in resources, role.rules


def test_prometheus_scrapes_our_scheduler(
    api: client.ApiClient, core: client.CoreV1Api, ours: Callable[[float], str]
) -> None:
    """The job dynamic-scheduler finds our replica through the headless Service and scrapes its
    secure port: the scheduler's SubjectAccessReview allows Prometheus's `get /metrics`, and the
    leader's series (the dashboard's) are there, the Dynamic plugin's per-node view included."""
    leader = ours(BURST_THRESHOLD)
    pod_ip = core.read_namespaced_pod(leader, "crane-system").status.pod_ip
    seen: list[Any] = []

    def scraped() -> bool:
        seen[:] = query(api, PROM_NS, 'leader_election_master_status{job="dynamic-scheduler"} == 1')
        nodes = query(api, PROM_NS, 'dynamic_scheduler_node_usage{job="dynamic-scheduler"}')
        return [r["metric"]["instance"] for r in seen] == [f"{pod_ip}:10259"] and bool(nodes)

    try:
        poll(scraped, 90, "our leader scraped by Prometheus", interval=3, retry_on=(ApiException,))
    except AssertionError as e:
        targets = prometheus_get(api, PROM_NS, "/api/v1/targets")["data"]["activeTargets"]
        ours_targets = [(t["scrapeUrl"], t["health"], t.get("lastError")) for t in targets]
        raise AssertionError(f"{e}\nleader series {seen}\ntargets {ours_targets}") from None


def test_a_burst_of_pods_spreads_over_the_workers(
    api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    test_image: str,
    ours: Callable[[float], str],
) -> None:
    workers = cluster_nodes(core).workers
    leader = ours(BURST_THRESHOLD)
    loads, _ = wait_loads(
        api,
        f"{METRIC} of both workers under {BURST_THRESHOLD - MARGIN}",
        lambda ls: all(w in ls and ls[w] < BURST_THRESHOLD - MARGIN for w in workers),
        300,
    )
    start = time.monotonic()
    names = create_at_once(core, namespace, test_image, "burst", BURST)
    placed = {name: wait_bound(core, namespace, name, 120)["spec"]["nodeName"] for name in names}
    took = time.monotonic() - start
    for name in names:
        assert_bound_by(core, namespace, name, {leader}, 60)
    counts = Counter(placed.values())
    per_node = {w: counts.get(w, 0) for w in workers}
    record(
        SUITE, "burst_max_share", max(per_node.values()) / BURST, per_node=per_node, loads=loads, pods=BURST
    )
    record(SUITE, "burst_all_bound_s", took, pods=BURST)
    assert set(counts) == set(workers), f"the burst piled onto one node: {placed}; {METRIC}: {loads}"
    # The load part of the score differs by (difference in usage) x 100 x 3; each two pods on a
    # node within a minute cost it 10 x 3: a difference of up to 0.3 still leaves 2 of 8 pods.
    assert max(per_node.values()) <= BURST - 2, f"the burst barely spread: {per_node}; {METRIC}: {loads}"


def test_new_pods_avoid_a_worker_over_the_threshold(
    api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    test_image: str,
    prometheus: Path,
    burner: Callable[[str], str],
    ours: Callable[[float], str],
) -> None:
    """The threshold is set between the two workers' readings with the burner running: on a
    machine shared with other clusters one busy thread gets anything from a tenth of a core to a
    whole one, so a fixed threshold could be above it; the gap between the workers is what counts."""
    workers = cluster_nodes(core).workers
    calm, _ = wait_loads(api, f"{METRIC} of both workers", lambda ls: all(w in ls for w in workers), 300)
    # The busier worker at rest gets the burner, so that the other one stays the calm one.
    hot, cool = sorted(workers, key=lambda w: calm[w], reverse=True)
    started = time.time()
    burner(hot)
    # The threshold goes halfway between the two once the burner's share fills a whole window.
    loads, seen = wait_loads(
        api,
        f"{METRIC} of {hot} at least {GAP} above {cool}'s, {FULL_WINDOW:g}s after the burner started",
        lambda ls: (
            hot in ls and cool in ls and ls[hot] - ls[cool] >= GAP and time.time() - started >= FULL_WINDOW
        ),
        300,
    )
    record(SUITE, "burner_to_gap_s", seen - started, hot=loads[hot], cool=loads[cool], before=calm)
    threshold = round((loads[hot] + loads[cool]) / 2, 2)
    leader = ours(threshold)
    loads, seen = wait_loads(
        api,
        f"{METRIC} of {hot} over {threshold + MARGIN:g} and of {cool} under {threshold - MARGIN:g}",
        lambda ls: ls.get(hot, 0) > threshold + MARGIN and ls.get(cool, 1) < threshold - MARGIN,
        300,
    )
    read = wait_scheduler_read_after(api, leader, seen, 60)
    record(SUITE, "over_threshold_to_scheduler_read_s", read - seen, threshold=threshold)

    names = create_at_once(core, namespace, test_image, "after-burn", 4)
    placed = {name: wait_bound(core, namespace, name, 120)["spec"]["nodeName"] for name in names}
    for name in names:
        assert_bound_by(core, namespace, name, {leader}, 60)
    assert set(placed.values()) == {cool}, f"pods went to {placed}; {METRIC}: {loads}, threshold {threshold}"

    # A pod that may only go to the hot worker: the Dynamic filter refuses it there, and as no
    # node passes every filter the manifests' relaxWhenNothingFits places it there all the same
    # (kube-scheduler would), with a warning that gives the refusal.
    pinned = pod_body("only-hot", test_image, node_selector={HOSTNAME_LABEL: hot})
    core.create_namespaced_pod(namespace, pinned)
    assert wait_bound(core, namespace, "only-hot", 60)["spec"]["nodeName"] == hot
    ev = wait_event(core, namespace, "only-hot", "FilterRelaxed", 60)
    assert ev["type"] == "Warning"
    assert ev["message"] == (
        f"Assigned {namespace}/only-hot to {hot} with the Dynamic filter relaxed, as no node passed "
        f"every filter: 0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        f"1 node(s) had {METRIC} above {threshold:g}, 1 {CONTROL_PLANE_TAINT}."
    ), ev["message"]
    assert instance_pod(ev.get("reportingInstance") or "") == leader
    after = {n: round(v, 3) for n, v in prom_query(api, METRIC).items()}
    record(SUITE, "pods_on_cool_worker", len(names), threshold=threshold, at_placement=loads, after=after)
