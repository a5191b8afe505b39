"""finalize-namespace against the real API server, where no namespace controller finalizes anything."""

from __future__ import annotations

import pytest
from kubernetes.client import ApiClient, CoreV1Api

from scheduler.deploy import finalize_namespace
from tests.apiserver import ControlPlane
from tests.deploy.cluster_util import make_pod, namespace_state
from tests.deploy.util import error_of, run_main

pytestmark = pytest.mark.apiserver


def terminating(
    admin: ApiClient, name: str, spec_finalizers: list[str], meta_finalizers: list[str] = ()
) -> None:
    core = CoreV1Api(admin)
    core.create_namespace(
        {
            "metadata": {"name": name, "finalizers": list(meta_finalizers)},
            "spec": {"finalizers": spec_finalizers},
        }
    )
    make_pod(admin, name, "left-behind")
    core.delete_namespace(name)
    assert namespace_state(admin, name) == "Terminating"


def test_releases_a_namespace_held_by_a_custom_finalizer(
    apiserver: ControlPlane, admin: ApiClient, unique: str, capsys: pytest.CaptureFixture[str]
) -> None:
    terminating(admin, unique, ["kubernetes", "example.com/hold"])
    code, out, err = run_main(finalize_namespace.main, [unique, "--kubeconfig", apiserver.kubeconfig], capsys)
    assert code == 0, err
    assert out.splitlines() == [
        f"namespace {unique}: removed spec.finalizers ['kubernetes', 'example.com/hold']",
        f"namespace {unique} is gone",
    ]
    assert namespace_state(admin, unique) == "absent"


def test_releases_a_terminating_namespace_whose_finalizers_were_already_empty(
    apiserver: ControlPlane, admin: ApiClient, unique: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Emptied before the delete (finalize-namespace --force on an Active namespace, then a delete):
    nothing finalizes it any more, on a real cluster too; the empty finalize update releases it."""
    core = CoreV1Api(admin)
    core.create_namespace({"metadata": {"name": unique}})
    ns = core.read_namespace(unique)
    ns.spec.finalizers = []
    core.replace_namespace_finalize(unique, ns)
    core.delete_namespace(unique)
    assert namespace_state(admin, unique) == "Terminating"
    code, out, err = run_main(finalize_namespace.main, [unique, "--kubeconfig", apiserver.kubeconfig], capsys)
    assert code == 0, err
    assert out.splitlines() == [
        f"namespace {unique}: spec.finalizers was already empty",
        f"namespace {unique} is gone",
    ]
    assert namespace_state(admin, unique) == "absent"


def test_metadata_finalizers_are_reported_not_removed(
    apiserver: ControlPlane, admin: ApiClient, unique: str, capsys: pytest.CaptureFixture[str]
) -> None:
    terminating(admin, unique, ["kubernetes"], ["example.com/meta"])
    try:
        code, out, _ = run_main(
            finalize_namespace.main, [unique, "--kubeconfig", apiserver.kubeconfig], capsys
        )
        assert code == 1
        assert out.splitlines() == [
            f"namespace {unique}: removed spec.finalizers ['kubernetes']",
            f"namespace {unique} is still Terminating, held by metadata.finalizers ['example.com/meta']: other "
            "controllers' claims, which this command does not remove",
        ]
        ns = CoreV1Api(admin).read_namespace(unique)
        assert (ns.spec.finalizers or [], ns.metadata.finalizers) == ([], ["example.com/meta"])
    finally:
        CoreV1Api(admin).patch_namespace(unique, {"metadata": {"finalizers": None}})


def test_an_active_namespace_is_refused_without_force(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(
        finalize_namespace.main, [namespace, "--kubeconfig", apiserver.kubeconfig], capsys
    )
    assert (code, out) == (1, "")
    assert error_of(err) == (
        f"error: finalize-namespace: namespace {namespace} is Active, not Terminating: its "
        "finalizers make a delete clean up its contents; pass --force to remove them anyway\n"
    )
    assert CoreV1Api(admin).read_namespace(namespace).spec.finalizers == ["kubernetes"]
    code, out, _ = run_main(
        finalize_namespace.main, [namespace, "--force", "--kubeconfig", apiserver.kubeconfig], capsys
    )
    assert code == 0
    assert out == f"namespace {namespace}: removed spec.finalizers ['kubernetes']\n"
    ns = CoreV1Api(admin).read_namespace(namespace)
    assert (ns.status.phase, ns.spec.finalizers or []) == ("Active", [])


def test_a_missing_namespace(
    apiserver: ControlPlane, unique: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(finalize_namespace.main, [unique, "--kubeconfig", apiserver.kubeconfig], capsys)
    assert (code, out) == (1, "")
    assert error_of(err) == f"error: finalize-namespace: namespace {unique} not found\n"
