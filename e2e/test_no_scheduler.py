"""With every scheduler stopped: what still runs, what waits, and ours picking up the rest.

kube-scheduler is stopped the way the static-pod method's replace mode does it
(scheduler/deploy/static.py): its manifest moved out of the kubelet's
staticPodPath to ``/etc/kubernetes/dynamic-scheduler/kube-scheduler.yaml.orig``
on the control-plane node (``docker exec``), so ``dynamic-scheduler restore
static`` would put it back too. Then, with no scheduler at all:

- a pod with ``spec.nodeName`` runs: the kubelet admits it, nothing schedules
  it (the field note's way to seed a scheduler when none runs);
- a pod without stays Pending: no ``nodeName``, no ``PodScheduled`` condition;
- ours comes back with the lease method, its replica pinned with ``nodeName``
  (``--set nodeName=<worker>``: no scheduler is needed to start it), takes the
  lapsed Lease and binds the waiting pod (its ``Scheduled`` event names our pod).

The fixture puts kube-scheduler's manifest back, waits until its mirror pod is
Ready, removes ours (``restore lease``) and waits until a new kube-scheduler
holds the Lease. Figures go to ``_artifacts/e2e-metrics/no_scheduler.jsonl``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from e2e.deploying import deploy, log_command, restore
from e2e.events import assert_bound_by
from e2e.kube import is_ready, wait_pod
from e2e.lease import acquired_at, annotated_ours, holder, holder_host, read_lease
from e2e.measure import record
from e2e.nodes import cluster_nodes, crictl_running, docker_exec, node_file_exists, restart_kubelet
from e2e.pods import condition, is_bound, pod_body
from e2e.schedulers import kube_scheduler_pods, our_pods
from scheduler.polling import poll

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

SUITE = "no_scheduler"
MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"
ASIDE_DIR = "/etc/kubernetes/dynamic-scheduler"  # values static.configDir
ASIDE = f"{ASIDE_DIR}/kube-scheduler.yaml.orig"
UNBOUND_WINDOW = 10.0
"""How long the pod without nodeName is watched for a binding that must not come (see the test)."""


@dataclass
class Stopped:
    node: str
    """The control-plane node, where kube-scheduler ran."""
    holder: str
    """The Lease's holder before the stop (kube-scheduler's identity)."""
    at: float


@pytest.fixture
def kube_scheduler_stopped(kind_cluster, api: client.ApiClient, core: client.CoreV1Api) -> Iterator[Stopped]:
    os.environ.setdefault("KUBECONFIG", str(kind_cluster.kubeconfig_path))
    node = cluster_nodes(core).control_plane
    assert not our_pods(core), "a scheduler of ours is running already"
    assert [p.metadata.name for p in kube_scheduler_pods(core)] == [f"kube-scheduler-{node}"]
    assert node_file_exists(node, MANIFEST) and not node_file_exists(node, ASIDE), (
        f"expected kubeadm's {MANIFEST} in place and nothing at {ASIDE} on {node}"
    )
    before = holder(read_lease(api))
    made_dir = not node_file_exists(node, ASIDE_DIR)
    docker_exec(node, "mkdir", "-p", ASIDE_DIR)
    docker_exec(node, "mv", MANIFEST, ASIDE)
    try:
        poll(
            lambda: not kube_scheduler_pods(core) or None,
            120,
            "kube-scheduler's mirror pod gone",
            interval=1,
            retry_on=(ApiException,),
        )
        poll(
            lambda: crictl_running(node, "kube-scheduler") == [],
            60,
            "kube-scheduler's container stopped",
            interval=0.5,
        )
        yield Stopped(node, before, time.time())
    finally:
        try:
            if node_file_exists(node, ASIDE) and not node_file_exists(node, MANIFEST):
                docker_exec(node, "mv", ASIDE, MANIFEST)
            if made_dir:
                docker_exec(node, "rmdir", "--ignore-fail-on-non-empty", ASIDE_DIR)
            try:
                wait_pod(core, "kube-system", f"kube-scheduler-{node}", is_ready, "Ready", 90)
            except AssertionError:
                # The manifest came back with the same content, so the static pod has the same UID
                # as the one the kubelet has just stopped; now and then the kubelet keeps it down
                # as terminated. A restart of the kubelet starts it (the subject here is ours, not
                # the kubelet's static pod bookkeeping).
                restart_kubelet(node)
                log_command("kube-scheduler not back 90 s after its manifest: the kubelet restarted")
                wait_pod(core, "kube-system", f"kube-scheduler-{node}", is_ready, "Ready", 180)
        finally:
            restore("lease")  # ours, if the test got that far; waits until kube-scheduler holds the Lease
        poll(
            lambda: (lambda h: h if holder_host(h) == node and h != before else None)(
                holder(read_lease(api))
            ),
            120,
            "a new kube-scheduler holding the Lease",
            interval=1,
            retry_on=(ApiException,),
        )
        assert not annotated_ours(read_lease(api))


def read_pod(core: client.CoreV1Api, ns: str, name: str) -> dict[str, Any]:
    return json.loads(core.read_namespaced_pod(name, ns, _preload_content=False).data)


def assert_stays_unbound(core: client.CoreV1Api, ns: str, name: str, window: float) -> dict[str, Any]:
    """Watch the pod for ``window`` seconds: every version of it must be without a nodeName."""
    body = json.loads(
        core.list_namespaced_pod(ns, field_selector=f"metadata.name={name}", _preload_content=False).data
    )
    (pod,) = body["items"]
    assert not is_bound(pod), f"{ns}/{name} is bound to {pod['spec']['nodeName']}"
    rv = body["metadata"]["resourceVersion"]
    deadline = time.monotonic() + window
    versions = 1
    while (left := deadline - time.monotonic()) > 0:
        w = watch.Watch()
        for ev in w.stream(
            core.list_namespaced_pod,
            ns,
            field_selector=f"metadata.name={name}",
            resource_version=rv,
            timeout_seconds=max(1, int(left + 0.5)),
            _request_timeout=left + 10,
            deserialize=False,
        ):
            obj = ev["object"]
            assert ev["type"] != "ERROR", f"the watch of {ns}/{name} failed: {obj}"
            rv = obj["metadata"]["resourceVersion"]
            if ev["type"] == "BOOKMARK":
                continue
            assert ev["type"] != "DELETED", f"{ns}/{name} was deleted"
            versions += 1
            pod = obj
            assert not is_bound(pod), (
                f"{ns}/{name} was bound to {pod['spec']['nodeName']} with no scheduler running"
            )
            if time.monotonic() >= deadline:
                w.stop()
                break
    record(SUITE, "unbound_window_s", window, versions_seen=versions)
    return pod


def test_without_any_scheduler_nodename_pods_run_and_the_rest_wait_for_ours(
    api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    test_image: str,
    kube_scheduler_stopped: Stopped,
) -> None:
    cp = kube_scheduler_stopped.node
    worker = cluster_nodes(core).workers[0]
    assert crictl_running(cp, "kube-scheduler") == []

    # spec.nodeName: the kubelet of that node admits and runs it, no scheduler involved.
    start = time.monotonic()
    core.create_namespaced_pod(namespace, pod_body("pinned", test_image, node_name=worker))
    pinned = wait_pod(core, namespace, "pinned", is_ready, "Running and Ready", 120)
    record(SUITE, "nodename_pod_ready_s", time.monotonic() - start)
    assert pinned["status"]["phase"] == "Running" and pinned["spec"]["nodeName"] == worker
    assert condition(pinned, "PodScheduled") is None or condition(pinned, "PodScheduled")["status"] == "True"

    # No nodeName: nothing binds it. A negative can only be watched for a while: any running
    # scheduler binds a pod that fits (10m CPU on idle workers) within a second or two of its
    # creation, on this cluster too (bound_by in the other suites); 10 s is several times that
    # and keeps the suite short, and kube-scheduler's container was seen gone before the pod existed.
    core.create_namespaced_pod(namespace, pod_body("waiting", test_image))
    created = time.time()
    pod = assert_stays_unbound(core, namespace, "waiting", UNBOUND_WINDOW)
    assert pod["status"].get("phase") == "Pending", pod["status"]
    assert condition(pod, "PodScheduled") is None, f"something tried to schedule it: {pod['status']}"

    # Ours comes back: the lease method with its replica pinned, so that it starts with no scheduler.
    res = deploy("lease", "--set", f"nodeName={worker}", "--set", "replicas=1", "--timeout", "300")
    record(SUITE, "deploy_lease_without_scheduler_s", res.seconds)
    (ours,) = [p.metadata.name for p in our_pods(core)]
    lease = read_lease(api)
    assert holder_host(holder(lease)) == ours and annotated_ours(lease), lease
    at = assert_bound_by(core, namespace, "waiting", {ours}, 120).at
    bound = read_pod(core, namespace, "waiting")
    assert bound["spec"]["nodeName"] in cluster_nodes(core).workers
    record(SUITE, "waiting_pod_bound_after_ours_held_s", at - (acquired_at(lease) or at))
    record(SUITE, "waiting_pod_pending_s", at - created)
    wait_pod(core, namespace, "waiting", is_ready, "Running and Ready", 120)
