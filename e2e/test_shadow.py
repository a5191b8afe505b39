"""Shadow mode beside kube-scheduler, and ``explain``, on the kind cluster.

kube-scheduler stays the cluster's scheduler; ``dynamic-scheduler deploy shadow`` runs ours
beside it. Everyday workloads (a Deployment, required anti-affinity, a topology spread, a
pod tolerating the control-plane taint, a CPU burner, a pod that fits nowhere) are created
and kube-scheduler binds them; the shadow must have judged every bind, each disagreement
explained (the plugin that made the difference, or the filter that refuses the node), and
``shadow report`` must give the agreement rate, through the API server's pod proxy.

That no write of ours reaches the API server is checked from the API server's side: a
validating webhook on this machine is called for every write the shadow's ServiceAccount
sends, on any resource, and records it. For the duration, the ServiceAccount is also bound
to cluster-admin, so that no write of its could stop at RBAC before the webhook sees it; a
write made as that ServiceAccount (impersonated) first shows the webhook does see them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.deploying import cli, deploy, restore
from e2e.measure import record
from e2e.nodes import CONTROL_PLANE_LABEL, control_plane
from e2e.pods import is_bound, list_pods_raw, pod_body, wait_bound
from e2e.webhook import kind_write_webhook
from scheduler.cluster.client import api_request
from scheduler.polling import poll
from tests.access import grants_of, wait_until_allowed
from tests.webhook import WriteSeen, WriteWebhook

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

SHADOW_NS = "crane-system"
SHADOW_SA = f"system:serviceaccount:{SHADOW_NS}:dynamic-scheduler-shadow"
WIDENED = "e2e-shadow-cluster-admin"
TOLERATE_CONTROL_PLANE = [{"key": CONTROL_PLANE_LABEL, "operator": "Exists", "effect": "NoSchedule"}]


def rbac(api: client.ApiClient) -> client.RbacAuthorizationV1Api:
    return client.RbacAuthorizationV1Api(api)


@pytest.fixture(scope="module")
def probe_namespace(core: client.CoreV1Api) -> Iterator[str]:
    name = "e2e-shadow-webhook-probe"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture(scope="module")
def writes(
    api: client.ApiClient, core: client.CoreV1Api, kind_cluster: Any, probe_namespace: str
) -> Iterator[WriteWebhook]:
    """The webhook recording the shadow's writes, the shadow's rights widened, the shadow deployed."""
    os.environ.setdefault("KUBECONFIG", str(kind_cluster.kubeconfig_path))
    hook = kind_write_webhook(api, probe_namespace, control_plane(core).metadata.name, SHADOW_SA)
    with hook:
        # The webhook sees a write made as the ServiceAccount (before it exists: RBAC lets
        # cluster-admin's subjects through whether or not their account exists).
        widened = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": WIDENED},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "dynamic-scheduler-shadow", "namespace": SHADOW_NS}
            ],
        }
        rbac(api).create_cluster_role_binding(widened)
        try:
            wait_until_allowed(api, grants_of(api, [widened]))
            canary_write(api, probe_namespace)
            assert hook.seen == [WriteSeen("CREATE", "configmaps", probe_namespace, "canary")], hook.seen
            hook.seen.clear()
            res = deploy("shadow")
            assert "is judging default-scheduler's binds" in res.stdout, res.stdout
            yield hook
        finally:
            restore("shadow")
            rbac(api).delete_cluster_role_binding(WIDENED)


def canary_write(api: client.ApiClient, namespace: str) -> None:
    """A ConfigMap created as the shadow's ServiceAccount (impersonated): refused by the webhook."""
    as_shadow = client.ApiClient(api.configuration)
    as_shadow.set_default_header("Impersonate-User", SHADOW_SA)
    try:
        api_request(
            as_shadow,
            "POST",
            f"/api/v1/namespaces/{namespace}/configmaps",
            query=[("dryRun", "All")],
            body={"metadata": {"name": "canary"}},
        )
    except ApiException as e:
        assert e.status == 403 and "recorded and refused" in (e.body or ""), e.body
    else:
        raise AssertionError("the write webhook let a write of the shadow through")
    finally:
        as_shadow.close()


def deployment(name: str, image: str, replicas: int, **spec: Any) -> dict[str, Any]:
    pod = pod_body(name, image, labels={"app": name})
    pod["spec"].update(spec)
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": pod["metadata"], "spec": pod["spec"]},
        },
    }


def everyday_workloads(api: client.ApiClient, core: client.CoreV1Api, ns: str, image: str) -> None:
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment(ns, deployment("web", image, 6))
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "anti"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    apps.create_namespaced_deployment(ns, deployment("anti", image, 2, affinity=anti))
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "spread"}},
            # The tainted control-plane node is no domain: 2 and 2 on the workers.
            "nodeTaintsPolicy": "Honor",
        }
    ]
    apps.create_namespaced_deployment(ns, deployment("spread", image, 4, topologySpreadConstraints=spread))
    core.create_namespaced_pod(ns, pod_body("tolerant", image, tolerations=TOLERATE_CONTROL_PLANE))
    burn = ["python3", "-c", "while True: pass"]
    core.create_namespaced_pod(
        ns, pod_body("burner", image, cpu="200m", limits={"cpu": "500m"}, command=burn)
    )
    core.create_namespaced_pod(ns, pod_body("nowhere", image, cpu="1000"))


def report(*args: str) -> dict[str, Any]:
    return json.loads(cli("shadow", "report", "-n", SHADOW_NS, "-o", "json", *args).stdout)


def test_the_shadow_judges_every_bind_of_kube_scheduler_and_writes_nothing(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, test_image: str, writes: WriteWebhook
) -> None:
    everyday_workloads(api, core, namespace, test_image)

    def all_bound_but_one() -> list[dict[str, Any]] | None:
        pods = [p for p in list_pods_raw(core, namespace) if not p["metadata"].get("deletionTimestamp")]
        bound = [p for p in pods if is_bound(p)]
        return bound if len(pods) == 15 and len(bound) == 14 else None

    bound = poll(
        all_bound_but_one,
        180,
        "14 of 15 pods bound by kube-scheduler",
        interval=0.5,
        retry_on=(ApiException,),
    )
    keys = {f"{namespace}/{p['metadata']['name']}" for p in bound}
    decided: dict[str, dict[str, Any]] = {}

    def every_bind_judged() -> bool:
        decided.update(
            {d["pod"]: d for d in report("--limit", "1000")["last"] if d["pod"].startswith(f"{namespace}/")}
        )
        return keys <= set(decided)

    poll(every_bind_judged, 60, "a shadow decision for each bound pod", interval=2)
    assert set(decided) == keys, sorted(set(decided) - keys)  # nothing judged that was not bound
    where = {f"{namespace}/{p['metadata']['name']}": p["spec"]["nodeName"] for p in bound}
    for key, d in decided.items():
        assert d["activeNode"] == where[key], d
        assert d["verdict"] in ("same", "different", "unschedulable"), d
        assert d["reason"], d
        if d["verdict"] == "different":
            # Explained: the plugin with the lead, or the filter that refuses kube-scheduler's node.
            assert d["plugin"] and d["oursNode"] and d["oursNode"] != d["activeNode"], d
    same = sum(d["verdict"] == "same" for d in decided.values())
    rate = same / len(decided)
    record(
        "shadow",
        "agreement with kube-scheduler",
        rate,
        pods=len(decided),
        disagreements=[
            f"{k.split('/')[1]}: {d['verdict']} {d['activeNode']} -> {d['oursNode'] or '-'} ({d['plugin']}: {d['reason']})"
            for k, d in sorted(decided.items())
            if d["verdict"] != "same"
        ],
    )
    cpu = [d["cpuSeconds"] for d in decided.values()]
    record("shadow", "CPU per decision (ms, max)", max(cpu) * 1000, median=sorted(cpu)[len(cpu) // 2] * 1000)

    text = cli("shadow", "report", "-n", SHADOW_NS).stdout
    assert "agreement" in text and f"{namespace}/web-" in text, text

    # Not one write of the shadow reached the API server (it ran with every right meanwhile).
    assert writes.seen == [], writes.seen


def test_explain_says_why_kube_schedulers_pods_went_where_they_did(
    core: client.CoreV1Api, namespace: str, test_image: str, writes: WriteWebhook
) -> None:
    core.create_namespaced_pod(namespace, pod_body("one", test_image, cpu="100m"))
    node = wait_bound(core, namespace, "one", 60)["spec"]["nodeName"]
    doc = json.loads(cli("explain", f"{namespace}/one", "-o", "json").stdout)
    assert doc["boundNode"] == node
    # no --config: the profile the shadow runs, from its ConfigMap
    assert doc["configuration"] == f"ConfigMap {SHADOW_NS}/shadow-config (the deployed shadow)"
    totals = {n["name"]: n["total"] for n in doc["nodes"] if n["feasible"]}
    if doc["agrees"]:
        assert totals[node] == max(totals.values()), totals
    else:
        assert "The active scheduler chose differently" in doc["verdict"], doc["verdict"]
    plane = control_plane(core).metadata.name
    cp = next(n for n in doc["nodes"] if n["name"] == plane)
    assert not cp["feasible"]
    assert [f["plugin"] for f in cp["filters"] if f["code"] != "Success"][0] == "TaintToleration"

    # A pending pod: each node's rejecting plugin.
    core.create_namespaced_pod(namespace, pod_body("big", test_image, cpu="1000"))
    doc = json.loads(cli("explain", f"{namespace}/big", "-o", "json").stdout)
    assert doc["best"] == [] and doc["boundNode"] is None
    for n in doc["nodes"]:
        rejecting = [f["plugin"] for f in n["filters"] if f["code"] != "Success"]
        assert rejecting[0] == ("TaintToleration" if n["name"] == plane else "NodeResourcesFit"), n
    text = cli("explain", f"{namespace}/one").stdout
    assert "Verdict: ours would" in text and "SCORES" in text, text
    assert writes.seen == []
