"""``dynamic-scheduler explain`` against the private API server.

Three nodes of this test (a NodeAffinity pluginConfig keeps the profile to them; the other
tests' nodes show as rejected by NodeAffinity): ``small`` (1 CPU), ``mid`` (4) and ``big``
(6). A pending pod asking for 2 CPUs fits ``mid`` and ``big`` and scores best on ``big``
(LeastAllocated prefers the emptier node). Counted twice on ``big`` (once bound, once
explained), it would score best on ``mid``: a bound pod must be explained without itself.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scheduler.cli import main
from scheduler.cluster.client import api_request
from scheduler.deploy.templates import labels
from tests.apiserver import ControlPlane
from tests.cluster.util import bound_node, create_pod, kept_to_nodes_config, make_node, scheduler_running

pytestmark = pytest.mark.apiserver

CRANE = Path(__file__).parents[1] / "data" / "crane-scheduler"


@pytest.fixture
def cluster(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path
) -> Iterator[dict[str, Any]]:
    label = f"x{uuid.uuid4().hex[:6]}"
    nodes = {size: f"{label}-{size}" for size in ("small", "mid", "big")}
    for size, cpu in (("small", "1"), ("mid", "4"), ("big", "6")):
        make_node(admin, nodes[size], {"explain-test": label}, cpu=cpu, memory="32Gi")
    profile = f"explain-{label}"
    config = kept_to_nodes_config(apiserver, profile, "explain-test", label)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    try:
        yield {
            "nodes": nodes,
            "profile": profile,
            "config": config,
            "args": ["--config", str(path), "--kubeconfig", str(apiserver.kubeconfig)],
            "namespace": namespace,
            "tmp": tmp_path,
        }
    finally:
        for n in nodes.values():
            api_request(admin, "DELETE", f"/api/v1/nodes/{n}")


def explain_json(capsys: pytest.CaptureFixture[str], target: str, args: list[str]) -> dict[str, Any]:
    code = main(["explain", target, "-o", "json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_pending_pod_names_the_plugin_rejecting_each_node(admin, cluster, capsys):
    ns, nodes = cluster["namespace"], cluster["nodes"]
    create_pod(admin, ns, "web", cluster["profile"], cpu="2")

    doc = explain_json(capsys, f"{ns}/web", cluster["args"])

    by = {n["name"]: n for n in doc["nodes"]}
    small = by[nodes["small"]]
    assert not small["feasible"]
    rejecting = [f for f in small["filters"] if f["code"] != "Success"]
    assert rejecting[0]["plugin"] == "NodeResourcesFit"
    assert rejecting[0]["message"] == "Insufficient cpu"
    for name, n in by.items():
        if name not in nodes.values():  # other tests' nodes: outside the profile's addedAffinity
            assert not n["feasible"]
            assert [f["plugin"] for f in n["filters"] if f["code"] != "Success"][0] == "NodeAffinity"
    assert doc["best"] == [nodes["big"]]
    assert by[nodes["big"]]["total"] > by[nodes["mid"]]["total"]
    assert doc["boundNode"] is None and doc["agrees"] is None
    assert doc["verdict"].startswith(f"ours would choose {nodes['big']} (total ")

    # The text form says the same, for people.
    assert main(["explain", f"{ns}/web", *cluster["args"]]) == 0
    text = capsys.readouterr().out
    assert re.search(rf"^{nodes['small']} +NodeResourcesFit: Insufficient cpu +-$", text, re.M)
    assert re.search(rf"^{nodes['big']} +passed \d+ +{by[nodes['big']]['total']} +best$", text, re.M)
    assert "SCORES (raw -> normalized -> x weight)" in text
    assert f"Verdict: ours would choose {nodes['big']}" in text


def test_a_pod_nowhere_fits(admin, cluster, capsys):
    ns = cluster["namespace"]
    create_pod(admin, ns, "huge", cluster["profile"], cpu="64")
    doc = explain_json(capsys, f"{ns}/huge", cluster["args"])
    assert doc["best"] == []
    assert "3 Insufficient cpu" in doc["message"]
    assert doc["verdict"].startswith("ours finds no node: 0/")


def test_bound_pod_agrees_when_ours_chose_it_and_says_so_when_another_did(admin, cluster, capsys):
    ns, nodes = cluster["namespace"], cluster["nodes"]
    with scheduler_running(cluster["config"], cluster["tmp"]):
        create_pod(admin, ns, "ours", cluster["profile"], cpu="2")
        chosen = bound_node(admin, ns, "ours")
    doc = explain_json(capsys, f"{ns}/ours", cluster["args"])
    assert doc["boundNode"] == chosen == nodes["big"]
    totals = {n["name"]: n["total"] for n in doc["nodes"] if n["feasible"]}
    assert totals[chosen] == max(totals.values())
    assert doc["agrees"] is True
    assert doc["verdict"].startswith(f"ours would choose {chosen} too")
    path = f"/api/v1/namespaces/{ns}/pods/ours"
    api_request(admin, "DELETE", path, query=[("gracePeriodSeconds", "0")])

    # Another "scheduler" binds a pod to mid, where it fits but scores lower.
    create_pod(admin, ns, "theirs", "someone-else", cpu="2")
    api_request(
        admin,
        "POST",
        f"/api/v1/namespaces/{ns}/pods/theirs/binding",
        body={"metadata": {"name": "theirs"}, "target": {"kind": "Node", "name": nodes["mid"]}},
    )
    doc = explain_json(capsys, f"{ns}/theirs", [*cluster["args"], "--profile", cluster["profile"]])
    assert doc["boundNode"] == nodes["mid"]
    assert doc["agrees"] is False
    assert doc["best"] == [nodes["big"]]
    assert "The active scheduler chose differently" in doc["verdict"]
    assert f"over {nodes['mid']} (total " in doc["verdict"]


def test_errors_are_one_line(admin, cluster, capsys):
    ns = cluster["namespace"]
    assert main(["explain", f"{ns}/missing", *cluster["args"]]) == 1
    assert capsys.readouterr().err == f"error: explain: pod {ns}/missing not found\n"

    create_pod(admin, ns, "odd", "nobody", cpu="2")
    assert main(["explain", f"{ns}/odd", *cluster["args"]]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: explain: pod {ns}/odd: spec.schedulerName: 'nobody' is not a profile")
    assert err.endswith("pick one with --profile\n") and err.count("\n") == 1

    assert main(["explain", "a/b/c", *cluster["args"]]) == 1
    assert "expected NAMESPACE/NAME or NAME" in capsys.readouterr().err


def test_without_config_it_runs_the_configuration_of_the_deployed_scheduler(admin, cluster, capsys):
    """After a lease deploy, the scheduler's ConfigMap holds its configuration and policy (under
    the policy file's name): explain runs those, and says so."""
    ns = cluster["namespace"]
    config = copy.deepcopy(cluster["config"])
    profile = config["profiles"][0]
    profile["plugins"] = {
        "filter": {"enabled": [{"name": "Dynamic"}]},
        "score": {"enabled": [{"name": "Dynamic", "weight": 3}]},
    }
    profile["pluginConfig"].append({"name": "Dynamic", "args": {"policyConfigPath": "/etc/ours/policy.yaml"}})
    data = {
        "scheduler-config.yaml": yaml.safe_dump(config),
        "policy.yaml": (CRANE / "policy.yaml").read_text(),
    }
    create_pod(admin, ns, "web", cluster["profile"], cpu="2")
    no_config = ["--kubeconfig", cluster["args"][cluster["args"].index("--kubeconfig") + 1]]
    path = f"/api/v1/namespaces/{ns}/configmaps"

    def config_map(name: str, data: dict[str, str]) -> None:
        api_request(
            admin,
            "POST",
            path,
            body={"metadata": {"name": name, "labels": labels("scheduler")}, "data": data},
        )

    config_map("scheduler-config", data)
    try:
        doc = explain_json(capsys, f"{ns}/web", no_config)
        assert doc["configuration"] == f"ConfigMap {ns}/scheduler-config (the deployed scheduler)"
        for n in doc["nodes"]:
            assert "Dynamic" in [f["plugin"] for f in n["filters"]]
        assert main(["explain", f"{ns}/web", *no_config]) == 0
        assert (
            f"Configuration: ConfigMap {ns}/scheduler-config (the deployed scheduler)\n"
            in capsys.readouterr().out
        )

        # The policy under another name than the configuration reads: a clear error.
        config_map(
            "other",
            {"scheduler-config.yaml": data["scheduler-config.yaml"], "policy.yml": data["policy.yaml"]},
        )
        api_request(admin, "DELETE", f"{path}/scheduler-config")
        assert main(["explain", f"{ns}/web", *no_config]) == 1
        assert capsys.readouterr().err == (
            f"error: explain: ConfigMap {ns}/other: profile {cluster['profile']!r} reads its Dynamic policy from "
            "/etc/ours/policy.yaml, and the ConfigMap has no key 'policy.yaml'\n"
        )

        # Two deployed schedulers: which one is for the user to say.
        config_map("scheduler-config", data)
        assert main(["explain", f"{ns}/web", *no_config]) == 1
        assert capsys.readouterr().err == (
            f"error: explain: 2 ConfigMaps of the deployed scheduler ({ns}/other, {ns}/scheduler-config): "
            "pick the configuration with --config\n"
        )
    finally:
        for name in ("scheduler-config", "other"):
            with contextlib.suppress(ApiException):
                api_request(admin, "DELETE", f"{path}/{name}")
