"""The secure port's ``/configz`` and ``/metrics/resources``, beside the real Go kube-scheduler's.

- ``/configz``: kube-scheduler serves its effective configuration as a v1
  ``KubeSchedulerConfiguration`` under ``componentconfig`` (component-base's configz); ours
  must answer the same shape, with the same values where both schedulers implement the
  field, and only to callers that may read it.
- ``/metrics/resources``: every pod's requests and limits (sidecars, init containers,
  overhead, pod-level resources, extended resources and huge pages), the same series with
  the same values from the same pods; nothing from a replica that does not lead.
"""

from __future__ import annotations

import json
import logging
import ssl
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiClient
from prometheus_client.parser import text_string_to_metric_families

from scheduler.cluster.client import api_request
from scheduler.config.effective import SchedulerConfig
from scheduler.config.loading import parse_config
from scheduler.config.options import AuthorizationOptions, ServingOptions
from scheduler.config.types import Plugins
from scheduler.logs import V, set_verbosity
from scheduler.polling import poll
from tests.apiserver import ControlPlane, free_port
from tests.cluster.util import make_node, scheduler_running

pytestmark = pytest.mark.apiserver

_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE


def fetch(port: int, path: str, put: bytes | None = None) -> tuple[int, str, bytes]:
    """(status, content type, body) of an anonymous GET, or PUT of ``put``."""
    req = urllib.request.Request(
        f"https://127.0.0.1:{port}{path}", data=put, method="GET" if put is None else "PUT"
    )
    try:
        with urllib.request.urlopen(req, timeout=5, context=_INSECURE) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def configz(port: int) -> tuple[int, str, Any]:
    """(status, content type, the JSON body or None) of GET /configz."""
    status, ctype, body = fetch(port, "/configz")
    return status, ctype, json.loads(body) if status == 200 else None


def served(port: int) -> tuple[int, str, Any] | None:
    try:
        return configz(port)
    except OSError:  # not listening yet
        return None


def scheduler_config(name: str) -> dict[str, Any]:
    """Values that differ from the defaults, in the fields and plugins both schedulers have."""
    return {
        "leaderElection": {"leaderElect": False},
        "parallelism": 8,
        "podMaxBackoffSeconds": 7,
        "percentageOfNodesToScore": 40,
        "profiles": [
            {
                "schedulerName": name,
                "plugins": {"score": {"disabled": [{"name": "ImageLocality"}]}},
                "pluginConfig": [
                    {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
                ],
            }
        ],
    }


def ours_config(apiserver: ControlPlane, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        **scheduler_config(name),
        "clientConnection": {"kubeconfig": str(apiserver.kubeconfig_for("system:kube-scheduler"))},
    }


def serving(port: int, *allow: str) -> ServingOptions:
    """The secure port on localhost, open to anyone on the health paths and ``allow``."""
    paths = ("/healthz", "/readyz", "/livez", *allow)
    return ServingOptions(
        secure_port=port,
        bind_address="127.0.0.1",
        authorization=AuthorizationOptions(always_allow_paths=paths),
    )


def start_kube_scheduler(apiserver: ControlPlane, config: dict[str, Any], port: int, *allow: str) -> Any:
    if not apiserver.kube_scheduler.exists():
        pytest.fail("kube-scheduler binary missing: run make tools first")
    paths = ",".join(("/healthz", "/readyz", "/livez", *allow))
    return apiserver.start_kube_scheduler(
        config,
        extra_args=(
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            f"--authorization-always-allow-paths={paths}",
        ),
    )


def test_configz_answers_as_kube_schedulers_does(apiserver: ControlPlane, tmp_path: Path) -> None:
    name = f"configz-{uuid.uuid4().hex[:6]}"
    theirs_port = free_port()
    go = start_kube_scheduler(apiserver, scheduler_config(name), theirs_port, "/configz")
    try:
        theirs = poll(lambda: served(theirs_port), 60, "kube-scheduler's /configz")
    finally:
        go.stop()
    port = free_port()
    with scheduler_running(ours_config(apiserver, name), tmp_path, serving(port, "/configz")):
        mine = configz(port)
    assert theirs[0] == mine[0] == 200
    assert theirs[1].startswith("application/json") and mine[1].startswith("application/json")
    assert set(mine[2]) == set(theirs[2]) == {"componentconfig"}
    a, b = mine[2]["componentconfig"], theirs[2]["componentconfig"]
    assert set(a) == set(b)
    assert (a["apiVersion"], a["kind"]) == (b["apiVersion"], b["kind"])
    # The same configuration: each document, loaded as ours loads a file, gives the same
    # effective configuration (every point's plugins, the weights, each plugin's args, the
    # top-level fields); kube-scheduler's own, fields of v1.37 included, loads as it is.
    ours, theirs_cfg = effective(a), effective(b)
    assert ours == theirs_cfg
    (profile,) = ours.profiles
    assert profile.scheduler_name == name and "ImageLocality" not in profile.plugins.score
    assert profile.args["NodeResourcesFit"].scoring_strategy.type == "MostAllocated"
    assert (ours.parallelism, ours.pod_max_backoff_seconds, ours.percentage_of_nodes_to_score) == (8, 7, 40)


def effective(doc: dict[str, Any]) -> SchedulerConfig:
    """``doc`` loaded as a file is; without what says how it was written (the kubeconfig's
    path, plugin sets as merged before expansion)."""
    cfg = parse_config(yaml.safe_dump(doc), policies=False)
    return replace(
        cfg,
        client_connection=replace(cfg.client_connection, kubeconfig=""),
        profiles=tuple(replace(p, configured=Plugins()) for p in cfg.profiles),
    )


def test_configz_is_for_callers_that_may_read_it(apiserver: ControlPlane, tmp_path: Path) -> None:
    """Not among the always-allowed paths, /configz is authorized like /metrics: an anonymous
    caller is refused."""
    port = free_port()
    with scheduler_running(ours_config(apiserver, "configz-closed"), tmp_path, serving(port)):
        status, _, body = configz(port)
    assert status == 403 and body is None


# --- /metrics/resources ----------------------------------------------------------------------

PAUSE = "registry.k8s.io/pause:3.10"


def container(
    name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> dict:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return {"name": name, "image": PAUSE, "resources": resources}


def resource_pods(admin: ApiClient, ns: str, node: str, priority_class: str, runtime_class: str) -> list[str]:
    """Pods whose requests and limits take each rule to compute; returns the names expected in
    the metrics (not the one without resources, nor the finished one)."""
    bound = {"nodeName": node, "schedulerName": f"nobody-{ns}"}
    pods = {
        "plain": {
            **bound,
            "priorityClassName": priority_class,
            "containers": [
                container("a", {"cpu": "250m", "memory": "64Mi"}, {"cpu": "500m", "memory": "128Mi"}),
                container("b", {"cpu": "250m"}),
            ],
        },
        "sidecar": {
            **bound,
            "initContainers": [
                {**container("side", {"cpu": "100m"}, {"cpu": "200m"}), "restartPolicy": "Always"},
                container("init", {"cpu": "1", "memory": "1Gi"}),
            ],
            "containers": [container("main", {"cpu": "300m"}, {"cpu": "300m"})],
        },
        "extended": {
            **bound,
            "containers": [
                container(
                    "c",
                    {"example.com/foo": "2", "hugepages-2Mi": "4Mi", "memory": "64Mi"},
                    {"example.com/foo": "2", "hugepages-2Mi": "4Mi", "memory": "64Mi"},
                )
            ],
        },
        "overhead": {
            **bound,
            "runtimeClassName": runtime_class,
            "containers": [container("c", {"cpu": "100m", "memory": "32Mi"}, {"cpu": "200m"})],
        },
        "podlevel": {
            **bound,
            "resources": {
                "requests": {"cpu": "1", "memory": "256Mi"},
                "limits": {"cpu": "2", "memory": "512Mi"},
            },
            "containers": [container("c", {"cpu": "100m"})],
        },
        "pending": {"schedulerName": f"nobody-{ns}", "containers": [container("c", {"cpu": "1"})]},
        "empty": {**bound, "containers": [container("c")]},
        "finished": {**bound, "containers": [container("c", {"cpu": "1"})]},
    }
    for name, spec in pods.items():
        api_request(
            admin, "POST", f"/api/v1/namespaces/{ns}/pods", body={"metadata": {"name": name}, "spec": spec}
        )
    path = f"/api/v1/namespaces/{ns}/pods/finished/status"
    status = api_request(admin, "GET", path)
    status["status"]["phase"] = "Succeeded"
    api_request(admin, "PUT", path, body=status)
    return ["plain", "sidecar", "extended", "overhead", "podlevel", "pending"]


Series = dict[tuple[str, str, tuple[tuple[str, str], ...]], float]
"""(metric, pod, its other labels) -> value."""


def series(text: str, namespace: str) -> Series:
    out: Series = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("namespace") == namespace:
                rest = tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("namespace", "pod")))
                out[(s.name, s.labels["pod"], rest)] = s.value
    return out


def pod_resources_of(port: int, namespace: str, pods: list[str]) -> Series | None:
    """The namespace's series once every pod of ``pods`` shows (None before: caches filling)."""
    try:
        status, _, body = fetch(port, "/metrics/resources")
    except OSError:
        return None
    if status != 200:
        return None
    got = series(body.decode(), namespace)
    return got if {pod for _, pod, _ in got} == set(pods) else None


@pytest.fixture
def classes(admin: ApiClient, namespace: str) -> Iterator[tuple[str, str]]:
    """A PriorityClass (1000) and a RuntimeClass with overhead (50m, 10Mi), deleted after."""
    pc, rc = f"high-{namespace}", f"rc-{namespace}"
    api_request(
        admin,
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        body={"metadata": {"name": pc}, "value": 1000},
    )
    api_request(
        admin,
        "POST",
        "/apis/node.k8s.io/v1/runtimeclasses",
        body={
            "metadata": {"name": rc},
            "handler": "runc",
            "overhead": {"podFixed": {"cpu": "50m", "memory": "10Mi"}},
        },
    )
    yield pc, rc
    api_request(admin, "DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{pc}")
    api_request(admin, "DELETE", f"/apis/node.k8s.io/v1/runtimeclasses/{rc}")


def test_pod_resources_are_kube_schedulers_series(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, classes: tuple[str, str], tmp_path: Path
) -> None:
    node = make_node(admin, f"{namespace}-node")["metadata"]["name"]
    try:
        pods = resource_pods(admin, namespace, node, *classes)
        name = f"resources-{namespace}"
        theirs_port = free_port()
        go = start_kube_scheduler(apiserver, scheduler_config(name), theirs_port, "/metrics/resources")
        try:
            theirs = poll(
                lambda: pod_resources_of(theirs_port, namespace, pods), 60, "kube-scheduler's series"
            )
        finally:
            go.stop()
        port = free_port()
        with scheduler_running(ours_config(apiserver, name), tmp_path, serving(port, "/metrics/resources")):
            mine = poll(lambda: pod_resources_of(port, namespace, pods), 30, "our series")
    finally:
        api_request(admin, "DELETE", f"/api/v1/nodes/{node}")
    assert mine == theirs
    # What the rules give, so that a rule both got wrong would show too.
    assert value(mine, "request", "sidecar", "cpu") == 1.1  # the init container beside the sidecar
    assert value(mine, "limit", "sidecar", "cpu") == 0.5  # main + sidecar
    assert value(mine, "request", "overhead", "cpu") == 0.15
    assert value(mine, "limit", "overhead", "cpu") == 0.25
    assert value(mine, "limit", "overhead", "memory") is None  # no limit: the overhead adds none
    assert value(mine, "request", "plain", "memory") == 64 * 2**20
    units = {dict(k[2])["resource"]: dict(k[2])["unit"] for k in mine if k[1] == "extended"}
    assert units == {"example.com/foo": "", "hugepages-2Mi": "bytes", "memory": "bytes"}
    assert {dict(k[2])["priority"] for k in mine if k[1] == "plain"} == {"1000"}
    assert {dict(k[2])["node"] for k in mine if k[1] == "pending"} == {""}


def value(got: Series, kind: str, pod: str, resource: str) -> float | None:
    """The value of kube_pod_resource_<kind> for the pod's resource, None when not there."""
    found = [
        v
        for (m, p, rest), v in got.items()
        if (m, p) == (f"kube_pod_resource_{kind}", pod) and ("resource", resource) in rest
    ]
    assert len(found) <= 1
    return found[0] if found else None


def test_a_standby_serves_no_pod_resources(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path
) -> None:
    """As kube-scheduler's handler, which answers nothing unless it leads; /metrics still answers."""
    user = f"standby-{namespace}"
    lease = f"held-{namespace}"
    admin = apiserver.api_client()
    try:
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        api_request(
            admin,
            "POST",
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases",
            body={
                "metadata": {"name": lease},
                "spec": {
                    "holderIdentity": "someone-else",
                    "leaseDurationSeconds": 3600,
                    "acquireTime": now,
                    "renewTime": now,
                },
            },
        )
    finally:
        admin.close()
    config = ours_config(apiserver, user)
    config["leaderElection"] = {"leaderElect": True, "resourceNamespace": namespace, "resourceName": lease}
    config["clientConnection"] = {"kubeconfig": str(apiserver.kubeconfig_for(user, ("system:masters",)))}
    port = free_port()
    with scheduler_running(
        config, tmp_path, serving(port, "/metrics", "/metrics/resources"), leading=False
    ) as app:
        assert not app.scheduling.is_set()
        status, _, body = fetch(port, "/metrics/resources")
        assert (status, body) == (200, b"")
        status, _, body = fetch(port, "/metrics")
        assert status == 200 and b"scheduler_pending_pods" in body
        for kind, n in app.cache.sizes().items():  # a standby's cache is warm too
            assert f'scheduler_cache_size{{type="{kind}"}} {float(n)}'.encode() in body


# --- /debug/flags/v --------------------------------------------------------------------------

VERBOSITY = "/debug/flags/v"
ASKS = (b"3", b"x", b"3\n", b"-1", b"3000000000", b"9999999999", None)
"""A level; not a number, with a newline, signed, beyond klog's int32, beyond uint32; a GET."""


def asked(port: int) -> list[tuple[int, bytes]]:
    return [(status, body) for status, _, body in (fetch(port, VERBOSITY, put=ask) for ask in ASKS)]


def test_verbosity_is_set_at_run_time_as_with_kube_scheduler(apiserver: ControlPlane, tmp_path: Path) -> None:
    name = f"flags-{uuid.uuid4().hex[:6]}"
    theirs_port = free_port()
    go = start_kube_scheduler(apiserver, scheduler_config(name), theirs_port, VERBOSITY)
    try:
        poll(lambda: served(theirs_port), 60, "kube-scheduler's secure port")
        theirs = asked(theirs_port)
    finally:
        go.stop()
    port = free_port()
    levels = {n: logging.getLogger(n).level for n in ("", "urllib3", "kubernetes")}
    try:
        set_verbosity(0)
        with scheduler_running(ours_config(apiserver, name), tmp_path, serving(port, VERBOSITY)):
            mine = asked(port)
            assert logging.getLogger().level == V(3)
    finally:
        for n, level in levels.items():
            logging.getLogger(n).setLevel(level)
    assert mine == theirs
    assert theirs[0] == (200, b"successfully set klog.logging.verbosity to 3\n")
    assert [status for status, _ in theirs[1:]] == [400, 400, 400, 400, 400, 406]
