"""Prometheus's faults survived: the Dynamic plugin's source stopped, answering garbage, or
answering with times in the future, while pods are created throughout (``e2e.faults``).

Prometheus is installed for the module (``dynamic-scheduler deploy prometheus``,
short windows) and ours deployed with one load metric, queried every
``PERIOD``, a node rejected above ``LIMIT``, a value stale ``PERIOD`` +
``GRACE`` after it was read. The faults:

- **Prometheus stopped**: its Deployment scaled to 0, until ours has seen the
  queries fail and its last values have gone stale, then back to 1;
- **garbage**: the ``prometheus`` Service pointed at a fake
  (``e2e/fake_prometheus.py garbage``) that answers each query with the next of
  its bad answers (HTML, cut-off or misshapen JSON, values that are not
  numbers, JSON nested 100000 deep, errors, random bytes, a body slower than
  the query timeout), until it has served each of them;
- **times in the future**: the Service pointed at a fake that puts every node
  above the limit, timestamped an hour ahead; once ours refuses pods for it,
  the Service left without endpoints (Prometheus gone): the future values
  must go stale as any other, and pods be bound again, before Prometheus
  returns.

After each, beside ``run_fault``'s checks: ours noticed (its
``dynamic_scheduler_prometheus_up`` went to 0 and back to 1), logged no
traceback, and did not restart; kube-scheduler would not restart either, it
has no load source at all.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.deploying import SHORT_PROMETHEUS_WINDOWS, deploy, restore
from e2e.events import events
from e2e.faults import run_fault
from e2e.kube import is_ready, scale, wait_pod
from e2e.lease import holder, holder_host, read_lease
from e2e.metrics import scheduler_metrics
from e2e.pods import is_bound, list_pods_raw, pod_body, pod_log, wait_pods_gone
from e2e.schedulers import wait_leading, wait_ours_hold
from scheduler.polling import poll

pytestmark = [pytest.mark.cluster, pytest.mark.disruptive, pytest.mark.timeout(900)]

NS = "crane-system"
"""Where Prometheus and ours run (values.namespace)."""
METRIC = "cpu_usage_avg_5m"
PERIOD, GRACE = 5, 10
LIMIT = 0.95
"""No kind node gets near it on its own; the fake's 0.99 is above it."""
FAKE = Path(__file__).with_name("fake_prometheus.py")
FAKE_LABEL = "e2e.dynamic-scheduler.io/fake-prometheus"
REAL_SELECTOR = {"app.kubernetes.io/name": "prometheus"}

SCHEDULER_VALUES: dict[str, Any] = {
    "replicas": 1,
    "dynamic": {
        "metricsUpdatePeriod": f"{PERIOD}s",
        "staleGrace": f"{GRACE}s",
        # The future values put every node above the limit: the pods must be refused for them
        # (and bound once they go stale), not placed with the limits relaxed.
        "relaxWhenNothingFits": False,
        "policy": {
            "spec": {
                "syncPolicy": [{"name": METRIC, "period": f"{PERIOD}s"}],
                "predicate": [{"name": METRIC, "maxLimitPecent": LIMIT}],
                "priority": [{"name": METRIC, "weight": 1}],
                "hotValue": [{"timeRange": "5m", "count": 5}, {"timeRange": "1m", "count": 2}],
            }
        },
    },
}


# --- ours with a real Prometheus, and the fakes --------------------------------------------------


@pytest.fixture(scope="module")
def ours_with_prometheus(kind_cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    os.environ.setdefault("KUBECONFIG", str(kind_cluster.kubeconfig_path))
    folder = tmp_path_factory.mktemp("faults-prometheus")
    (folder / "prometheus.yaml").write_text(yaml.safe_dump(SHORT_PROMETHEUS_WINDOWS))
    (folder / "scheduler.yaml").write_text(yaml.safe_dump(SCHEDULER_VALUES))
    try:
        deploy("prometheus", "-f", str(folder / "prometheus.yaml"), "--timeout", "400")
        deploy("lease", "-f", str(folder / "scheduler.yaml"), "--timeout", "300")
        yield
    finally:
        restore("lease", "prometheus")


@pytest.fixture(scope="module")
def fakes(
    ours_with_prometheus: None, core: client.CoreV1Api, test_image: str
) -> Iterator[Callable[[str], None]]:
    """Both fake Prometheus pods running beside the real one; yields ``point(mode)``, which
    points the Service at one of them, the real one (``"real"``) or nothing (``"none"``)."""
    nodes = ",".join(n.metadata.name for n in core.list_node().items)
    core.create_namespaced_config_map(
        NS, {"metadata": {"name": "fake-prometheus"}, "data": {FAKE.name: FAKE.read_text()}}
    )
    for mode in ("garbage", "future"):
        body = pod_body(
            f"fake-prometheus-{mode}",
            test_image,
            labels={FAKE_LABEL: mode},
            command=["python3", f"/fake/{FAKE.name}", mode],
        )
        spec = body["spec"]
        (c,) = spec["containers"]
        c["env"] = [{"name": "NODES", "value": nodes}, {"name": "VALUE", "value": "0.99"}]
        c["ports"] = [{"name": "web", "containerPort": 9090}]
        c["volumeMounts"] = [{"name": "fake", "mountPath": "/fake"}]
        spec["volumes"] = [{"name": "fake", "configMap": {"name": "fake-prometheus"}}]
        core.create_namespaced_pod(NS, body)
    for mode in ("garbage", "future"):
        wait_pod(core, NS, f"fake-prometheus-{mode}", is_ready, "Ready", 120)

    def point(mode: str) -> None:
        selector = REAL_SELECTOR if mode == "real" else {FAKE_LABEL: mode}
        core.patch_namespaced_service(
            "prometheus", NS, [{"op": "replace", "path": "/spec/selector", "value": selector}]
        )

    try:
        yield point
    finally:
        point("real")
        for mode in ("garbage", "future"):
            core.delete_namespaced_pod(f"fake-prometheus-{mode}", NS, grace_period_seconds=0)
        core.delete_namespaced_config_map("fake-prometheus", NS)


# --- what ours says ------------------------------------------------------------------------------


def leader(api: client.ApiClient) -> str:
    return holder_host(holder(read_lease(api)))


def gauge(text: str, name: str) -> float | None:
    m = re.search(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def wait_up(api: client.ApiClient, up: float, timeout: float) -> float:
    """Until ours' dynamic_scheduler_prometheus_up is ``up``; the seconds it took."""
    t = time.monotonic()
    poll(
        lambda: gauge(scheduler_metrics(api, leader(api)), "dynamic_scheduler_prometheus_up") == up,
        timeout,
        f"dynamic_scheduler_prometheus_up {up:g} in ours",
        interval=1,
        retry_on=(ApiException,),
    )
    return round(time.monotonic() - t, 1)


def fake_served(core: client.CoreV1Api, mode: str) -> list[str]:
    return re.findall(r"^served (\S+)$", pod_log(core, NS, f"fake-prometheus-{mode}"), re.M)


def tracebacks_since(api: client.ApiClient, core: client.CoreV1Api, since: float) -> list[str]:
    text = pod_log(core, NS, leader(api), since_seconds=max(1, int(time.time() - since) + 2))
    return [line for line in text.splitlines() if "Traceback" in line]


@pytest.fixture
def prometheus_fault(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, test_image: str
) -> Callable[[str, Callable[[], dict[str, Any]]], dict[str, Any]]:
    """``run(name, inject)``: run_fault in the test's namespace, ours fresh on real data before,
    back on real data after, no traceback; the figures."""

    def run(name: str, inject: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        _, pod = wait_ours_hold(api, core, 60)
        wait_leading(core, pod, 120)
        wait_up(api, 1, 120)
        start = time.time()

        def fault() -> dict[str, Any]:
            figures = inject()
            figures["up_again_after_s"] = wait_up(api, 1, 45)  # a query period, a timeout, a retry
            return figures

        figures = run_fault(api, core, namespace, test_image, name, fault, may_restart=False)
        assert not tracebacks_since(api, core, start), f"ours logged tracebacks: {figures}"
        return figures

    return run


# --- the faults ----------------------------------------------------------------------------------


def test_prometheus_stopped(api, core, ours_with_prometheus, prometheus_fault) -> None:
    apps = client.AppsV1Api(api)

    def inject() -> dict[str, Any]:
        t = time.monotonic()
        scale(apps, NS, "prometheus", 0)
        wait_pods_gone(core, NS, "app.kubernetes.io/name=prometheus", 120)
        noticed = wait_up(api, 0, 60)
        # Past PERIOD + GRACE without an answer: every node's value is stale, pods pass on.
        age = poll(
            lambda: (lambda a: a if a and a > PERIOD + GRACE else None)(
                gauge(scheduler_metrics(api, leader(api)), "dynamic_scheduler_metric_age_seconds")
            ),
            60,
            f"{METRIC} older than {PERIOD + GRACE}s in ours",
            interval=1,
            retry_on=(ApiException,),
        )
        scale(apps, NS, "prometheus", 1)
        poll(
            lambda: any(
                is_ready(p.to_dict())
                for p in core.list_namespaced_pod(
                    NS, label_selector="app.kubernetes.io/name=prometheus"
                ).items
            ),
            180,
            "Prometheus ready again",
            interval=1,
            retry_on=(ApiException,),
        )
        return {
            "noticed_after_s": noticed,
            "stale_age_s": round(age, 1),
            "down_s": round(time.monotonic() - t, 1),
        }

    prometheus_fault("prometheus_stopped", inject)


def test_prometheus_answering_garbage(api, core, fakes, prometheus_fault) -> None:
    kinds = {
        "html",
        "truncated",
        "wrong-shape",
        "bad-values",
        "deep",
        "error-status",
        "unavailable",
        "random-bytes",
        "drip",
    }

    def inject() -> dict[str, Any]:
        before = len(fake_served(core, "garbage"))
        t = time.monotonic()
        fakes("garbage")
        try:
            noticed = wait_up(api, 0, 60)
            poll(
                lambda: kinds <= set(fake_served(core, "garbage")[before:]),
                180,
                "every bad answer served to ours",
                interval=2,
                retry_on=(ApiException,),
            )
        finally:
            fakes("real")
        return {"noticed_after_s": noticed, "garbage_s": round(time.monotonic() - t, 1)}

    prometheus_fault("prometheus_garbage", inject)


def test_prometheus_answering_from_the_future(api, core, namespace, fakes, prometheus_fault) -> None:
    refused = f"{METRIC} above"

    def inject() -> dict[str, Any]:
        t = time.monotonic()
        fakes("future")
        try:
            # Ours takes the values (every node above LIMIT) and refuses the pods for them.
            poll(
                lambda: any(
                    refused in (e.get("message") or "")
                    for e in events(core, namespace, reason="FailedScheduling")
                ),
                60,
                f"a pod refused for {refused}",
                interval=1,
                retry_on=(ApiException,),
            )
            hot_s = round(time.monotonic() - t, 1)
            fakes("none")  # Prometheus gone: the last answer, an hour ahead, is all ours has
            cut = time.monotonic()
            pending = [p["metadata"]["name"] for p in list_pods_raw(core, namespace) if not is_bound(p)]
            poll(
                lambda: all(
                    is_bound(p) for p in list_pods_raw(core, namespace) if p["metadata"]["name"] in pending
                ),
                PERIOD + GRACE + 60,
                f"the pods refused for the future values bound before Prometheus returns ({len(pending)})",
                interval=1,
                retry_on=(ApiException,),
            )
            stale_s = round(time.monotonic() - cut, 1)
        finally:
            fakes("real")
        return {"refusing_after_s": hot_s, "pending_at_cut": len(pending), "bound_again_after_s": stale_s}

    figures = prometheus_fault("prometheus_future", inject)
    assert figures["pending_at_cut"] > 0, figures
