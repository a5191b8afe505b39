"""Who bound each soak pod, and how often: a watch of the namespace's ``Scheduled`` events.

The API server drops events an hour after their last update (kube-apiserver's ``--event-ttl``),
so a soak of hours counts them as they come rather than listing them at the end. Each event is
counted whole (``count``, or its ``series``' count, as ``e2e.podchecks.scheduled_events``), per
pod UID, and its ``reportingInstance`` tells ours from kube-scheduler (``e2e.events``: the
instance names the pod of ours, or the node of kube-scheduler).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from e2e.events import instance_pod

logger = logging.getLogger(__name__)


class ScheduledEvents:
    def __init__(self, api: client.ApiClient, namespace: str, kube_scheduler_hosts: set[str]) -> None:
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.kube_scheduler_hosts = kube_scheduler_hosts
        self._counts: dict[str, tuple[str, int, bool]] = {}
        """event UID -> (pod UID, its count, written by kube-scheduler)."""
        self.errors = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-events", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def per_pod(self) -> dict[str, int]:
        """pod UID -> Scheduled events about it."""
        out: Counter[str] = Counter()
        with self._lock:
            for pod, n, _ in self._counts.values():
                out[pod] += n
        return dict(out)

    def by_kube_scheduler(self) -> set[str]:
        """Pod UIDs kube-scheduler reported binding (it led for a while)."""
        with self._lock:
            return {pod for pod, _, ks in self._counts.values() if ks}

    def _observe(self, ev: dict[str, Any]) -> None:
        if ev.get("reason") != "Scheduled":
            return
        pod = ev["involvedObject"].get("uid") or ev["involvedObject"].get("name") or ""
        n = max(ev.get("count") or 1, (ev.get("series") or {}).get("count") or 1)
        ks = instance_pod(ev.get("reportingInstance") or "") in self.kube_scheduler_hosts
        with self._lock:
            self._counts[ev["metadata"]["uid"]] = (pod, n, ks)

    def _run(self) -> None:
        rv = ""
        selector = "reason=Scheduled"
        while not self._stop.is_set():
            try:
                if not rv:
                    listed = self.core.api_client.sanitize_for_serialization(
                        self.core.list_namespaced_event(
                            self.namespace, field_selector=selector, _request_timeout=60
                        )
                    )
                    for ev in listed.get("items") or ():
                        self._observe(ev)
                    rv = listed["metadata"]["resourceVersion"]
                w = watch.Watch()
                for item in w.stream(
                    self.core.list_namespaced_event,
                    self.namespace,
                    field_selector=selector,
                    resource_version=rv,
                    timeout_seconds=5,  # so that stop() returns within seconds
                    _request_timeout=20,
                    deserialize=False,
                    allow_watch_bookmarks=True,
                ):
                    obj = item["object"]
                    if item["type"] == "ERROR":
                        rv = ""
                        break
                    rv = obj["metadata"].get("resourceVersion") or rv
                    if item["type"] in ("ADDED", "MODIFIED"):
                        self._observe(obj)
                    if self._stop.is_set():
                        w.stop()
                        break
            except ApiException as e:
                if e.status == 410:
                    rv = ""
                else:
                    self.errors += 1
                    self._stop.wait(1)
            except Exception as e:  # noqa: BLE001 - a dropped connection: watch again from rv
                logger.debug("event watch broke err=%r", e)
                self.errors += 1
                rv = rv if not isinstance(e, KeyError) else ""
                self._stop.wait(1)
