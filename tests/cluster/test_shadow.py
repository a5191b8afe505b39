"""Shadow mode against the private API server, beside the real Go kube-scheduler.

Ours runs ``--shadow`` with two profiles on three nodes of this test (a NodeAffinity
pluginConfig keeps both schedulers to them): ``a`` and ``b`` (4 CPUs), ``big`` (8).

- Profile ``P`` is kube-scheduler's too: it binds those pods, one at a time, and ours must
  agree on every one (``same``).
- Profile ``Q`` has no scheduler running: the test binds its pods itself, as another
  scheduler would, to nodes ours would not choose (``different``, with the score plugin or
  the refusing filter), one that fits nowhere (``unschedulable``), and leaves one Pending
  with the condition a scheduler writes when it gives up (``placeable``).

The shadow authenticates as a user of its own, with every right (``system:masters``): the
API server's audit log must show its reads and not one write.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scheduler.app import App
from scheduler.cli import main
from scheduler.cluster.client import api_request
from scheduler.config import load_config
from scheduler.config.options import AuthorizationOptions, Options, ServingOptions
from scheduler.polling import poll
from scheduler.settings import Settings, ShadowSettings
from tests.apiserver import ControlPlane, free_port
from tests.cluster.util import bound_node, create_pod, make_node, only_nodes_labelled
from tests.cluster.webhook import loopback_tls
from tests.webhook import WriteSeen, WriteWebhook

pytestmark = pytest.mark.apiserver

WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def bind(admin: ApiClient, ns: str, name: str, node: str) -> None:
    api_request(
        admin,
        "POST",
        f"/api/v1/namespaces/{ns}/pods/{name}/binding",
        body={"metadata": {"name": name}, "target": {"kind": "Node", "name": node}},
    )


@pytest.fixture
def shadow(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path
) -> Iterator[dict[str, Any]]:
    if not apiserver.kube_scheduler.exists():
        pytest.fail("kube-scheduler binary missing: run make tools first")
    label = f"s{uuid.uuid4().hex[:6]}"
    nodes = {n: f"{label}-{n}" for n in ("a", "b", "big")}
    for n, cpu in (("a", "4"), ("b", "4"), ("big", "8")):
        make_node(admin, nodes[n], {"shadow-test": label}, cpu=cpu, memory="32Gi")
    kept = [only_nodes_labelled("shadow-test", label)]
    p, q = f"p-{label}", f"q-{label}"
    go = apiserver.start_kube_scheduler(
        {"leaderElection": {"leaderElect": False}, "profiles": [{"schedulerName": p, "pluginConfig": kept}]}
    )
    user = f"shadow-{label}"
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        # Asked for, and ignored in shadow mode: a Lease would be a write.
        "leaderElection": {"leaderElect": True, "resourceName": user, "resourceNamespace": namespace},
        "clientConnection": {"kubeconfig": str(apiserver.kubeconfig_for(user, ("system:masters",)))},
        "profiles": [{"schedulerName": p, "pluginConfig": kept}, {"schedulerName": q, "pluginConfig": kept}],
    }
    path = tmp_path / "shadow.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    serving = ServingOptions(
        secure_port=port,
        bind_address="127.0.0.1",
        authorization=AuthorizationOptions(
            always_allow_paths=("/healthz", "/readyz", "/livez", "/shadow/decisions")
        ),
    )
    app = App(
        Options(config=load_config(str(path)), serving=serving, shadow=True),
        Settings(shadow=ShadowSettings(sweep_every=0.2)),
    )
    app.build()
    runner = threading.Thread(target=app.run, name="shadow-under-test", daemon=True)
    runner.start()
    try:
        assert app.scheduling.wait(30), "the shadow did not start"
        yield {"app": app, "nodes": nodes, "p": p, "q": q, "ns": namespace, "user": user, "port": port}
    finally:
        app.stop.set()
        runner.join(20)
        go.stop()
        for n in nodes.values():
            api_request(admin, "DELETE", f"/api/v1/nodes/{n}")


def decisions(app: App, n: int) -> list[dict[str, Any]]:
    judge = app.judge
    assert judge is not None

    def enough() -> list[dict[str, Any]] | None:
        last = judge.report(1000)["last"]
        return last if len(last) >= n else None

    return poll(enough, 30, f"{n} shadow decisions")


def test_shadow_judges_every_bind_and_writes_nothing(apiserver, admin, shadow, capsys):
    app, nodes, ns, p, q = shadow["app"], shadow["nodes"], shadow["ns"], shadow["p"], shadow["q"]

    # kube-scheduler places P's pods; ours agrees on each.
    for i in range(6):
        create_pod(admin, ns, f"web-{i}", p, cpu="500m")
        bound_node(admin, ns, f"web-{i}")
    got = decisions(app, 6)
    assert [d["verdict"] for d in got] == ["same"] * 6, json.dumps(got, indent=1)
    assert all(d["activeNode"] == d["oursNode"] or "tied" in d["reason"] for d in got)

    # Q's pods are bound by "another scheduler": the test.
    create_pod(admin, ns, "worse", q, cpu="1")
    bind(admin, ns, "worse", nodes["a"])
    create_pod(admin, ns, "refused", q, cpu="6")
    bind(admin, ns, "refused", nodes["a"])
    create_pod(admin, ns, "huge", q, cpu="64")
    bind(admin, ns, "huge", nodes["big"])
    got = decisions(app, 9)[6:]
    by_pod = {d["pod"].split("/")[1]: d for d in got}

    worse = by_pod["worse"]
    assert worse["verdict"] == "different"
    assert worse["activeNode"] == nodes["a"] and worse["oursNode"] == nodes["big"]
    assert worse["oursTotal"] > worse["activeTotal"]
    assert worse["plugin"] in ("NodeResourcesFit", "NodeResourcesBalancedAllocation")

    refused = by_pod["refused"]
    assert refused["verdict"] == "different"
    assert refused["plugin"] == "NodeResourcesFit"
    assert refused["reason"] == f"ours refuses {nodes['a']}: Insufficient cpu"
    assert refused["activeTotal"] is None

    huge = by_pod["huge"]
    assert huge["verdict"] == "unschedulable"
    assert huge["oursNode"] == ""
    assert "Insufficient cpu" in huge["reason"]

    # A pod the active scheduler gave up on, that ours would place.
    create_pod(admin, ns, "waiting", q, cpu="1")
    api_request(
        admin,
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/waiting/status",
        body={
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/3 nodes are available: made up.",
                    }
                ]
            }
        },
        content_type="application/strategic-merge-patch+json",
    )
    placeable = decisions(app, 10)[9]
    assert placeable["verdict"] == "placeable"
    # a and big are overcommitted by the pods bound there above: b is the one node that fits.
    assert placeable["pod"] == f"{ns}/waiting" and placeable["oursNode"] == nodes["b"]
    assert "made up" in placeable["reason"]

    # The counters, by profile and verdict.
    registry = app.metrics.registry
    count = lambda prof, v: registry.get_sample_value(  # noqa: E731
        "dynamic_scheduler_shadow_decisions_total", {"profile": prof, "verdict": v}
    )
    assert count(p, "same") == 6 and count(p, "different") == 0
    assert count(q, "different") == 2 and count(q, "unschedulable") == 1 and count(q, "placeable") == 1
    assert registry.get_sample_value("dynamic_scheduler_shadow_decision_cpu_seconds_count") >= 10

    # shadow report, from the shadow's HTTPS port.
    url = f"https://127.0.0.1:{shadow['port']}"
    assert main(["shadow", "report", "--url", url, "--insecure-skip-tls-verify", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["decisions"] == 10
    assert doc["agreement"] == pytest.approx(0.6)
    assert doc["counts"][q] == {"different": 2, "placeable": 1, "unschedulable": 1}
    assert main(["shadow", "report", "--url", url, "--insecure-skip-tls-verify", "--disagreements"]) == 0
    text = capsys.readouterr().out
    assert "10 decisions, agreement 60.0%" in text
    assert f"{ns}/refused" in text and f"{ns}/web-0" not in text

    # The audit log: the shadow's user read (watches: the initial states streamed), and wrote nothing.
    mine = [e for e in apiserver.audit_events() if e.get("user", {}).get("username") == shadow["user"]]
    assert "watch" in {e["verb"] for e in mine}
    writes = [f"{e['verb']} {e['requestURI']}" for e in mine if e["verb"] in WRITES]
    assert writes == []


def test_report_errors_are_one_line(capsys):
    assert main(["shadow", "report", "--url", "https://127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: shadow report: --url: the shadow's certificate is self-signed")
    assert main(["shadow", "report", "--url", "https://127.0.0.1:1", "--insecure-skip-tls-verify"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: shadow report: https://127.0.0.1:1/shadow/decisions?limit=50: ")
    assert err.count("\n") == 1


def test_the_write_webhook_records_and_refuses_its_users_writes_only(apiserver, admin, namespace):
    """The tool of the e2e suite's no-write check sees a write of its user, and only theirs."""
    user = f"someone-{uuid.uuid4().hex[:6]}"
    hook = WriteWebhook(admin, namespace, user, loopback_tls(apiserver))
    body = {"metadata": {"name": "canary"}}
    with hook:
        api_request(admin, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body)
        assert hook.seen == []
        as_user = apiserver.api_client(user, ("system:masters",))
        with pytest.raises(ApiException) as refused:
            api_request(as_user, "DELETE", f"/api/v1/namespaces/{namespace}/configmaps/canary")
        assert refused.value.status == 403 and "recorded and refused" in refused.value.body
        assert hook.seen == [WriteSeen("DELETE", "configmaps", namespace, "canary")]
