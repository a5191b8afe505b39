"""Validating admission webhooks that the API server itself calls: one on ``pods/binding``,
one on every write of one user.

To test how a scheduler meets refused binds honestly, the refusals must come
from the API server. A webhook's denial carries its own ``Status`` (code, and
``details.retryAfterSeconds``, which the API server turns into a
``Retry-After`` header). Registered for ``pods/binding`` CREATE in one
namespace, this one asks ``decide`` about every binding and records each, so
a test also learns from outside the scheduler how many Bindings reached the
API server, for which pod and node, and when.

It serves HTTPS on ``listen`` (an address the API server reaches: loopback for
the private kube-apiserver of ``tests/``, the docker network's gateway for a
kind cluster). Used by ``tests/cluster/webhook.py`` and ``e2e/webhook.py``.

:class:`WriteWebhook` sees every write (create, update, patch, delete, connect, on any
resource and subresource) that one user sends, records it and refuses it: shadow mode's
proof that it writes nothing, taken from the API server's side. Given that user every right
in RBAC, no write of theirs can stop before admission.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import tempfile
import threading
import time
import uuid
from base64 import b64encode
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.client import api_request
from scheduler.polling import poll

Refusal = tuple[int, int | None]
"""(HTTP code, Retry-After seconds or None) of a refused binding."""


@dataclass(frozen=True)
class BindingSeen:
    pod: str
    node: str
    at: float
    """time.monotonic() when it arrived."""
    refused: int | None
    """The code it was refused with; None: allowed."""
    user: str = ""
    """Who sent it (the request's user name)."""


@dataclass(frozen=True)
class WebhookTLS:
    """Where a webhook listens, its serving certificate and key, and the CA the API server trusts it by."""

    listen: str
    cert_pem: bytes
    key_pem: bytes
    ca_pem: bytes


class _UnreachableError(Exception):
    """The probe's 500: the API server cannot call the webhook (yet)."""


class _Webhook:
    """The HTTPS server, the ValidatingWebhookConfiguration and its readiness probe (a dry-run
    ConfigMap in ``namespace`` that the first webhook refuses with "probe")."""

    prefix = "test-webhook"

    def __init__(self, admin: ApiClient, namespace: str, tls: WebhookTLS) -> None:
        self.admin, self.namespace = admin, namespace
        self.listen, self.cert_pem, self.key_pem, self.ca_pem = (
            tls.listen,
            tls.cert_pem,
            tls.key_pem,
            tls.ca_pem,
        )
        self.name = f"{self.prefix}-{uuid.uuid4().hex[:6]}"
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def _webhooks(self, client_config: dict[str, Any]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _answer(self, req: dict[str, Any]) -> dict[str, Any] | None:
        """The response to a request other than the probe: None allows it."""
        raise NotImplementedError

    def _probe_rule(self) -> dict[str, Any]:
        return {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["configmaps"],
        }

    def _review(self, review: dict[str, Any]) -> dict[str, Any]:
        req = review["request"]
        if req["resource"]["resource"] == "configmaps" and (req.get("name") or "") == "probe":
            resp: dict[str, Any] = {
                "uid": req["uid"],
                "allowed": False,
                "status": {"code": 403, "message": "probe"},
            }
        else:
            resp = self._answer(req) or {"allowed": True}
            resp["uid"] = req["uid"]
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}

    def __enter__(self) -> Any:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                out = json.dumps(hook._review(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        tmp = Path(tempfile.mkdtemp(prefix="webhook-"))
        (tmp / "tls.crt").write_bytes(self.cert_pem)
        (tmp / "tls.key").write_bytes(self.key_pem)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tmp / "tls.crt", tmp / "tls.key")
        self._server = ThreadingHTTPServer((self.listen, 0), Handler)
        self._server.daemon_threads = True
        self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        port = self._server.server_address[1]
        host = f"[{self.listen}]" if ":" in self.listen else self.listen
        try:
            api_request(
                self.admin,
                "POST",
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                body={
                    "metadata": {"name": self.name},
                    "webhooks": self._webhooks(
                        {
                            "url": f"https://{host}:{port}/validate",
                            "caBundle": b64encode(self.ca_pem).decode(),
                        }
                    ),
                },
            )
            self._wait_active()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_active(self, timeout: float = 30.0) -> None:
        """The API server loads webhook configurations asynchronously: probe until ours answers."""

        def answered() -> bool:
            try:
                api_request(
                    self.admin,
                    "POST",
                    f"/api/v1/namespaces/{self.namespace}/configmaps",
                    query=[("dryRun", "All")],
                    body={"metadata": {"name": "probe"}},
                )
            except ApiException as e:
                if e.status == 403 and "probe" in (e.body or ""):
                    return True
                if e.status != 500:
                    raise
                raise _UnreachableError((e.body or "")[:300]) from None
            return False  # admitted without it: not loaded yet

        poll(answered, timeout, "the test webhook to become active", 0.1, retry_on=(_UnreachableError,))

    def __exit__(self, *exc: Any) -> None:
        with contextlib.suppress(ApiException):
            api_request(
                self.admin,
                "DELETE",
                f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{self.name}",
            )
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class BindingWebhook(_Webhook):
    prefix = "binding-refuser"

    def __init__(
        self,
        admin: ApiClient,
        namespace: str,
        decide: Callable[[str, str], Refusal | None],
        tls: WebhookTLS,
    ) -> None:
        """``decide(pod, node)``: None to allow that binding, else how to refuse it."""
        super().__init__(admin, namespace, tls)
        self.decide = decide
        self.seen: list[BindingSeen] = []

    @property
    def calls(self) -> int:
        return len(self.seen)

    @property
    def times(self) -> list[float]:
        """When each binding arrived (time.monotonic())."""
        return [s.at for s in self.seen]

    def _webhooks(self, client_config: dict[str, Any]) -> list[dict[str, Any]]:
        rule = {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods/binding"],
        }
        return [
            {
                "name": "refuse.bindings.test",
                "clientConfig": client_config,
                "rules": [rule, self._probe_rule()],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail",
                "timeoutSeconds": 5,
            }
        ]

    def _answer(self, req: dict[str, Any]) -> dict[str, Any] | None:
        if req.get("subResource") != "binding":
            return None
        pod = req.get("name", "")
        node = ((req.get("object") or {}).get("target") or {}).get("name", "")
        with self._lock:
            step = self.decide(pod, node)
            user = (req.get("userInfo") or {}).get("username", "")
            self.seen.append(BindingSeen(pod, node, time.monotonic(), step[0] if step else None, user))
        if step is None:
            return None
        code, retry_after = step
        status: dict[str, Any] = {"code": code, "message": f"refused by test ({code})"}
        if retry_after:
            status["details"] = {"retryAfterSeconds": retry_after}
        return {"allowed": False, "status": status}


@dataclass(frozen=True)
class WriteSeen:
    operation: str
    """CREATE, UPDATE, DELETE or CONNECT."""
    resource: str
    """``pods``, ``pods/binding``, ``leases``..."""
    namespace: str
    name: str


class WriteWebhook(_Webhook):
    """Records and refuses every write of ``user``, cluster-wide (the probe lives in ``namespace``)."""

    prefix = "write-recorder"

    def __init__(
        self,
        admin: ApiClient,
        namespace: str,
        user: str,
        tls: WebhookTLS,
    ) -> None:
        super().__init__(admin, namespace, tls)
        self.user = user
        self.seen: list[WriteSeen] = []

    def _webhooks(self, client_config: dict[str, Any]) -> list[dict[str, Any]]:
        common = {
            "clientConfig": client_config,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "failurePolicy": "Fail",
            "timeoutSeconds": 5,
        }
        everything = {
            "operations": ["*"],
            "apiGroups": ["*"],
            "apiVersions": ["*"],
            "resources": ["*/*"],
            "scope": "*",
        }
        return [
            {
                "name": "probe.writes.test",
                "rules": [self._probe_rule()],
                # The probe only: the user's writes are the other webhook's, once each.
                "matchConditions": [
                    {"name": "the-probe", "expression": "object != null && object.metadata.name == 'probe'"}
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}},
                **common,
            },
            {
                "name": "record.writes.test",
                "rules": [everything],
                "matchConditions": [
                    {
                        "name": "the-user",
                        "expression": f"request.userInfo.username == {json.dumps(self.user)}",
                    }
                ],
                **common,
            },
        ]

    def _answer(self, req: dict[str, Any]) -> dict[str, Any] | None:
        if (req.get("userInfo") or {}).get("username") != self.user:
            return None
        resource = req["resource"]["resource"] + (f"/{req['subResource']}" if req.get("subResource") else "")
        with self._lock:
            self.seen.append(
                WriteSeen(req["operation"], resource, req.get("namespace") or "", req.get("name") or "")
            )
        return {
            "allowed": False,
            "status": {"code": 403, "message": f"write by {self.user} recorded and refused"},
        }
