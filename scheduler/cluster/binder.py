"""The scheduler's writes for one pod: the Binding; its status (the PodScheduled condition and
the nominated node on failure, a preemption victim's DisruptionTarget); a victim's delete.

Binding goes through the ``pods/{name}/binding`` subresource as kube-scheduler's
DefaultBinder does (``Pods(ns).Bind``), with the pod's UID as a precondition,
so a pod deleted and re-created under the same name is not bound by mistake.

Two traps of the Python client, both checked against a real API server in
tests/cluster/test_binder.py:

- ``CoreV1Api.create_namespaced_binding`` posts to the legacy
  ``/namespaces/{ns}/bindings`` collection, not to the subresource. There the
  API server wipes ``metadata.uid`` from the request (system fields are only
  kept on subresource creates), so the UID precondition silently does
  nothing; and admission webhooks registered for ``pods/binding`` never see
  it. We call ``create_namespaced_pod_binding``.
- Either method, left to parse the answer, raises ``ValueError: Invalid value
  for `target`, must not be `None``` after a *successful* bind: the server
  answers with a ``Status``, which the client reads as a ``V1Binding``
  (kubernetes-client/python #547, #825, still so in 36.x).

So every write here is an ``api_request`` to the path kube-scheduler uses:
raw JSON both ways, and a fraction of the typed call's CPU.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.client import api_request
from scheduler.cluster.retry import CancelledError, call_with_retries, retriable, status_message
from scheduler.core.loop import BindOutcome
from scheduler.logs import V, kv
from scheduler.settings import BindingSettings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BindResult:
    status: BindOutcome
    message: str = ""
    code: int | None = None
    attempts: int = 1

    @property
    def bound(self) -> bool:
        return self.status is BindOutcome.BOUND

    @property
    def drop(self) -> bool:
        return self.status is BindOutcome.GONE


def binding_body(namespace: str, name: str, uid: str | None, node: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def now_rfc3339() -> str:
    """metav1.Time: RFC 3339, whole seconds, UTC."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Binder:
    """Binds pods and writes their PodScheduled condition, retrying 429/5xx with tenacity.

    ``settings`` bound each call's retries (:class:`scheduler.settings.BindingSettings`): the
    backoff is exponential with jitter from ``initial_wait`` to ``max_wait``, and never shorter
    than a ``Retry-After`` the server sent (capped at ``retry_after_cap``).
    """

    def __init__(self, api_client: ApiClient, settings: BindingSettings | None = None) -> None:
        self.api = api_client
        self.settings = settings or BindingSettings()
        self.halted = threading.Event()
        """Set by :meth:`halt`: no write starts any more (a retry's backoff ends at once)."""

    def halt(self) -> None:
        """Start no more writes: this scheduler lost its Lease (kube-scheduler exits then)."""
        self.halted.set()

    def _retrying(self, fn: Any, what: str, on_attempt: Any = None) -> Any:
        return call_with_retries(
            fn,
            what=what,
            attempts=self.settings.attempts,
            max_seconds=self.settings.max_seconds,
            initial_wait=self.settings.initial_wait,
            max_wait=self.settings.max_wait,
            retry_after_cap=self.settings.retry_after_cap,
            on_attempt=on_attempt,
            cancel=self.halted,
        )

    # --- binding ---------------------------------------------------------------------

    def bind(self, namespace: str, name: str, uid: str | None, node: str) -> BindResult:
        """Bind ``namespace/name`` (with ``uid`` as precondition, if given) to ``node``."""
        body = binding_body(namespace, name, uid, node)
        attempts = 0

        def count(n: int) -> None:
            nonlocal attempts
            attempts = n

        path = f"/api/v1/namespaces/{namespace}/pods/{name}/binding"
        # Whether an earlier send of this Binding may have reached the API server: an attempt
        # with no answer or a 5xx one, or libcurl's first send of a request it sent again.
        sent_before = False

        def call() -> None:
            nonlocal sent_before
            try:
                api_request(self.api, "POST", path, body=body, timeout=self.settings.timeout)
            except ApiException as e:
                if getattr(e, "resent", False) or e.status >= 500:
                    sent_before = True
                raise
            except (TimeoutError, ConnectionError):
                sent_before = True
                raise

        try:
            self._retrying(call, "bind", count)
        except CancelledError:
            logger.log(V(2), "Not binding: halted", extra=kv(pod=f"{namespace}/{name}", node=node))
            return BindResult(BindOutcome.CANCELLED, "halted", attempts=attempts)
        except ApiException as e:
            msg = status_message(e)
            if e.status in (404, 409):
                # A 409 is our own bind only when an earlier send of ours may have reached the
                # API server; else someone else bound the pod (another scheduler, or a second
                # leader), and its bind is theirs: no event, no success, the cache learns it.
                bound = self._bound_node(namespace, name, uid) if e.status == 409 else None
                if bound == node and sent_before:
                    return BindResult(BindOutcome.BOUND, attempts=attempts)
                if bound:
                    logger.info(
                        "Pod was bound by someone else",
                        extra=kv(pod=f"{namespace}/{name}", node=bound, ourNode=node),
                    )
                    return BindResult(
                        BindOutcome.GONE, f"bound to {bound} by someone else", e.status, attempts
                    )
                logger.log(
                    V(2),
                    "Pod bound or deleted elsewhere",
                    extra=kv(pod=f"{namespace}/{name}", node=node, code=e.status, err=msg),
                )
                return BindResult(BindOutcome.GONE, msg, e.status, attempts)
            logger.warning(
                "Binding failed",
                extra=kv(pod=f"{namespace}/{name}", node=node, code=e.status, err=msg, attempts=attempts),
            )
            return BindResult(BindOutcome.FAILED, msg, e.status, attempts)
        except Exception as e:  # connection errors after the last attempt
            if retriable(e) and attempts > 0 and self._bound_node(namespace, name, uid) == node:
                return BindResult(BindOutcome.BOUND, attempts=attempts)
            logger.warning(
                "Binding failed",
                extra=kv(pod=f"{namespace}/{name}", node=node, err=str(e)[:300], attempts=attempts),
            )
            return BindResult(BindOutcome.FAILED, f"{type(e).__name__}: {e}", None, attempts)
        return BindResult(BindOutcome.BOUND, attempts=attempts)

    def _bound_node(self, namespace: str, name: str, uid: str | None) -> str | None:
        """The node the pod (of ``uid``, if given) is bound to; None if unbound, gone or unknown."""
        try:
            pod = api_request(
                self.api, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}", timeout=self.settings.timeout
            )
        except Exception:  # noqa: BLE001 - best effort: unknown means "not ours"
            return None
        if not pod or (uid and pod["metadata"].get("uid") != uid):
            return None
        return (pod.get("spec") or {}).get("nodeName") or None

    # --- the PodScheduled condition ------------------------------------------------------

    def set_unschedulable(
        self,
        pod: dict[str, Any],
        message: str,
        reason: str = "Unschedulable",
        nominated_node: str | None = None,
    ) -> bool:
        """Write ``PodScheduled=False`` with ``reason``/``message`` on the pod's status, as
        kube-scheduler's ``updatePod``: only when status, reason or message differ from the
        pod's current condition (``lastTransitionTime`` kept unless the status flips); and
        ``status.nominatedNodeName`` when ``nominated_node`` is given and differs ("" clears it).

        ``pod`` is the raw pod the caller knows (the informer's). Returns True when a
        patch was sent; a pod that is gone is ignored (False). Other errors raise
        after retries.
        """
        meta = pod["metadata"]
        cond = unschedulable_condition(pod, message, reason)
        status: dict[str, Any] = {}
        if cond is not None:
            status["conditions"] = [cond]
        current = (pod.get("status") or {}).get("nominatedNodeName") or ""
        if nominated_node is not None and nominated_node != current:
            status["nominatedNodeName"] = nominated_node or None  # null removes the field
        if not status or not self.patch_status(pod, status):
            return False
        logger.log(
            V(3),
            "Updated pod condition",
            extra=kv(
                pod=f"{meta['namespace']}/{meta['name']}",
                conditionType="PodScheduled",
                conditionStatus="False",
                conditionReason=reason,
                nominatedNodeName=status.get("nominatedNodeName", current),
            ),
        )
        return True

    def patch_status(self, pod: dict[str, Any], status: dict[str, Any]) -> bool:
        """A strategic merge patch of ``status`` onto the pod's, guarded by its UID. False when
        the pod is gone (or was re-created under its name); other errors raise after retries."""
        meta = pod["metadata"]
        patch: dict[str, Any] = {"status": status}
        if meta.get("uid"):
            # The API server refuses to change metadata.uid (422 on that field): a pod
            # re-created under the same name is not patched.
            patch["metadata"] = {"uid": meta["uid"]}
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        try:
            self._retrying(
                lambda: api_request(
                    self.api,
                    "PATCH",
                    path,
                    body=patch,
                    content_type="application/strategic-merge-patch+json",
                    timeout=self.settings.timeout,
                ),
                "patch pod status",
            )
        except ApiException as e:
            if e.status in (404, 409) or (e.status == 422 and _uid_refused(e)):
                logger.log(
                    V(3),
                    "Pod gone before its status was written",
                    extra=kv(pod=f"{meta['namespace']}/{meta['name']}", code=e.status),
                )
                return False
            raise
        return True

    def delete(self, pod: dict[str, Any]) -> bool:
        """Delete the pod with its own grace period (``util.DeletePod``), its UID as a
        precondition. False when it is gone already; other errors raise after retries."""
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if meta.get("uid"):
            body["preconditions"] = {"uid": meta["uid"]}
        try:
            self._retrying(
                lambda: api_request(self.api, "DELETE", path, body=body, timeout=self.settings.timeout),
                "delete pod",
            )
        except ApiException as e:
            if e.status in (404, 409):  # 409: the precondition failed, another pod has the name
                return False
            raise
        return True


def _uid_refused(e: ApiException) -> bool:
    try:
        causes = json.loads(e.body)["details"]["causes"]
    except (TypeError, ValueError, KeyError):
        return False
    return any(c.get("field") == "metadata.uid" for c in causes)


def pod_condition(pod: dict[str, Any], type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
    """A condition to write on ``pod`` (``UpdatePodCondition``): now as its transition time
    (kept from the pod's current one when the status does not change), and the pod's
    generation as ``observedGeneration``."""
    cond: dict[str, Any] = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now_rfc3339(),
    }
    old = current_condition(pod, type_)
    if old is not None and old.get("status") == status:
        cond["lastTransitionTime"] = old.get("lastTransitionTime") or cond["lastTransitionTime"]
    generation = pod["metadata"].get("generation")
    if generation:
        cond["observedGeneration"] = generation
    return cond


def current_condition(pod: dict[str, Any], type_: str) -> dict[str, Any] | None:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return next((c for c in conditions if c.get("type") == type_), None)


def unschedulable_condition(pod: dict[str, Any], message: str, reason: str) -> dict[str, Any] | None:
    """The PodScheduled=False condition to write, or None when the pod has it already."""
    old = current_condition(pod, "PodScheduled")
    cond = pod_condition(pod, "PodScheduled", "False", reason, message)
    cond["lastProbeTime"] = None
    unchanged = old is not None and (old.get("status"), old.get("reason"), old.get("message") or "") == (
        "False",
        reason,
        message,
    )
    if unchanged and not old.get("lastProbeTime"):  # type: ignore[union-attr]
        return None
    return cond
