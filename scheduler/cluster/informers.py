"""List + watch one resource into a thread-safe store of raw dicts, with handlers.

An :class:`Informer` does what client-go's reflector + informer do, minus
model types: objects stay the JSON dicts the API server sent (parsing them
into ``kubernetes.client`` models costs far more than the watch itself).

Why not ``kubernetes.watch.Watch`` or ``kubernetes.informer.SharedInformer``
(36.x)? ``Watch.stream`` retries a 410 once then raises, disables that retry
when ``timeout_seconds`` is set, and with ``deserialize=False`` it neither
tracks the resourceVersion nor survives an ERROR event (it reads a
``raw_object`` key that only the deserializing path adds). ``SharedInformer``
parses models and sets neither bookmarks, pagination nor a client timeout. So
the loop below streams the watch response itself: a few lines of
``decode`` (orjson) per event over ``call_api(..., _preload_content=False)``.

The loop:

1. get the whole state, replace the store and deliver the difference to the
   handlers (adds, updates whose resourceVersion changed, and deletes of
   objects that vanished while we were not watching). The state is streamed
   where the API server offers it (WatchList, on by default since v1.34: a
   watch with ``sendInitialEvents`` answers from the watch cache with one
   ADDED event per object, then a bookmark annotated
   ``k8s.io/initial-events-end``), as client-go's reflector does
   (``Reflector.watchList``); else, and after any failure of the stream, it is
   listed in pages (``limit``/``continue``). A server that refuses the
   stream's parameters (400 or 422: too old, or the feature off) is not asked
   again;
2. watch from the list's resourceVersion with ``allowWatchBookmarks``, a
   server ``timeoutSeconds`` and a client read timeout, recording the RV of
   every event and bookmark; when the server ends the watch, watch again from
   the last RV; when the connection fails, back off and watch again from the
   last RV;
3. on 410 Gone (as an HTTP status or an ERROR event) relist at once; on any
   other ERROR event or list failure, back off and relist.

Objects are stored slim (:mod:`scheduler.cluster.slim`): without ``managedFields``, and pods
and nodes without what only the kubelet reads.
Handlers run on the informer's thread, in event order; an exception in one is
logged with the object's key and does not stop the informer. Handlers and
readers of the store get the stored dicts themselves: treat them as read-only.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.client import api_request, decode
from scheduler.cluster.slim import slimmer
from scheduler.cluster.store import Obj, ObjectStore, Resource, object_key
from scheduler.logs import V, kv
from scheduler.settings import WatchSettings

logger = logging.getLogger(__name__)

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
"""The annotation of the bookmark that ends a streamed initial state (metav1.InitialEventsAnnotationKey)."""


@dataclass
class Handlers:
    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None


@dataclass
class InformerStats:
    """Counters for logs, metrics and tests."""

    lists: int = 0
    """Whole states read by a paged list."""
    streams: int = 0
    """Whole states read as a stream of initial events (WatchList)."""
    stream_fallbacks: int = 0
    """Streams that failed or were refused, each followed by a list."""
    watches: int = 0
    expired: int = 0
    """410 Gone answers (each one causes a relist)."""
    watch_errors: int = 0
    """Lists or watches that failed: connection errors, read timeouts, API errors, ERROR events
    other than 410 (each one is followed by a backoff)."""
    events: int = 0
    bookmarks: int = 0
    handler_errors: int = 0
    last_error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class _ExpiredError(Exception):
    """410 Gone: the resourceVersion is too old; relist."""


class _WatchError(Exception):
    """An ERROR event other than 410; relist after a backoff."""


class Informer:
    """List+watch ``resource`` into :attr:`store`, calling the handlers; its timeouts, page size and
    backoff are ``settings`` (:class:`scheduler.settings.WatchSettings`)."""

    def __init__(
        self,
        api_client: ApiClient,
        resource: Resource,
        *,
        name: str | None = None,
        settings: WatchSettings | None = None,
    ) -> None:
        self.api = api_client
        self.resource = resource
        self.name = name or resource.plural
        self.store = ObjectStore()
        self._slim = slimmer(resource.plural)
        self.stats = InformerStats()
        self.settings = settings or WatchSettings()
        self._handlers: list[Handlers] = []
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._resp_lock = threading.Lock()
        self._resp: Any = None
        self._progress = False
        self._stream_refused = False
        self.resource_version: str | None = None
        """The last resourceVersion seen (list, event or bookmark)."""
        self.bookmark_resource_version: str | None = None

    # --- public API -------------------------------------------------------------------

    def add_handlers(
        self,
        on_add: Callable[[Obj], None] | None = None,
        on_update: Callable[[Obj, Obj], None] | None = None,
        on_delete: Callable[[Obj], None] | None = None,
    ) -> None:
        """Register handlers; do it before :meth:`start` (handlers added later miss the initial adds)."""
        self._handlers.append(Handlers(on_add, on_update, on_delete))

    def start(self) -> Informer:
        if self._thread is not None:
            raise RuntimeError(f"informer {self.name} already started")
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.name}", daemon=True)
        self._thread.start()
        return self

    def list_once(self) -> None:
        """One list into the store, delivered to the handlers; no watch (one-shot views such as
        ``explain``). API errors are raised."""
        self._list_and_replace()
        self._synced.set()

    def has_synced(self) -> bool:
        """True once the first whole state has been delivered to the handlers."""
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop and wait (up to ``timeout``) for the thread; an open watch is cut at once."""
        self._stop.set()
        self._abort_response()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # --- the loop -----------------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        rv: str | None = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    self._progress = False
                    rv = self._initial_state()
                    if rv is None:
                        break
                    self._synced.set()
                    failures = 0
                rv = self._watch(rv)
                failures = 0
            except _ExpiredError as e:
                self.stats.expired += 1
                logger.info("Watch expired, relisting", extra=kv(informer=self.name, rv=rv, err=str(e)))
                rv = None
            except Exception as e:  # noqa: BLE001 - the informer must survive anything
                if self._stop.is_set():
                    break
                failures = 1 if self._progress else failures + 1
                # A broken connection or a 429 resumes from the last RV; an
                # ERROR event or another API error starts again from a list.
                relist = (
                    rv is None
                    or isinstance(e, _WatchError)
                    or (isinstance(e, ApiException) and e.status != 429)
                )
                self.stats.watch_errors += 1
                self.stats.last_error = f"{type(e).__name__}: {e}"
                delay = min(self.settings.backoff[1], self.settings.backoff[0] * 2 ** (failures - 1)) * (
                    0.5 + random.random()
                )
                logger.warning(
                    "Watch or list failed; retrying",
                    extra=kv(
                        informer=self.name,
                        err=self.stats.last_error.splitlines()[0][:300],
                        relist=relist,
                        retryIn=round(delay, 2),
                    ),
                )
                if relist:
                    rv = None
                self._stop.wait(delay)
        logger.log(V(2), "Informer stopped", extra=kv(informer=self.name))

    def _query(self, **params: Any) -> list[tuple[str, Any]]:
        q: list[tuple[str, Any]] = []
        if self.resource.field_selector:
            q.append(("fieldSelector", self.resource.field_selector))
        if self.resource.label_selector:
            q.append(("labelSelector", self.resource.label_selector))
        q.extend((k, v) for k, v in params.items() if v is not None)
        return q

    def _list_and_replace(self) -> str | None:
        """List every page, replace the store, deliver the differences; the list's RV
        (None when stopped meanwhile)."""
        items: dict[str, Obj] = {}
        cont: str | None = None
        rv = ""
        while True:
            try:
                page = api_request(
                    self.api,
                    "GET",
                    self.resource.path,
                    query=self._query(limit=self.settings.page_size, **{"continue": cont}),
                    timeout=(self.settings.connect_timeout, self.settings.list_timeout),
                )
            except ApiException as e:
                if e.status == 410 and cont:
                    # The continue token expired mid-list: start over.
                    logger.info("List continue token expired; listing again", extra=kv(informer=self.name))
                    items, cont = {}, None
                    continue
                raise
            for obj in page.get("items") or ():
                items[object_key(obj)] = self._slim(obj)
            meta = page.get("metadata") or {}
            rv = meta.get("resourceVersion") or rv
            cont = meta.get("continue")
            if not cont:
                break
            if self._stop.is_set():  # a partial list must not replace the store
                return None
        self.stats.lists += 1
        self._replace(items, rv, "Listed")
        return rv

    def _initial_state(self) -> str | None:
        """The whole state into the store and the handlers: streamed where the server offers it,
        else listed; its RV (None when stopped meanwhile)."""
        if self.settings.stream_initial_state and not self._stream_refused:
            try:
                return self._stream_and_replace()
            except Exception as e:  # noqa: BLE001 - any failure of the stream falls back to a list
                if self._stop.is_set():
                    return None
                self.stats.stream_fallbacks += 1
                refused = isinstance(e, ApiException) and e.status in (400, 422)
                self._stream_refused = refused
                logger.log(
                    V(2) if refused else logging.INFO,
                    "Streaming the initial state failed; listing instead",
                    extra=kv(
                        informer=self.name,
                        err=f"{type(e).__name__}: {e}".splitlines()[0][:300],
                        again=not refused,
                    ),
                )
        return self._list_and_replace()

    def _stream_and_replace(self) -> str | None:
        """Stream the whole state (WatchList), replace the store, deliver the differences; the
        state's RV (None when stopped meanwhile). The stream is closed at its end bookmark and
        the watch opened afresh from that RV: one request more than reusing it, and the same
        recovery as every other watch."""
        timeout = int(max(self.settings.watch_timeout, self.settings.list_timeout))
        resp = self._open(
            self._query(
                watch="true",
                sendInitialEvents="true",
                resourceVersionMatch="NotOlderThan",
                allowWatchBookmarks="true",
                timeoutSeconds=timeout,
            ),
            "the initial state",
        )
        items: dict[str, Obj] = {}
        try:
            for line in _lines(resp):
                if self._stop.is_set():
                    return None
                ev = decode(line)
                typ, obj = ev.get("type"), ev.get("object") or {}
                if typ == "ERROR":
                    raise _event_error(obj)
                if typ == "BOOKMARK":
                    meta = obj.get("metadata") or {}
                    if (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true":
                        rv = str(meta.get("resourceVersion") or "")
                        self.stats.streams += 1
                        self._replace(items, rv, "Streamed")
                        return rv
                elif typ == "DELETED":
                    items.pop(object_key(obj), None)
                else:  # ADDED, or an object changed while the state was being sent
                    items[object_key(obj)] = self._slim(obj)
            if self._stop.is_set():
                return None
            raise _WatchError(f"the watch ended after {len(items)} objects, before the initial state's end")
        finally:
            self._close(resp, clean=False)

    def _replace(self, items: dict[str, Obj], rv: str, how: str) -> None:
        """Make ``items`` (at ``rv``) the store's content and deliver the differences."""
        self.resource_version = rv
        old = self.store.replace(items)
        adds = updates = deletes = 0
        for key, obj in items.items():
            prev = old.pop(key, None)
            if prev is None:
                adds += 1
                self._dispatch("add", key, obj)
            elif prev["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                updates += 1
                self._dispatch("update", key, obj, prev)
        for key, prev in old.items():  # gone while we were not watching
            deletes += 1
            self._dispatch("delete", key, prev)
        logger.log(
            V(2),
            how,
            extra=kv(
                informer=self.name, items=len(items), rv=rv, added=adds, updated=updates, deleted=deletes
            ),
        )

    def _open(self, query: list[tuple[str, Any]], what: str) -> Any:
        """Open a watch request (streamed, not read yet) and make it the one :meth:`stop` cuts."""
        try:
            resp = self.api.call_api(
                self.resource.path,
                "GET",
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=(self.settings.connect_timeout, self.settings.read_timeout),
            )
        except ApiException as e:
            if e.status == 410:
                raise _ExpiredError(f"{e.reason}: watch of {what}") from e
            raise
        with self._resp_lock:
            self._resp = resp
        if self._stop.is_set():
            self._abort_response()
        return resp

    def _close(self, resp: Any, *, clean: bool) -> None:
        with self._resp_lock:
            self._resp = None
        if not clean:
            resp.close()  # a half-read stream can't go back to the pool as is
        resp.release_conn()

    def _watch(self, rv: str) -> str:
        self._progress = False
        timeout = int(self.settings.watch_timeout * (1 + random.random()))
        query = self._query(
            watch="true", resourceVersion=rv, allowWatchBookmarks="true", timeoutSeconds=timeout
        )
        resp = self._open(query, rv)
        self.stats.watches += 1
        logger.log(V(4), "Watching", extra=kv(informer=self.name, rv=rv, timeoutSeconds=timeout))
        clean = False
        try:
            for line in _lines(resp):
                rv = self._handle_event(decode(line), rv)
                self._progress = True
                if self._stop.is_set():
                    return rv
            clean = True
        except Exception:
            if self._stop.is_set():
                return rv
            raise
        finally:
            self._close(resp, clean=clean)
        return rv

    def _handle_event(self, ev: Obj, rv: str) -> str:
        typ = ev.get("type")
        obj = ev.get("object") or {}
        if typ == "ERROR":
            raise _event_error(obj)
        new_rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
        if typ == "BOOKMARK":
            self.stats.bookmarks += 1
            self.bookmark_resource_version = new_rv
            self.resource_version = new_rv
            return new_rv
        self.stats.events += 1
        self._slim(obj)
        key = object_key(obj)
        if typ == "ADDED" or typ == "MODIFIED":
            old = self.store.set(key, obj)
            if old is None:
                self._dispatch("add", key, obj)
            else:
                self._dispatch("update", key, obj, old)
        elif typ == "DELETED":
            self.store.pop(key)
            self._dispatch("delete", key, obj)
        else:
            logger.warning("Unknown watch event type", extra=kv(informer=self.name, type=typ))
        self.resource_version = new_rv
        return new_rv

    def _dispatch(self, what: str, key: str, obj: Obj, old: Obj | None = None) -> None:
        for h in self._handlers:
            try:
                if what == "add" and h.on_add:
                    h.on_add(obj)
                elif what == "update" and h.on_update:
                    h.on_update(old, obj)  # type: ignore[arg-type]
                elif what == "delete" and h.on_delete:
                    h.on_delete(obj)
            except Exception:
                self.stats.handler_errors += 1
                logger.exception("Event handler failed", extra=kv(informer=self.name, event=what, object=key))

    def _abort_response(self) -> None:
        """Unblock a read on the open watch by shutting its socket down (close() would wait on
        the SSL lock the blocked reader holds)."""
        with self._resp_lock:
            resp = self._resp
        if resp is None:
            return
        sock = getattr(getattr(resp, "connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _event_error(status: Obj) -> Exception:
    """What a watch ERROR event (its object a Status) raises: 410 Gone relists at once, the rest
    back off first."""
    code = status.get("code")
    msg = f"{status.get('reason')}: {status.get('message')}"
    if code == 410:
        return _ExpiredError(msg)
    return _WatchError(f"watch ERROR event {code} {msg}")


def _lines(resp: Any) -> Iterator[bytes]:
    """Newline-delimited JSON from a streaming response, one event per line, as each chunk arrives."""
    buf = b""
    for chunk in resp.stream(None, decode_content=True):
        if not chunk:
            continue
        buf += chunk
        if b"\n" not in buf:
            continue
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line:
                yield line
    if buf.strip():
        yield buf


@contextlib.contextmanager
def initial_load() -> Iterator[None]:
    """The informers' first lists, with the cyclic garbage collector off; then one collection
    and what is left frozen (``gc.freeze``), and the collector as it was.

    A large cluster's state arrives as millions of small dicts and lists that hold no reference
    cycles. The collector, run every 700 new container objects, scans the young ones each time
    and all of them now and then, as they arrive: at 150 000 pods that is 6.5 of the 10 s of
    CPU their decoding, slimming and caching take (3.7 s without it). What is alive before the
    lists (modules, clients, plugins) is frozen first, so that the one collection at the end
    scans only what came since: it frees the cycles any thread made meanwhile (a failed
    request's exception and traceback), and what survives it is frozen too, so later
    collections skip it. Frozen objects are still freed by reference counting as their last
    reference goes (a deleted pod's dicts, which form no cycles); only an object alive at a
    freeze that later ends up in a garbage cycle (a watch connection open then) is never
    freed: a few, once. A relist later runs with the collector on."""
    enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()
        if enabled:
            gc.enable()


def wait_for_sync(informers: list[Informer], timeout: float) -> bool:
    """Wait until every informer has synced, within one overall deadline."""
    deadline = time.monotonic() + timeout
    return all(i.wait_for_sync(max(0.0, deadline - time.monotonic())) for i in informers)
