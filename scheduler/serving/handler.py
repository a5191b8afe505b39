"""The secure port's WSGI application: who may ask, then what is answered.

As kube-scheduler's handler chain (``buildHandlerChain`` around
``newEndpointsHandler``), with a :class:`~scheduler.serving.delegation.Delegation`
(the command line always makes one) every request is authenticated and then
authorized before it is routed: credentials that are presented and rejected
are ``401``, a user without the right ``403`` (both a ``Status`` in JSON, as
kube-apiserver's library writes them), a review that failed ``500``. The
health endpoints are open to anyone by ``--authorization-always-allow-paths``.

Endpoints (GET and HEAD only, but for the setters; any other path is 404, any other
method 405):

- ``/healthz``, ``/livez``, ``/readyz`` and ``/<endpoint>/<check>``: the
  registered checks (:class:`~scheduler.serving.checks.HealthChecks`).
- Paths added with :meth:`HandlerChain.add_json` (``/configz``, shadow mode's
  ``/shadow/decisions``) answer JSON.
- ``/metrics`` is the registry in Prometheus' text format, or OpenMetrics when
  the Accept header asks for it, gzipped when accepted; ``?name[]=`` filters
  (all of it is prometheus_client's exposition). Paths added with
  :meth:`HandlerChain.add_metrics` (``/metrics/resources``) answer their own
  registry the same way, or an empty 200 while their condition does not hold
  (kube-scheduler's answer on a replica that does not lead).
- Paths added with :meth:`HandlerChain.add_setter` (``/debug/flags/v``) take a
  PUT whose body is the new value, as apiserver's ``StringFlagPutHandler``:
  200 with what was set, 400 with why not, 406 for any other method.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, make_wsgi_app

from scheduler.logs import V, kv
from scheduler.serving.authentication import AuthenticationError, Credentials
from scheduler.serving.authorization import AuthorizationError, Decision, forbidden_message
from scheduler.serving.checks import ALL_ENDPOINTS, HealthChecks
from scheduler.serving.delegation import Delegation
from scheduler.serving.transport import ENVIRON_HEADERS, ENVIRON_PEER_CERTIFICATE

logger = logging.getLogger(__name__)

_TEXT = [("Content-Type", "text/plain; charset=utf-8"), ("X-Content-Type-Options", "nosniff")]
_JSON = [("Content-Type", "application/json"), ("X-Content-Type-Options", "nosniff")]

Response = tuple[str, list[tuple[str, str]], bytes]
"""The status line, the headers and the body."""
Setter = Callable[[str], str]
"""A setter of :meth:`HandlerChain.add_setter`: the PUT's body -> what was set (ValueError: why not)."""
_MAX_SETTER_BODY = 1024
JsonEndpoint = Callable[[dict[str, list[str]]], Any]
"""An endpoint of :meth:`HandlerChain.add_json`: the parsed query string -> a JSON-able answer."""


class HandlerChain:
    """The WSGI application of the secure port (see the module docstring).

    Without ``delegation`` every request is served (tests of the serving alone)."""

    def __init__(
        self, registry: CollectorRegistry, checks: HealthChecks, delegation: Delegation | None = None
    ) -> None:
        self.checks = checks
        self.delegation = delegation
        self._metrics_app = make_wsgi_app(registry)
        self._json: dict[str, JsonEndpoint] = {}
        self._metrics_apps: dict[str, tuple[Any, Callable[[], bool]]] = {}
        self._setters: dict[str, Setter] = {}
        self._lock = threading.Lock()

    def add_json(self, path: str, answer: JsonEndpoint) -> None:
        """Serve ``answer(query)`` as JSON at ``path`` (``query``: parse_qs of the query string).
        A ValueError it raises is a 400 with its message."""
        if not path.startswith("/") or path in ("/metrics", *(f"/{e}" for e in ALL_ENDPOINTS)):
            raise ValueError(f"invalid path {path!r}")
        with self._lock:
            self._json[path] = answer

    def add_metrics(self, path: str, registry: CollectorRegistry, serving: Callable[[], bool]) -> None:
        """Serve ``registry`` at ``path`` while ``serving()`` holds; an empty 200 otherwise."""
        if not path.startswith("/metrics/"):
            raise ValueError(f"invalid path {path!r}: expected /metrics/<name>")
        with self._lock:
            self._metrics_apps[path] = (make_wsgi_app(registry), serving)

    def add_setter(self, path: str, setter: Setter) -> None:
        """Take PUTs at ``path``: ``setter(body)`` answers what it set, or raises ValueError."""
        with self._lock:
            self._setters[path] = setter

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO", "")
        try:
            denied = self._authorize(environ)
            if denied is not None:
                status, headers, body = denied
            elif path in self._setters:
                status, headers, body = self._set(environ, self._setters[path])
            elif method not in ("GET", "HEAD"):
                status, headers, body = (
                    "405 Method Not Allowed",
                    [*_TEXT, ("Allow", "GET, HEAD")],
                    b"method not allowed\n",
                )
            elif path == "/metrics":
                status, headers, body = self._metrics(environ, self._metrics_app)
            elif path in self._metrics_apps:
                app, serving = self._metrics_apps[path]
                if serving():
                    status, headers, body = self._metrics(environ, app)
                else:
                    status, headers, body = "200 OK", list(_TEXT), b""
            elif path in self._json:
                status, headers, body = self._answer_json(environ)
            else:
                status, body = self.checks.answer(path, environ.get("QUERY_STRING", ""))
                headers = list(_TEXT)
        except Exception:
            logger.exception("Error answering a request", extra=kv(URI=environ.get("PATH_INFO")))
            status, headers, body = "500 Internal Server Error", list(_TEXT), b"internal server error\n"
        start_response(status, [*headers, ("Content-Length", str(len(body)))])
        return [] if method == "HEAD" else [body]

    def _authorize(self, environ: dict[str, Any]) -> Response | None:
        """None when the request may go on, else the 401, 403 or 500 answer."""
        if self.delegation is None:
            return None
        path = environ.get("PATH_INFO", "")
        verb = environ["REQUEST_METHOD"].lower()
        creds = Credentials(
            headers=environ.get(ENVIRON_HEADERS, {}), peer_certificate=environ.get(ENVIRON_PEER_CERTIFICATE)
        )
        try:
            user = self.delegation.authenticator.authenticate(creds)
        except AuthenticationError as e:
            logger.log(V(4), "Unauthorized", extra=kv(URI=path, srcIP=environ.get("REMOTE_ADDR"), err=str(e)))
            return "401 Unauthorized", list(_JSON), _status(401, "Unauthorized", "Unauthorized")
        try:
            verdict = self.delegation.authorizer(user, verb, path)
        except AuthorizationError as e:
            logger.log(V(2), "Authorization failed", extra=kv(URI=path, user=user.name, err=str(e)))
            text = f"Internal Server Error: {json.dumps(path)}: {e}\n"
            return "500 Internal Server Error", list(_TEXT), text.encode()
        if verdict.decision is Decision.ALLOW:
            return None
        logger.log(V(4), "Forbidden", extra=kv(URI=path, user=user.name, reason=verdict.reason))
        message = forbidden_message(user, verb, path, verdict.reason)
        return "403 Forbidden", list(_JSON), _status(403, "Forbidden", message)

    @staticmethod
    def _set(environ: dict[str, Any], setter: Setter) -> Response:
        plain = [("Content-Type", "text/plain"), ("X-Content-Type-Options", "nosniff")]
        if environ["REQUEST_METHOD"] != "PUT":
            return "406 Not Acceptable", plain, b"unsupported http method\n"
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= _MAX_SETTER_BODY:
            return "400 Bad Request", plain, f"expected a body of at most {_MAX_SETTER_BODY} bytes\n".encode()
        text = environ["wsgi.input"].read(length).decode("utf-8", "replace") if length else ""
        try:
            answer = setter(text)
        except ValueError as e:
            return "400 Bad Request", plain, f"{e}\n".encode()
        return "200 OK", plain, f"{answer}\n".encode()

    def _answer_json(self, environ: dict[str, Any]) -> Response:
        answer = self._json[environ["PATH_INFO"]]
        try:
            doc = answer(parse_qs(environ.get("QUERY_STRING", "")))
        except ValueError as e:
            return "400 Bad Request", list(_TEXT), f"{e}\n".encode()
        return "200 OK", list(_JSON), json.dumps(doc).encode() + b"\n"

    @staticmethod
    def _metrics(environ: dict[str, Any], app: Any) -> Response:
        got: list[Any] = []
        body = b"".join(
            app({**environ, "REQUEST_METHOD": "GET"}, lambda status, headers: got.extend((status, headers)))
        )
        return got[0], list(got[1]), body


def _status(code: int, reason: str, message: str) -> bytes:
    """A ``Status`` as kube-apiserver's library writes errors (metav1.Status, JSON)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if code == 403:
        body["details"] = {}
    body["code"] = code
    return (json.dumps(body, separators=(",", ":")) + "\n").encode()
