"""What the informers keep of pods and nodes (``scheduler.cluster.slim``): unit rules, and the
stores of informers against the API server."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import orjson

from scheduler.cluster.client import api_request
from scheduler.cluster.informers import Informer
from scheduler.cluster.slim import LAST_APPLIED, RUNTIME_ONLY, slim_node, slim_pod, slimmer, trimmed
from scheduler.cluster.store import NAMESPACES, NODES, PODS
from scheduler.core.podinfo import PodInfo
from scheduler.settings import WatchSettings

KEPT_CONTAINER = {
    "name": "app",
    "image": "registry.example.com/app:1",
    "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}},
    "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    "restartPolicy": "Always",
    "securityContext": {"runAsNonRoot": True},
}
RUNTIME = {
    "command": ["/app"],
    "args": ["--port=80"],
    "env": [{"name": "A", "value": "1"}],
    "envFrom": [{"configMapRef": {"name": "cm"}}],
    "imagePullPolicy": "IfNotPresent",
    "livenessProbe": {"httpGet": {"path": "/", "port": 80}},
    "readinessProbe": {"httpGet": {"path": "/", "port": 80}},
    "startupProbe": {"httpGet": {"path": "/", "port": 80}},
    "lifecycle": {"preStop": {"sleep": {"seconds": 1}}},
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "workingDir": "/srv",
    "stdin": False,
    "stdinOnce": False,
    "tty": False,
    "volumeDevices": [{"name": "raw", "devicePath": "/dev/xvda"}],
}


def running_pod() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web-1",
            "namespace": "default",
            "uid": "u1",
            "labels": {"app": "web"},
            "annotations": {LAST_APPLIED: '{"kind":"Pod"}', "example.com/team": "a"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "rs", "controller": True}],
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {
            "nodeName": "n1",
            "schedulerName": "default-scheduler",
            "containers": [{**KEPT_CONTAINER, **RUNTIME}],
            "initContainers": [{**KEPT_CONTAINER, "name": "init", **RUNTIME}],
            "ephemeralContainers": [{"name": "debug", "image": "busybox", "command": ["sh"], "tty": True}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
        },
        "status": {
            "phase": "Running",
            "nominatedNodeName": "",
            "startTime": "2026-12-01T10:00:00Z",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
                {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"},
                {"type": "ContainersReady", "status": "True"},
            ],
            "podIP": "10.244.0.5",
            "containerStatuses": [{"name": "app", "ready": True}],
            "initContainerStatuses": [{"name": "init", "ready": True}],
            "ephemeralContainerStatuses": [{"name": "debug"}],
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "web-1-gpu"}],
        },
    }


def test_a_pod_keeps_what_scheduling_reads_and_loses_what_only_the_kubelet_does() -> None:
    pod = running_pod()
    before = copy.deepcopy(pod)
    assert slim_pod(pod) is pod  # in place
    meta, spec, status = pod["metadata"], pod["spec"], pod["status"]
    assert "managedFields" not in meta
    assert meta["annotations"] == {"example.com/team": "a"}
    assert meta["ownerReferences"] == before["metadata"]["ownerReferences"]
    assert spec["containers"] == [KEPT_CONTAINER]
    assert spec["initContainers"] == [{**KEPT_CONTAINER, "name": "init"}]
    assert spec["ephemeralContainers"] == [{"name": "debug", "image": "busybox"}]
    for key in ("volumes", "tolerations", "nodeName", "schedulerName"):
        assert spec[key] == before["spec"][key]
    assert set(status) == {"phase", "nominatedNodeName", "startTime", "conditions", "resourceClaimStatuses"}
    assert [c["type"] for c in status["conditions"]] == ["PodScheduled", "DisruptionTarget"]
    assert status["conditions"][1] == before["status"]["conditions"][2]
    # what PodInfo derives is the same from the slim pod
    a, b = PodInfo.from_pod(before), PodInfo.from_pod(pod)
    assert (a.requests, a.non_zero_requests, a.host_ports, a.labels) == (
        b.requests,
        b.non_zero_requests,
        b.host_ports,
        b.labels,
    )


def test_slimming_tolerates_missing_parts_and_a_second_pass() -> None:
    assert slim_pod({"metadata": {"name": "p"}}) == {"metadata": {"name": "p"}}
    assert slim_pod({"metadata": {"name": "p", "annotations": None}, "spec": {"containers": None}})
    once = slim_pod(running_pod())
    assert slim_pod(copy.deepcopy(once)) == once
    assert slim_node({"metadata": {"name": "n"}}) == {"metadata": {"name": "n"}}


def test_a_node_keeps_labels_taints_allocatable_addresses_images() -> None:
    node = {
        "metadata": {"name": "n1", "labels": {"zone": "a"}, "annotations": {"cpu_usage_avg_5m": "0.5,t"}},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": False},
        "status": {
            "capacity": {"cpu": "8"},
            "allocatable": {"cpu": "8"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "images": [{"names": ["app:1"], "sizeBytes": 10}],
            "declaredFeatures": ["f"],
            "conditions": [{"type": "Ready", "status": "True"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"kubeletVersion": "v1.37.0"},
            "volumesInUse": ["v"],
            "volumesAttached": [{"name": "v", "devicePath": ""}],
            "config": {},
        },
    }
    kept = copy.deepcopy(node)
    for key in ("conditions", "daemonEndpoints", "nodeInfo", "volumesInUse", "volumesAttached", "config"):
        del kept["status"][key]
    assert slim_node(node) == kept


def test_other_resources_lose_only_managed_fields() -> None:
    assert slimmer("pods") is slim_pod and slimmer("nodes") is slim_node
    assert slimmer("persistentvolumeclaims") is trimmed
    ns = {"metadata": {"name": "a", "managedFields": [{}], "annotations": {LAST_APPLIED: "{}"}}}
    assert slimmer("namespaces")(ns) == {"metadata": {"name": "a", "annotations": {LAST_APPLIED: "{}"}}}


def test_every_runtime_only_field_is_a_container_field_nothing_here_reads() -> None:
    assert set(RUNTIME) == set(RUNTIME_ONLY)


def test_the_informers_store_slim_pods_and_nodes(admin, namespace: str) -> None:
    node = api_request(
        admin,
        "POST",
        "/api/v1/nodes",
        body={
            "metadata": {"name": f"node-{uuid.uuid4().hex[:6]}"},
            "status": {
                "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                "nodeInfo": {"kubeletVersion": "v1.37.0"},
            },
        },
    )
    pod = running_pod()
    pod["metadata"] = {k: pod["metadata"][k] for k in ("name", "labels", "annotations")}
    pod["spec"].pop("nodeName")
    pod["spec"].pop("ephemeralContainers")
    pod["spec"]["schedulerName"] = "nobody"
    pod["spec"]["volumes"].append({"name": "raw", "persistentVolumeClaim": {"claimName": "raw"}})
    created = api_request(admin, "POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)
    assert created["spec"]["containers"][0]["env"] and created["metadata"]["annotations"][LAST_APPLIED]
    for stream in (True, False):
        pods = Informer(admin, PODS, settings=WatchSettings(stream_initial_state=stream)).start()
        nodes = Informer(admin, NODES, settings=WatchSettings(stream_initial_state=stream)).start()
        namespaces = Informer(admin, NAMESPACES, settings=WatchSettings(stream_initial_state=stream)).start()
        try:
            assert pods.wait_for_sync(10) and nodes.wait_for_sync(10) and namespaces.wait_for_sync(10)
            stored = pods.store.get(f"{namespace}/web-1")
            (c,) = stored["spec"]["containers"]
            assert not set(RUNTIME_ONLY) & set(c) and c["image"] == KEPT_CONTAINER["image"]
            assert c["resources"] == KEPT_CONTAINER["resources"] and c["ports"][0]["hostPort"] == 8080
            assert stored["metadata"]["annotations"] == {"example.com/team": "a"}
            status = nodes.store.get(node["metadata"]["name"])["status"]
            assert "conditions" not in status and "nodeInfo" not in status
            assert status["allocatable"]["cpu"] == "4"
            assert "managedFields" not in namespaces.store.get(namespace)["metadata"]
        finally:
            for inf in (pods, nodes, namespaces):
                inf.stop()


def test_strings_that_repeat_across_pods_are_shared() -> None:
    a, b = (slim_pod(orjson.loads(orjson.dumps(running_pod()))) for _ in range(2))
    assert a == running_pod_slim()
    same = [
        lambda p: p["metadata"]["namespace"],
        lambda p: p["metadata"]["labels"]["app"],
        lambda p: p["spec"]["nodeName"],
        lambda p: p["spec"]["containers"][0]["image"],
        lambda p: p["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        lambda p: p["status"]["phase"],
        lambda p: p["status"]["conditions"][0]["status"],
    ]
    for get in same:
        assert get(a) is get(b), get(a)
    # a pod's own strings are not kept in the interning table
    assert a["metadata"]["uid"] is not b["metadata"]["uid"]


def running_pod_slim() -> dict[str, Any]:
    return slim_pod(running_pod())
