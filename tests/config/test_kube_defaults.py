"""The default profile is kube-scheduler v1.37's: compared with what the pinned kube-scheduler
binary itself writes (``--write-config-to``), plugin by plugin and weight by weight.

Only the plugins this scheduler does not implement (``NOT_IMPLEMENTED``, listed in
the README's "Not supported yet") may be missing, and nothing may be added.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml

from scheduler.config import default_config, dump_config, parse_config
from scheduler.config.registry import NOT_IMPLEMENTED
from tests.apiserver import REPO, find_bin_dir

pytestmark = pytest.mark.apiserver  # needs the pinned binaries of make tools

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: unused}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


@pytest.fixture(scope="module")
def kube_scheduler_defaults(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    bin_dir = find_bin_dir()
    if bin_dir is None or not (bin_dir / "kube-scheduler").exists():
        pytest.fail("the pinned kube-scheduler binary is not built: run make tools first", pytrace=False)
    tmp = tmp_path_factory.mktemp("kube-defaults")
    (tmp / "kubeconfig").write_text(KUBECONFIG)
    out = tmp / "written.yaml"
    proc = subprocess.run(
        [
            str(bin_dir / "kube-scheduler"),
            f"--kubeconfig={tmp / 'kubeconfig'}",
            "--authentication-skip-lookup",
            f"--write-config-to={out}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and out.exists(), proc.stderr[-2000:]
    return yaml.safe_load(out.read_text())


def enabled(doc: dict[str, Any]) -> list[tuple[str, int]]:
    """The default profile's multiPoint plugins as (name, weight), weight 0 when none."""
    (profile,) = doc["profiles"]
    plugins = profile["plugins"]
    points = {k: v for k, v in plugins.items() if v and k != "multiPoint"}
    assert not points, f"plugins set outside multiPoint: {points}"
    return [(p["name"], p.get("weight") or 0) for p in plugins["multiPoint"]["enabled"]]


def test_the_default_profile_is_kube_schedulers_less_what_is_not_implemented(
    kube_scheduler_defaults: dict[str, Any],
) -> None:
    theirs = enabled(kube_scheduler_defaults)
    ours = enabled(yaml.safe_load(dump_config(default_config())))
    assert ours == [p for p in theirs if p[0] not in NOT_IMPLEMENTED]
    missing = {name for name, _ in theirs} - {name for name, _ in ours}
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Not supported yet") :]
    for name in missing:
        assert f"`{name}`" in section, f"{name} is left out of the default profile but not in the README"


def test_the_profile_name_and_leader_election_are_kube_schedulers(
    kube_scheduler_defaults: dict[str, Any],
) -> None:
    ours = yaml.safe_load(dump_config(default_config()))
    assert ours["profiles"][0]["schedulerName"] == kube_scheduler_defaults["profiles"][0]["schedulerName"]
    keys = (
        "leaderElect",
        "leaseDuration",
        "renewDeadline",
        "retryPeriod",
        "resourceLock",
        "resourceName",
        "resourceNamespace",
    )
    assert {k: ours["leaderElection"][k] for k in keys} == {
        k: kube_scheduler_defaults["leaderElection"][k] for k in keys
    }


def test_kube_schedulers_own_written_configuration_loads_as_our_defaults(
    kube_scheduler_defaults: dict[str, Any],
) -> None:
    """An operator may start from kube-scheduler's ``--write-config-to``: the file loads as it
    is (the fields of v1.37 included) and means the default profile."""
    theirs = parse_config(yaml.safe_dump(kube_scheduler_defaults), policies=False)
    ours = default_config()
    (t,), (o,) = theirs.profiles, ours.profiles
    assert (t.plugins, dict(t.score_weights), dict(t.args)) == (
        o.plugins,
        dict(o.score_weights),
        dict(o.args),
    )
    assert (theirs.parallelism, theirs.leader_election) == (ours.parallelism, ours.leader_election)
