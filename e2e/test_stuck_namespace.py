"""A namespace stuck in Terminating (the field note's 1.7), released by ``finalize-namespace``.

The namespace gets a finalizer of its own in ``spec.finalizers`` through the
``finalize`` subresource (as an aggregated API or an operator would), next to
``kubernetes``. Deleted, the namespace controller empties it and removes
``kubernetes``, then nothing removes ``example.com/hold``: it stays
Terminating. ``dynamic-scheduler finalize-namespace`` (and ``make
finalize-namespace``) clear ``spec.finalizers``; a watch sees it go.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from e2e.deploying import REPO, cli
from e2e.measure import record
from scheduler.polling import PollTimeoutError, poll

pytestmark = pytest.mark.cluster

HOLD = "example.com/hold"


def read(core: client.CoreV1Api, name: str) -> dict[str, Any] | None:
    try:
        return json.loads(core.read_namespace(name, _preload_content=False).data)
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise


def add_finalizer(core: client.CoreV1Api, name: str) -> None:
    ns = read(core, name)
    assert ns is not None
    ns["spec"]["finalizers"] = [*ns["spec"].get("finalizers", []), HOLD]
    core.replace_namespace_finalize(name, ns)


def wait_deleted(core: client.CoreV1Api, name: str, timeout: float) -> float:
    """Watch the namespace until it is deleted; the seconds it took."""
    start = time.monotonic()
    body = json.loads(
        core.list_namespace(field_selector=f"metadata.name={name}", _preload_content=False).data
    )
    if not body["items"]:
        return 0.0
    w = watch.Watch()
    for ev in w.stream(
        core.list_namespace,
        field_selector=f"metadata.name={name}",
        resource_version=body["metadata"]["resourceVersion"],
        timeout_seconds=int(timeout),
        _request_timeout=timeout + 5,
        deserialize=False,
    ):
        if ev["type"] == "DELETED":
            w.stop()
            return time.monotonic() - start
    raise PollTimeoutError(f"namespace {name} to be deleted", timeout, read(core, name))


@pytest.fixture
def held_namespace(core: client.CoreV1Api) -> Iterator[str]:
    """A namespace with a ConfigMap in it and ``example.com/hold`` in spec.finalizers; gone afterwards."""
    name = f"e2e-stuck-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name, "labels": {"e2e.dynamic-scheduler.io/test": "true"}}})
    try:
        core.create_namespaced_config_map(name, {"metadata": {"name": "content"}, "data": {"a": "b"}})
        add_finalizer(core, name)
        yield name
    finally:
        # Delete first, then finalize: a namespace finalized while Active and deleted afterwards
        # stays Terminating (nothing sends it a finalize update any more).
        if read(core, name) is not None:
            core.delete_namespace(name)
            ns = read(core, name)
            if ns is not None:
                ns["spec"]["finalizers"] = []
                core.replace_namespace_finalize(name, ns)
            wait_deleted(core, name, 60)


def stuck(core: client.CoreV1Api, name: str) -> float:
    """Delete it and wait until the namespace controller has done all it can; the seconds it took."""
    start = time.monotonic()
    core.delete_namespace(name)

    def controller_done() -> Any:
        ns = read(core, name)
        assert ns is not None, f"namespace {name} went away although {HOLD} holds it"
        left = ns["spec"].get("finalizers") or []
        return ns if ns["status"]["phase"] == "Terminating" and left == [HOLD] else None

    ns = poll(
        controller_done,
        60,
        f"namespace {name} Terminating with only {HOLD} left",
        interval=0.5,
        retry_on=(ApiException,),
    )
    assert ns["metadata"].get("deletionTimestamp")
    # Emptied by the controller, yet still there: stuck.
    assert not core.list_namespaced_config_map(name).items
    return time.monotonic() - start


def test_a_namespace_held_by_a_finalizer_stays_terminating_until_finalize_namespace(
    core: client.CoreV1Api, held_namespace: str
) -> None:
    took = stuck(core, held_namespace)
    res = cli("finalize-namespace", held_namespace)
    assert f"namespace {held_namespace}: removed spec.finalizers ['{HOLD}']" in res.stdout
    assert f"namespace {held_namespace} is gone" in res.stdout
    gone = wait_deleted(core, held_namespace, 30)
    assert read(core, held_namespace) is None
    record(
        "stuck_namespace",
        "finalize_seconds",
        res.seconds,
        stuck_after_s=round(took, 2),
        deleted_after_command_s=round(gone, 2),
    )


def test_make_finalize_namespace_releases_it_too(core: client.CoreV1Api, held_namespace: str) -> None:
    stuck(core, held_namespace)
    env = {**os.environ, "NAMESPACE": held_namespace}
    proc = subprocess.run(
        ["make", "--no-print-directory", "finalize-namespace", f"NAMESPACE={held_namespace}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert f"namespace {held_namespace} is gone" in proc.stdout
    wait_deleted(core, held_namespace, 30)


def test_finalize_namespace_refuses_an_active_namespace(core: client.CoreV1Api, held_namespace: str) -> None:
    res = cli("finalize-namespace", held_namespace, check=False)
    assert res.code == 1
    assert f"error: finalize-namespace: namespace {held_namespace} is Active, not Terminating" in res.stderr
    ns = read(core, held_namespace)
    assert ns is not None and HOLD in ns["spec"]["finalizers"] and not ns["metadata"].get("deletionTimestamp")
