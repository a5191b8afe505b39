"""Simulated nodes: kwok Node objects in the kind cluster, and the kwok controller that keeps them alive.

The nodes carry the annotation ``kwok.x-k8s.io/node=fake``, which is how the
controller (the pinned ``kwok`` binary, run locally with
``--manage-nodes-with-annotation-selector``) tells them from the kind nodes: it
never touches a node without it, nor the pods on such a node. It marks its
nodes Ready, renews their Leases (every 30 s: ``--node-lease-duration-seconds=120``,
a quarter of it, as the kubelet; within the node controller's 50 s grace), and
moves pods bound to them to Running, through the Stages of kwok's own
``kustomize/stage`` files of the pinned release (node-initialize,
node-heartbeat-with-lease, pod-ready, pod-delete).

The nodes are tainted ``kwok.x-k8s.io/node=fake:NoSchedule``, so ordinary pods
never land there; the bench pods tolerate the taint and select the nodes by
label. kind's ``kindnet`` (and the offline image's stand-in) and ``kube-proxy``
select ``kubernetes.io/os=linux``, which the nodes do not carry; a DaemonSet
that selects every node and tolerates every taint still gets a pod on each of
them, as on any real node. kwok runs those too, and the bench counts them: their
creation and status writes load the API server while the contenders run.
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from bench.load import merge_patch
from bench.procstat import stop_process
from scheduler.cluster.client import api_request
from scheduler.cluster.retry import call_with_retries
from scheduler.polling import PollTimeoutError, poll

logger = logging.getLogger(__name__)

ANNOTATION = "kwok.x-k8s.io/node"
ANNOTATION_VALUE = "fake"
LABEL = "bench.dynamic-scheduler.io/kwok"
"""Label of the bench's nodes (the pods' nodeSelector, the raw binder's node selector)."""
TAINT = {"key": ANNOTATION, "value": ANNOTATION_VALUE, "effect": "NoSchedule"}
TOLERATION = {"key": ANNOTATION, "operator": "Equal", "value": ANNOTATION_VALUE, "effect": "NoSchedule"}
NODE_PREFIX = "kwok-node-"
NODE_CPU = "32"
NODE_MEMORY = "256Gi"
NODE_PODS = "110"
LEASE_SECONDS = 120
POD_CIDR = "10.128.0.0/14"
"""Pod IPs kwok hands out (kind's pods use 10.244.0.0/16, its Services 10.96.0.0/12)."""


ZONE_LABEL = "topology.kubernetes.io/zone"
ZONES = 10
"""The kwok nodes' zones, round robin (for the workloads that spread or prefer by zone)."""


def zone_of(i: int) -> str:
    return f"zone-{i % ZONES}"


def node_name(i: int) -> str:
    return f"{NODE_PREFIX}{i:05d}"


def address(second_octet: int, i: int) -> str:
    """The ``i``-th IPv4 address from ``10.<second_octet>.0.0`` on."""
    return f"10.{second_octet + (i >> 16)}.{(i >> 8) & 0xFF}.{i & 0xFF}"


def node_ip(i: int) -> str:
    """A distinct InternalIP per node, from 10.200.0.0/14 (unrouted: nothing connects to it)."""
    return address(200, i)


def node_body(i: int) -> dict[str, Any]:
    name = node_name(i)
    resources = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": NODE_PODS}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {ANNOTATION: ANNOTATION_VALUE, "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {LABEL: "true", "kubernetes.io/hostname": name, "type": "kwok", ZONE_LABEL: zone_of(i)},
        },
        "spec": {"taints": [TAINT]},
        # Kept on create (the API server drops a new node's status only in part):
        # kwok's node-initialize Stage keeps allocatable, capacity and addresses.
        "status": {
            "allocatable": resources,
            "capacity": resources,
            "addresses": [
                {"type": "InternalIP", "address": node_ip(i)},
                {"type": "Hostname", "address": name},
            ],
        },
    }


def list_bench_nodes(api: ApiClient) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cont = None
    while True:
        query: list[tuple[str, Any]] = [("labelSelector", f"{LABEL}=true"), ("limit", 500)]
        if cont:
            query.append(("continue", cont))
        page = api_request(api, "GET", "/api/v1/nodes", query=query, timeout=(5, 60))
        items.extend(page.get("items") or ())
        cont = (page.get("metadata") or {}).get("continue")
        if not cont:
            return items


def node_ready(node: dict[str, Any]) -> bool:
    conds = (node.get("status") or {}).get("conditions") or ()
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)
    # The node lifecycle controller taints a new node not-ready until it sees it Ready.
    taints = (node.get("spec") or {}).get("taints") or ()
    return ready and not any(t.get("key", "").startswith("node.kubernetes.io/") for t in taints)


def ensure_nodes(
    api: ApiClient,
    count: int,
    *,
    workers: int = 32,
    progress: Callable[[str], None] = lambda s: None,
    timeout: float = 900,
) -> float:
    """Exactly ``count`` bench nodes, all Ready (extra ones from an earlier, larger run are
    deleted). Returns the seconds it took."""
    start = time.monotonic()
    listed = list_bench_nodes(api)
    existing = {n["metadata"]["name"] for n in listed}
    wanted = {node_name(i): i for i in range(count)}
    missing = [i for name, i in wanted.items() if name not in existing]
    extra = sorted(existing - set(wanted))
    unzoned = [  # kept from a run before the nodes had zones
        wanted[n["metadata"]["name"]]
        for n in listed
        if n["metadata"]["name"] in wanted and ZONE_LABEL not in (n["metadata"].get("labels") or {})
    ]

    def label_zone(i: int) -> None:
        patch = {"metadata": {"labels": {ZONE_LABEL: zone_of(i)}}}
        merge_patch(api, f"/api/v1/nodes/{node_name(i)}", patch, what="label node")

    def create(i: int) -> None:
        body = node_body(i)

        def call() -> None:
            try:
                api_request(api, "POST", "/api/v1/nodes", body=body, timeout=(5, 30))
            except ApiException as e:
                if e.status != 409:
                    raise

        call_with_retries(call, what="create node", attempts=8, max_seconds=120)

    def delete(name: str) -> None:
        def call() -> None:
            try:
                api_request(api, "DELETE", f"/api/v1/nodes/{name}", timeout=(5, 30))
            except ApiException as e:
                if e.status != 404:
                    raise

        call_with_retries(call, what="delete node", attempts=8, max_seconds=120)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        if missing:
            progress(f"creating {len(missing)} kwok nodes ({len(existing)} exist)")
            list(pool.map(create, missing))
        if extra:
            progress(f"deleting {len(extra)} kwok nodes beyond {count}")
            list(pool.map(delete, extra))
        if unzoned:
            progress(f"labelling {len(unzoned)} kwok nodes with their zones")
            list(pool.map(label_zone, unzoned))

    wait_ready(api, count, timeout=timeout, progress=progress)
    return time.monotonic() - start


def wait_ready(
    api: ApiClient, count: int, *, timeout: float = 900, progress: Callable[[str], None] = lambda s: None
) -> None:
    """Until the first ``count`` bench nodes are Ready, without the node controller's
    not-ready/unreachable taints."""
    wanted = {node_name(i) for i in range(count)}
    ready = [0]

    def all_ready() -> bool:
        nodes = [n for n in list_bench_nodes(api) if n["metadata"]["name"] in wanted]
        ready[0] = sum(1 for n in nodes if node_ready(n))
        if ready[0] < count:
            progress(f"waiting for kwok nodes: {ready[0]}/{count} Ready")
        return ready[0] == count

    try:
        poll(all_ready, timeout, f"{count} kwok nodes Ready", 2)
    except PollTimeoutError:
        raise TimeoutError(
            f"only {ready[0]} of {count} kwok nodes became Ready within {timeout:.0f}s "
            "(is the kwok controller running? see its log)"
        ) from None


def _delete_all(api: ApiClient, paths: list[str], what: str, workers: int) -> int:
    """DELETE every path concurrently, with retries; already gone is fine. The number of paths."""

    def delete(path: str) -> None:
        try:
            call_with_retries(
                lambda: api_request(api, "DELETE", path, timeout=(5, 30)),
                what=what,
                attempts=8,
                max_seconds=120,
            )
        except ApiException as e:
            if e.status != 404:
                raise

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(delete, paths))
    return len(paths)


def release_leases(api: ApiClient, *, workers: int = 32) -> int:
    """Delete the node Leases of the bench nodes. kwok takes over a Lease another kwok
    process held only once it expires (2 minutes), and the node controller marks the
    node unreachable long before; without a Lease, the new process creates its own at once."""
    paths = [
        f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{n['metadata']['name']}"
        for n in list_bench_nodes(api)
    ]
    return _delete_all(api, paths, "delete lease", workers)


def delete_nodes(api: ApiClient, *, workers: int = 32) -> int:
    """Delete every bench node (the pods on them go with them); the number deleted."""
    paths = [f"/api/v1/nodes/{n['metadata']['name']}" for n in list_bench_nodes(api)]
    return _delete_all(api, paths, "delete node", workers)


UNMANAGED_LABEL = ("bench.dynamic-scheduler.io/resident", "true")
"""kwok leaves pods with this label alone: whoever creates them writes their status
(``bench.population``'s resident pods: 150 000 of them would keep kwok's pod stages busy for
an hour on two cores)."""

KWOK_OPTIONS = f"""apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  # Nodes made Ready and their Leases renewed 16 at a time, not kwok's default 4: 5000 nodes
  # are Ready in minutes, and on a busy machine no renewal comes late enough for the node
  # controller to mark a node NotReady. Pods go on at the default pace (the contenders' load).
  nodePlayStageParallelism: 16
  nodeLeaseParallelism: 16
  # A config file gets no defaults: kwok's own for the rest.
  podPlayStageParallelism: 4
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  disregardStatusWithLabelSelector: {"=".join(UNMANAGED_LABEL)}
"""


def stages_config(stage_files: list[Path]) -> str:
    """One multi-document kwok config: ``KWOK_OPTIONS`` and the given Stage files."""
    docs = [KWOK_OPTIONS.strip()]
    for f in stage_files:
        text = f.read_text(encoding="utf-8").strip()
        if text.startswith("---"):
            text = text[3:].lstrip()
        docs.append(f"# {f}\n{text}")
    return "\n---\n".join(docs) + "\n"


class KwokController:
    """The kwok controller as a local process."""

    def __init__(
        self,
        binary: str,
        kubeconfig: str,
        stage_files: list[Path],
        workdir: Path,
        *,
        extra_config: str = "",
        server_port: int | None = None,
    ) -> None:
        """``extra_config``: more documents for its ``--config`` (kwok's ResourceUsage and
        Metric); ``server_port``: serve kwok's HTTP endpoints (the Metrics) on 127.0.0.1 there."""
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.stage_files = stage_files
        self.workdir = workdir
        self.extra_config = extra_config
        self.server_port = server_port
        self.log_path = workdir / "kwok.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        config = self.workdir / "kwok-stages.yaml"
        text = stages_config(self.stage_files)
        if self.extra_config:
            text += "---\n" + self.extra_config
        config.write_text(text, encoding="utf-8")
        cmd = [
            self.binary,
            f"--kubeconfig={self.kubeconfig}",
            f"--config={config}",
            f"--manage-nodes-with-annotation-selector={ANNOTATION}={ANNOTATION_VALUE}",
            f"--node-lease-duration-seconds={LEASE_SECONDS}",
            f"--cidr={POD_CIDR}",
            "--v=WARN",
        ]
        if self.server_port is not None:
            cmd.append(f"--server-address=127.0.0.1:{self.server_port}")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        # No readiness to ask for: a kwok that cannot start (bad flag, kubeconfig) exits within a second.
        try:
            code = self.proc.wait(1)
        except subprocess.TimeoutExpired:
            return
        raise RuntimeError(f"kwok exited with {code}: {self.tail()}")

    def check(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"kwok exited with {self.proc.returncode}: {self.tail()}")

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        stop_process(self.proc)


def wait_daemonsets(
    api: ApiClient, *, timeout: float = 900, progress: Callable[[str], None] = lambda s: None
) -> None:
    """Until every DaemonSet has a pod bound on every node it targets. A DaemonSet that
    tolerates every taint gets a pod on each kwok node; this waits out that burst of
    creates and binds (kwok runs the pods; their readiness does not matter here)."""
    pending: list[str] = []

    def placed() -> bool:
        pending.clear()
        for ds in api_request(api, "GET", "/apis/apps/v1/daemonsets").get("items") or ():
            st = ds.get("status") or {}
            want, have = st.get("desiredNumberScheduled", 0), st.get("currentNumberScheduled", 0)
            if have < want:
                pending.append(f"{ds['metadata']['namespace']}/{ds['metadata']['name']} {have}/{want}")
        if pending:
            progress(f"waiting for DaemonSet pods on the kwok nodes: {', '.join(pending)}")
        return not pending

    try:
        poll(placed, timeout, "DaemonSet pods on the kwok nodes", 3)
    except PollTimeoutError:
        raise TimeoutError(f"DaemonSet pods not placed within {timeout:.0f}s: {', '.join(pending)}") from None


def daemonset_pods(api: ApiClient) -> int:
    """How many DaemonSet pods are bound to kwok nodes (the DaemonSet controller labels its
    pods ``pod-template-generation``)."""
    query = [("labelSelector", "pod-template-generation")]
    pods = api_request(api, "GET", "/api/v1/pods", query=query).get("items") or ()
    return sum(1 for p in pods if ((p.get("spec") or {}).get("nodeName") or "").startswith(NODE_PREFIX))
