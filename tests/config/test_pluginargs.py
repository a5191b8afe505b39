"""Plugin args: kube-scheduler's defaults and validation, and DynamicArgs."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config import ConfigError
from scheduler.config.pluginargs import (
    DefaultPreemptionArgs,
    DynamicArgs,
    DynamicResourcesArgs,
    InterPodAffinityArgs,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    PodTopologySpreadArgs,
    ResourceSpec,
    VolumeBindingArgs,
    decode_args,
)
from tests.config.util import load

PROME = "http://prometheus:9090"


def args(plugin: str, raw: dict[str, Any] | None) -> Any:
    return decode_args(plugin, raw, "args")


def bad(plugin: str, raw: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        args(plugin, raw)
    return info.value


def test_defaults_of_the_default_profile() -> None:
    (p,) = load("").profiles
    fit = p.args_for("NodeResourcesFit")
    assert fit.scoring_strategy.type == "LeastAllocated"
    assert fit.scoring_strategy.resources == (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
    assert (fit.ignored_resources, fit.ignored_resource_groups) == ((), ())
    assert p.args_for("NodeResourcesBalancedAllocation").resources == (
        ResourceSpec("cpu", 1),
        ResourceSpec("memory", 1),
    )
    assert p.args_for("InterPodAffinity") == InterPodAffinityArgs(1, False)
    assert p.args_for("PodTopologySpread") == PodTopologySpreadArgs((), "System")
    assert p.args_for("NodeAffinity") == NodeAffinityArgs(None)
    assert p.args_for("VolumeBinding") == VolumeBindingArgs(600)
    assert [(s.utilization, s.score) for s in VolumeBindingArgs().shape] == [(0, 10), (100, 0)]
    assert p.args_for("DefaultPreemption") == DefaultPreemptionArgs(10, 100)
    assert p.args_for("DynamicResources") == DynamicResourcesArgs(10.0, 600.0)
    assert p.args_for("NodeName") is None
    assert set(p.args) == {
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
        "InterPodAffinity",
        "PodTopologySpread",
        "NodeAffinity",
        "VolumeBinding",
        "DefaultPreemption",
        "DynamicResources",
    }


def test_given_args_keep_defaults_for_the_rest() -> None:
    (p,) = load(
        "profiles: [{pluginConfig: [{name: InterPodAffinity, args: {hardPodAffinityWeight: 7}}]}]\n"
    ).profiles
    assert p.args_for("InterPodAffinity") == InterPodAffinityArgs(7, False)


def test_scoring_strategy() -> None:
    fit = args(
        "NodeResourcesFit",
        {
            "scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "cpu", "weight": 3}, {"name": "gpu"}],
            }
        },
    )
    assert fit.scoring_strategy.type == "MostAllocated"
    assert fit.scoring_strategy.resources == (ResourceSpec("cpu", 3), ResourceSpec("gpu", 1))
    assert args("NodeResourcesFit", {"scoringStrategy": {"resources": []}}).scoring_strategy.resources == (
        ResourceSpec("cpu", 1),
        ResourceSpec("memory", 1),
    )
    rtcr = args(
        "NodeResourcesFit",
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
                },
            }
        },
    )
    assert [(s.utilization, s.score) for s in rtcr.scoring_strategy.requested_to_capacity_ratio.shape] == [
        (0, 10),
        (100, 0),
    ]


def test_resource_weight_zero_means_one() -> None:
    assert ResourceSpec("cpu", 0).weight == 1


@pytest.mark.parametrize(
    ("plugin", "raw", "path", "expected"),
    [
        (
            "NodeResourcesFit",
            {"scoringStrategy": {"type": "Fancy"}},
            "args.scoringStrategy.type",
            'expected one of "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio", got "Fancy"',
        ),
        (
            "NodeResourcesFit",
            {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 101}]}},
            "args.scoringStrategy.resources[0].weight",
            "expected an integer 1..100, got 101",
        ),
        (
            "NodeResourcesFit",
            {"scoringStrategy": {"resources": [{"name": "cpu"}, {"name": "cpu"}]}},
            "args.scoringStrategy.resources[1].name",
            'expected each resource once, got "cpu" again',
        ),
        (
            "NodeResourcesFit",
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
            "args.scoringStrategy.requestedToCapacityRatio",
            'required when type is "RequestedToCapacityRatio"',
        ),
        (
            "NodeResourcesFit",
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]
                    },
                }
            },
            "args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
            "increasing order",
        ),
        (
            "NodeResourcesFit",
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": [{"utilization": 50, "score": 11}]},
                }
            },
            "args.scoringStrategy.requestedToCapacityRatio.shape[0].score",
            "expected an integer 0..10, got 11",
        ),
        (
            "NodeResourcesFit",
            {"ignoredResourceGroups": ["example.com/x"]},
            "args.ignoredResourceGroups[0]",
            'without "/"',
        ),
        (
            "NodeResourcesBalancedAllocation",
            {"resources": [{"name": "cpu", "weight": 2}]},
            "args.resources[0].weight",
            "expected 1, got 2",
        ),
        (
            "InterPodAffinity",
            {"hardPodAffinityWeight": "x"},
            "args.hardPodAffinityWeight",
            'expected an integer 0..100, got "x"',
        ),
        ("InterPodAffinity", {"hardPodAffinityWeight": 101}, "args.hardPodAffinityWeight", "got 101"),
        (
            "PodTopologySpread",
            {
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
                ]
            },
            "args.defaultConstraints",
            'expected no constraints when defaultingType is "System"',
        ),
        (
            "PodTopologySpread",
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
                ],
            },
            "args.defaultConstraints[0].maxSkew",
            "expected an integer >= 1, got 0",
        ),
        (
            "PodTopologySpread",
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {},
                    }
                ],
            },
            "args.defaultConstraints[0].labelSelector",
            "expected no selector",
        ),
        (
            "PodTopologySpread",
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
                    {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
                ],
            },
            "args.defaultConstraints[1]",
            "expected one constraint per topologyKey and whenUnsatisfiable",
        ),
        (
            "NodeAffinity",
            {"addedAffinity": {"requiredDuringScheduling": {}}},
            "args.addedAffinity.requiredDuringScheduling",
            "unknown field",
        ),
        (
            "VolumeBinding",
            {"bindTimeoutSeconds": -1},
            "args.bindTimeoutSeconds",
            "expected an integer >= 0, got -1",
        ),
        ("VolumeBinding", {"shape": []}, "args.shape", "expected at least one point"),
        (
            "VolumeBinding",
            {"shape": [{"utilization": 50, "score": 5}, {"utilization": 50, "score": 0}]},
            "args.shape[1].utilization",
            "expected utilization values in increasing order",
        ),
        (
            "VolumeBinding",
            {"shape": [{"utilization": 0, "score": 11}]},
            "args.shape[0].score",
            "got 11",
        ),
        (
            "DefaultPreemption",
            {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
            "args.minCandidateNodesAbsolute",
            "expected a value > 0",
        ),
        ("InterPodAffinity", {"kind": "NodeAffinityArgs"}, "args.kind", 'expected "InterPodAffinityArgs"'),
        ("InterPodAffinity", {"apiVersion": "v1"}, "args.apiVersion", "expected one of"),
    ],
)
def test_kube_args_validation(plugin: str, raw: dict[str, Any], path: str, expected: str) -> None:
    e = bad(plugin, raw)
    assert e.path == path
    assert expected in e.message


def test_kube_style_args_with_api_version_and_kind() -> None:
    got = args(
        "InterPodAffinity",
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "InterPodAffinityArgs",
            "hardPodAffinityWeight": 5,
        },
    )
    assert got == InterPodAffinityArgs(5, False)


def test_topology_spread_list_defaulting() -> None:
    got = args(
        "PodTopologySpread",
        {
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 3, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}
            ],
        },
    )
    (c,) = got.default_constraints
    assert (c.max_skew, c.topology_key, c.when_unsatisfiable) == (
        3,
        "kubernetes.io/hostname",
        "DoNotSchedule",
    )


def test_node_affinity_keeps_added_affinity_as_given() -> None:
    raw = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]
        }
    }
    assert args("NodeAffinity", {"addedAffinity": raw}).added_affinity == raw


# --- Dynamic ------------------------------------------------------------------------------------


def test_dynamic_defaults() -> None:
    # crane-scheduler's DynamicArgs has policyConfigPath alone: no promeAddr means its annotations
    assert args("Dynamic", {}) == DynamicArgs(
        prome_addr="",
        metrics_update_period=300.0,
        cluster_name="",
        cluster_label="cluster",
        node_label="instance",
        policy_config_path="/etc/kubernetes/dynamic-scheduler-policy.yaml",
        query_timeout=5.0,
        stale_grace=300.0,
        missing_data_policy="FailOpen",
        metric_scale="auto",
        annotation_fallback=False,
        time_zone="",
    )
    assert args("Dynamic", {"promeAddr": PROME}).prome_addr == PROME


def test_dynamic_all_fields() -> None:
    d = args(
        "Dynamic",
        {
            "promeAddr": "https://prom.example:443/prefix",
            "metricsUpdatePeriodBySeconds": "1m30s",
            "clusterName": "c1",
            "clusterLabel": "k8s_cluster",
            "nodeLabel": "node",
            "policyConfigPath": "/p.yaml",
            "queryTimeout": "2500ms",
            "staleGrace": "0s",
            "missingDataPolicy": "FailClosed",
        },
    )
    assert (d.metrics_update_period, d.query_timeout, d.stale_grace) == (90.0, 2.5, 0.0)
    assert (d.cluster_name, d.cluster_label, d.node_label, d.missing_data_policy) == (
        "c1",
        "k8s_cluster",
        "node",
        "FailClosed",
    )


@pytest.mark.parametrize(("value", "seconds"), [("5m", 300.0), (300, 300.0), (1.5, 1.5), ("1h", 3600.0)])
def test_dynamic_update_period_is_a_duration_or_seconds(value: Any, seconds: float) -> None:
    assert (
        args("Dynamic", {"promeAddr": PROME, "metricsUpdatePeriodBySeconds": value}).metrics_update_period
        == seconds
    )


@pytest.mark.parametrize(
    ("raw", "path", "expected"),
    [
        ({"timeZone": "Mars/Olympus"}, "args.timeZone", "expected an IANA time zone"),
        ({"metricScale": "permille"}, "args.metricScale", 'expected one of "auto", "fraction", "percent"'),
        (
            {"promeAddr": "prometheus:9090"},
            "args.promeAddr",
            'expected an http(s) URL like "http://prometheus:9090"',
        ),
        ({"promeAddr": "ftp://prometheus"}, "args.promeAddr", "http(s) URL"),
        ({"promeAddr": "http://"}, "args.promeAddr", "http(s) URL"),
        (
            {"promeAddr": PROME, "metricsUpdatePeriodBySeconds": "0s"},
            "args.metricsUpdatePeriodBySeconds",
            "expected a duration > 0",
        ),
        (
            {"promeAddr": PROME, "metricsUpdatePeriodBySeconds": -5},
            "args.metricsUpdatePeriodBySeconds",
            "got -5",
        ),
        (
            {"promeAddr": PROME, "metricsUpdatePeriodBySeconds": "5 minutes"},
            "args.metricsUpdatePeriodBySeconds",
            "Go duration",
        ),
        ({"promeAddr": PROME, "queryTimeout": "0s"}, "args.queryTimeout", "expected a duration > 0"),
        ({"promeAddr": PROME, "staleGrace": "-1s"}, "args.staleGrace", "expected a duration >= 0"),
        (
            {"promeAddr": PROME, "nodeLabel": "node-name"},
            "args.nodeLabel",
            "expected a Prometheus label name",
        ),
        ({"promeAddr": PROME, "clusterLabel": ""}, "args.clusterLabel", "expected a Prometheus label name"),
        (
            {"promeAddr": PROME, "missingDataPolicy": "Ignore"},
            "args.missingDataPolicy",
            'expected one of "FailOpen", "FailClosed", got "Ignore"',
        ),
        ({"promeAddr": PROME, "policyConfigPath": ""}, "args.policyConfigPath", "non-empty"),
        ({"promeAddr": PROME, "promAddr": PROME}, "args.promAddr", 'did you mean "promeAddr"'),
    ],
)
def test_dynamic_validation(raw: dict[str, Any], path: str, expected: str) -> None:
    e = bad("Dynamic", raw)
    assert e.path == path
    assert expected in e.message


def test_plugins_without_args_reject_args() -> None:
    assert args("NodeName", None) is None
    assert bad("NodeName", {"x": 1}).message == "expected no args (NodeName takes none)"


def test_balanced_allocation_defaults_when_empty() -> None:
    assert args("NodeResourcesBalancedAllocation", {"resources": []}) == NodeResourcesBalancedAllocationArgs()
    assert args("NodeResourcesFit", None) == NodeResourcesFitArgs()
