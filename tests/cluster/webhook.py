"""A validating admission webhook that makes the real API server refuse bindings on cue.

To test retries honestly the 429s and 5xx must come from the API server
itself. A webhook's denial carries its own ``Status`` (code, and
``details.retryAfterSeconds``, which the API server turns into a
``Retry-After`` header), so this webhook, registered for ``pods/binding``
CREATE in one namespace, answers the first bindings with the scripted codes
and then allows them.
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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.client import api_request
from tests.apiserver import ControlPlane


class BindingWebhook:
    def __init__(
        self, cp: ControlPlane, admin: ApiClient, namespace: str, deny: list[tuple[int, int | None]]
    ) -> None:
        """``deny``: (HTTP code, Retry-After seconds or None) for the first bindings, in order."""
        self.cp, self.admin, self.namespace = cp, admin, namespace
        self.script = list(deny)
        self.calls = 0
        self.times: list[float] = []
        """When each binding arrived (time.monotonic())."""
        self.name = f"binding-refuser-{uuid.uuid4().hex[:6]}"
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def _review(self, review: dict[str, Any]) -> dict[str, Any]:
        req = review["request"]
        resp: dict[str, Any] = {"uid": req["uid"], "allowed": True}
        if req["resource"]["resource"] == "configmaps":  # the readiness probe
            resp = {"uid": req["uid"], "allowed": False, "status": {"code": 403, "message": "probe"}}
        elif req.get("subResource") == "binding":
            with self._lock:
                self.calls += 1
                self.times.append(time.monotonic())
                step = self.script.pop(0) if self.script else None
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

        crt, key = self.cp.ca.issue("webhook", server=True)
        tmp = Path(tempfile.mkdtemp(prefix="webhook-"))
        (tmp / "tls.crt").write_bytes(crt)
        (tmp / "tls.key").write_bytes(key)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tmp / "tls.crt", tmp / "tls.key")
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        port = self._server.server_address[1]
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
                            "url": f"https://127.0.0.1:{port}/validate",
                            "caBundle": b64encode(self.cp.ca.pem).decode(),
                        },
                        "rules": [
                            {
                                "operations": ["CREATE"],
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "resources": ["pods/binding", "configmaps"],
                            }
                        ],
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}},
                        "sideEffects": "None",
                        "admissionReviewVersions": ["v1"],
                        "failurePolicy": "Fail",
                        "timeoutSeconds": 5,
                    }
                ],
            },
        )
        self._wait_active()
        return self

    def _wait_active(self, timeout: float = 20.0) -> None:
        """The API server loads webhook configurations asynchronously: probe until ours answers."""
        deadline = time.monotonic() + timeout
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
                raise
            time.sleep(0.1)
        raise AssertionError("the test webhook never became active")

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
