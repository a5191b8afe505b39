"""Suite 3: the static-pod method on kind (``dynamic-scheduler deploy static``), both modes.

- **beside**: our ``my-scheduler`` static pod next to kube-scheduler, on its own
  Lease ``kube-system/my-scheduler``: a pod naming ``my-scheduler`` is bound by
  ours, a pod naming no scheduler still by kube-scheduler.
- **replace**: kube-scheduler's manifest moved aside, ours runs as
  ``default-scheduler`` on ``kube-system/kube-scheduler``: a pod naming no
  scheduler is bound by ours. Both run on the host network, so the Scheduled
  event's ``reportingInstance`` is ``default-scheduler-<node>`` either way;
  what tells them apart is that kube-scheduler's container is gone, the Lease
  carries our holder annotation, and our log has the bind.

Each test deploys, checks the mirror pod (Running, Ready, probes on 12345 over
HTTPS), measures manifest drop-in -> Ready, then restores and checks that the
node's files and kube-scheduler are as they were. Figures go to
``_artifacts/e2e-metrics/static.jsonl``.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.deploying import deploy, restore
from e2e.events import assert_bound_by
from e2e.kube import is_ready, wait_pod
from e2e.lease import annotated_ours, holder, holder_host, read_lease
from e2e.measure import record
from e2e.nodes import control_plane, crictl_running, https_get, node_file_exists, node_ip, node_listing
from e2e.pods import pod_log, sleeper
from scheduler.polling import poll

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

SUITE = "static"
NAME = "my-scheduler"  # values static.name / schedulerName / leaseName
PORT = 12345
MANIFESTS = "/etc/kubernetes/manifests"
CONFIG_DIR = "/etc/kubernetes/dynamic-scheduler"
WATCHED = ("/etc/kubernetes", MANIFESTS)


def mirror(core: client.CoreV1Api, name: str) -> client.V1Pod | None:
    try:
        return core.read_namespaced_pod(name, "kube-system")
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise


def ready_since(pod: client.V1Pod) -> float:
    return next(
        c.last_transition_time.timestamp()
        for c in pod.status.conditions
        if c.type == "Ready" and c.status == "True"
    )


@pytest.fixture
def node(kind_cluster, core: client.CoreV1Api) -> Iterator[str]:
    """The control-plane node; restored (static) whatever the test did, and checked to be as before."""
    os.environ.setdefault("KUBECONFIG", str(kind_cluster.kubeconfig_path))
    name = control_plane(core).metadata.name
    before = node_listing(name, *WATCHED)
    assert node_file_exists(name, f"{MANIFESTS}/kube-scheduler.yaml"), (
        "kube-scheduler's manifest must be in place"
    )
    assert mirror(core, f"{NAME}-{name}") is None
    yield name
    restore("static")
    assert node_listing(name, *WATCHED) == before, "the node's files differ from before the deploy"


def check_mirror_pod(core: client.CoreV1Api, node: str) -> client.V1Pod:
    pod = mirror(core, f"{NAME}-{node}")
    assert pod is not None
    assert "kubernetes.io/config.mirror" in (pod.metadata.annotations or {}), "not a mirror pod"
    assert pod.spec.node_name == node and pod.spec.host_network
    assert pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions
    )
    cs = pod.status.container_statuses[0]
    assert cs.ready and cs.started and cs.restart_count == 0, cs
    # The probes (startup, liveness: /healthz; readiness: /readyz) are HTTPS on 127.0.0.1:12345,
    # as kubeadm's kube-scheduler on 10259; Ready says they pass. Ask the same URLs on the node.
    for path in ("/healthz", "/readyz", "/livez"):
        assert https_get(node, f"https://127.0.0.1:{PORT}{path}") == (0, "ok"), path
    # /metrics only for those the API server authorizes (reviewed with scheduler.conf's identity)
    code, body = https_get(node, f"https://127.0.0.1:{PORT}/metrics")
    assert code == 0 and '"code":403' in body and "system:anonymous" in body, body
    # --bind-address=127.0.0.1, as kubeadm's kube-scheduler: not served on the node's address.
    ip = node_ip(control_plane(core))
    code, _ = https_get(node, f"https://{ip}:{PORT}/healthz")
    assert code == 7, f"curl https://{ip}:{PORT}/healthz exited {code}; expected connection refused"
    return pod


def dropped_in_to_ready(stdout: str, node: str) -> float:
    m = re.search(
        rf"{re.escape(node)}: kube-system/{NAME}-{re.escape(node)} is Running and Ready, "
        r"([\d.]+)s after its manifest was written",
        stdout,
    )
    assert m, stdout
    return float(m.group(1))


def test_beside_kube_scheduler_on_its_own_lease(
    node: str, api: client.ApiClient, core: client.CoreV1Api, namespace: str, test_image: str
) -> None:
    ks_before = read_lease(api)
    start = time.time()
    res = deploy("static", "--timeout", "240")
    pod = check_mirror_pod(core, node)
    record(SUITE, "beside_dropin_to_ready_s", dropped_in_to_ready(res.stdout, node))
    record(SUITE, "beside_deploy_to_ready_condition_s", ready_since(pod) - start, resolution="1s")
    record(SUITE, "beside_deploy_s", res.seconds)
    assert node_file_exists(node, f"{MANIFESTS}/{NAME}.yaml")
    assert node_file_exists(node, f"{MANIFESTS}/kube-scheduler.yaml")

    lease = read_lease(api, NAME)
    assert holder_host(holder(lease)) == node and annotated_ours(lease)
    ks = read_lease(api)
    assert holder(ks) == holder(ks_before) and not annotated_ours(ks), "kube-scheduler keeps its own Lease"
    assert crictl_running(node, "kube-scheduler"), "kube-scheduler keeps running"

    sleeper(core, namespace, "names-my-scheduler", test_image, scheduler_name=NAME)
    assert_bound_by(core, namespace, "names-my-scheduler", {node}, 60, scheduler=NAME)
    sleeper(core, namespace, "names-no-scheduler", test_image)
    assert_bound_by(core, namespace, "names-no-scheduler", {node}, 60)
    assert "names-no-scheduler" not in pod_log(core, "kube-system", f"{NAME}-{node}")

    res = restore("static")
    record(SUITE, "beside_restore_s", res.seconds)
    assert mirror(core, f"{NAME}-{node}") is None
    assert not node_file_exists(node, f"{MANIFESTS}/{NAME}.yaml")
    assert not node_file_exists(node, CONFIG_DIR)
    rbac = client.RbacAuthorizationV1Api(api)
    for read in (rbac.read_namespaced_role, rbac.read_namespaced_role_binding):
        with pytest.raises(client.ApiException) as e:
            read(f"dynamic-scheduler:{NAME}-lease", "kube-system")
        assert e.value.status == 404
    assert read_lease(api, NAME) is None, "our Lease kube-system/my-scheduler is left behind"
    assert crictl_running(node, "kube-scheduler")


def test_replace_kube_scheduler(
    node: str, api: client.ApiClient, core: client.CoreV1Api, namespace: str, test_image: str
) -> None:
    start = time.time()
    res = deploy("static", "--set", "static.mode=replace", "--timeout", "240")
    pod = check_mirror_pod(core, node)
    record(SUITE, "replace_dropin_to_ready_s", dropped_in_to_ready(res.stdout, node))
    record(SUITE, "replace_deploy_to_ready_condition_s", ready_since(pod) - start, resolution="1s")
    record(SUITE, "replace_deploy_s", res.seconds)

    assert not node_file_exists(node, f"{MANIFESTS}/kube-scheduler.yaml")
    assert node_file_exists(node, f"{CONFIG_DIR}/kube-scheduler.yaml.orig")
    poll(
        lambda: mirror(core, f"kube-scheduler-{node}") is None,
        60,
        "kube-scheduler's mirror pod gone",
        interval=0.5,
        retry_on=(ApiException,),
    )
    assert crictl_running(node, "kube-scheduler") == []
    lease = read_lease(api)
    assert holder_host(holder(lease)) == node and annotated_ours(lease), lease
    # deploy returned once ours schedules (after the safe wait): the pod created now is ours to bind.
    m = re.search(r"^\S+ is scheduling since \S+: ([\d.]+)s after it held the Lease", res.stdout, re.M)
    assert m, res.stdout
    record(SUITE, "replace_hold_to_scheduling_s", float(m.group(1)))

    sleeper(core, namespace, "names-no-scheduler", test_image)
    assert_bound_by(core, namespace, "names-no-scheduler", {node}, 60)
    log = pod_log(core, "kube-system", f"{NAME}-{node}")
    assert f'"Successfully bound pod to node" pod="{namespace}/names-no-scheduler"' in log

    res = restore("static")
    record(SUITE, "replace_restore_s", res.seconds)
    assert node_file_exists(node, f"{MANIFESTS}/kube-scheduler.yaml")
    assert not node_file_exists(node, CONFIG_DIR)
    assert mirror(core, f"{NAME}-{node}") is None
    ks = wait_pod(core, "kube-system", f"kube-scheduler-{node}", is_ready, "Ready", 120)
    assert ks["status"]["phase"] == "Running"
    lease = read_lease(api)
    assert holder_host(holder(lease)) == node and not annotated_ours(lease), lease

    sleeper(core, namespace, "after-restore", test_image)
    assert_bound_by(core, namespace, "after-restore", {node}, 120)
