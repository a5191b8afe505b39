"""Our replicas' own metrics: read from their secure port, and histograms compared between two
scrapes.

/metrics needs a token the API server authorizes for it (kube-scheduler's
rules): :func:`metrics_reader_token` makes a ServiceAccount that may, and
:func:`scheduler_get` asks the replica from its node, with curl.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.nodes import docker_exec
from e2e.schedulers import OUR_NS
from tests.access import grants_of, wait_until_allowed

METRICS_READER = "dynamic-scheduler-e2e:metrics-reader"
"""A ClusterRole, and the ServiceAccount in kube-system bound to it, that may get /metrics."""


def metrics_reader_token(api: client.ApiClient) -> str:
    """A short-lived token of a ServiceAccount that may get /metrics (made when missing), once
    the API server's authorizer answers our secure port's review of it with yes."""
    rbac, core = client.RbacAuthorizationV1Api(api), client.CoreV1Api(api)
    name = METRICS_READER.replace(":", "-")
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": METRICS_READER},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": METRICS_READER},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": METRICS_READER},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "kube-system"}],
    }
    for create, body in (
        (rbac.create_cluster_role, role),
        (rbac.create_cluster_role_binding, binding),
        (lambda b: core.create_namespaced_service_account("kube-system", b), {"metadata": {"name": name}}),
    ):
        try:
            create(body)
        except ApiException as e:
            if e.status != 409:
                raise
    wait_until_allowed(api, grants_of(api, [role, binding]))
    req = core.create_namespaced_service_account_token(
        name, "kube-system", {"spec": {"expirationSeconds": 600}}
    )
    return req.status.token


def scheduler_get(api: client.ApiClient, pod: str, path: str, token: str | None = None) -> tuple[int, str]:
    """(HTTP status, body) of a GET on one of our replicas' secure port (10259), by curl on the
    pod's node: the API server's pod proxy would drop the caller's credentials."""
    p = client.CoreV1Api(api).read_namespaced_pod(pod, OUR_NS)
    auth = ["-H", f"Authorization: Bearer {token}"] if token else []
    url = f"https://{p.status.pod_ip}:10259{path}"
    out = docker_exec(
        p.spec.node_name, "curl", "-sSk", "--max-time", "20", "-w", "\n%{http_code}", *auth, url
    )
    body, _, code = out.stdout.rpartition("\n")
    return int(code), body


def scheduler_metrics(api: client.ApiClient, pod: str) -> str:
    """/metrics of one of our replicas, read with a token that may (see :func:`scheduler_get`)."""
    code, body = scheduler_get(api, pod, "/metrics", metrics_reader_token(api))
    assert code == 200, f"GET /metrics of {pod}: {code} {body[:300]}"
    return body


def histogram(text: str, name: str) -> dict[float, float]:
    """Cumulative bucket counts of a histogram (summed over its labels): upper bound -> count."""
    out: dict[float, float] = {}
    prefix = name + "_bucket{"
    for line in text.splitlines():
        if line.startswith(prefix):
            labels, value = line[len(prefix) :].rsplit("} ", 1)
            le = next(
                part.split("=", 1)[1].strip('"') for part in labels.split(",") if part.startswith("le=")
            )
            bound = float("inf") if le == "+Inf" else float(le)
            out[bound] = out.get(bound, 0.0) + float(value)
    return out


def histogram_quantiles(before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """Observations between two scrapes: their count and the bucket upper bounds of p50 and p99."""
    delta = {le: after.get(le, 0.0) - before.get(le, 0.0) for le in sorted(after)}
    total = delta.get(float("inf"), 0.0)
    out: dict[str, Any] = {"n": int(total)}
    for q, key in ((0.5, "p50_le"), (0.99, "p99_le")):
        if total:
            out[key] = next(le for le, c in delta.items() if c >= q * total)
    return out
