"""--write-config-to output: v1, defaults spelled out, and loading it gives the same configuration."""

from __future__ import annotations

import pytest
import yaml

from scheduler.config import config_document, default_config, dump_config, load_config, parse_config
from tests.config.util import DYNAMIC_CONFIG, SEED, V1, load

CONFIGS = {
    "defaults": "",
    "several profiles": """\
        leaderElection: {leaderElect: false, leaseDuration: 1m30.5s, renewDeadline: 250ms, retryPeriod: 100ms}
        clientConnection: {kubeconfig: /etc/k.conf, qps: 12.5, burst: 30}
        percentageOfNodesToScore: 40
        podInitialBackoffSeconds: 2
        podMaxBackoffSeconds: 20
        parallelism: 4
        enableProfiling: false
        profiles:
          - schedulerName: a
            percentageOfNodesToScore: 70
            plugins:
              multiPoint:
                enabled: [{name: Dynamic, weight: 3}]
              score:
                disabled: [{name: "*"}]
                enabled: [{name: NodeResourcesFit, weight: 4}]
              filter:
                disabled: [{name: NodePorts}, {name: EBSLimits}]
            pluginConfig:
              - DYNAMIC
              - name: NodeResourcesFit
                args:
                  scoringStrategy:
                    type: RequestedToCapacityRatio
                    resources: [{name: cpu, weight: 2}, {name: example.com/gpu}]
                    requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]}
              - name: PodTopologySpread
                args:
                  defaultingType: List
                  defaultConstraints:
                    - {maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
          - schedulerName: b
            plugins:
              multiPoint: {disabled: [{name: DefaultPreemption}]}
            pluginConfig:
              - name: NodeAffinity
                args:
                  addedAffinity:
                    requiredDuringSchedulingIgnoredDuringExecution:
                      nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [a]}]}]
        """.replace("DYNAMIC", DYNAMIC_CONFIG),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_written_config_loads_back_the_same(name: str) -> None:
    config = load(CONFIGS[name])
    again = parse_config(dump_config(config), policies=False)
    assert again == config
    assert dump_config(again) == dump_config(config)


def test_seed_config_round_trips() -> None:
    config = load_config(SEED, policies=False)
    assert parse_config(dump_config(config), policies=False) == config


def test_output_is_v1_with_go_durations_and_every_default() -> None:
    doc = yaml.safe_load(dump_config(load(CONFIGS["several profiles"])))
    assert (doc["apiVersion"], doc["kind"]) == (
        "kubescheduler.config.k8s.io/v1",
        "KubeSchedulerConfiguration",
    )
    le = doc["leaderElection"]
    assert (le["leaseDuration"], le["renewDeadline"], le["retryPeriod"]) == ("1m30.5s", "250ms", "100ms")
    assert (le["resourceName"], le["resourceNamespace"], le["resourceLock"]) == (
        "kube-scheduler",
        "kube-system",
        "leases",
    )
    assert doc["enableContentionProfiling"] is False
    a, b = doc["profiles"]
    dynamic = next(e["args"] for e in a["pluginConfig"] if e["name"] == "Dynamic")
    assert (dynamic["metricsUpdatePeriodBySeconds"], dynamic["queryTimeout"], dynamic["staleGrace"]) == (
        "5m0s",
        "5s",
        "5m0s",
    )
    assert "EBSLimits" not in str(a["plugins"])  # not implemented: not part of the effective config
    assert "percentageOfNodesToScore" not in b


def test_defaults_document_lists_the_default_plugins_and_args() -> None:
    doc = config_document(default_config())
    (profile,) = doc["profiles"]
    assert profile["schedulerName"] == "default-scheduler"
    names = [p["name"] for p in profile["plugins"]["multiPoint"]["enabled"]]
    assert names[:2] == ["SchedulingGates", "PrioritySort"] and names[-2:] == [
        "DefaultBinder",
        "NodeDeclaredFeatures",
    ]
    assert {e["name"] for e in profile["pluginConfig"]} == set(default_config().profiles[0].args)


def test_header_only_text_is_the_default() -> None:
    assert parse_config(V1) == default_config()
