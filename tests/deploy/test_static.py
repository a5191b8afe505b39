"""The static method's node side, on a temporary folder: checks, install, undo, uninstall.

Both ways to reach a node run the same steps: LocalFS directly, and DockerExecFS
through a stand-in ``docker`` that runs ``docker exec``'s command here, so its
shell scripts are exercised for real (kind's docker exec is the e2e suite's).
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from scheduler.deploy.cmdline import DeployError
from scheduler.deploy.nodefs import DockerExecFS, LocalFS, NodeFS
from scheduler.deploy.static import Paths, check_node, install, undo, uninstall
from tests.deploy.util import rendered

KUBE_SCHEDULER = "apiVersion: v1\nkind: Pod\nmetadata: {name: kube-scheduler}\n"


def node_values(tmp: Path, mode: str) -> tuple[Paths, dict[str, str]]:
    r = rendered(
        "static",
        f"static.mode={mode}",
        f"static.configDir={tmp}/etc/kubernetes/dynamic-scheduler",
        f"static.manifestDir={tmp}/etc/kubernetes/manifests",
        f"static.kubeconfig={tmp}/etc/kubernetes/scheduler.conf",
    )
    v = {
        "static": {
            "manifestDir": f"{tmp}/etc/kubernetes/manifests",
            "configDir": f"{tmp}/etc/kubernetes/dynamic-scheduler",
            "kubeconfig": f"{tmp}/etc/kubernetes/scheduler.conf",
            "name": "my-scheduler",
        }
    }
    return Paths.of(v), r.node_files


def kubeadm_node(tmp: Path) -> None:
    (tmp / "etc/kubernetes/manifests").mkdir(parents=True)
    (tmp / "etc/kubernetes/scheduler.conf").write_text("kubeconfig")
    (tmp / "etc/kubernetes/manifests/kube-scheduler.yaml").write_text(KUBE_SCHEDULER)


def tree(tmp: Path) -> dict[str, str]:
    return {str(p.relative_to(tmp)): p.read_text() for p in sorted(tmp.rglob("*")) if p.is_file()}


@pytest.fixture(params=["local", "docker-exec"])
def fs(request: pytest.FixtureRequest, tmp_path: Path) -> NodeFS:
    if request.param == "local":
        return LocalFS("node-1")
    docker = tmp_path / "docker"
    docker.write_text(
        '#!/bin/sh\n# docker exec -i CONTAINER COMMAND...: run COMMAND here\nshift 3\nexec "$@"\n'
    )
    docker.chmod(0o755)
    return DockerExecFS("node-1", docker=str(docker))


@pytest.fixture
def node(tmp_path: Path) -> Path:
    root = tmp_path / "node"
    kubeadm_node(root)
    return root


def test_beside_install_and_uninstall(fs: NodeFS, node: Path) -> None:
    before = tree(node)
    paths, files = node_values(node, "beside")
    plan = check_node(fs, paths, "beside")
    assert not plan.move_kube_scheduler
    install(fs, plan, paths, files)
    after = tree(node)
    assert after["etc/kubernetes/manifests/kube-scheduler.yaml"] == KUBE_SCHEDULER
    assert after["etc/kubernetes/manifests/my-scheduler.yaml"] == files[paths.pod_file]
    assert after["etc/kubernetes/dynamic-scheduler/policy.yaml"] == files[paths.config_files[1]]
    assert stat.S_IMODE((node / "etc/kubernetes/manifests/my-scheduler.yaml").stat().st_mode) == 0o600
    assert not [p for p in (node / "etc/kubernetes/manifests").iterdir() if p.name.startswith(".")]
    removed = uninstall(fs, paths)
    assert (removed.pod_removed, removed.kube_scheduler_restored) == (True, False)
    assert tree(node) == before
    assert not (node / "etc/kubernetes/dynamic-scheduler").exists()
    again = uninstall(fs, paths)  # idempotent
    assert (again.pod_removed, again.kube_scheduler_restored) == (False, False)


def test_replace_moves_kube_scheduler_aside_and_back(fs: NodeFS, node: Path) -> None:
    before = tree(node)
    paths, files = node_values(node, "replace")
    plan = check_node(fs, paths, "replace")
    assert plan.move_kube_scheduler
    install(fs, plan, paths, files)
    after = tree(node)
    assert "etc/kubernetes/manifests/kube-scheduler.yaml" not in after
    assert after["etc/kubernetes/dynamic-scheduler/kube-scheduler.yaml.orig"] == KUBE_SCHEDULER
    # deploying again finds ours in place: nothing more to move
    assert not check_node(fs, paths, "replace").move_kube_scheduler
    removed = uninstall(fs, paths)
    assert (removed.pod_removed, removed.kube_scheduler_restored) == (True, True)
    assert tree(node) == before


@pytest.mark.parametrize(
    ("setup", "mode", "message"),
    [
        (lambda n: (n / "etc/kubernetes/scheduler.conf").unlink(), "beside", "scheduler.conf not found"),
        (
            lambda n: (n / "etc/kubernetes/manifests/kube-scheduler.yaml").unlink(),
            "replace",
            "kube-scheduler.yaml not found: replace mode moves kubeadm's kube-scheduler manifest aside",
        ),
        (
            lambda n: (
                (n / "etc/kubernetes/dynamic-scheduler").mkdir(),
                (n / "etc/kubernetes/dynamic-scheduler/kube-scheduler.yaml.orig").write_text("x"),
            ),
            "replace",
            "run restore first",
        ),
        (
            lambda n: (
                (n / "etc/kubernetes/dynamic-scheduler").mkdir(),
                (n / "etc/kubernetes/dynamic-scheduler/kube-scheduler.yaml.orig").write_text("x"),
            ),
            "beside",
            "run restore before deploying in beside mode",
        ),
    ],
)
def test_checks_refuse_and_change_nothing(
    fs: NodeFS, node: Path, setup: Any, mode: str, message: str
) -> None:
    setup(node)
    before = tree(node)
    paths, _ = node_values(node, mode)
    with pytest.raises(DeployError, match=message) as info:
        check_node(fs, paths, mode)
    assert str(info.value).startswith("node-1: ") and "nothing was changed" in str(info.value)
    assert tree(node) == before


class FailingPodWrite(LocalFS):
    """A node whose staticPodPath refuses our manifest (a full disk, say)."""

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        if path.endswith("/my-scheduler.yaml"):
            raise DeployError(f"{self.node}: cannot write {path}: No space left on device")
        super().write(path, text, mode)


@pytest.mark.parametrize("mode", ["beside", "replace"])
def test_a_failed_install_is_undone(node: Path, mode: str) -> None:
    (node / "etc/kubernetes/dynamic-scheduler").mkdir()
    (node / "etc/kubernetes/dynamic-scheduler/policy.yaml").write_text("an older policy")
    before = tree(node)
    fs = FailingPodWrite("node-1")
    paths, files = node_values(node, mode)
    plan = check_node(fs, paths, mode)
    with pytest.raises(DeployError, match="No space left"):
        install(fs, plan, paths, files)
    assert tree(node) == before
    assert plan.done == []
    undo(fs, plan)  # nothing left to undo
    assert tree(node) == before
