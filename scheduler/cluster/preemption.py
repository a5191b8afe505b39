"""Carrying out a preemption: the API writes of kube-scheduler's preemption ``Executor``.

For a :class:`scheduler.core.preemption.Preemption`, in the background
(``prepareCandidateAsync``: scheduling goes on meanwhile):

1. the lower-priority pods nominated to the node lose ``status.nominatedNodeName``;
2. each victim not already being deleted (all at once, as kube-scheduler's
   ``Parallelizer().Until`` over them) gets the condition
   ``DisruptionTarget=True`` (reason ``PreemptionByScheduler``, message
   ``<scheduler>: preempting to accommodate a higher priority pod``), then is
   deleted with its own grace period, and a ``Preempted`` event (regarding the
   victim, related to the preemptor: ``Preempted by pod <uid> on node <node>``);
3. ``done(ok)`` is called, whatever happened: ``ok`` is False when a write
   failed, and the loop then tries the preemptor again at once.

A victim that is gone already made room anyway. Other failures are logged,
and the rest still runs. Every write carries the pod's UID (the Binder's
status patch and delete), so a pod re-created under the same name is never hit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.cluster.binder import Binder, current_condition, pod_condition
from scheduler.cluster.events import EventRecorder
from scheduler.cluster.retry import CancelledError, status_message
from scheduler.core.podinfo import PodInfo
from scheduler.core.preemption import Preemption
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def disruption_condition(victim: dict[str, Any], scheduler_name: str) -> dict[str, Any] | None:
    """The condition to write on a victim, or None when it has this one already."""
    message = f"{scheduler_name}: preempting to accommodate a higher priority pod"
    old = current_condition(victim, DISRUPTION_TARGET)
    if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (
        "True",
        PREEMPTION_BY_SCHEDULER,
        message,
    ):
        return None
    return pod_condition(victim, DISRUPTION_TARGET, "True", PREEMPTION_BY_SCHEDULER, message)


class PreemptionExecutor:
    """Runs ``workers`` preemptions at once (kube-scheduler: a goroutine each), and evicts the
    victims of each concurrently on a second pool of ``victim_workers`` threads (its
    parallelizer's 16)."""

    def __init__(
        self, binder: Binder, recorder: EventRecorder, *, workers: int = 16, victim_workers: int = 16
    ) -> None:
        self.binder = binder
        self.recorder = recorder
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="preemption")
        # Apart from _pool: a preemption waits for its victims, which must never wait for it.
        self._victims = ThreadPoolExecutor(max_workers=victim_workers, thread_name_prefix="preempt-victim")

    def preempt(self, preemption: Preemption, scheduler_name: str, done: Callable[[bool], None]) -> None:
        self._pool.submit(self._run, preemption, scheduler_name, done)

    def stop(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=False)
        self._victims.shutdown(wait=True, cancel_futures=False)

    # --- one preemption --------------------------------------------------------------

    def _run(self, p: Preemption, scheduler_name: str, done: Callable[[bool], None]) -> None:
        ok = True
        try:
            for pod in p.clear_nominations:
                ok &= self._write(p, pod, "clear the nominated node of", self._clear_nomination)
            evict = []
            for victim in p.victims:
                if victim.deleting:
                    logger.log(
                        V(2),
                        "Victim Pod is already being deleted, skipping the API call for it",
                        extra=kv(preemptor=p.preemptor.key, node=p.node, victim=victim.key),
                    )
                    continue
                evict.append(victim)
            results = self._victims.map(
                lambda v: self._write(p, v, "preempt", lambda v: self._evict(p, v, scheduler_name)), evict
            )
            ok &= all(list(results))
            logger.log(
                V(2),
                "Preemption finished",
                extra=kv(preemptor=p.preemptor.key, node=p.node, victims=len(p.victims), ok=ok),
            )
        except Exception:
            ok = False
            logger.exception("Preemption failed", extra=kv(preemptor=p.preemptor.key, node=p.node))
        finally:
            done(ok)

    def _write(self, p: Preemption, pod: PodInfo, what: str, write: Callable[[PodInfo], None]) -> bool:
        """``write(pod)``; False (logged) when it failed after retries."""
        try:
            write(pod)
        except CancelledError:
            return False  # halted: the Lease is lost
        except ApiException as e:
            logger.error(
                f"Could not {what} pod",
                extra=kv(preemptor=p.preemptor.key, pod=pod.key, code=e.status, err=status_message(e)),
            )
            return False
        except Exception as e:
            logger.error(
                f"Could not {what} pod", extra=kv(preemptor=p.preemptor.key, pod=pod.key, err=str(e)[:300])
            )
            return False
        return True

    def _evict(self, p: Preemption, victim: PodInfo, scheduler_name: str) -> None:
        """Mark, delete and report one victim (``PreemptPod``)."""
        raw = victim.pod
        cond = disruption_condition(raw, scheduler_name)
        gone = cond is not None and not self.binder.patch_status(raw, {"conditions": [cond]})
        if gone or not self.binder.delete(raw):
            logger.log(
                V(2), "Victim Pod is already deleted", extra=kv(preemptor=p.preemptor.key, victim=victim.key)
            )
            return
        logger.log(
            V(2),
            "Preemptor Pod preempted victim Pod",
            extra=kv(preemptor=p.preemptor.key, victim=victim.key, node=p.node),
        )
        self.recorder.preempted(raw, p.preemptor.pod, p.node, scheduler_name)

    def _clear_nomination(self, pod: PodInfo) -> None:
        """``clearNominatedNodeName`` for a lower-priority pod nominated to the node; one
        nominated in memory only has nothing to clear (the loop has forgotten it already)."""
        if (pod.pod.get("status") or {}).get("nominatedNodeName"):
            self.binder.patch_status(pod.pod, {"nominatedNodeName": None})
