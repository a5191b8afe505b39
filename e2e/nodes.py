"""The kind cluster's nodes: which they are, and what the suites do inside their containers.

``kind-config.yaml`` makes one control plane and two workers. A kind node is a
container named like the node, so anything the suites do on a node (restart
its kubelet, ask crictl about a container, kill a process, look at files,
curl a local port) is a ``docker exec`` in it (``$DOCKER``, default
``docker``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass

from kubernetes import client

CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
HOSTNAME_LABEL = "kubernetes.io/hostname"
DOCKER = os.environ.get("DOCKER", "docker")


# --- the nodes, as the API server has them ----------------------------------------------------


@dataclass(frozen=True)
class Nodes:
    control_plane: str
    workers: tuple[str, ...]

    @property
    def all(self) -> tuple[str, ...]:
        return (self.control_plane, *self.workers)


def cluster_nodes(core: client.CoreV1Api) -> Nodes:
    nodes = core.list_node().items
    cps = sorted(n.metadata.name for n in nodes if CONTROL_PLANE_LABEL in (n.metadata.labels or {}))
    workers = sorted(n.metadata.name for n in nodes if CONTROL_PLANE_LABEL not in (n.metadata.labels or {}))
    assert len(cps) == 1 and len(workers) == 2, (
        f"expected kind-config.yaml's 1 control plane + 2 workers: {cps} {workers}"
    )
    return Nodes(cps[0], tuple(workers))


def control_plane(core: client.CoreV1Api) -> client.V1Node:
    return core.list_node(label_selector=CONTROL_PLANE_LABEL).items[0]


def node_ip(node: client.V1Node) -> str:
    return next(a.address for a in node.status.addresses if a.type == "InternalIP")


# --- inside a node's container ----------------------------------------------------------------


def docker_exec(
    node: str, *cmd: str, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``docker exec <node> cmd...``; fails on a non-zero exit unless ``check=False``."""
    proc = subprocess.run(
        [DOCKER, "exec", node, *cmd], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"docker exec {node} {' '.join(cmd)} exited {proc.returncode}: "
            f"{proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc


def restart_kubelet(node: str) -> None:
    """Restart the node's kubelet (systemd). It starts its static pods again and forgets the
    restart back-offs of its containers."""
    docker_exec(node, "systemctl", "restart", "kubelet")


def crictl_running(node: str, name: str) -> list[str]:
    """Ids of the running containers named ``name`` on ``node``."""
    out = docker_exec(node, "crictl", "ps", "--state", "running", "--name", f"^{name}$", "-q").stdout
    return [line for line in out.split() if line]


def container_pid(pod: client.V1Pod, container: str | None = None) -> tuple[str, int]:
    """(node, pid in the node's PID namespace) of a pod's running container, via crictl inspect."""
    statuses = pod.status.container_statuses or []
    cs = next(c for c in statuses if container is None or c.name == container)
    cid = re.sub(r"^\w+://", "", cs.container_id or "")
    assert cid, f"pod {pod.metadata.name} has no running container: {cs}"
    node = pod.spec.node_name
    info = json.loads(docker_exec(node, "crictl", "inspect", cid).stdout)
    return node, int(info["info"]["pid"])


def sigkill(pod: client.V1Pod) -> float:
    """SIGKILL the pod's (first) container process on its node; the time of the kill."""
    node, pid = container_pid(pod)
    at = time.time()
    docker_exec(node, "kill", "-KILL", str(pid))
    return at


def node_file_exists(node: str, path: str) -> bool:
    return docker_exec(node, "test", "-e", path, check=False).returncode == 0


def node_listing(node: str, *dirs: str) -> str:
    """``ls -la`` of folders on a node (for "nothing changed" comparisons), without the times."""
    out = docker_exec(
        node,
        "sh",
        "-c",
        'for d in "$@"; do echo "== $d"; ls -la --time-style=+ "$d" 2>&1; done',
        "sh",
        *dirs,
        check=False,
    ).stdout
    return out


def https_get(node: str, url: str) -> tuple[int, str]:
    """``curl -k`` on the node: (exit code, body). 7 = connection refused."""
    proc = docker_exec(node, "curl", "-sk", "--max-time", "5", url, check=False)
    return proc.returncode, proc.stdout
