"""The scheduler as a local process against kind, under a second scheduler name.

kube-scheduler keeps running as the cluster's scheduler; ours schedules only
the pods that name it: binding, events, the PodScheduled condition,
DaemonSet placement (node affinity on metadata.name) and a
WaitForFirstConsumer claim of the default StorageClass.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.events import bound_by, wait_event_v1
from e2e.kube import is_ready, phase_is, wait_pod
from e2e.localscheduler import LocalScheduler, config, local_scheduler
from e2e.pods import pod_body, wait_bound
from scheduler.polling import poll

pytestmark = pytest.mark.cluster

NAME = "e2e-local-scheduler"


@pytest.fixture(scope="module")
def sched(kind_cluster) -> Iterator[LocalScheduler]:
    with local_scheduler(NAME, config(NAME, NAME), str(kind_cluster.kubeconfig_path)) as s:
        s.wait_ready()
        yield s


def our_pod(name: str, image: str, **spec: Any) -> dict[str, Any]:
    """A pod naming ours, without requests: ``container`` adds to its container, the rest to its spec."""
    body = pod_body(name, image, cpu=None, memory=None, scheduler_name=NAME)
    body["spec"]["containers"][0].update(spec.pop("container", {}))
    body["spec"].update(spec)
    return body


def test_binds_and_reports_like_kube_scheduler(sched, core, namespace, test_image) -> None:
    core.create_namespaced_pod(namespace, our_pod("p", test_image))
    pod = wait_bound(core, namespace, "p", 60)
    node = pod["spec"]["nodeName"]
    assert "control-plane" not in node, "the control plane's taint is respected"
    ev = wait_event_v1(core, namespace, "p", "Scheduled")
    assert ev["note"] == f"Successfully assigned {namespace}/p to {node}"
    assert ev["reportingController"] == NAME
    assert ev["reportingInstance"] == f"{NAME}-{socket.gethostname()}"
    assert ev["type"] == "Normal" and ev["action"] == "Binding"
    cond = poll(
        lambda: [
            c
            for c in core.read_namespaced_pod("p", namespace).status.conditions or ()
            if c.type == "PodScheduled" and c.status == "True"
        ],
        30,
        "PodScheduled=True",
        interval=0.5,
        retry_on=(ApiException,),
    )
    assert cond


def test_unschedulable_pod_gets_event_and_condition(sched, core, namespace, test_image) -> None:
    core.create_namespaced_pod(
        namespace, our_pod("big", test_image, container={"resources": {"requests": {"cpu": "1000"}}})
    )
    want = (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."
        # 1000 CPUs is more than any node has: removing pods cannot help anywhere
        " preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    ev = wait_event_v1(core, namespace, "big", "FailedScheduling")
    assert ev["note"] == want
    assert ev["reportingController"] == NAME and ev["type"] == "Warning"

    def condition():
        for c in core.read_namespaced_pod("big", namespace).status.conditions or ():
            if c.type == "PodScheduled" and c.status == "False":
                return c
        return None

    c = poll(condition, 30, "PodScheduled=False", interval=0.5, retry_on=(ApiException,))
    assert c.reason == "Unschedulable" and c.message == want
    assert not core.read_namespaced_pod("big", namespace).spec.node_name


def test_daemonset_gets_one_pod_per_node(sched, api, core, namespace, test_image) -> None:
    apps = client.AppsV1Api(api)
    tmpl = our_pod(
        "x",
        test_image,
        tolerations=[
            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
        ],
    )
    apps.create_namespaced_daemon_set(
        namespace,
        {
            "metadata": {"name": "ds"},
            "spec": {
                "selector": {"matchLabels": {"app": "ds"}},
                "template": {"metadata": {"labels": {"app": "ds"}}, "spec": tmpl["spec"]},
            },
        },
    )
    nodes = sorted(n.metadata.name for n in core.list_node().items)

    def placed():
        pods = core.list_namespaced_pod(namespace, label_selector="app=ds").items
        return sorted(p.spec.node_name for p in pods if p.spec.node_name) == nodes and pods

    pods = poll(placed, 90, "one DaemonSet pod bound on every node", interval=0.5, retry_on=(ApiException,))
    for p in pods:
        assert bound_by(core, namespace, p.metadata.name, 30).controller == NAME


def test_wait_for_first_consumer_claim(sched, api, core, namespace, test_image) -> None:
    sc = next(
        s
        for s in client.StorageV1Api(api).list_storage_class().items
        if (s.metadata.annotations or {}).get("storageclass.kubernetes.io/is-default-class") == "true"
    )
    assert sc.volume_binding_mode == "WaitForFirstConsumer"
    core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}},
        },
    )
    core.create_namespaced_pod(
        namespace,
        our_pod(
            "consumer",
            test_image,
            container={"volumeMounts": [{"name": "data", "mountPath": "/data"}]},
            volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        ),
    )
    pod = wait_pod(
        core, namespace, "consumer", lambda p: phase_is("Running")(p) and is_ready(p), "Running", 180
    )
    pvc = core.read_namespaced_persistent_volume_claim("data", namespace)
    assert pvc.status.phase == "Bound"
    assert pvc.metadata.annotations["volume.kubernetes.io/selected-node"] == pod["spec"]["nodeName"]
    pv = core.read_persistent_volume(pvc.spec.volume_name)
    terms = pv.spec.node_affinity.required.node_selector_terms
    assert pod["spec"]["nodeName"] in [v for t in terms for e in t.match_expressions or () for v in e.values]
