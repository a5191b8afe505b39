"""The static-pod method on the control-plane nodes: check, install, wait, and the way back.

Per node (a :class:`~scheduler.deploy.nodefs.NodeFS`), with the paths of the values:

- **check** (:func:`check_node`, before anything changes on any node): kubeadm's
  scheduler kubeconfig is there, the staticPodPath is a folder and, in replace
  mode, kube-scheduler's manifest is in it (or already moved aside by us);
- **install** (:func:`install`): our configuration and policy into
  ``static.configDir``, then in replace mode kube-scheduler's manifest moved to
  ``configDir/kube-scheduler.yaml.orig``, then our pod manifest into the
  staticPodPath. A failure part-way undoes the node's earlier steps;
- **uninstall** (:func:`uninstall`): our manifest out, kube-scheduler's back
  (if we moved it and nobody put another in its place), our files out.
  Idempotent.

The waits use the mirror pods the kubelet posts: ``<pod name>-<node>``.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException

from scheduler.deploy.cmdline import DeployError, UsageError
from scheduler.deploy.nodefs import DockerExecFS, LocalFS, NodeFS, kind_nodes
from scheduler.deploy.templates import REVISION
from scheduler.deploy.waiting import pod_ready, pod_summary, poll
from scheduler.logs import kv

logger = logging.getLogger(__name__)

KUBE_SCHEDULER = "kube-scheduler"


@dataclass(frozen=True)
class Paths:
    manifest_dir: str
    config_dir: str
    kubeconfig: str
    pod_name: str

    @classmethod
    def of(cls, values: dict[str, Any]) -> Paths:
        s = values["static"]
        return cls(s["manifestDir"].rstrip("/"), s["configDir"].rstrip("/"), s["kubeconfig"], s["name"])

    @property
    def pod_file(self) -> str:
        return f"{self.manifest_dir}/{self.pod_name}.yaml"

    @property
    def kube_scheduler(self) -> str:
        return f"{self.manifest_dir}/{KUBE_SCHEDULER}.yaml"

    @property
    def kube_scheduler_orig(self) -> str:
        return f"{self.config_dir}/{KUBE_SCHEDULER}.yaml.orig"

    @property
    def config_files(self) -> tuple[str, str]:
        return f"{self.config_dir}/scheduler-config.yaml", f"{self.config_dir}/policy.yaml"


def mirror_pod(pod_name: str, node: str) -> str:
    return f"{pod_name}-{node}"


# --- check and install -------------------------------------------------------------------------


@dataclass
class Plan:
    node: str
    move_kube_scheduler: bool = False
    done: list[tuple[str, str, str | None]] = field(default_factory=list)
    """Steps taken, to undo: ("write", path, previous content or None) / ("move", src, dst)."""


def check_node(fs: NodeFS, paths: Paths, mode: str) -> Plan:
    """What install will do on this node; DeployError (nothing changed) when it cannot."""
    node = fs.node
    if not fs.is_file(paths.kubeconfig):
        raise DeployError(
            f"{node}: {paths.kubeconfig} not found: the static pod authenticates with kubeadm's "
            f"scheduler kubeconfig (is this a kubeadm control-plane node?); nothing was changed"
        )
    if not fs.is_dir(paths.manifest_dir):
        raise DeployError(
            f"{node}: {paths.manifest_dir} is not a folder: expected the kubelet's staticPodPath; "
            f"nothing was changed"
        )
    plan = Plan(node)
    if mode == "replace":
        live, orig = fs.is_file(paths.kube_scheduler), fs.exists(paths.kube_scheduler_orig)
        if live and orig:
            raise DeployError(
                f"{node}: both {paths.kube_scheduler} and {paths.kube_scheduler_orig} exist: "
                f"run restore first; nothing was changed"
            )
        if not live and not orig:
            raise DeployError(
                f"{node}: {paths.kube_scheduler} not found: replace mode moves kubeadm's "
                f"kube-scheduler manifest aside, and it is not where expected; nothing was changed"
            )
        plan.move_kube_scheduler = live
    elif fs.exists(paths.kube_scheduler_orig):
        raise DeployError(
            f"{node}: {paths.kube_scheduler_orig} exists (a replace-mode deploy): run restore "
            f"before deploying in beside mode; nothing was changed"
        )
    return plan


def install(fs: NodeFS, plan: Plan, paths: Paths, node_files: dict[str, str]) -> float:
    """Write our files (see the module docstring); the monotonic time the pod manifest landed."""
    try:
        for path, text in node_files.items():
            if path == paths.pod_file:
                continue
            _write(fs, plan, path, text, 0o644)
        if plan.move_kube_scheduler:
            fs.move(paths.kube_scheduler, paths.kube_scheduler_orig)
            plan.done.append(("move", paths.kube_scheduler, paths.kube_scheduler_orig))
            logger.info(
                "Moved kube-scheduler's manifest aside", extra=kv(node=fs.node, to=paths.kube_scheduler_orig)
            )
        _write(fs, plan, paths.pod_file, node_files[paths.pod_file], 0o600)
        return time.monotonic()
    except BaseException:
        undo(fs, plan)
        raise


def _write(fs: NodeFS, plan: Plan, path: str, text: str, mode: int) -> None:
    previous = fs.read(path) if fs.is_file(path) else None
    fs.write(path, text, mode)
    plan.done.append(("write", path, previous))
    logger.info("Wrote", extra=kv(node=fs.node, file=path))


def undo(fs: NodeFS, plan: Plan) -> None:
    """Reverse the steps of an install that failed part-way (best effort)."""
    for step, a, b in reversed(plan.done):
        try:
            if step == "move" and b is not None:
                fs.move(b, a)
            elif step == "write":
                if b is None:
                    fs.remove(a)
                else:
                    fs.write(a, b)
        except DeployError as e:
            logger.warning("Could not undo", extra=kv(node=fs.node, step=step, path=a, err=str(e)))
    plan.done.clear()


# --- uninstall ---------------------------------------------------------------------------------


@dataclass
class Removed:
    node: str
    pod_removed: bool = False
    kube_scheduler_restored: bool = False


def uninstall(fs: NodeFS, paths: Paths) -> Removed:
    out = Removed(fs.node)
    if fs.exists(paths.pod_file):
        fs.remove(paths.pod_file)
        out.pod_removed = True
        logger.info("Removed our static pod manifest", extra=kv(node=fs.node, file=paths.pod_file))
    if fs.exists(paths.kube_scheduler_orig):
        if fs.exists(paths.kube_scheduler):
            logger.warning(
                "kube-scheduler's manifest is back already; leaving the moved-aside copy",
                extra=kv(node=fs.node, kept=paths.kube_scheduler_orig),
            )
        else:
            fs.move(paths.kube_scheduler_orig, paths.kube_scheduler)
            out.kube_scheduler_restored = True
            logger.info(
                "Put kube-scheduler's manifest back", extra=kv(node=fs.node, file=paths.kube_scheduler)
            )
    for path in paths.config_files:
        fs.remove(path)
    fs.remove_dir_if_empty(paths.config_dir)
    return out


# --- waits -------------------------------------------------------------------------------------


def _read_pod(api: ApiClient, name: str) -> Any | None:
    try:
        return CoreV1Api(api).read_namespaced_pod(name, "kube-system", _request_timeout=30)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def wait_mirror_ready(api: ApiClient, name: str, revision: str | None, timeout: float) -> float:
    """Wait until mirror pod ``name`` (of ``revision``, if given) is Running and Ready; seconds waited."""

    def check() -> tuple[bool, str]:
        pod = _read_pod(api, name)
        if pod is None:
            return False, f"{name}: no mirror pod yet (the kubelet reads its staticPodPath every ~20s)"
        rev = (pod.metadata.annotations or {}).get(REVISION)
        if revision is not None and rev != revision:
            return False, f"{name}: still the previous pod (revision {rev})"
        return pod.status is not None and pod.status.phase == "Running" and pod_ready(pod), pod_summary(pod)

    return poll(f"mirror pod {name}", check, timeout)


def wait_mirror_gone(api: ApiClient, name: str, timeout: float) -> float:
    def check() -> tuple[bool, str]:
        pod = _read_pod(api, name)
        return pod is None, "gone" if pod is None else pod_summary(pod)

    return poll(f"mirror pod {name} gone", check, timeout)


# --- which nodes -------------------------------------------------------------------------------

CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"


def add_node_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("nodes (the static method writes files on the control-plane nodes)")
    g.add_argument(
        "--kind-cluster",
        metavar="NAME",
        help="a kind cluster: its control-plane nodes, reached with docker exec",
    )
    g.add_argument(
        "--node",
        dest="nodes",
        action="append",
        default=[],
        metavar="NAME",
        help="only this node of the kind cluster (repeatable; default: every control-plane node)",
    )
    g.add_argument(
        "--manifest-dir",
        metavar="DIR",
        help="run on the node itself: the kubelet's staticPodPath here (overrides static.manifestDir)",
    )
    g.add_argument(
        "--node-name",
        metavar="NAME",
        help="with --manifest-dir: this node's name in Kubernetes (default: the hostname)",
    )
    g.add_argument(
        "--kind-bin",
        default=os.environ.get("KIND") or "kind",
        metavar="PATH",
        help="the kind command (default: $KIND, else kind)",
    )
    g.add_argument(
        "--docker-bin",
        default=os.environ.get("DOCKER") or "docker",
        metavar="PATH",
        help="the docker command (default: $DOCKER, else docker)",
    )


def check_node_flags(ns: argparse.Namespace) -> None:
    """The node flags make sense together (before anything is contacted)."""
    if ns.kind_cluster and ns.manifest_dir:
        raise UsageError("--kind-cluster and --manifest-dir: give one (a kind cluster, or this machine)")
    if ns.manifest_dir and ns.nodes:
        raise UsageError("--node: only with --kind-cluster (with --manifest-dir, use --node-name)")
    if ns.node_name and not ns.manifest_dir:
        raise UsageError("--node-name: only with --manifest-dir (with --kind-cluster, use --node)")
    if not ns.kind_cluster and not ns.manifest_dir:
        raise UsageError(
            "static needs --kind-cluster NAME (a kind cluster) or --manifest-dir DIR (on the node)"
        )


def has_node_flags(ns: argparse.Namespace) -> bool:
    return bool(ns.kind_cluster or ns.manifest_dir)


def node_targets(ns: argparse.Namespace, api: ApiClient) -> list[NodeFS]:
    """The nodes the flags name, each as a NodeFS (--manifest-dir: this machine)."""
    check_node_flags(ns)
    if ns.manifest_dir:
        return [LocalFS(ns.node_name or socket.gethostname().lower())]
    containers = kind_nodes(ns.kind_cluster, ns.kind_bin)
    if ns.nodes:
        unknown = sorted(set(ns.nodes) - set(containers))
        if unknown:
            raise UsageError(
                f"--node: {', '.join(unknown)} not in kind cluster {ns.kind_cluster!r} "
                f"(its nodes: {', '.join(containers)})"
            )
        names = sorted(set(ns.nodes))
    else:
        nodes = CoreV1Api(api).list_node(label_selector=CONTROL_PLANE_LABEL, _request_timeout=30).items
        names = sorted(n.metadata.name for n in nodes if n.metadata.name in containers)
        if not names:
            raise DeployError(
                f"kind cluster {ns.kind_cluster!r}: no node labelled {CONTROL_PLANE_LABEL} "
                f"among {', '.join(containers)}"
            )
    return [DockerExecFS(n, docker=ns.docker_bin) for n in names]
