"""scheduler.cluster.events against a real API server (and the real kubectl)."""

from __future__ import annotations

import logging
import socket
import time

import pytest
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.client import ClientOptions, api_request, new_api_client
from scheduler.cluster.events import EventRecorder, micro_time, truncate_note
from scheduler.settings import EventSettings
from tests.apiserver import ControlPlane
from tests.cluster.netproxy import TCPProxy
from tests.cluster.util import make_pod


def events_v1(admin, ns: str) -> list[dict]:
    return api_request(admin, "GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]


def test_truncate_note_as_kube_scheduler() -> None:
    assert truncate_note("short") == "short"
    long = "é" * 1000  # 2000 bytes
    cut = truncate_note(long)
    assert len(cut.encode()) <= 1024 and cut.endswith(" ...")


def test_a_full_queue_drops_and_counts_without_blocking() -> None:
    rec = EventRecorder(
        api_client=None, settings=EventSettings(queue_size=2)
    )  # never started: nothing drains the queue
    pod = {"metadata": {"namespace": "ns", "name": "p", "uid": "u"}}
    start = time.monotonic()
    results = [rec.failed_scheduling(pod, f"m{i}", "default-scheduler") for i in range(5)]
    assert time.monotonic() - start < 0.1
    assert results == [True, True, False, False, False]
    assert rec.stats.dropped == 3


@pytest.mark.apiserver
def test_scheduled_event_as_kube_scheduler_writes_it(apiserver: ControlPlane, admin, namespace: str) -> None:
    pod = make_pod(admin, namespace)
    rec = EventRecorder(admin).start()
    try:
        assert rec.scheduled(pod, "node-a", "default-scheduler")
        assert rec.flush(10)
    finally:
        rec.stop()
    [ev] = events_v1(admin, namespace)
    name = pod["metadata"]["name"]
    assert ev["reason"] == "Scheduled" and ev["action"] == "Binding" and ev["type"] == "Normal"
    assert ev["note"] == f"Successfully assigned {namespace}/{name} to node-a"
    assert ev["reportingController"] == "default-scheduler"
    assert ev["reportingInstance"] == f"default-scheduler-{socket.gethostname()}"
    assert ev["regarding"]["kind"] == "Pod" and ev["regarding"]["uid"] == pod["metadata"]["uid"]
    assert ev["metadata"]["name"].startswith(f"{name}.")

    # The core/v1 view, which kubectl reads: the controller is reportingComponent; source stays
    # empty (the API server maps source from deprecatedSource, not from reportingController).
    [core] = api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/events")["items"]
    assert core["reportingComponent"] == "default-scheduler"
    assert not (core.get("source") or {}).get("component")
    assert core["message"] == ev["note"] and core["involvedObject"]["name"] == name

    # What users see: kubectl falls back to reportingController for the From/SOURCE columns.
    described = apiserver.kubectl_run("describe", "pod", "-n", namespace, name)
    line = next(ln for ln in described.splitlines() if "Scheduled" in ln and "Successfully assigned" in ln)
    assert line.split()[:2] == ["Normal", "Scheduled"] and "default-scheduler" in line.split()
    wide = apiserver.kubectl_run("get", "events", "-n", namespace, "-o", "wide")
    assert f"default-scheduler, default-scheduler-{socket.gethostname()}" in wide


@pytest.mark.apiserver
def test_events_v1_rejects_a_source(admin, namespace: str) -> None:
    """Why we cannot fill source.component: events.k8s.io/v1 refuses deprecatedSource on create."""
    pod = make_pod(admin, namespace)
    body = {
        "metadata": {"name": f"{pod['metadata']['name']}.x", "namespace": namespace},
        "eventTime": micro_time(),
        "reportingController": "default-scheduler",
        "reportingInstance": "i",
        "action": "Binding",
        "reason": "Scheduled",
        "type": "Normal",
        "note": "n",
        "regarding": {"kind": "Pod", "namespace": namespace, "name": pod["metadata"]["name"]},
        "deprecatedSource": {"component": "default-scheduler"},
    }
    with pytest.raises(ApiException) as e:
        api_request(admin, "POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body=body)
    assert e.value.status == 422 and "source" in e.value.body


@pytest.mark.apiserver
def test_identical_failures_become_one_event_with_a_series(admin, namespace: str) -> None:
    pod = make_pod(admin, namespace)
    rec = EventRecorder(admin, settings=EventSettings(series_interval=0.2)).start()
    try:
        for _ in range(5):
            rec.failed_scheduling(pod, "0/3 nodes are available: 3 Insufficient cpu.", "my-scheduler")
        rec.failed_scheduling(pod, "0/3 nodes are available: 3 Too many pods.", "my-scheduler")
        rec.failed_scheduling(pod, "x" * 2000, "my-scheduler")
        assert rec.flush(10)
    finally:
        rec.stop()  # writes the pending series count
    evs = sorted(events_v1(admin, namespace), key=lambda e: e["eventTime"])
    assert [e["note"] for e in evs[:2]] == [
        "0/3 nodes are available: 3 Insufficient cpu.",
        "0/3 nodes are available: 3 Too many pods.",
    ]
    assert evs[2]["note"].startswith("xxxx")
    first = evs[0]
    assert (
        first["type"] == "Warning"
        and first["reason"] == "FailedScheduling"
        and first["action"] == "Scheduling"
    )
    assert first["reportingController"] == "my-scheduler"
    assert first["series"]["count"] == 5
    assert "series" not in evs[1]
    assert len(evs[2]["note"].encode()) == 1024 and evs[2]["note"].endswith(" ...")
    assert rec.stats.written == 3 and rec.stats.aggregated == 4 and rec.stats.failed == 0


@pytest.mark.apiserver
def test_recording_never_blocks_the_caller_even_when_the_api_hangs(
    apiserver: ControlPlane, admin, namespace: str
) -> None:
    proxy = TCPProxy(apiserver.port)
    api = new_api_client(
        ClientOptions(
            kubeconfig=str(apiserver.kubeconfig_for("admin", ("system:masters",), server=proxy.url)),
            timeout=(1.0, 1.0),
        )
    )
    rec = EventRecorder(api, settings=EventSettings(attempts=1)).start()
    pod = make_pod(admin, namespace)
    try:
        proxy.partition("blackhole")
        start = time.monotonic()
        for i in range(20):
            rec.failed_scheduling(pod, f"message {i}", "my-scheduler")
        assert time.monotonic() - start < 0.1
    finally:
        writers = list(rec._threads)
        rec.stop(timeout=1)
        proxy.close()
        # The writers give up on their own (1 s timeouts); then the client's sockets are closed,
        # not left to the garbage collector in some later test.
        for t in writers:
            t.join(timeout=60)
        api.close()


@pytest.mark.apiserver
def test_stopping_says_how_many_events_were_not_written(
    apiserver: ControlPlane, admin, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = TCPProxy(apiserver.port)
    api = new_api_client(
        ClientOptions(
            kubeconfig=str(apiserver.kubeconfig_for("admin", ("system:masters",), server=proxy.url)),
            timeout=(1.0, 1.0),
        )
    )
    rec = EventRecorder(api, settings=EventSettings(attempts=1, writers=2)).start()
    pod = make_pod(admin, namespace)
    try:
        proxy.partition("blackhole")
        for i in range(5):
            rec.failed_scheduling(pod | {"metadata": pod["metadata"] | {"uid": f"u{i}"}}, "m", "s")
        with caplog.at_level(logging.WARNING, logger="scheduler.cluster.events"):
            rec.stop(timeout=0.3)
    finally:
        proxy.close()
        api.close()
    (record,) = [r for r in caplog.records if r.getMessage() == "Stopping with events not written"]
    assert record.kv["events"] == 5  # two in the hung writers' hands, three queued


@pytest.mark.apiserver
def test_writers_in_parallel_write_every_pod_once_and_fold_repeats_into_one_series(
    admin, namespace: str
) -> None:
    pods = [make_pod(admin, namespace) for _ in range(40)]
    rec = EventRecorder(admin, settings=EventSettings(writers=8, series_interval=60)).start()
    try:
        for pod in pods:
            assert rec.scheduled(pod, "node-a", "default-scheduler")
        # Repeats queued back to back reach different writers: they must still make one event.
        for _ in range(30):
            assert rec.failed_scheduling(pods[0], "0/3 nodes are available: 3 Insufficient cpu.", "s")
        assert rec.flush(30)
    finally:
        rec.stop(timeout=10)  # writes the series count
    evs = events_v1(admin, namespace)
    scheduled = [e for e in evs if e["reason"] == "Scheduled"]
    assert sorted(e["regarding"]["uid"] for e in scheduled) == sorted(p["metadata"]["uid"] for p in pods)
    [failed] = [e for e in evs if e["reason"] == "FailedScheduling"]
    assert failed["series"]["count"] == 30
    assert (rec.stats.written, rec.stats.aggregated, rec.stats.dropped, rec.stats.failed) == (41, 29, 0, 0)
