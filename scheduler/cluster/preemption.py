"""Carrying out a preemption: the API writes of kube-scheduler's preemption ``Executor``.

For a :class:`scheduler.core.preemption.Preemption`, in the background
(``prepareCandidateAsync``: scheduling goes on meanwhile):

1. the lower-priority pods nominated to the node lose ``status.nominatedNodeName``;
2. each victim not already being deleted gets the condition
   ``DisruptionTarget=True`` (reason ``PreemptionByScheduler``, message
   ``<scheduler>: preempting to accommodate a higher priority pod``), then is
   deleted with its own grace period, and a ``Preempted`` event (regarding the
   victim, related to the preemptor: ``Preempted by pod <uid> on node <node>``);
3. ``done`` is called, whatever happened, so the preemptor is tried again.

A victim that is gone already (404, or a UID that no longer matches) is fine:
it made room anyway. Other failures are logged, and the rest still runs.
Writes carry the victim's UID (a precondition on the delete, a
``metadata.uid`` in the status patch), so a pod re-created under the same
name is never hit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.binder import now_rfc3339
from scheduler.cluster.client import Timeout, api_request
from scheduler.cluster.events import EventRecorder
from scheduler.cluster.retry import call_with_retries, status_message
from scheduler.core.podinfo import PodInfo
from scheduler.core.preemption import Preemption
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def disruption_condition(victim: dict[str, Any], scheduler_name: str) -> dict[str, Any] | None:
    """The condition to write on a victim, or None when it has this one already."""
    message = f"{scheduler_name}: preempting to accommodate a higher priority pod"
    for c in (victim.get("status") or {}).get("conditions") or ():
        if c.get("type") == DISRUPTION_TARGET and (c.get("status"), c.get("reason"), c.get("message")) == (
            "True",
            PREEMPTION_BY_SCHEDULER,
            message,
        ):
            return None
    cond: dict[str, Any] = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": PREEMPTION_BY_SCHEDULER,
        "message": message,
        "lastTransitionTime": now_rfc3339(),
    }
    generation = victim["metadata"].get("generation")
    if generation:
        cond["observedGeneration"] = generation
    return cond


class PreemptionExecutor:
    """Runs preemptions on a small pool of threads; each preemption's writes in order."""

    def __init__(
        self,
        api_client: ApiClient,
        recorder: EventRecorder,
        *,
        workers: int = 4,
        attempts: int = 5,
        max_seconds: float = 15.0,
        timeout: Timeout = (5.0, 15.0),
    ) -> None:
        self.api = api_client
        self.recorder = recorder
        self.attempts = attempts
        self.max_seconds = max_seconds
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="preemption")

    def preempt(self, preemption: Preemption, scheduler_name: str, done: Callable[[], None]) -> None:
        self._pool.submit(self._run, preemption, scheduler_name, done)

    def stop(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=False)

    # --- one preemption --------------------------------------------------------------

    def _run(self, p: Preemption, scheduler_name: str, done: Callable[[], None]) -> None:
        result = "success"
        try:
            for pod in p.clear_nominations:
                if not self._clear_nomination(pod):
                    result = "error"
            for victim in p.victims:
                if victim.deleting:
                    logger.log(
                        V(2),
                        "Victim Pod is already being deleted, skipping the API call for it",
                        extra=kv(preemptor=p.preemptor.key, node=p.node, victim=victim.key),
                    )
                    continue
                if not self._evict(p, victim, scheduler_name):
                    result = "error"
            logger.log(
                V(2),
                "Preemption finished",
                extra=kv(preemptor=p.preemptor.key, node=p.node, victims=len(p.victims), result=result),
            )
        except Exception:
            result = "error"
            logger.exception("Preemption failed", extra=kv(preemptor=p.preemptor.key, node=p.node))
        finally:
            done()

    def _call(self, fn: Callable[[], Any], what: str) -> Any:
        return call_with_retries(fn, what=what, attempts=self.attempts, max_seconds=self.max_seconds)

    def _evict(self, p: Preemption, victim: PodInfo, scheduler_name: str) -> bool:
        """Mark, delete and report one victim; False when a write failed."""
        raw = victim.pod
        meta = raw["metadata"]
        base = f"/api/v1/namespaces/{victim.namespace}/pods/{victim.name}"
        cond = disruption_condition(raw, scheduler_name)
        try:
            if cond is not None:
                patch = {"metadata": {"uid": victim.uid}, "status": {"conditions": [cond]}}
                self._call(
                    lambda: api_request(
                        self.api,
                        "PATCH",
                        base + "/status",
                        body=patch,
                        content_type="application/strategic-merge-patch+json",
                        timeout=self.timeout,
                    ),
                    "patch victim status",
                )
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": victim.uid}}
            self._call(
                lambda: api_request(self.api, "DELETE", base, body=body, timeout=self.timeout),
                "delete victim",
            )
        except ApiException as e:
            if e.status in (404, 409) or (e.status == 422 and "uid" in (e.body or "")):
                logger.log(
                    V(2),
                    "Victim Pod is already deleted",
                    extra=kv(preemptor=p.preemptor.key, victim=victim.key, node=p.node, code=e.status),
                )
                return True
            logger.error(
                "Could not preempt victim",
                extra=kv(preemptor=p.preemptor.key, victim=victim.key, code=e.status, err=status_message(e)),
            )
            return False
        except Exception as e:
            logger.error(
                "Could not preempt victim",
                extra=kv(preemptor=p.preemptor.key, victim=victim.key, err=str(e)[:300]),
            )
            return False
        logger.log(
            V(2),
            "Preemptor Pod preempted victim Pod",
            extra=kv(preemptor=p.preemptor.key, victim=victim.key, node=p.node, uid=meta.get("uid")),
        )
        self.recorder.preempted(raw, p.preemptor.pod, p.node, scheduler_name)
        return True

    def _clear_nomination(self, pod: PodInfo) -> bool:
        """``clearNominatedNodeName`` for a lower-priority pod nominated to the node."""
        if not (pod.pod.get("status") or {}).get("nominatedNodeName"):
            return True  # nominated in memory only: the loop has forgotten it already
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"
        patch = {"metadata": {"uid": pod.uid}, "status": {"nominatedNodeName": None}}
        try:
            self._call(
                lambda: api_request(
                    self.api,
                    "PATCH",
                    path,
                    body=patch,
                    content_type="application/strategic-merge-patch+json",
                    timeout=self.timeout,
                ),
                "clear nominated node",
            )
        except ApiException as e:
            if e.status in (404, 409, 422):
                return True
            logger.error(
                "Cannot clear 'NominatedNodeName' field from lower priority pod",
                extra=kv(pod=pod.key, code=e.status, err=status_message(e)),
            )
            return False
        except Exception as e:
            logger.error("Cannot clear 'NominatedNodeName' field", extra=kv(pod=pod.key, err=str(e)[:300]))
            return False
        return True
