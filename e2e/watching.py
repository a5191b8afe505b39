"""A background watch of a namespace's pods: when each was created and bound, and whether the
requests on every node fit.

:class:`PodWatch` keeps, per pod UID, when it was created (the API's
``creationTimestamp`` and the moment the watch saw it), when it was bound (the
``PodScheduled=True`` condition's ``lastTransitionTime`` and the moment the
watch first saw a ``nodeName``), and every ``nodeName`` it ever had. The API's
times have one-second resolution; the watch's are this process's wall clock,
so they include the watch's delivery delay (they can only overstate a
latency). Fit is counted as ``e2e.fit`` counts it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from e2e.fit import holds_resources, pod_requests
from e2e.kube import wall
from e2e.pods import condition, is_bound


@dataclass
class PodRecord:
    uid: str
    name: str
    created: float | None
    """creationTimestamp (whole seconds)."""
    seen: float
    """When the watch first saw the pod (this process's clock, epoch seconds)."""
    requests: tuple[int, int] = (0, 0)
    node: str = ""
    nodes: list[str] = field(default_factory=list)
    """Every distinct nodeName the pod had, in order: more than one is a second binding."""
    bound_seen: float | None = None
    """When the watch first saw a nodeName."""
    scheduled_at: float | None = None
    """lastTransitionTime of PodScheduled=True (whole seconds)."""
    deleted_seen: float | None = None
    phase: str = ""
    reason: str = ""

    def api_latency(self) -> float | None:
        if self.created is None or self.scheduled_at is None:
            return None
        return self.scheduled_at - self.created

    def watch_latency(self) -> float | None:
        return None if self.bound_seen is None else self.bound_seen - self.seen


class PodWatch:
    """Records every pod of ``namespace`` (see the module doc) while running, and checks fit.

    It watches the pods of every namespace, so that after every change on a node the
    requests of all the pods holding resources there can be held against the node's
    ``alloc``atable: ``overcommits`` lists any moment they did not fit, ``peak`` the
    highest (milli-CPU, memory) requested per node."""

    def __init__(
        self, core: client.CoreV1Api, namespace: str, *, alloc: dict[str, tuple[int, int]] | None = None
    ) -> None:
        self.core = core
        self.namespace = namespace
        self.alloc = alloc or {}
        self.pods: dict[str, PodRecord] = {}
        self.live: dict[str, dict[str, Any]] = {}
        """Every namespace's pods, by UID."""
        self.overcommits: list[str] = []
        self.peak: dict[str, tuple[int, int]] = {}
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"podwatch-{namespace}", daemon=True)

    def __enter__(self) -> PodWatch:
        self._thread.start()
        if not self._synced.wait(30):
            raise AssertionError(f"the pod watch of {self.namespace} did not start")
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(70)

    def records(self) -> list[PodRecord]:
        with self._lock:
            return list(self.pods.values())

    def ours(self) -> list[dict[str, Any]]:
        """The live pods of the namespace."""
        with self._lock:
            return [p for p in self.live.values() if p["metadata"]["namespace"] == self.namespace]

    def unbound_live(self) -> list[str]:
        return sorted(p["metadata"]["name"] for p in self.ours() if not is_bound(p))

    def binds_after(self, t: float) -> list[PodRecord]:
        """Pods first seen bound after ``t`` (epoch seconds), in order."""
        with self._lock:
            return sorted(
                (r for r in self.pods.values() if r.bound_seen is not None and r.bound_seen > t),
                key=lambda r: r.bound_seen or 0,
            )

    def _run(self) -> None:
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    body = json.loads(
                        self.core.list_pod_for_all_namespaces(
                            _preload_content=False, _request_timeout=30
                        ).data
                    )
                    now = time.time()
                    with self._lock:
                        self.live = {}
                        for p in body["items"]:
                            self._observe("ADDED", p, now)
                    rv = body["metadata"]["resourceVersion"]
                    self._synced.set()
                w = watch.Watch()
                for ev in w.stream(
                    self.core.list_pod_for_all_namespaces,
                    resource_version=rv,
                    timeout_seconds=30,
                    _request_timeout=40,
                    deserialize=False,
                    allow_watch_bookmarks=True,
                ):
                    obj = ev["object"]
                    if ev["type"] == "ERROR":
                        rv = ""  # 410 Gone: list again
                        break
                    rv = obj["metadata"].get("resourceVersion") or rv
                    if ev["type"] != "BOOKMARK":
                        with self._lock:
                            self._observe(ev["type"], obj, time.time())
                    if self._stop.is_set():
                        w.stop()
                        break
            except ApiException as e:
                if e.status == 410:
                    rv = ""
                else:
                    self.errors.append(f"{e.status} {e.reason}")
                    self._stop.wait(1)
            except KeyError as e:
                # the client's stream with deserialize=False fails on an ERROR event (an expired
                # resourceVersion, as after a kube-apiserver restart): list again
                self.errors.append(repr(e)[:200])
                rv = ""
                self._stop.wait(1)
            except Exception as e:  # noqa: BLE001 - a dropped connection: watch again from rv
                self.errors.append(repr(e)[:200])
                self._stop.wait(1)

    def _observe(self, type_: str, pod: dict[str, Any], now: float) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        if type_ == "DELETED":
            self.live.pop(uid, None)
        else:
            self.live[uid] = pod
        node = (pod.get("spec") or {}).get("nodeName") or ""
        if meta["namespace"] == self.namespace:
            rec = self.pods.get(uid)
            if rec is None:
                rec = self.pods[uid] = PodRecord(
                    uid, meta["name"], wall(meta.get("creationTimestamp")), now, pod_requests(pod)
                )
            if node and (not rec.nodes or rec.nodes[-1] != node):
                rec.nodes.append(node)
            if node and rec.bound_seen is None:
                rec.bound_seen = now
            rec.node = node or rec.node
            cond = condition(pod, "PodScheduled")
            if cond and cond.get("status") == "True" and rec.scheduled_at is None:
                rec.scheduled_at = wall(cond.get("lastTransitionTime"))
            status = pod.get("status") or {}
            rec.phase, rec.reason = status.get("phase") or "", status.get("reason") or rec.reason
            if type_ == "DELETED":
                rec.deleted_seen = now
        if node and self.alloc and self._synced.is_set():
            self._check_fit(node)

    def _check_fit(self, node: str) -> None:
        cpu = mem = 0
        for p in self.live.values():
            if holds_resources(p) and p["spec"]["nodeName"] == node:
                c, m = pod_requests(p)
                cpu, mem = cpu + c, mem + m
        pc, pm = self.peak.get(node, (0, 0))
        self.peak[node] = (max(pc, cpu), max(pm, mem))
        ac, am = self.alloc.get(node, (0, 0))
        if cpu > ac or mem > am:
            self.overcommits.append(f"{node}: requests {cpu}m/{mem}B > allocatable {ac}m/{am}B")
