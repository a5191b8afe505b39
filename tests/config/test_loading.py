"""Loading KubeSchedulerConfiguration files: defaults, versions, the seed file, and every kind of error."""

from __future__ import annotations

import logging
import os
import textwrap
from pathlib import Path

import pytest

from scheduler.config import ConfigError, default_config, load_config, parse_config
from scheduler.config.pluginargs import DynamicArgs
from tests.config.util import SEED, error, load

GROUP = "kubescheduler.config.k8s.io"


def test_kube_scheduler_defaults() -> None:
    c = default_config()
    le = c.leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period) == (True, 15.0, 10.0, 2.0)
    assert (le.resource_lock, le.resource_name, le.resource_namespace) == (
        "leases",
        "kube-scheduler",
        "kube-system",
    )
    cc = c.client_connection
    assert (cc.qps, cc.burst, cc.kubeconfig) == (50.0, 100, "")
    assert cc.content_type == "application/vnd.kubernetes.protobuf"
    assert (c.pod_initial_backoff_seconds, c.pod_max_backoff_seconds) == (1, 10)
    assert (c.parallelism, c.percentage_of_nodes_to_score) == (16, 0)
    assert (c.enable_profiling, c.enable_contention_profiling) == (True, True)
    assert c.scheduler_names() == ("default-scheduler",)


def test_an_empty_body_is_the_default_configuration() -> None:
    assert load("") == default_config()


def test_contention_profiling_follows_profiling_unless_set() -> None:
    assert load("enableProfiling: false\n").enable_contention_profiling is False
    assert (
        load("enableProfiling: false\nenableContentionProfiling: true\n").enable_contention_profiling is True
    )


def test_seed_config_loads_unchanged() -> None:
    c = load_config(SEED, policies=False)
    assert c.source == str(SEED)
    assert c.leader_election.leader_elect is True
    assert (c.leader_election.resource_name, c.leader_election.resource_namespace) == (
        "kube-scheduler",
        "kube-system",
    )
    (profile,) = c.profiles
    assert profile.scheduler_name == "default-scheduler"
    assert profile.plugins.score[-1] == "Dynamic"
    assert profile.score_weights["Dynamic"] == 3
    assert profile.plugins.post_bind == ("Dynamic",)
    assert "Dynamic" not in profile.plugins.filter  # the seed enables it at score and postBind only
    assert profile.args_for("Dynamic") == DynamicArgs(
        prome_addr="http://prometheus.crane-system.svc.cluster.local:9090",
        metrics_update_period=300.0,
        cluster_name="cs-test-2",
        policy_config_path="/etc/kubernetes/policy.yaml",
    )


def test_each_api_version_keeps_its_default_plugins() -> None:
    body = SEED.read_text(encoding="utf-8").split("\n", 1)[1]  # without the apiVersion line
    v1, v1beta3, v1beta2 = (
        parse_config(f"apiVersion: {GROUP}/{v}\n{body}", policies=False).profiles[0]
        for v in ("v1", "v1beta3", "v1beta2")
    )
    assert v1 == v1beta3
    # kube-scheduler's weights (apis/config/*/default_plugins.go); Dynamic's from the file
    assert dict(v1.scores()) == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 1,
        "VolumeBinding": 1,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "DynamicResources": 2,
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
        "Dynamic": 3,
    }
    assert dict(v1beta2.scores()) == {
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
        "InterPodAffinity": 1,
        "NodeResourcesFit": 1,
        "NodeAffinity": 1,
        "PodTopologySpread": 2,
        "TaintToleration": 1,
        "Dynamic": 3,
    }
    # v1beta2 (last served by 1.25) had its own filter list: the old order, no NodeDeclaredFeatures
    assert v1beta2.plugins.filter == (
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
    )
    assert v1.plugins.filter[:2] == ("NodeName", "NodeUnschedulable")
    assert v1.plugins.filter[-1] == "NodeDeclaredFeatures"
    assert v1beta2.plugins.post_filter == ("DefaultPreemption",)
    assert "SchedulingGates" not in v1beta2.plugins.pre_enqueue  # v1beta2 had no PreEnqueue


def test_v1beta2_insecure_addresses_are_accepted_only_empty() -> None:
    header = f"apiVersion: {GROUP}/v1beta2\nkind: KubeSchedulerConfiguration\n"
    assert load('healthzBindAddress: ""\nmetricsBindAddress: ""\n', header) == load("", header)
    assert error("healthzBindAddress: 0.0.0.0:10251\n", header).path == "healthzBindAddress"
    assert error('healthzBindAddress: ""\n').path == "healthzBindAddress"  # not a v1 field


def test_dynamic_policy_is_loaded_when_dynamic_is_enabled(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        textwrap.dedent("""\
        apiVersion: scheduler.policy.crane.io/v1alpha1
        kind: DynamicSchedulerPolicy
        spec:
          syncPolicy: [{name: cpu_usage_avg_5m, period: 3m}]
          predicate: [{name: cpu_usage_avg_5m, maxLimitPecent: 0.65}]
          priority: [{name: cpu_usage_avg_5m, weight: 0.2}]
          hotValue: [{timeRange: 5m, count: 5}]
        """)
    )
    text = SEED.read_text(encoding="utf-8").replace("/etc/kubernetes/policy.yaml", str(policy))
    c = parse_config(text, file="seed.yaml")
    assert list(c.dynamic_policies) == [str(policy)]


def test_a_bad_dynamic_policy_fails_the_load(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: scheduler.policy.crane.io/v1alpha1\nkind: Nope\n")
    text = SEED.read_text(encoding="utf-8").replace("/etc/kubernetes/policy.yaml", str(policy))
    with pytest.raises(ConfigError) as info:
        parse_config(text, file="seed.yaml")
    assert info.value.file == str(policy)


def test_no_policy_is_read_without_dynamic(tmp_path: Path) -> None:
    assert parse_config(f"apiVersion: {GROUP}/v1\nkind: KubeSchedulerConfiguration\n").dynamic_policies == {}


# --- file and YAML errors -------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.yaml")
    assert info.value.file == str(tmp_path / "nope.yaml")
    assert "No such file" in info.value.message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path: Path) -> None:
    f = tmp_path / "sched.yaml"
    f.write_text("kind: KubeSchedulerConfiguration\n")
    f.chmod(0)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(f)


def test_a_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_config(tmp_path)


def test_invalid_yaml_names_line_and_column() -> None:
    e = error("profiles:\n  - schedulerName: a\n   plugins: {}\n")
    assert e.path == "line 5, column 4"  # the header is lines 1-2
    assert e.message.startswith("invalid YAML: while parsing a block collection, expected <block end>")
    e = error("parallelism: 4\nleaderElection: {leaderElect: true\n")
    assert e.path == "line 5, column 1"
    assert (
        e.message == "invalid YAML: while parsing a flow mapping, expected ',' or '}', but got '<stream end>'"
    )


def test_duplicate_keys_are_rejected() -> None:
    e = error("parallelism: 4\nparallelism: 8\n")
    assert e.path == "line 4, column 1"
    assert 'duplicate key "parallelism"' in e.message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a KubeSchedulerConfiguration document, got an empty file"),
        ("- a\n", "expected a KubeSchedulerConfiguration mapping, got a list"),
        ("a: 1\n---\nb: 2\n", "expected one YAML document, got 2"),
    ],
)
def test_not_one_mapping(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, file="f.yaml")
    assert info.value.message == message


@pytest.mark.parametrize(
    ("header", "path"),
    [
        ("kind: KubeSchedulerConfiguration\n", "apiVersion"),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1alpha1\nkind: KubeSchedulerConfiguration\n",
            "apiVersion",
        ),
        ("apiVersion: kubescheduler.config.k8s.io/v1\n", "kind"),
        ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeProxyConfiguration\n", "kind"),
    ],
)
def test_wrong_api_version_or_kind(header: str, path: str) -> None:
    assert error("", header).path == path


# --- field errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "path", "expected"),
    [
        ("parallelizm: 4\n", "parallelizm", 'unknown field (did you mean "parallelism"?)'),
        (
            "leaderElection: {leaderElect: true, leaseDurationn: 15s}\n",
            "leaderElection.leaseDurationn",
            "unknown field",
        ),
        ("profiles: [{schedulerName: a, plugin: {}}]\n", "profiles[0].plugin", "unknown field"),
        ("parallelism: four\n", "parallelism", 'expected an integer >= 1, got "four"'),
        ("parallelism: 0\n", "parallelism", "expected an integer >= 1, got 0"),
        (
            "percentageOfNodesToScore: 101\n",
            "percentageOfNodesToScore",
            "expected an integer 0..100, got 101",
        ),
        (
            "profiles: [{schedulerName: a, percentageOfNodesToScore: -1}]\n",
            "profiles[0].percentageOfNodesToScore",
            "expected an integer 0..100, got -1",
        ),
        ("podInitialBackoffSeconds: 0\n", "podInitialBackoffSeconds", "expected an integer >= 1, got 0"),
        (
            "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 4\n",
            "podMaxBackoffSeconds",
            "expected an integer >= podInitialBackoffSeconds (5), got 4",
        ),
        (
            "leaderElection: {leaseDuration: 15}\n",
            "leaderElection.leaseDuration",
            'expected a Go duration like "15s"',
        ),
        ("leaderElection: {leaseDuration: 15x}\n", "leaderElection.leaseDuration", 'unknown unit "x"'),
        (
            "leaderElection: {retryPeriod: 0s}\n",
            "leaderElection.retryPeriod",
            "expected a Go duration greater than 0",
        ),
        (
            "leaderElection: {leaseDuration: 10s}\n",
            "leaderElection.leaseDuration",
            "expected more than renewDeadline",
        ),
        (
            "leaderElection: {renewDeadline: 2s}\n",
            "leaderElection.renewDeadline",
            "expected more than 1.2 x retryPeriod",
        ),
        ("leaderElection: {resourceLock: endpoints}\n", "leaderElection.resourceLock", 'expected "leases"'),
        (
            "leaderElection: {resourceLock: configmapsleases}\n",
            "leaderElection.resourceLock",
            'expected "leases"',
        ),
        (
            "leaderElection: {resourceName: ''}\n",
            "leaderElection.resourceName",
            "expected a non-empty string",
        ),
        ("clientConnection: {qps: 0}\n", "clientConnection.qps", "expected a number > 0, got 0"),
        ("clientConnection: {burst: 1.5}\n", "clientConnection.burst", "expected an integer >= 1, got 1.5"),
        ("clientConnection: {kubeconfig: 3}\n", "clientConnection.kubeconfig", "expected a string, got 3"),
        ("enableProfiling: maybe\n", "enableProfiling", 'expected a boolean (true or false), got "maybe"'),
        ("extenders: [{urlPrefix: 'http://x'}]\n", "extenders", "not supported"),
        (
            "profiles: [{schedulerName: a}, {schedulerName: a}]\n",
            "profiles[1].schedulerName",
            'expected a unique name, got "a" (also profiles[0])',
        ),
        (
            "profiles: [{schedulerName: a}, {}]\n",
            "profiles[1].schedulerName",
            "required when there are several profiles",
        ),
        ("profiles: [{schedulerName: ''}]\n", "profiles[0].schedulerName", "expected a non-empty string"),
    ],
)
def test_field_errors(body: str, path: str, expected: str) -> None:
    e = error(body)
    assert e.path == path
    assert expected in e.message


def test_error_text_is_file_path_expectation() -> None:
    e = error(
        "profiles: [{schedulerName: a, pluginConfig: [{name: InterPodAffinity, args: "
        "{hardPodAffinityWeight: x}}]}]\n"
    )
    assert str(e) == (
        "sched.yaml: profiles[0].pluginConfig[0].args.hardPodAffinityWeight: "
        'expected an integer 0..100, got "x"'
    )


def test_leader_election_durations_need_not_be_consistent_when_off() -> None:
    c = load("leaderElection: {leaderElect: false, leaseDuration: 1s}\n")
    assert c.leader_election.lease_duration == 1.0


def test_profile_percentage_overrides_the_global_one() -> None:
    c = load(
        "percentageOfNodesToScore: 30\nprofiles: [{schedulerName: a, percentageOfNodesToScore: 50}, "
        "{schedulerName: b}]\n"
    )
    assert [c.percentage_for(p) for p in c.profiles] == [50, 30]


def test_plugin_config_for_a_plugin_the_profile_does_not_enable() -> None:
    e = error(
        "profiles: [{schedulerName: a, pluginConfig: [{name: Dynamic, args: {promeAddr: http://p}}]}]\n"
    )
    assert e.path == "profiles[0].pluginConfig[0].name"
    assert "expected a plugin this profile enables" in e.message


def test_plugin_config_for_an_unknown_plugin() -> None:
    e = error("profiles: [{schedulerName: a, pluginConfig: [{name: Dynamo}]}]\n")
    assert e.path == "profiles[0].pluginConfig[0].name"
    assert e.message.startswith(
        'unknown plugin "Dynamo"; known plugins: DefaultBinder, DefaultPreemption, Dynamic'
    )


def test_plugin_config_twice_for_one_plugin() -> None:
    e = error("profiles: [{schedulerName: a, pluginConfig: [{name: NodeAffinity}, {name: NodeAffinity}]}]\n")
    assert e.path == "profiles[0].pluginConfig[1].name"


def test_dynamic_without_args_gets_cranes_defaults() -> None:
    c = load("profiles: [{schedulerName: a, plugins: {score: {enabled: [{name: Dynamic, weight: 3}]}}}]\n")
    dyn = c.profiles[0].args["Dynamic"]
    assert (dyn.prome_addr, dyn.policy_config_path) == ("", "/etc/kubernetes/dynamic-scheduler-policy.yaml")


def test_plugin_config_of_a_not_implemented_plugin_is_ignored(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="scheduler.config")
    c = load(
        "profiles: [{schedulerName: a, pluginConfig: [{name: EBSLimits, args: {}}]},"
        " {schedulerName: b, pluginConfig: [{name: EBSLimits}]}]\n"
    )
    assert "EBSLimits" not in c.profiles[0].args
    warned = [r for r in caplog.records if getattr(r, "kv", {}).get("plugin") == "EBSLimits"]
    assert len(warned) == 1


def test_a_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    f = tmp_path / "sched.yaml"
    f.write_bytes(b"\xef\xbb\xbf" + SEED.read_bytes())
    assert load_config(f, policies=False) == load_config(SEED, policies=False)


def test_args_for_a_plugin_that_takes_none() -> None:
    e = error("profiles: [{schedulerName: a, pluginConfig: [{name: NodePorts, args: {x: 1}}]}]\n")
    assert e.path == "profiles[0].pluginConfig[0].args"
    assert load("profiles: [{schedulerName: a, pluginConfig: [{name: NodePorts, args: {}}]}]\n") == load(
        "profiles: [{schedulerName: a}]\n"
    )


def test_the_pod_group_points_of_v1_37_are_accepted_empty() -> None:
    """kube-scheduler v1.37 writes placementGenerate, placementScore and podGroupPostFilter into
    its configuration (``--write-config-to``, ``/configz``): such a file loads; a plugin enabled
    there is refused, as none here implements them."""
    c = load(
        "profiles: [{plugins: {placementGenerate: {}, placementScore: {disabled: [{name: '*'}]}, "
        "podGroupPostFilter: {enabled: []}}}]\n"
    )
    assert c.profiles[0].plugins == default_config().profiles[0].plugins
    e = error("profiles: [{plugins: {placementScore: {enabled: [{name: TopologyPlacementGenerator}]}}}]\n")
    assert e.path == "profiles[0].plugins.placementScore.enabled[0]"
    assert "pod group (workload) scheduling is not supported" in e.message
    assert "'TopologyPlacementGenerator'" in e.message
