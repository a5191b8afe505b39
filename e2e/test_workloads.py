"""Everyday workloads with ours as the cluster's scheduler (the lease method deployed).

Each test first makes sure our leader is the one binding (a probe pod), then
checks what an operator would: a DaemonSet on every node, a StatefulSet with
``WaitForFirstConsumer`` claims, required anti-affinity, taints, and a pod
that fits nowhere, with kube-scheduler's message, until room frees up. Who
bound a pod is read from its ``Scheduled`` event (e2e/events.py).
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.events import assert_bound_by, instance_pod, preemption_note, wait_event
from e2e.fit import free_cpu, wait_no_terminating_pods
from e2e.kube import is_ready, wait_pod
from e2e.measure import record
from e2e.nodes import CONTROL_PLANE_LABEL, HOSTNAME_LABEL, cluster_nodes
from e2e.pods import condition, is_bound, list_pods_raw, pod_body, wait_bound
from e2e.schedulers import our_pod_names, wait_ours_scheduling
from scheduler.polling import poll

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

CONTROL_PLANE_TAINT = "node(s) had untolerated taint(s)"
TOLERATE_CONTROL_PLANE = [{"key": CONTROL_PLANE_LABEL, "operator": "Exists", "effect": "NoSchedule"}]


@pytest.fixture
def ours(core: client.CoreV1Api, namespace: str, test_image: str, ours_is_the_scheduler: str) -> set[str]:
    """Our leader binds pods; the names of our replicas."""
    wait_ours_scheduling(core, namespace, test_image)
    return our_pod_names(core)


def pods(core: client.CoreV1Api, ns: str, selector: str) -> list[dict[str, Any]]:
    return [
        p
        for p in list_pods_raw(core, ns, label_selector=selector)
        if not p["metadata"].get("deletionTimestamp")
    ]


def template(name: str, image: str, **kw: Any) -> dict[str, Any]:
    pod = pod_body(name, image, labels={"app": name}, **kw)
    return {"metadata": pod["metadata"], "spec": pod["spec"]}


def test_a_daemonset_gets_one_pod_per_node_bound_by_ours(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, test_image: str, ours: set[str]
) -> None:
    nodes = cluster_nodes(core)
    tpl = template("ds", test_image, tolerations=TOLERATE_CONTROL_PLANE)
    client.AppsV1Api(api).create_namespaced_daemon_set(
        namespace,
        {"metadata": {"name": "ds"}, "spec": {"selector": {"matchLabels": {"app": "ds"}}, "template": tpl}},
    )
    running = poll(
        lambda: (lambda ps: ps if len(ps) == 3 and all(is_ready(p) for p in ps) else None)(
            pods(core, namespace, "app=ds")
        ),
        180,
        "a Running DaemonSet pod on each node",
        interval=1,
        retry_on=(ApiException,),
    )
    assert sorted(p["spec"]["nodeName"] for p in running) == sorted(nodes.all)
    for p in running:
        # The DaemonSet controller only pins the pod (node affinity on metadata.name); the scheduler binds it.
        terms = p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [p["spec"]["nodeName"]]
        assert_bound_by(core, namespace, p["metadata"]["name"], ours, 30)


def test_a_statefulset_with_wait_for_first_consumer_claims_binds(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, test_image: str, ours: set[str]
) -> None:
    default = [
        sc
        for sc in client.StorageV1Api(api).list_storage_class().items
        if (sc.metadata.annotations or {}).get("storageclass.kubernetes.io/is-default-class") == "true"
    ]
    assert len(default) == 1 and default[0].volume_binding_mode == "WaitForFirstConsumer", [
        (sc.metadata.name, sc.volume_binding_mode) for sc in default
    ]
    tpl = template("sts", test_image, command=["sh", "-c", "echo $HOSTNAME > /data/owner && exec sleep 3600"])
    tpl["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    client.AppsV1Api(api).create_namespaced_stateful_set(
        namespace,
        {
            "metadata": {"name": "sts"},
            "spec": {
                "serviceName": "sts",
                "replicas": 2,
                "selector": {"matchLabels": {"app": "sts"}},
                "template": tpl,
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "16Mi"}},
                        },
                    }
                ],
            },
        },
    )
    start = time.monotonic()
    for i in range(2):
        wait_pod(core, namespace, f"sts-{i}", is_ready, "Ready", timeout=240)
    took = time.monotonic() - start
    for i in range(2):
        pod = json.loads(core.read_namespaced_pod(f"sts-{i}", namespace, _preload_content=False).data)
        pvc = core.read_namespaced_persistent_volume_claim(f"data-sts-{i}", namespace)
        assert pvc.status.phase == "Bound"
        assert pvc.spec.storage_class_name == default[0].metadata.name
        # Ours chose the node and wrote it on the claim; the provisioner made the volume there.
        assert (pvc.metadata.annotations or {}).get("volume.kubernetes.io/selected-node") == pod["spec"][
            "nodeName"
        ]
        pv = client.CoreV1Api(api).read_persistent_volume(pvc.spec.volume_name)
        node_terms = pv.spec.node_affinity.required.node_selector_terms
        assert [v for t in node_terms for e in t.match_expressions for v in e.values] == [
            pod["spec"]["nodeName"]
        ]
        assert_bound_by(core, namespace, f"sts-{i}", ours, 30)
    record("workloads", "statefulset_ready_s", took)


def test_required_anti_affinity_spreads_and_the_third_replica_waits(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, test_image: str, ours: set[str]
) -> None:
    """Two workers (the control plane is tainted): 2 replicas on distinct workers; a third has
    no node left and stays unbound with kube-scheduler's reasons."""
    nodes = cluster_nodes(core)
    tpl = template("anti", test_image)
    tpl["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "anti"}}, "topologyKey": HOSTNAME_LABEL}
            ]
        }
    }
    client.AppsV1Api(api).create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "anti"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "anti"}}, "template": tpl},
        },
    )

    def two_bound_one_not() -> Any:
        ps = pods(core, namespace, "app=anti")
        bound = [p for p in ps if is_bound(p)]
        return (bound, [p for p in ps if not is_bound(p)]) if len(ps) == 3 and len(bound) == 2 else None

    bound, waiting = poll(
        two_bound_one_not, 90, "2 replicas bound, 1 not", interval=0.5, retry_on=(ApiException,)
    )
    assert sorted(p["spec"]["nodeName"] for p in bound) == sorted(nodes.workers)
    for p in bound:
        assert_bound_by(core, namespace, p["metadata"]["name"], ours, 30)
    name = waiting[0]["metadata"]["name"]
    expected = (
        f"0/3 nodes are available: 1 {CONTROL_PLANE_TAINT}, 2 node(s) didn't match pod anti-affinity rules."
        + preemption_note(1, 2)
    )
    ev = wait_event(core, namespace, name, "FailedScheduling", 60)
    assert ev["message"] == expected
    assert instance_pod(ev.get("reportingInstance") or "") in ours
    pod = wait_pod(
        core,
        namespace,
        name,
        lambda p: (condition(p, "PodScheduled") or {}).get("status") == "False",
        "marked unschedulable",
        30,
    )
    assert not is_bound(pod)


@pytest.fixture
def tainted_worker(core: client.CoreV1Api, namespace: str) -> Any:
    """One worker tainted NoSchedule with a key of this test; untainted afterwards."""
    node = cluster_nodes(core).workers[0]
    taint = {"key": "e2e.dynamic-scheduler.io/avoid", "value": namespace, "effect": "NoSchedule"}

    def set_taints(change: Any) -> None:
        n = core.read_node(node)
        taints = [t.to_dict() for t in n.spec.taints or () if t.key != taint["key"]]
        core.patch_node(node, {"spec": {"taints": change(taints)}})

    set_taints(lambda ts: [*ts, taint])
    try:
        yield node, taint
    finally:
        set_taints(lambda ts: ts)


def wait_taint_seen(core: client.CoreV1Api, ns: str, image: str, node: str, timeout: float = 60) -> None:
    """Until our scheduler refuses a probe pod kept to ``node``: it has seen the new taint (the
    Node update and pod creations reach it on separate watches). A probe bound before that is
    deleted, and another one tried."""
    deadline = time.monotonic() + timeout
    numbers = itertools.count(1)

    def refused() -> bool:
        name = f"taint-probe-{next(numbers)}"
        core.create_namespaced_pod(ns, pod_body(name, image, node_selector={HOSTNAME_LABEL: node}))

        def outcome() -> str | None:
            pod = json.loads(core.read_namespaced_pod(name, ns, _preload_content=False).data)
            if is_bound(pod):
                return "bound"
            return "refused" if (condition(pod, "PodScheduled") or {}).get("status") == "False" else None

        got = poll(
            outcome,
            max(1.0, deadline - time.monotonic()),
            f"{name} bound or refused",
            interval=0.2,
            retry_on=(ApiException,),
        )
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
        return got == "refused"

    poll(refused, timeout, f"{node}'s taint seen by our scheduler (a probe pod refused there)")


def test_taints_are_respected(
    core: client.CoreV1Api, namespace: str, test_image: str, ours: set[str], tainted_worker: Any
) -> None:
    tainted, taint = tainted_worker
    other = next(w for w in cluster_nodes(core).workers if w != tainted)
    wait_taint_seen(core, namespace, test_image, tainted)
    for i in range(4):
        core.create_namespaced_pod(namespace, pod_body(f"free-{i}", test_image))
    placed = {f"free-{i}": wait_bound(core, namespace, f"free-{i}", 60)["spec"]["nodeName"] for i in range(4)}
    assert set(placed.values()) == {other}, f"pods without a toleration went to {placed}, tainted: {tainted}"
    pin = {HOSTNAME_LABEL: tainted}
    core.create_namespaced_pod(namespace, pod_body("pinned", test_image, node_selector=pin))
    tolerating = [{"key": taint["key"], "operator": "Equal", "value": taint["value"], "effect": "NoSchedule"}]
    core.create_namespaced_pod(
        namespace, pod_body("tolerating", test_image, node_selector=pin, tolerations=tolerating)
    )
    assert wait_bound(core, namespace, "tolerating", 60)["spec"]["nodeName"] == tainted
    ev = wait_event(core, namespace, "pinned", "FailedScheduling", 60)
    # Per node, the first filter that fails (kube-scheduler's order: TaintToleration, then NodeAffinity).
    # The tainted worker and the control plane: kube-scheduler 1.37 words both alike.
    assert ev["message"] == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        f"2 {CONTROL_PLANE_TAINT}." + preemption_note(3)
    ), ev["message"]
    assert not is_bound(
        json.loads(core.read_namespaced_pod("pinned", namespace, _preload_content=False).data)
    )


def test_a_pod_that_fits_nowhere_waits_then_binds_when_room_frees(
    core: client.CoreV1Api, namespace: str, test_image: str, ours: set[str]
) -> None:
    """Placeholders (pinned with nodeName, no scheduler) take all but 100m of each worker's free
    CPU; a pod asking 400m fits nowhere. Deleting one placeholder makes room: ours binds it there."""
    workers = cluster_nodes(core).workers
    wait_no_terminating_pods(core, workers, 180)
    free = free_cpu(core)
    assert all(free[w] >= 600 for w in workers), f"the workers have too little free CPU for this test: {free}"
    for w in workers:
        core.create_namespaced_pod(
            namespace, pod_body(f"hold-{w}", test_image, cpu=f"{free[w] - 100}m", node_name=w)
        )
    for w in workers:
        wait_pod(core, namespace, f"hold-{w}", is_ready, "Ready (admitted by the kubelet)", 120)
    core.create_namespaced_pod(namespace, pod_body("big", test_image, cpu="400m"))
    # The placeholders have the big pod's priority: nothing to preempt.
    expected = f"0/3 nodes are available: 1 {CONTROL_PLANE_TAINT}, 2 Insufficient cpu." + preemption_note(
        1, 2
    )
    ev = wait_event(core, namespace, "big", "FailedScheduling", 60)
    assert ev["message"] == expected
    assert instance_pod(ev.get("reportingInstance") or "") in ours
    pod = wait_pod(
        core,
        namespace,
        "big",
        lambda p: (condition(p, "PodScheduled") or {}).get("status") == "False",
        "PodScheduled=False",
        30,
    )
    cond = condition(pod, "PodScheduled")
    assert (cond["reason"], cond["message"]) == ("Unschedulable", expected)
    freed = workers[0]
    t0 = time.monotonic()
    core.delete_namespaced_pod(f"hold-{freed}", namespace, grace_period_seconds=0)
    bound = wait_bound(core, namespace, "big", 60)
    took = time.monotonic() - t0
    assert bound["spec"]["nodeName"] == freed
    assert_bound_by(core, namespace, "big", ours, 30)
    record("workloads", "unschedulable_bound_after_room_freed_s", took)
