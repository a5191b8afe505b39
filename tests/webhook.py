"""A validating admission webhook on ``pods/binding`` that the API server itself calls.

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


class BindingWebhook:
    def __init__(
        self,
        admin: ApiClient,
        namespace: str,
        decide: Callable[[str, str], Refusal | None],
        *,
        listen: str,
        cert_pem: bytes,
        key_pem: bytes,
        ca_pem: bytes,
    ) -> None:
        """``decide(pod, node)``: None to allow that binding, else how to refuse it."""
        self.admin, self.namespace, self.decide = admin, namespace, decide
        self.listen, self.cert_pem, self.key_pem, self.ca_pem = listen, cert_pem, key_pem, ca_pem
        self.seen: list[BindingSeen] = []
        self.name = f"binding-refuser-{uuid.uuid4().hex[:6]}"
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def calls(self) -> int:
        return len(self.seen)

    @property
    def times(self) -> list[float]:
        """When each binding arrived (time.monotonic())."""
        return [s.at for s in self.seen]

    def _review(self, review: dict[str, Any]) -> dict[str, Any]:
        req = review["request"]
        resp: dict[str, Any] = {"uid": req["uid"], "allowed": True}
        if req["resource"]["resource"] == "configmaps":  # the readiness probe
            resp = {"uid": req["uid"], "allowed": False, "status": {"code": 403, "message": "probe"}}
        elif req.get("subResource") == "binding":
            pod = req.get("name", "")
            node = ((req.get("object") or {}).get("target") or {}).get("name", "")
            with self._lock:
                step = self.decide(pod, node)
                self.seen.append(BindingSeen(pod, node, time.monotonic(), step[0] if step else None))
            if step is not None:
                code, retry_after = step
                status: dict[str, Any] = {"code": code, "message": f"refused by test ({code})"}
                if retry_after:
                    status["details"] = {"retryAfterSeconds": retry_after}
                resp = {"uid": req["uid"], "allowed": False, "status": status}
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}

    def __enter__(self) -> BindingWebhook:
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
                    "webhooks": [
                        {
                            "name": "refuse.bindings.test",
                            "clientConfig": {
                                "url": f"https://{host}:{port}/validate",
                                "caBundle": b64encode(self.ca_pem).decode(),
                            },
                            "rules": [
                                {
                                    "operations": ["CREATE"],
                                    "apiGroups": [""],
                                    "apiVersions": ["v1"],
                                    "resources": ["pods/binding", "configmaps"],
                                }
                            ],
                            "namespaceSelector": {
                                "matchLabels": {"kubernetes.io/metadata.name": self.namespace}
                            },
                            "sideEffects": "None",
                            "admissionReviewVersions": ["v1"],
                            "failurePolicy": "Fail",
                            "timeoutSeconds": 5,
                        }
                    ],
                },
            )
            self._wait_active()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_active(self, timeout: float = 30.0) -> None:
        """The API server loads webhook configurations asynchronously: probe until ours answers."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
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
                    return
                if e.status != 500:  # 500: the API server cannot call the webhook (yet)
                    raise
                last = (e.body or "")[:300]
            time.sleep(0.1)
        raise AssertionError(f"the test webhook never became active: {last}")

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
