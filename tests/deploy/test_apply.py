"""Deploying against a real API server: server-side dry run of every manifest, all-or-nothing apply,
access checks, and restore. No kubelet or controller-manager runs here, so Deployments never roll out:
these tests stop where the deploy starts waiting (the kind e2e suite covers the rest)."""

from __future__ import annotations

import copy
import datetime
import socket
import threading
from typing import Any

import pytest
from kubernetes.client import ApiClient, AppsV1Api, CoordinationV1Api, CoreV1Api, RbacAuthorizationV1Api
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.leases import RESTORING_ANNOTATION
from scheduler.deploy import deploy, finalize_namespace, restore
from scheduler.deploy.cmdline import DeployError
from scheduler.deploy.kube import Cluster
from scheduler.deploy.templates import FIELD_MANAGER
from scheduler.deploy.waiting import holder, read_lease
from tests.access import grants_of, wait_until_allowed
from tests.apiserver import ControlPlane
from tests.deploy.cluster_util import existing, make_pod, namespace_state
from tests.deploy.util import METHODS, all_objects, error_of, rendered, run_main

pytestmark = pytest.mark.apiserver


def dry_run(admin: ApiClient, obj: dict[str, Any]) -> None:
    cluster = Cluster(admin)
    res = cluster.resource(obj)
    cluster.dyn.server_side_apply(
        res,
        body=obj,
        name=obj["metadata"]["name"],
        namespace=obj["metadata"].get("namespace") if res.namespaced else None,
        field_manager=FIELD_MANAGER,
        dry_run="All",
    )


def cleanup(apiserver: ControlPlane, *argv: str) -> None:
    """Remove what a test deployed (restore is what users run; its exit code is checked where it matters)."""
    restore.main([*argv, "--kubeconfig", apiserver.kubeconfig, "--timeout", "30"])


# --- the server accepts every manifest ---------------------------------------------------------


@pytest.mark.parametrize("sets", [(), ("static.mode=replace", "takeover=false", "nodeName=n1")])
@pytest.mark.parametrize("method", METHODS)
def test_server_side_dry_run_of_every_rendered_object(
    admin: ApiClient, namespace: str, method: str, sets: tuple[str, ...]
) -> None:
    objects = all_objects(rendered(method, f"namespace={namespace}", *sets))
    assert objects
    for obj in objects:
        dry_run(admin, obj)
    assert existing(admin, [o for o in objects if o["kind"] != "Namespace"]) == []


def test_the_scheduler_pods_priority_class_is_admitted_in_our_namespace(
    admin: ApiClient, namespace: str
) -> None:
    """system-cluster-critical outside kube-system (allowed since Kubernetes 1.17): the pod the
    Deployment would create passes admission in our namespace; an unknown class does not."""
    dep = rendered("lease", f"namespace={namespace}").objects[-1]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": namespace},
        "spec": copy.deepcopy(dep["spec"]["template"]["spec"]),
    }
    pod["spec"]["serviceAccountName"] = "default"
    core = CoreV1Api(admin)
    created = core.create_namespaced_pod(namespace, pod, dry_run="All")
    assert created.spec.priority == 2000000000
    pod["spec"]["priorityClassName"] = "no-such-class"
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod(namespace, pod, dry_run="All")
    assert info.value.status == 403 and "no PriorityClass with name no-such-class" in info.value.body


# --- all or nothing ----------------------------------------------------------------------------


def test_apply_creates_everything_then_restore_removes_it(
    apiserver: ControlPlane, admin: ApiClient, unique: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sets = [f"namespace={unique}"]
    objects = rendered("lease", *sets).objects
    try:
        created = Cluster(admin).apply(objects)  # the namespace does not exist yet
        assert [o["kind"] for o in created] == [o["kind"] for o in objects]
        assert len(existing(admin, objects)) == len(objects)
        dep = AppsV1Api(admin).read_namespaced_deployment("dynamic-scheduler", unique)
        assert {m.manager for m in dep.metadata.managed_fields} == {FIELD_MANAGER}
        assert Cluster(admin).apply(objects) == []  # idempotent: nothing new
        argv = ["lease", "--kubeconfig", apiserver.kubeconfig, "--timeout", "30", "--set", sets[0]]
        code, out, err = run_main(restore.main, argv, capsys)
        assert code == 0, err
        assert "kube-system/kube-scheduler is held by" in out and "(it was not ours)" in out
        assert existing(admin, objects) == []
        assert namespace_state(admin, unique) == "Terminating"  # ours and empty: deleted
        code, _, err = run_main(restore.main, argv, capsys)  # again: nothing to do, still fine
        assert code == 0, err
    finally:
        cleanup(apiserver, "lease", "--set", sets[0])


def test_apply_waits_until_a_namespace_being_deleted_is_gone(
    apiserver: ControlPlane, admin: ApiClient, unique: str
) -> None:
    """A deploy right after a restore: our namespace is still being deleted (the namespace
    controller empties it first, which takes a while). Nothing can be created in it, so apply
    waits until it is gone, then creates it again; if it never goes, apply says so and stops."""
    objects = rendered("lease", f"namespace={unique}").objects
    core = CoreV1Api(admin)
    core.create_namespace(
        {"metadata": {"name": unique, "labels": {"app.kubernetes.io/managed-by": "dynamic-scheduler"}}}
    )
    core.delete_namespace(unique)  # Terminating for good here: no namespace controller runs
    with pytest.raises(
        DeployError,
        match=rf"namespace {unique} deleted: not done after 2s; last status: "
        rf"Terminating: nothing can be created in a namespace being deleted",
    ):
        Cluster(admin).apply(objects, namespace_wait=2)
    assert existing(admin, [o for o in objects if o["kind"] != "Namespace"]) == []
    # What the namespace controller does once the namespace is empty, a moment later.
    timer = threading.Timer(1.5, finalize_namespace.finalize, (core, unique, True))
    timer.start()
    try:
        created = Cluster(admin).apply(objects, namespace_wait=30)
        assert [o["kind"] for o in created] == [o["kind"] for o in objects]
        assert namespace_state(admin, unique) == "Active"
    finally:
        timer.join()
        cleanup(apiserver, "lease", "--set", f"namespace={unique}")


def test_a_manifest_the_server_rejects_changes_nothing(
    apiserver: ControlPlane, admin: ApiClient, unique: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """requests above limits passes our schema and the offline schema, but not the API server."""
    sets = [
        "--set",
        f"namespace={unique}",
        "--set",
        "resources.requests.cpu=2",
        "--set",
        "resources.limits.cpu=1",
    ]
    objects = rendered("lease", f"namespace={unique}").objects
    try:
        code, out, err = run_main(deploy.main, ["lease", "--kubeconfig", apiserver.kubeconfig, *sets], capsys)
        assert (code, out) == (1, "")
        err = error_of(err)
        assert err.startswith(
            "error: deploy: the server rejects (dry run; nothing was changed):\n"
            f"  Deployment {unique}/dynamic-scheduler: 422 "
        )
        assert "must be less than or equal to cpu limit" in err
        assert existing(admin, objects) == []
        # the namespace had to exist for the dry run of what goes in it; it was deleted again
        assert namespace_state(admin, unique) in ("absent", "Terminating")
    finally:
        cleanup(apiserver, "lease", "--set", f"namespace={unique}")


def test_into_an_existing_namespace_a_rejected_deploy_touches_nothing(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = CoreV1Api(admin).read_namespace(namespace).metadata.resource_version
    sets = [
        "--set",
        f"namespace={namespace}",
        "--set",
        "resources.requests.memory=2Gi",
        "--set",
        "resources.limits.memory=1Gi",
    ]
    code, _, err = run_main(deploy.main, ["lease", "--kubeconfig", apiserver.kubeconfig, *sets], capsys)
    assert code == 1 and "nothing was changed" in error_of(err)
    assert existing(admin, rendered("lease", f"namespace={namespace}").objects) == [f"Namespace {namespace}"]
    assert CoreV1Api(admin).read_namespace(namespace).metadata.resource_version == before


def test_without_access_deploy_stops_before_changing_anything(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user who may read everything and write nothing: the access check lists what deploy needs."""
    user = f"viewer-{namespace}"
    rbac = RbacAuthorizationV1Api(admin)
    rbac.create_cluster_role(
        {
            "metadata": {"name": user},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}],
        }
    )
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": user},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    rbac.create_cluster_role_binding(binding)
    try:
        wait_until_allowed(admin, grants_of(admin, [binding]))
        kubeconfig = apiserver.kubeconfig_for(user)
        code, out, err = run_main(
            deploy.main, ["lease", "--kubeconfig", str(kubeconfig), "--set", f"namespace={namespace}"], capsys
        )
        assert (code, out) == (1, "")
        err = error_of(err)
        assert err.startswith("error: deploy: deploy lease: not allowed to ")
        assert err.endswith("(nothing was changed)\n") and err.count("\n") == 1
        assert f"patch deployments.apps dynamic-scheduler in namespace {namespace}" in err
        assert "patch clusterroles.rbac.authorization.k8s.io dynamic-scheduler;" in err
        assert "get deployments.apps" not in err
        assert existing(admin, rendered("lease", f"namespace={namespace}").objects) == [
            f"Namespace {namespace}"
        ]
    finally:
        rbac.delete_cluster_role_binding(user)
        rbac.delete_cluster_role(user)


def test_a_user_who_cannot_read_the_objects_is_told_so(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = apiserver.kubeconfig_for(f"nobody-{namespace}")
    code, _, err = run_main(
        deploy.main,
        ["prometheus", "--kubeconfig", str(kubeconfig), "--set", f"namespace={namespace}"],
        capsys,
    )
    assert code == 1
    # the first thing deploy prometheus reads is the node list (for static discovery)
    assert (
        error_of(err) == "error: deploy: deploy prometheus: not allowed to list nodes (nothing was changed)\n"
    )


def test_a_namespace_that_is_not_ours_is_left_alone(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = rendered("lease", f"namespace={namespace}").objects
    try:
        created = Cluster(admin).apply(objects)
        assert "Namespace" not in [o["kind"] for o in created]
        labels = CoreV1Api(admin).read_namespace(namespace).metadata.labels or {}
        assert "app.kubernetes.io/managed-by" not in labels
        code, _, err = run_main(
            restore.main,
            ["lease", "--kubeconfig", apiserver.kubeconfig, "--set", f"namespace={namespace}"],
            capsys,
        )
        assert code == 0, err
        assert namespace_state(admin, namespace) == "Active"
        assert existing(admin, objects) == [f"Namespace {namespace}"]
    finally:
        cleanup(apiserver, "lease", "--set", f"namespace={namespace}")


# --- restore gives the Lease back --------------------------------------------------------------


OURS = "dynamic-scheduler-6f7d8c9b5-x2x4z_0b6f2a8e-1c1e-4c5e-9a9b-7b1e2f3a4b5c"


def held_lease(
    admin: ApiClient, namespace: str, name: str, who: str, seconds: int = 15, annotated: bool = True
) -> None:
    """A Lease held by ``who`` since now; ``annotated``: with our holder annotation (as ours write)."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    CoordinationV1Api(admin).create_namespaced_lease(
        namespace,
        {
            "metadata": {
                "name": name,
                "annotations": {"dynamic-scheduler.io/holder": who if annotated else ""},
            },
            "spec": {
                "holderIdentity": who,
                "leaseDurationSeconds": seconds,
                "acquireTime": now,
                "renewTime": now,
            },
        },
    )


def restore_static(
    apiserver: ControlPlane, tmp_path: Any, sets: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """``restore static`` on node n1 with a manifest directory of its own (nothing in it)."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    argv = ["static", "--kubeconfig", apiserver.kubeconfig, "--manifest-dir", str(manifests)]
    argv += ["--node-name", "n1", "--set", f"static.configDir={tmp_path}/ds", "--timeout", "5", *sets]
    return run_main(restore.main, argv, capsys)


def lease_method_holding_the_lease(admin: ApiClient, namespace: str) -> tuple[list[str], str]:
    """The lease method applied in ``namespace``, and a 6 s Lease ``kube-scheduler`` there held
    by one of ours (as after a takeover); the restore flags for it, and the holder."""
    sets = ["--set", f"namespace={namespace}", "--set", f"leaderElection.resourceNamespace={namespace}"]
    Cluster(admin).apply(
        rendered("lease", f"namespace={namespace}", f"leaderElection.resourceNamespace={namespace}").objects
    )
    held_lease(admin, namespace, "kube-scheduler", OURS, seconds=6)
    return sets, OURS


def test_restore_waits_until_kube_scheduler_holds_the_lease_again(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Lease names one of ours; the real kube-scheduler takes it once it lapses.

    The Lease lives in the test's namespace under kube-scheduler's name: the built-in
    system:kube-scheduler role may update Leases called kube-scheduler, in any namespace."""
    sets, ours = lease_method_holding_the_lease(admin, namespace)
    ks = apiserver.start_kube_scheduler(
        {
            "leaderElection": {
                "leaderElect": True,
                "resourceNamespace": namespace,
                "resourceName": "kube-scheduler",
                "leaseDuration": "6s",
                "renewDeadline": "4s",
                "retryPeriod": "1s",
            }
        }
    )
    try:
        code, out, err = run_main(
            restore.main, ["lease", "--kubeconfig", apiserver.kubeconfig, "--timeout", "60", *sets], capsys
        )
        assert code == 0, err + ks.tail()
        lease = read_lease(admin, namespace, "kube-scheduler")
        h = holder(lease)
        assert h.startswith(socket.gethostname() + "_") and h != ours
        assert out.startswith(f"{namespace}/kube-scheduler is held by {h} again (")
        # Marked while ours stopped (kube-scheduler's writes keep the annotation), unmarked after.
        assert "Marked the Lease as being restored" in err
        assert RESTORING_ANNOTATION not in (lease["metadata"].get("annotations") or {})
    finally:
        ks.stop()
        cleanup(apiserver, "lease", *sets)


def test_restore_says_what_kube_scheduler_is_doing_while_the_lease_stays_away(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No kube-scheduler takes the Lease back: the wait's status (and so the error at its
    deadline) shows kubeadm's kube-scheduler pod, here waiting out a CrashLoopBackOff."""
    sets, ours = lease_method_holding_the_lease(admin, namespace)
    make_pod(admin, namespace, "kube-scheduler-cp", labels={"component": "kube-scheduler"})
    backoff = "back-off 5m0s restarting failed container=kube-scheduler pod=kube-scheduler-cp"
    CoreV1Api(admin).patch_namespaced_pod_status(
        "kube-scheduler-cp",
        namespace,
        {
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.10",
                        "imageID": "",
                        "ready": False,
                        "restartCount": 7,
                        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": backoff}},
                    }
                ],
            }
        },
    )
    try:
        code, _, err = run_main(
            restore.main, ["lease", "--kubeconfig", apiserver.kubeconfig, "--timeout", "2", *sets], capsys
        )
        assert code == 1
        msg = error_of(err)
        assert f"Lease {namespace}/kube-scheduler back with kube-scheduler: not done after 2s" in msg
        assert (
            f"held by {ours}; kube-scheduler-cp: Running, c: CrashLoopBackOff ({backoff}), 7 restarts" in msg
        )
        # The restore did not finish: the mark stays until the next deploy, which removes it (or
        # ours would never take over); that deploy then waits for a rollout no kubelet makes here.
        annotations = read_lease(admin, namespace, "kube-scheduler")["metadata"]["annotations"]
        assert annotations[RESTORING_ANNOTATION] == "true"
        code, _, err = run_main(
            deploy.main, ["lease", "--kubeconfig", apiserver.kubeconfig, "--timeout", "2", *sets], capsys
        )
        assert code == 1 and "Lease no longer marked as being restored" in err
        assert (
            RESTORING_ANNOTATION
            not in read_lease(admin, namespace, "kube-scheduler")["metadata"]["annotations"]
        )
    finally:
        cleanup(apiserver, "lease", *sets)


def test_restore_static_leaves_the_lease_methods_lease_to_restore_lease(
    apiserver: ControlPlane,
    admin: ApiClient,
    namespace: str,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The Lease is held by a replica of the lease method (annotated as ours): restoring the static
    method, which comes first, must not wait for kube-scheduler to get it back, which cannot happen
    while that Deployment runs."""
    sets = ["--set", f"namespace={namespace}", "--set", f"leaderElection.resourceNamespace={namespace}"]
    replica = "dynamic-scheduler-6f7d8c9b5-x2x4z"
    make_pod(
        admin,
        namespace,
        replica,
        {"app.kubernetes.io/name": "dynamic-scheduler", "app.kubernetes.io/component": "scheduler"},
    )
    ours = f"{replica}_0b6f2a8e-1c1e-4c5e-9a9b-7b1e2f3a4b5c"
    held_lease(admin, namespace, "kube-scheduler", ours)
    code, out, err = restore_static(apiserver, tmp_path, sets, capsys)
    assert code == 0, err
    assert "back with kube-scheduler" not in err
    assert holder(read_lease(admin, namespace, "kube-scheduler")) == ours


@pytest.mark.parametrize("annotated", [True, False])
def test_restore_static_deletes_beside_modes_own_lease_unless_a_stranger_holds_it(
    apiserver: ControlPlane,
    admin: ApiClient,
    namespace: str,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
    annotated: bool,
) -> None:
    """Our static pod in beside mode leaves its own Lease (released, or held by a killed pod);
    restore removes it. A Lease of that name held by another scheduler is not ours to delete."""
    sets = ["--set", f"leaderElection.resourceNamespace={namespace}"]
    held_lease(
        admin, namespace, "my-scheduler", "n1_0b6f2a8e-1c1e-4c5e-9a9b-7b1e2f3a4b5c", annotated=annotated
    )
    code, out, err = restore_static(apiserver, tmp_path, sets, capsys)
    assert code == 0, err
    assert (read_lease(admin, namespace, "my-scheduler") is None) == annotated


def test_restore_static_needs_a_way_to_the_nodes(
    apiserver: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(restore.main, ["static", "--kubeconfig", apiserver.kubeconfig], capsys)
    assert (code, out) == (1, "")
    assert (
        error_of(err)
        == "error: restore: static needs --kind-cluster NAME or --manifest-dir DIR to reach the nodes\n"
    )


def test_deploy_static_stops_when_the_node_is_not_kubeadms(
    apiserver: ControlPlane, admin: ApiClient, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run on 'the node' (--manifest-dir) without kubeadm's scheduler.conf: refused, nothing written,
    and the beside-mode RBAC objects were not applied either."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    argv = [
        "static",
        "--kubeconfig",
        apiserver.kubeconfig,
        "--manifest-dir",
        str(manifests),
        "--node-name",
        "n1",
        "--set",
        f"static.configDir={tmp_path}/ds",
        "--set",
        f"static.kubeconfig={tmp_path}/scheduler.conf",
    ]
    code, out, err = run_main(deploy.main, argv, capsys)
    assert (code, out) == (1, "")
    assert error_of(err).startswith(f"error: deploy: n1: {tmp_path}/scheduler.conf not found")
    assert list(tmp_path.rglob("*")) == [manifests]
    assert existing(admin, rendered("static").objects) == []


def test_a_rollout_that_does_not_finish_is_reported_with_the_pods_status(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No controller runs here, so the rollout never finishes; a pod stuck pulling its image shows why."""
    core = CoreV1Api(admin)
    labels = {"app.kubernetes.io/name": "dynamic-scheduler", "app.kubernetes.io/component": "scheduler"}
    make_pod(admin, namespace, "dynamic-scheduler-x", labels)
    core.patch_namespaced_pod_status(
        "dynamic-scheduler-x",
        namespace,
        {
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {
                        "name": "scheduler",
                        "image": "dynamic-scheduler:dev",
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {"waiting": {"reason": "ImagePullBackOff", "message": "pull access denied"}},
                    }
                ],
            }
        },
    )
    sets = ["--set", f"namespace={namespace}"]
    try:
        code, _, err = run_main(
            deploy.main, ["lease", "--kubeconfig", apiserver.kubeconfig, "--timeout", "2", *sets], capsys
        )
        assert code == 1
        assert error_of(err) == (
            f"error: deploy: Deployment {namespace}/dynamic-scheduler: not done after 2s; last status: waiting for "
            f"the Deployment's new spec to be observed; dynamic-scheduler-x: Pending, scheduler: ImagePullBackOff "
            f"(pull access denied)\n"
        )
    finally:
        core.delete_namespaced_pod("dynamic-scheduler-x", namespace, grace_period_seconds=0)
        cleanup(apiserver, "lease", *sets)
