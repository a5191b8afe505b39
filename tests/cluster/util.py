"""Helpers for the cluster tests: objects to create, and the scheduler run in this process."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client import ApiClient

from scheduler.cluster.client import api_request
from scheduler.polling import poll


def make_node(
    admin: ApiClient,
    name: str | None = None,
    labels: dict[str, str] | None = None,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
) -> dict[str, Any]:
    """A node of this capacity (the API server defaults its allocatable to it); no kubelet."""
    name = name or f"node-{uuid.uuid4().hex[:6]}"
    return api_request(
        admin,
        "POST",
        "/api/v1/nodes",
        body={
            "metadata": {"name": name, "labels": labels or {}},
            "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": pods}},
        },
    )


def make_pod(
    admin: ApiClient,
    namespace: str,
    name: str | None = None,
    *,
    scheduler_name: str = "test-scheduler",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An unbound pod for a scheduler nobody runs (the Go kube-scheduler of the lease
    tests only takes ``default-scheduler`` pods)."""
    name = name or f"pod-{uuid.uuid4().hex[:6]}"
    return api_request(
        admin,
        "POST",
        f"/api/v1/namespaces/{namespace}/pods",
        body={
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {
                "schedulerName": scheduler_name,
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        },
    )


@contextlib.contextmanager
def scheduler_running(
    config: dict[str, Any], workdir: Path, serving: Any = None, *, leading: bool = True
) -> Iterator[Any]:
    """The scheduler (``scheduler.app.App``) in this process with ``config`` (a
    KubeSchedulerConfiguration as a dict; ``serving``: its ServingOptions, else no serving),
    until the block ends. It starts once it schedules, or (``leading=False``: a standby) once
    its caches are synced."""
    from scheduler.app import App
    from scheduler.config import load_config
    from scheduler.config.options import Options, ServingOptions

    path = workdir / "scheduler-config.yaml"
    path.write_text(yaml.safe_dump(config))
    app = App(Options(config=load_config(str(path)), serving=serving or ServingOptions(secure_port=0)))
    app.build()
    runner = threading.Thread(target=app.run, name="scheduler-under-test", daemon=True)
    runner.start()
    try:
        if leading:
            assert app.scheduling.wait(30), "the scheduler did not start"
        else:
            poll(lambda: all(i.has_synced() for i in app.informers) or None, 30, "the standby's caches")
        yield app
    finally:
        app.stop.set()
        runner.join(20)


def only_nodes_labelled(key: str, value: str) -> dict[str, Any]:
    """A NodeAffinity pluginConfig entry that keeps a profile to the nodes with this label (the
    shared API server has other tests' nodes too)."""
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
    return {
        "name": "NodeAffinity",
        "args": {
            "addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        },
    }


def kept_to_nodes_config(apiserver: Any, profile: str, key: str, value: str) -> dict[str, Any]:
    """A v1 configuration of one default profile named ``profile``, kept to the nodes labelled
    ``key=value``, no leader election, for ``scheduler_running``."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(apiserver.kubeconfig)},
        "profiles": [{"schedulerName": profile, "pluginConfig": [only_nodes_labelled(key, value)]}],
    }


# A crane-scheduler policy of one metric, synced every second, with a 65 % limit.
DYNAMIC_POLICY = """\
apiVersion: scheduler.policy.crane.io/v1alpha1
kind: DynamicSchedulerPolicy
spec:
  syncPolicy: [{name: cpu_usage_avg_5m, period: 1s}]
  predicate: [{name: cpu_usage_avg_5m, maxLimitPecent: 0.65}]
  priority: [{name: cpu_usage_avg_5m, weight: 1}]
"""


def dynamic_config(
    apiserver: Any, label: str, prom: Any, tmp_path: Path, **args: object
) -> tuple[str, dict[str, Any]]:
    """A profile of Dynamic alone at filter and score (``DYNAMIC_POLICY``, reading ``prom``), on
    the nodes labelled ``load-test=label``: the profile's name and the configuration."""
    (tmp_path / "policy.yaml").write_text(DYNAMIC_POLICY)
    profile = f"load-{label}"
    config = kept_to_nodes_config(apiserver, profile, "load-test", label)
    config["profiles"][0]["plugins"] = {
        "filter": {"enabled": [{"name": "Dynamic"}]},
        "score": {"enabled": [{"name": "Dynamic", "weight": 3}]},
    }
    config["profiles"][0]["pluginConfig"].append(
        {
            "name": "Dynamic",
            "args": {"promeAddr": prom.url, "policyConfigPath": str(tmp_path / "policy.yaml"), **args},
        }
    )
    return profile, config


def create_pod(
    admin: ApiClient,
    namespace: str,
    name: str,
    scheduler: str,
    *,
    image: str = "registry.k8s.io/pause:3.10",
    volumes: list[dict[str, Any]] | None = None,
    cpu: str | None = None,
) -> dict[str, Any]:
    """A pod for ``scheduler`` that tolerates nodes without a Ready condition (no kubelets here),
    requesting ``cpu`` if given."""
    container: dict[str, Any] = {"name": "c", "image": image}
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu}}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
        "containers": [container],
    }
    if volumes:
        spec["volumes"] = volumes
    return api_request(
        admin, "POST", f"/api/v1/namespaces/{namespace}/pods", body={"metadata": {"name": name}, "spec": spec}
    )


def bound_node(admin: ApiClient, namespace: str, name: str, timeout: float = 20) -> str:
    """The node the pod gets bound to, once it is."""
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    return poll(lambda: api_request(admin, "GET", path)["spec"].get("nodeName", ""), timeout, f"{name} bound")


def bound_claim(
    admin: ApiClient,
    namespace: str,
    pv: str,
    claim: str,
    *,
    pv_labels: dict[str, str] | None = None,
    access_modes: tuple[str, ...] = ("ReadWriteOnce",),
    source: dict[str, Any] | None = None,
) -> str:
    """A claim bound to a 1Gi PV (hostPath, or ``source``) as the PV controller would bind it (it does not run
    beside the private API server): the PV's ``claimRef``, the claim's ``volumeName`` and
    ``pv.kubernetes.io/bind-completed``. Returns the claim's name; the PV is the caller's to delete."""
    api_request(
        admin,
        "POST",
        "/api/v1/persistentvolumes",
        body={
            "metadata": {"name": pv, "labels": pv_labels or {}},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": list(access_modes),
                **(source or {"hostPath": {"path": "/tmp/data"}}),
                "storageClassName": "",
                "claimRef": {"namespace": namespace, "name": claim},
            },
        },
    )
    api_request(
        admin,
        "POST",
        f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
        body={
            "metadata": {"name": claim, "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {
                "accessModes": list(access_modes),
                "resources": {"requests": {"storage": "1Gi"}},
                "storageClassName": "",
                "volumeName": pv,
            },
        },
    )
    return claim


def failed_note(admin: ApiClient, namespace: str, pod: str) -> str:
    """The note of the pod's FailedScheduling event, "" while it has none."""
    items = api_request(admin, "GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
    return next(
        (e["note"] for e in items if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == pod), ""
    )


def halt_times(app: Any) -> list[float]:
    """When (time.monotonic()) the app's binder is halted, its Lease lost: a list that gets
    the moment of each halt."""
    assert app.io is not None
    times: list[float] = []
    halt = app.io.binder.halt

    def timed_halt() -> None:
        times.append(time.monotonic())
        halt()

    app.io.binder.halt = timed_halt
    return times
