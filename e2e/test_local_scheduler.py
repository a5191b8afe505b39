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

from e2e.binding import wait_bound
from e2e.kube import is_ready, phase_is, poll, wait_pod
from e2e.localscheduler import LocalScheduler, config, local_scheduler

pytestmark = pytest.mark.cluster

NAME = "e2e-local-scheduler"


@pytest.fixture(scope="module")
def sched(kind_cluster) -> Iterator[LocalScheduler]:
    with local_scheduler(NAME, config(NAME, NAME), str(kind_cluster.kubeconfig_path)) as s:
        s.wait_ready()
        yield s


def pod_body(name: str, image: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "schedulerName": NAME,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["python3", "-c", "import time; time.sleep(3600)"],
                    **spec.pop("container", {}),
                }
            ],
            **spec,
        },
    }


def events_for(api: client.ApiClient, ns: str, pod: str, reason: str) -> list[dict[str, Any]]:
    ev = client.EventsV1Api(api).list_namespaced_event(
        ns, field_selector=f"regarding.name={pod},reason={reason}"
    )
    return [api.sanitize_for_serialization(e) for e in ev.items]


def test_binds_and_reports_like_kube_scheduler(sched, api, core, namespace, test_image) -> None:
    core.create_namespaced_pod(namespace, pod_body("p", test_image))
    pod = wait_bound(core, namespace, "p", 60)
    node = pod["spec"]["nodeName"]
    assert "control-plane" not in node, "the control plane's taint is respected"
    ev = poll("the Scheduled event", lambda: events_for(api, namespace, "p", "Scheduled"), 30)[0]
    assert ev["note"] == f"Successfully assigned {namespace}/p to {node}"
    assert ev["reportingController"] == NAME
    assert ev["reportingInstance"] == f"{NAME}-{socket.gethostname()}"
    assert ev["type"] == "Normal" and ev["action"] == "Binding"
    cond = poll(
        "PodScheduled=True",
        lambda: [
            c
            for c in core.read_namespaced_pod("p", namespace).status.conditions or ()
            if c.type == "PodScheduled" and c.status == "True"
        ],
        30,
    )
    assert cond


def test_unschedulable_pod_gets_event_and_condition(sched, api, core, namespace, test_image) -> None:
    core.create_namespaced_pod(
        namespace, pod_body("big", test_image, container={"resources": {"requests": {"cpu": "1000"}}})
    )
    want = (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."
        # 1000 CPUs is more than any node has: removing pods cannot help anywhere
        " preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    ev = poll("a FailedScheduling event", lambda: events_for(api, namespace, "big", "FailedScheduling"), 30)[
        0
    ]
    assert ev["note"] == want
    assert ev["reportingController"] == NAME and ev["type"] == "Warning"

    def condition():
        for c in core.read_namespaced_pod("big", namespace).status.conditions or ():
            if c.type == "PodScheduled" and c.status == "False":
                return c
        return None

    c = poll("PodScheduled=False", condition, 30)
    assert c.reason == "Unschedulable" and c.message == want
    assert not core.read_namespaced_pod("big", namespace).spec.node_name


def test_daemonset_gets_one_pod_per_node(sched, api, core, namespace, test_image) -> None:
    apps = client.AppsV1Api(api)
    tmpl = pod_body(
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

    pods = poll("one DaemonSet pod bound on every node", placed, 90)
    for p in pods:
        ev = poll(
            f"Scheduled event of {p.metadata.name}",
            lambda p=p: events_for(api, namespace, p.metadata.name, "Scheduled"),
            30,
        )[0]
        assert ev["reportingController"] == NAME


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
        pod_body(
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
