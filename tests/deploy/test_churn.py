"""churn against the real API server: the right pods, the right number of rounds, a clean Ctrl-C."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException

from scheduler.deploy import churn
from tests.apiserver import ControlPlane
from tests.deploy.cluster_util import make_pod
from tests.deploy.util import error_of, run_main

pytestmark = pytest.mark.apiserver
REPO = Path(__file__).resolve().parents[2]


def names(admin: ApiClient, ns: str, selector: str | None = None) -> list[str]:
    return sorted(
        p.metadata.name for p in CoreV1Api(admin).list_namespaced_pod(ns, label_selector=selector).items
    )


def test_each_round_deletes_the_selected_pods(admin: ApiClient, namespace: str, unique: str) -> None:
    other_ns = f"{unique}-other"
    CoreV1Api(admin).create_namespace({"metadata": {"name": other_ns}})
    churned = ["web-0", "web-1", "web-2"]
    for n in churned:
        make_pod(admin, namespace, n, {"app": "web"})
    make_pod(admin, namespace, "db-0", {"app": "db"})
    make_pod(admin, other_ns, "web-0", {"app": "web"})
    rounds: list[churn.Round] = []

    def report(r: churn.Round) -> None:
        rounds.append(r)
        assert names(admin, namespace, "app=web") == []  # forced: gone at once, no grace period
        for n in churned:  # what the Deployment controller would do
            make_pod(admin, namespace, n, {"app": "web"})

    done = churn.churn(
        admin, namespace, "app=web", every=0.01, count=3, duration=None, stop=threading.Event(), report=report
    )
    assert done == 3
    assert [(r.number, r.deleted, r.gone) for r in rounds] == [(i, churned, 0) for i in (1, 2, 3)]
    assert names(admin, namespace) == ["db-0", *churned]
    assert names(admin, other_ns) == ["web-0"]


def test_a_pod_replaced_under_its_name_is_left_for_the_next_round(admin: ApiClient, namespace: str) -> None:
    """The UID precondition: a pod deleted and re-created between the list and the delete survives."""
    old = make_pod(admin, namespace, "web-0", {"app": "web"})
    core = CoreV1Api(admin)
    core.delete_namespaced_pod("web-0", namespace, grace_period_seconds=0)
    new = make_pod(admin, namespace, "web-0", {"app": "web"})
    assert new.metadata.uid != old.metadata.uid
    body = {"gracePeriodSeconds": 0, "preconditions": {"uid": old.metadata.uid}}
    with pytest.raises(ApiException) as info:
        core.delete_namespaced_pod("web-0", namespace, body=body)
    assert info.value.status == 409
    assert names(admin, namespace) == ["web-0"]


def test_the_command_bounds_rounds_by_count(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for n in ("a", "b"):
        make_pod(admin, namespace, n, {"app": "x"})
    code, out, err = run_main(
        churn.main,
        [
            "-n",
            namespace,
            "-l",
            "app=x",
            "--count",
            "2",
            "--every",
            "0.05",
            "--kubeconfig",
            apiserver.kubeconfig,
        ],
        capsys,
    )
    assert code == 0, err
    assert out.splitlines() == [
        f"round 1/2: deleted 2 pods in {namespace}: a, b",
        f"round 2/2: deleted 0 pods in {namespace}",
    ]


def test_the_command_bounds_rounds_by_duration(
    apiserver: ControlPlane, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main(
        churn.main,
        ["-n", namespace, "--duration", "0.5", "--every", "0.2", "--kubeconfig", apiserver.kubeconfig],
        capsys,
    )
    assert code == 0
    assert 2 <= len(out.splitlines()) <= 4
    assert out.splitlines()[0] == f"round 1: deleted 0 pods in {namespace}"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-n", "Bad_NS"], "error: churn: --namespace: expected a DNS-1123 label"),
        (["-n", "x", "--every", "0"], 'error: churn: --every: expected a number of seconds > 0, got "0"'),
        (["-n", "x", "--count", "-1"], "error: churn: --count: expected a whole number >= 1, got -1"),
        ([], "error: churn: the following arguments are required: -n/--namespace"),
    ],
)
def test_bad_flags(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(churn.main, argv, capsys)
    assert (code, out) == (1, "")
    assert error_of(err).startswith(message)


def test_ctrl_c_stops_cleanly(apiserver: ControlPlane, namespace: str) -> None:
    cmd = [
        sys.executable,
        "-X",
        "faulthandler",
        "-m",
        "scheduler",
        "churn",
        "-n",
        namespace,
        "--every",
        "60",
        "--kubeconfig",
        apiserver.kubeconfig,
    ]
    with (
        subprocess.Popen(
            cmd,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            # A shell without job control starts background commands with SIGINT ignored, and
            # Python keeps an ignored SIGINT: give the command Ctrl-C as a terminal would.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        ) as proc,
        selectors.DefaultSelector() as sel,
    ):
        assert proc.stdout is not None and proc.stderr is not None
        try:
            sel.register(proc.stdout, selectors.EVENT_READ)
            assert sel.select(timeout=60), "no round reported"
            assert proc.stdout.readline().startswith("round 1: ")
            proc.send_signal(signal.SIGINT)  # during the 60 s between rounds
            try:
                code = proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                # Where it hangs: faulthandler (-X faulthandler) prints every thread's stack.
                proc.send_signal(signal.SIGABRT)
                proc.wait(timeout=10)
                pytest.fail(f"churn did not stop within 20 s of SIGINT:\n{proc.stderr.read()}")
            err = proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == 0, err
    assert "Traceback" not in err and "Interrupted; stopping" in err
