"""scheduler.cluster.informers against a real API server."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client import CoreV1Api

from scheduler.cluster.client import ClientOptions, api_request, new_api_client
from scheduler.cluster.informers import Informer
from scheduler.cluster.store import NODES, PODS, object_key
from scheduler.polling import poll
from scheduler.settings import WatchSettings
from tests.apiserver import ControlPlane, free_port
from tests.cluster.netproxy import TCPProxy
from tests.cluster.util import make_node, make_pod

pytestmark = pytest.mark.apiserver


class Recorder:
    """Handlers that record what they see for one namespace."""

    def __init__(self, namespace: str | None = None) -> None:
        self.ns = namespace
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str, Any]] = []

    def _mine(self, obj: dict[str, Any]) -> bool:
        return self.ns is None or obj["metadata"].get("namespace") == self.ns

    def add(self, obj: dict[str, Any]) -> None:
        if self._mine(obj):
            with self.lock:
                self.seen.append(("add", object_key(obj), obj))

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if self._mine(new):
            with self.lock:
                self.seen.append(("update", object_key(new), (old, new)))

    def delete(self, obj: dict[str, Any]) -> None:
        if self._mine(obj):
            with self.lock:
                self.seen.append(("delete", object_key(obj), obj))

    def of(self, kind: str, key: str) -> list[Any]:
        with self.lock:
            return [o for k, kk, o in self.seen if k == kind and kk == key]


def informer(api, resource=PODS, rec: Recorder | None = None, **kw: Any) -> Informer:
    inf = Informer(api, resource, settings=WatchSettings(**kw))
    if rec is not None:
        inf.add_handlers(rec.add, rec.update, rec.delete)
    return inf.start()


def test_list_then_watch_delivers_adds_updates_deletes(admin, namespace: str) -> None:
    before = make_pod(admin, namespace)
    rec = Recorder(namespace)
    # a list in pages (exercise limit/continue), not the stream
    inf = informer(admin, rec=rec, page_size=2, stream_initial_state=False)
    try:
        assert inf.wait_for_sync(10)
        k0 = f"{namespace}/{before['metadata']['name']}"
        assert rec.of("add", k0) and inf.store.get(k0)["metadata"]["uid"] == before["metadata"]["uid"]
        assert before["metadata"]["managedFields"] and "managedFields" not in inf.store.get(k0)["metadata"]

        pod = make_pod(admin, namespace)
        key = f"{namespace}/{pod['metadata']['name']}"
        poll(lambda: rec.of("add", key), 5, "add")
        api_request(
            admin,
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}",
            body={"metadata": {"labels": {"x": "1"}}},
            content_type="application/merge-patch+json",
        )
        old, new = poll(lambda: rec.of("update", key), 5, "update")[0]
        assert "x" not in (old["metadata"].get("labels") or {}) and new["metadata"]["labels"]["x"] == "1"
        assert inf.store.get(key)["metadata"]["labels"] == {"x": "1"}

        api_request(admin, "DELETE", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}")
        poll(lambda: rec.of("delete", key), 5, "delete")
        assert inf.store.get(key) is None
        assert inf.stats.lists == 1 and inf.stats.streams == 0 and inf.stats.expired == 0
    finally:
        inf.stop()


def test_the_initial_state_is_streamed_then_watched(admin, namespace: str) -> None:
    before = [make_pod(admin, namespace) for _ in range(3)]
    rec = Recorder(namespace)
    inf = informer(admin, rec=rec)
    try:
        assert inf.wait_for_sync(10)
        assert (inf.stats.streams, inf.stats.lists, inf.stats.stream_fallbacks) == (1, 0, 0), inf.stats
        for p in before:
            key = f"{namespace}/{p['metadata']['name']}"
            assert len(rec.of("add", key)) == 1
            assert inf.store.get(key)["metadata"]["uid"] == p["metadata"]["uid"]
            # stored without the managedFields the API server keeps
            assert p["metadata"]["managedFields"] and "managedFields" not in inf.store.get(key)["metadata"]
        assert int(inf.resource_version) >= max(int(p["metadata"]["resourceVersion"]) for p in before)
        # the watch goes on from the stream's end
        after = make_pod(admin, namespace)
        (added,) = poll(
            lambda: rec.of("add", f"{namespace}/{after['metadata']['name']}"), 5, "an add after the stream"
        )
        assert after["metadata"]["managedFields"] and "managedFields" not in added["metadata"]
        assert inf.stats.watches >= 1 and inf.stats.watch_errors == 0, inf.stats
    finally:
        inf.stop()


def test_a_server_without_watchlist_is_listed_instead(apiserver: ControlPlane, admin, namespace: str) -> None:
    """A server with the WatchList feature off (or older than v1.27) refuses the stream's
    parameters: the informer lists, and does not ask that server again on a relist."""
    port = free_port()
    server = apiserver.start_apiserver(
        port, name=f"kube-apiserver-{port}", extra_args=("--feature-gates=WatchList=false",)
    )
    api = apiserver.api_client(server=f"https://127.0.0.1:{port}")
    pod = make_pod(admin, namespace)
    rec = Recorder(namespace)
    inf = informer(api, rec=rec)
    try:
        assert inf.wait_for_sync(20)
        assert (inf.stats.streams, inf.stats.lists, inf.stats.stream_fallbacks) == (0, 1, 1), inf.stats
        assert rec.of("add", f"{namespace}/{pod['metadata']['name']}")
        assert inf._initial_state() is not None  # a relist, as after a 410
        assert (inf.stats.lists, inf.stats.stream_fallbacks) == (2, 1), inf.stats
    finally:
        inf.stop()
        server.stop()


def test_terminal_pods_leave_the_pod_informer(admin, namespace: str) -> None:
    """The field selector status.phase!=Succeeded,Failed: a pod that finishes is a delete."""
    rec = Recorder(namespace)
    inf = informer(admin, rec=rec)
    try:
        assert inf.wait_for_sync(10)
        pod = make_pod(admin, namespace)
        key = f"{namespace}/{pod['metadata']['name']}"
        poll(lambda: rec.of("add", key), 5, "add")
        api_request(
            admin,
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}/status",
            body={"status": {"phase": "Succeeded"}},
            content_type="application/merge-patch+json",
        )
        poll(lambda: rec.of("delete", key), 5, "delete of the finished pod")
        assert inf.store.get(key) is None
        # still on the server
        assert api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}")
    finally:
        inf.stop()


def test_handler_exception_is_logged_and_the_informer_goes_on(
    admin, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    rec = Recorder(namespace)
    bad = make_pod(admin, namespace)
    bad_key = f"{namespace}/{bad['metadata']['name']}"

    def explode(obj: dict[str, Any]) -> None:
        if object_key(obj) == bad_key:
            raise RuntimeError("handler bug")

    inf = Informer(admin, PODS)
    inf.add_handlers(on_add=explode)
    inf.add_handlers(rec.add, rec.update, rec.delete)
    with caplog.at_level(logging.ERROR, logger="scheduler.cluster.informers"):
        inf.start()
        try:
            assert inf.wait_for_sync(10)
            later = make_pod(admin, namespace)
            poll(lambda: rec.of("add", f"{namespace}/{later['metadata']['name']}"), 5, "later add")
            assert rec.of("add", bad_key)  # the other handler still got it
            assert inf.stats.handler_errors >= 1
            assert any(getattr(r, "kv", {}).get("object") == bad_key for r in caplog.records)
        finally:
            inf.stop()


def test_bookmarks_and_server_timeouts_rewatch_without_relisting(admin) -> None:
    """The API server ends each watch after timeoutSeconds (3..6 s here), sending a bookmark
    2 s before when the resource moved past the watch's start; we watch again from there."""
    inf = informer(admin, NODES, watch_timeout=3, read_timeout=10)
    try:
        assert inf.wait_for_sync(10)
        list_rv = int(inf.resource_version)
        node = make_node(admin)
        name = node["metadata"]["name"]

        def bookmarked_and_rewatched() -> bool:
            if inf.stats.watches >= 2 and inf.stats.bookmarks >= 1:
                return True
            # The server bookmarks a watch only once the resource moved past its start: keep it
            # moving, so a watch that began after the last change (a slow machine) gets one too.
            api_request(
                admin,
                "PATCH",
                f"/api/v1/nodes/{name}",
                body={"metadata": {"labels": {"tick": str(time.monotonic_ns())}}},
                content_type="application/merge-patch+json",
            )
            return False

        # 30 s: a few watch periods even when the test API server shares a busy machine.
        poll(bookmarked_and_rewatched, 30, "a bookmark and a rewatch", interval=1.0)
        assert inf.stats.lists + inf.stats.streams == 1, inf.stats
        assert inf.stats.expired == 0 and inf.stats.watch_errors == 0, inf.stats
        assert int(inf.bookmark_resource_version) >= int(node["metadata"]["resourceVersion"]) > list_rv
    finally:
        inf.stop()


def test_dead_connection_is_noticed_by_the_read_timeout(
    apiserver: ControlPlane, admin, namespace: str
) -> None:
    proxy = TCPProxy(apiserver.port)
    kc = apiserver.kubeconfig_for("admin", ("system:masters",), server=proxy.url)
    api = new_api_client(ClientOptions(kubeconfig=str(kc)))
    rec = Recorder(namespace)
    inf = informer(api, rec=rec, watch_timeout=300, read_timeout=1.5, connect_timeout=1.0, backoff=(0.1, 0.5))
    try:
        assert inf.wait_for_sync(10)
        proxy.partition("blackhole")  # the watch hangs: no error, no bytes
        poll(lambda: inf.stats.watch_errors >= 1, 10, "the read timeout")
        proxy.heal()
        pod = make_pod(admin, namespace)
        poll(lambda: rec.of("add", f"{namespace}/{pod['metadata']['name']}"), 10, "events after healing")
        # and stop() cuts a blocked watch at once
        start = time.monotonic()
        inf.stop()
        assert time.monotonic() - start < 1.0
        assert not inf._thread.is_alive()
    finally:
        inf.stop()
        proxy.close()


def test_410_after_a_gap_relists_and_delivers_missed_deletes(
    apiserver: ControlPlane, admin, namespace: str
) -> None:
    """The scheduler's API server goes away; meanwhile pods are deleted; it reconnects to a
    freshly started API server whose watch cache begins after those changes, so its watch
    from the old resourceVersion gets 410 Gone: it must relist and report the deletes.

    Other ways to force a 410 do not work with kube-apiserver 1.37: watches are served from
    the watch cache, which keeps every event of the last 75 s however many there are and
    ignores an etcd compaction (that only prunes its list snapshots); and on a fresh server
    even resourceVersion "1" is valid, as the caches start before the bootstrap objects.
    A watch cache that starts after the client's RV (a restarted or another API server) is
    what makes real clients see 410s."""
    proxy = TCPProxy(apiserver.port)
    kc = apiserver.kubeconfig_for("admin", ("system:masters",), server=proxy.url)
    api = new_api_client(ClientOptions(kubeconfig=str(kc)))
    rec = Recorder(namespace)
    pods = [make_pod(admin, namespace) for _ in range(3)]
    keys = [f"{namespace}/{p['metadata']['name']}" for p in pods]
    inf = informer(api, rec=rec, backoff=(0.2, 1.0))
    second = None
    try:
        assert inf.wait_for_sync(10)
        assert all(inf.store.get(k) for k in keys)
        proxy.partition("refuse")
        poll(lambda: inf.stats.watch_errors >= 1, 10, "the watch to break")
        for p in pods[:2]:
            api_request(admin, "DELETE", f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}")
        api_request(
            admin,
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{pods[2]['metadata']['name']}",
            body={"metadata": {"labels": {"gap": "yes"}}},
            content_type="application/merge-patch+json",
        )
        added = make_pod(admin, namespace)
        port = free_port()
        second = apiserver.start_apiserver(port, name=f"kube-apiserver-{port}")
        proxy.set_upstream(port)
        proxy.heal()
        poll(lambda: all(rec.of("delete", k) for k in keys[:2]), 30, "the missed deletes")
        assert inf.stats.expired >= 1 and inf.stats.lists + inf.stats.streams >= 2
        assert rec.of("add", f"{namespace}/{added['metadata']['name']}")
        _, new = rec.of("update", keys[2])[-1]
        assert new["metadata"]["labels"] == {"gap": "yes"}
        assert inf.store.get(keys[0]) is None and inf.store.get(keys[2]) is not None

        # Why the informer reads the watch stream itself: kubernetes.watch with
        # deserialize=False breaks on that same ERROR event (it looks up a key only its
        # deserializing path adds), so it cannot even tell a 410.
        lib = apiserver.api_client(server=f"https://127.0.0.1:{port}")
        with pytest.raises(KeyError, match="raw_object"):
            for _ in watch.Watch().stream(
                CoreV1Api(lib).list_namespaced_pod,
                namespace,
                resource_version=pods[0]["metadata"]["resourceVersion"],
                timeout_seconds=5,
                deserialize=False,
                _request_timeout=(5, 10),
            ):
                pass
    finally:
        inf.stop()
        proxy.close()
        if second is not None:
            second.stop()
