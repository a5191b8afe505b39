"""``dynamic-scheduler deploy prometheus``: the source of node usage for the Dynamic plugin.

With ``discovery: static`` and no ``nodes`` in the values, each node's kubelet
address is found first (its InternalIP and kubelet port, as
kubernetes_sd_configs would pick them); then apply, wait for the rollout, and
wait until a query for ``cpu_usage_avg_5m`` (through the API server's service
proxy) returns one series per node.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from typing import Any

from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException

from scheduler.deploy.cmdline import DeployError, api_message, out
from scheduler.deploy.kube import Cluster, Need
from scheduler.deploy.templates import render
from scheduler.deploy.values import LoadedValues, override
from scheduler.deploy.waiting import poll, wait_rollout
from scheduler.logs import kv

logger = logging.getLogger(__name__)

KUBELET_PORT = 10250
"""The kubelet's default port, for a node whose status does not name its own yet."""
ADDRESS_ORDER = ("InternalIP", "InternalDNS", "ExternalIP", "ExternalDNS", "Hostname")
"""The order in which kubernetes_sd_configs (role node) picks a node's address."""


def kubelet_address(node: Any) -> str:
    """``host:port`` of a node's kubelet, as kubernetes_sd_configs would scrape it: the first
    address by ADDRESS_ORDER, the port of ``status.daemonEndpoints.kubeletEndpoint``."""
    status = node.status
    addresses: dict[str, str] = {}
    for a in (status.addresses if status else None) or []:
        addresses.setdefault(a.type, a.address)
    host = next((addresses[t] for t in ADDRESS_ORDER if addresses.get(t)), None)
    if host is None:
        raise DeployError(
            f"node {node.metadata.name} has no address in its status ({', '.join(ADDRESS_ORDER)}): "
            f"Prometheus cannot scrape its kubelet"
        )
    endpoint = status.daemon_endpoints.kubelet_endpoint if status.daemon_endpoints else None
    port = (endpoint.port if endpoint else None) or KUBELET_PORT
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def list_nodes(api: ApiClient) -> list[Any]:
    return sorted(CoreV1Api(api).list_node(_request_timeout=30).items, key=lambda n: n.metadata.name)


def prometheus_get(
    api: ApiClient, namespace: str, path: str, params: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    """``GET`` of Prometheus's HTTP API (``/api/v1/...``) through the API server's service proxy."""
    resp = api.call_api(
        f"/api/v1/namespaces/{namespace}/services/prometheus:9090/proxy{path}",
        "GET",
        query_params=params or [],
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
        _request_timeout=30,
    )
    try:
        return dict(json.loads(resp.data))
    finally:
        resp.release_conn()


def query(api: ApiClient, namespace: str, promql: str) -> list[dict[str, Any]]:
    """An instant query through the API server's service proxy; the result vector."""
    body = prometheus_get(api, namespace, "/api/v1/query", [("query", promql)])
    if body.get("status") != "success":
        raise DeployError(f"Prometheus answered {body.get('errorType')}: {body.get('error')}")
    return body["data"]["result"]


def deploy_prometheus(api: ApiClient, values: LoadedValues, root: Any, ns: argparse.Namespace) -> int:
    vns = values.data["namespace"]
    cluster = Cluster(api)
    cluster.require([Need("list", "nodes")], "deploy prometheus")
    listed = list_nodes(api)
    nodes = [n.metadata.name for n in listed]
    prom = values.data["prometheus"]
    if prom["discovery"] == "static" and not prom["nodes"]:
        kubelets = {n.metadata.name: kubelet_address(n) for n in listed}
        values = override(values, "prometheus.nodes", kubelets, "the cluster's nodes")
        logger.info(
            "Static discovery of the cluster's kubelets",
            extra=kv(kubelets=",".join(f"{k}={a}" for k, a in kubelets.items())),
        )
    rendered = render("prometheus", values, root)
    needs = [
        Need("get", "deployments", "apps", vns, "prometheus"),
        Need("list", "pods", "", vns),
        Need("get", "services", "", vns, subresource="proxy"),
    ]
    start = time.monotonic()
    cluster.apply(rendered.objects, needs=needs, doing="deploy prometheus", namespace_wait=ns.timeout)
    wait_rollout(api, vns, "prometheus", ns.timeout)
    metric = "cpu_usage_avg_5m"

    def check_series() -> tuple[bool, str]:
        try:
            result = query(api, vns, metric)
        except ApiException as e:
            if e.status in (404, 503):  # the proxy's answer while the endpoint is not up
                return False, f"no answer yet ({api_message(e)})"
            raise
        got = {r["metric"].get("node"): r["value"][1] for r in result}
        have = [n for n in nodes if n in got]
        status = f"{len(have)}/{len(nodes)} nodes" + (
            ": " + ", ".join(f"{n}={float(got[n]):.3f}" for n in have) if have else ""
        )
        return len(have) == len(nodes), status

    poll(f"{metric} for every node", check_series, ns.timeout, interval=2.0)
    out(
        f"prometheus is ready: {metric} has a series for each of the {len(nodes)} nodes, "
        f"{time.monotonic() - start:.1f}s after the apply"
    )
    return 0
