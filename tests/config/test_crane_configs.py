"""crane-scheduler's own configurations and policies load unchanged (tests/data/crane-scheduler).

They are v1beta2 files that enable ``Dynamic`` at filter and score (weight 3) with
``policyConfigPath`` as their only arg: the profile must be kube-scheduler's
v1beta2 defaults plus Dynamic, reading crane's node annotations (no
``promeAddr``), and counting binds for the hot value although reserve and
postBind are not named (scheduler.profiles.bind_counting).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.cli import main
from scheduler.config import load_config
from scheduler.config.loading import parse_config
from scheduler.plugins.dynamic.policy import load_policy
from scheduler.profiles import bind_counting

CRANE = Path(__file__).parents[1] / "data" / "crane-scheduler"

V1BETA2_SCORES = {
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
    "InterPodAffinity": 1,
    "NodeResourcesFit": 1,
    "NodeAffinity": 1,
    "PodTopologySpread": 2,
    "TaintToleration": 1,
    "Dynamic": 3,
}


def configmap_file(manifest: Path, name: str, key: str) -> str:
    """The file ``key`` of ConfigMap ``name`` in a multi-document manifest."""
    for doc in yaml.safe_load_all(manifest.read_text()):
        if doc and doc.get("kind") == "ConfigMap" and doc["metadata"]["name"] == name:
            return str(doc["data"][key])
    raise AssertionError(f"no ConfigMap {name} in {manifest}")


def helm_rendered() -> str:
    """What gocrane/helm-charts' charts/scheduler renders on Kubernetes >= 1.22 (written out here,
    the chart stating no licence): the repository's file with its own scheduler name."""
    text = (CRANE / "scheduler-config.yaml").read_text()
    return text.replace("schedulerName: default-scheduler", "schedulerName: crane-scheduler").replace(
        'clientConnection:\n  kubeconfig: "REPLACE_ME_WITH_KUBE_CONFIG_PATH"\n', ""
    )


CONFIGS = {
    "deploy/manifests/dynamic/scheduler-config.yaml": lambda: (CRANE / "scheduler-config.yaml").read_text(),
    "deploy/scheduler/deployment.yaml": lambda: configmap_file(
        CRANE / "scheduler-deployment.yaml", "scheduler-config", "scheduler-config.yaml"
    ),
    "helm-charts charts/scheduler": helm_rendered,
}


@pytest.mark.parametrize("source", CONFIGS)
def test_cranes_configs_load_unchanged(source: str) -> None:
    config = parse_config(CONFIGS[source](), policies=False)
    (profile,) = config.profiles
    assert profile.scheduler_name == ("crane-scheduler" if "helm" in source else "default-scheduler")
    assert dict(profile.scores()) == V1BETA2_SCORES
    assert profile.plugins.filter[-1] == "Dynamic"
    assert profile.plugins.post_filter == ("DefaultPreemption",)
    dyn = profile.args["Dynamic"]
    assert (dyn.prome_addr, dyn.policy_config_path) == ("", "/etc/kubernetes/policy.yaml")
    assert config.leader_election.leader_elect is True
    # crane counts binds from Scheduled events; we count them in the plugin, whatever the file names
    assert "Dynamic" not in profile.plugins.reserve
    assert bind_counting(profile.plugins) == (["VolumeBinding", "Dynamic"], ["Dynamic"])


def test_cranes_policies_load_unchanged() -> None:
    shipped = load_policy(str(CRANE / "policy.yaml"))
    assert [(p.name, p.max_limit_percent) for p in shipped.predicate] == [
        ("cpu_usage_avg_5m", 0.65),
        ("cpu_usage_max_avg_1h", 0.75),
        ("mem_usage_avg_5m", 0.65),
        ("mem_usage_max_avg_1h", 0.75),
    ]
    assert shipped.sync_periods()["cpu_usage_max_avg_1d"] == 3 * 3600
    assert [(h.time_range, h.count) for h in shipped.hot_value] == [(300.0, 5), (60.0, 2)]


def test_the_policy_configmap_of_cranes_controller_loads(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        configmap_file(CRANE / "controller-deployment.yaml", "dynamic-scheduler-policy", "policy.yaml")
    )
    assert load_policy(str(policy)) == load_policy(str(CRANE / "policy.yaml"))


def test_write_config_to_shows_the_v1beta2_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "scheduler-config.yaml"
    config.write_text(CONFIGS["deploy/scheduler/deployment.yaml"]())
    out = tmp_path / "effective.yaml"
    assert main(["--config", str(config), "--write-config-to", str(out)]) == 0
    doc: dict[str, Any] = yaml.safe_load(out.read_text())
    (profile,) = doc["profiles"]
    weights = {p["name"]: p["weight"] for p in profile["plugins"]["score"]["enabled"]}
    assert weights == V1BETA2_SCORES
    assert profile["plugins"]["multiPoint"] == {"disabled": [{"name": "*"}]}
    # and as v1 it reads back the same
    assert load_config(str(out), policies=False).profiles == load_config(str(config), policies=False).profiles
