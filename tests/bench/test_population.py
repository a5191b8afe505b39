"""bench.population: the scale benchmark's resident pods are deterministic and shaped like a
cluster's workloads."""

from __future__ import annotations

import collections
import re

import pytest

from bench import kwok
from bench.__main__ import parse_args
from bench.population import APP_REPLICAS, RESIDENT_LABEL, Population

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def test_every_node_gets_per_node_pods_and_each_pod_is_the_same_every_time() -> None:
    pop = Population(nodes=40, per_node=30, namespaces=7)
    pods = [pop.pod(i) for i in range(pop.pods)]
    assert pods == [pop.pod(i) for i in range(pop.pods)]
    per_node = collections.Counter(body["spec"]["nodeName"] for _, body in pods)
    assert set(per_node) == {kwok.node_name(n) for n in range(40)}
    assert set(per_node.values()) == {30}
    keys = {(ns, body["metadata"]["name"]) for ns, body in pods}
    assert len(keys) == pop.pods  # no two pods share a name in a namespace
    assert {ns for ns, _ in pods} == set(pop.namespace_names()) and len(pop.namespace_names()) == 7
    for ns, body in pods:
        assert DNS_LABEL.match(ns) and DNS_LABEL.match(body["metadata"]["name"])
        assert kwok.TOLERATION in body["spec"]["tolerations"]
        assert body["metadata"]["labels"][RESIDENT_LABEL[0]] == RESIDENT_LABEL[1]


def test_an_apps_replicas_share_labels_and_go_to_consecutive_nodes() -> None:
    pop = Population(nodes=100)
    app = [pop.pod(i) for i in range(APP_REPLICAS, 2 * APP_REPLICAS)]
    assert len({body["metadata"]["labels"]["app"] for _, body in app}) == 1
    assert len({ns for ns, _ in app}) == 1
    assert [body["spec"]["nodeName"] for _, body in app] == [
        kwok.node_name(i) for i in range(APP_REPLICAS, 2 * APP_REPLICAS)
    ]


def test_the_shapes_vary_by_app_as_real_workloads_do() -> None:
    pop = Population(nodes=100, per_node=30)
    first = [pop.pod(a * APP_REPLICAS)[1]["spec"] for a in range(pop.apps)]

    def share(pred) -> float:
        return sum(1 for s in first if pred(s)) / len(first)

    assert share(lambda s: "podAntiAffinity" in s.get("affinity", {})) == 1 / 3
    assert share(lambda s: "nodeAffinity" in s.get("affinity", {})) == 1 / 10
    assert share(lambda s: "topologySpreadConstraints" in s) == 1 / 4
    assert share(lambda s: len(s["containers"]) == 2) == 1 / 2
    assert share(lambda s: len(s["tolerations"]) == 2) == 1 / 5
    assert all(s["containers"][0]["resources"]["requests"]["cpu"] for s in first)


def test_the_bench_refuses_resident_pods_with_the_preemption_workload(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["--kubeconfig", "/dev/null", "--kwok", "/bin/true", "--kwok-stages", "/dev/null"]
    args += ["--kube-scheduler", "/bin/true", "--rawbinder", "/bin/true"]
    args += ["--resident-per-node", "30"]
    assert parse_args([*args, "--workloads", "basic"]).resident_per_node == 30
    with pytest.raises(SystemExit):
        parse_args([*args, "--workloads", "basic,preemption"])
    assert "not with the preemption workload" in capsys.readouterr().err
