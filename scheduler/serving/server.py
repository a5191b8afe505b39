"""HTTPS serving of /healthz, /livez, /readyz and /metrics, as kube-scheduler's secure port.

Endpoints (GET and HEAD only; any other path is 404, any other method 405):

- ``/healthz``, ``/livez``, ``/readyz`` run the checks registered for them
  (:mod:`scheduler.serving.checks`) and answer ``200 ok``. With ``?verbose``
  the body lists every check, ``[+]ping ok`` ... ``healthz check passed``;
  ``?exclude=<name>`` skips a check. If one fails the answer is ``500`` with
  the list, the failed check as ``[-]<name> failed: <reason>``, and
  ``<endpoint> check failed``. ``/<endpoint>/<check>`` runs one check:
  ``ok``, or ``500 internal server error: <reason>``. kube-apiserver's
  library withholds the reason on the aggregate endpoint ("reason
  withheld"); ours are plain status texts, so we show them.
- Paths added with :meth:`SecureServer.add_json` (shadow mode's ``/shadow/decisions``)
  answer JSON.
- ``/metrics`` is the registry in Prometheus' text format, or OpenMetrics when
  the Accept header asks for it, gzipped when accepted; ``?name[]=`` filters
  (all of it is prometheus_client's exposition).

**Security.** With a :class:`~scheduler.serving.delegation.Delegation` (the
command line always makes one) every request is authenticated and then
authorized before it is routed, as kube-scheduler's handler chain
(``buildHandlerChain``): credentials that are presented and rejected are
``401``, a user without the right ``403`` (both a ``Status`` in JSON, as
kube-apiserver's library writes them), a review that failed ``500``. The
health endpoints are open to anyone by ``--authorization-always-allow-paths``.

**Threads.** Each connection is served in a daemon thread (TLS handshake
included, so a slow client holds only its own), at most ``max_connections``
at once: further connections wait in the listen backlog until one ends.
Every connection has ``timeout`` seconds for its handshake and request.
Handshake errors, typically TCP probes and port scans, are logged at V(4).
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Iterable
from socketserver import TCPServer, ThreadingMixIn
from typing import Any, Protocol
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry, make_wsgi_app

from scheduler.logs import V, kv
from scheduler.serving.authentication import AuthenticationError, Credentials
from scheduler.serving.authorization import AuthorizationError, Decision, forbidden_message
from scheduler.serving.checks import Check, ping
from scheduler.serving.delegation import Delegation
from scheduler.serving.tls import ServingError, load_pem_chain, read_key_pair, self_signed_certificate

logger = logging.getLogger(__name__)

DEFAULT_SECURE_PORT = 10259
DEFAULT_MAX_CONNECTIONS = 64
HEALTHZ, LIVEZ, READYZ = "healthz", "livez", "readyz"
ALL_ENDPOINTS = (HEALTHZ, LIVEZ, READYZ)

_TEXT = [("Content-Type", "text/plain; charset=utf-8"), ("X-Content-Type-Options", "nosniff")]
_JSON = [("Content-Type", "application/json"), ("X-Content-Type-Options", "nosniff")]
_PEER_CERT = "dynamic_scheduler.peer_certificate"
JsonEndpoint = Callable[[dict[str, list[str]]], Any]
"""An endpoint of :meth:`SecureServer.add_json`: the parsed query string -> a JSON-able answer."""
_HEADERS = "dynamic_scheduler.headers"


# --- HTTP -------------------------------------------------------------------------------


class _Handler(WSGIRequestHandler):
    timeout = 10.0  # seconds a client may take for the handshake and request; bounds slow clients

    def setup(self) -> None:
        # The handshake happens here, in the connection's thread, not in the accept loop.
        self.timeout = self.server.timeout_seconds  # type: ignore[attr-defined]
        self.request.settimeout(self.timeout)
        self.request = self.server.ssl_context.wrap_socket(self.request, server_side=True)  # type: ignore[attr-defined]
        self.peer_certificate: bytes | None = self.request.getpeercert(binary_form=True)
        super().setup()

    def get_environ(self) -> dict[str, Any]:
        env = super().get_environ()
        # Every value of every header, as received: wsgiref joins repeated headers with commas,
        # and a front proxy's X-Remote-Group lines are values of their own.
        headers: dict[str, list[str]] = {}
        for name, value in self.headers.items():
            headers.setdefault(name.lower(), []).append(value)
        env[_HEADERS] = headers
        env[_PEER_CERT] = self.peer_certificate
        return env

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.request.close()

    def get_stderr(self) -> Any:
        return _LogWriter()

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        headers = getattr(self, "headers", None)  # unset when the request line was malformed
        logger.log(
            V(5),
            "HTTP",
            extra=kv(
                verb=getattr(self, "command", None),
                URI=getattr(self, "path", None),
                resp=str(code),
                srcIP=self.client_address[0],
                userAgent=headers.get("User-Agent", "") if headers else "",
            ),
        )

    def log_message(self, format: str, *args: Any) -> None:
        logger.log(V(4), "HTTP request error", extra=kv(srcIP=self.client_address[0], err=format % args))


class _LogWriter:
    """wsgiref's error stream (tracebacks of failed writes), to the log instead of stderr."""

    def write(self, s: str) -> None:
        if s.strip():
            logger.log(V(4), "HTTP response error", extra=kv(err=s.strip()))

    def flush(self) -> None:
        pass


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        family: int,
        ssl_context: ssl.SSLContext,
        app: Any,
        *,
        max_connections: int,
        timeout: float,
    ) -> None:
        self.address_family = family
        self.ssl_context = ssl_context
        """Read per connection: replacing it (new client CAs) affects new connections only."""
        self.timeout_seconds = timeout
        self.slots = threading.BoundedSemaphore(max_connections)
        self.closing = threading.Event()
        self.waiting_for_slot = threading.Event()
        """Set while the accept loop waits for a connection to end (every slot taken)."""
        super().__init__(address, _Handler)
        self.set_app(app)

    def process_request(self, request: Any, client_address: Any) -> None:
        # In the accept loop: with every slot taken, wait (later connections queue in the
        # kernel's backlog) rather than start yet another thread.
        if not self.slots.acquire(blocking=False):
            self.waiting_for_slot.set()
            logger.log(V(4), "Every serving thread is busy; waiting", extra=kv(client=client_address[0]))
            while not self.slots.acquire(timeout=0.1):
                if self.closing.is_set():
                    self.waiting_for_slot.clear()
                    self.shutdown_request(request)
                    return
            self.waiting_for_slot.clear()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the bound address's FQDN (slow or stuck without DNS).
        TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])
        self.setup_environ()

    def handle_error(self, request: Any, client_address: Any) -> None:
        err = sys.exc_info()[1]
        if isinstance(err, OSError):  # TLS handshake failures, resets, timeouts: probes and scanners
            logger.log(
                V(4), "TLS handshake or connection error", extra=kv(client=client_address[0], err=str(err))
            )
        else:
            logger.error("Error serving a request", exc_info=True, extra=kv(client=client_address[0]))


class ServingFlags(Protocol):
    secure_port: int
    bind_address: str
    tls_cert_file: str | None
    tls_private_key_file: str | None
    authentication: Any
    authorization: Any


class SecureServer:
    """The HTTPS server of ``--bind-address``/``--secure-port`` (see the module docstring).

    Without ``cert_file``/``key_file`` it serves a self-signed certificate made at
    construction for localhost, 127.0.0.1, the hostname, ``pod_ip`` and a specific
    ``bind_address``. ``port=0`` binds an ephemeral port (see :attr:`port`), whereas
    ``--secure-port=0`` means "no server": :meth:`from_options` returns None for it.
    Certificate problems raise :class:`ServingError` here, a taken port in :meth:`start`.

    Without ``delegation`` every request is served (tests of the serving alone);
    :meth:`from_options` always delegates.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        bind_address: str = "0.0.0.0",
        port: int = DEFAULT_SECURE_PORT,
        cert_file: str | None = None,
        key_file: str | None = None,
        pod_ip: str | None = None,
        delegation: Delegation | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        timeout: float = 10.0,
    ) -> None:
        self.bind_address = bind_address
        self.delegation = delegation
        self.max_connections = max_connections
        self.timeout = timeout
        self._requested_port = port
        self._metrics_app = make_wsgi_app(registry)
        self._checks: dict[str, tuple[tuple[str, Check], ...]] = {e: (("ping", ping),) for e in ALL_ENDPOINTS}
        self._json: dict[str, JsonEndpoint] = {}
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

        if bool(cert_file) != bool(key_file):
            raise ServingError("--tls-cert-file and --tls-private-key-file must be given together")
        if cert_file and key_file:
            cert_pem, key_pem = read_key_pair(cert_file, key_file)
        else:
            specific = bind_address not in ("", "0.0.0.0", "::")
            hosts = [
                h
                for h in dict.fromkeys(
                    [
                        "localhost",
                        "127.0.0.1",
                        socket.gethostname(),
                        pod_ip or "",
                        bind_address if specific else "",
                    ]
                )
                if h
            ]
            cert_pem, key_pem = self_signed_certificate(hosts)
            logger.log(V(2), "Generated self-signed cert (in-memory)", extra=kv(hosts=",".join(hosts)))
        self.certificate_pem = cert_pem
        """The serving certificate (chain), PEM: a client's CA for the self-signed one."""
        self._key_pem = key_pem
        self._what = f"{cert_file} and key {key_file}" if cert_file else "(self-signed)"
        self.ssl_context = self._new_context()
        if delegation is not None:
            delegation.on_change = self._client_cas_changed

    def _new_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            load_pem_chain(ctx, self.certificate_pem.rstrip(b"\n") + b"\n" + self._key_pem)
        except ssl.SSLError as e:
            raise ServingError(f"unable to load serving certificate {self._what}: {e.reason or e}") from None
        cas = self.delegation.client_ca_bundle() if self.delegation is not None else b""
        if cas:
            # Ask for a client certificate, and take one that a client or front-proxy CA signed;
            # which of them did is the authenticators' question.
            try:
                ctx.load_verify_locations(cadata=cas.decode())
            except (ssl.SSLError, ValueError) as e:
                raise ServingError(f"unable to load the client CAs: {e}") from None
            ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx

    def _client_cas_changed(self) -> None:
        try:
            ctx = self._new_context()
        except ServingError as e:
            logger.warning("Keeping the previous client CAs", extra=kv(err=str(e)))
            return
        self.ssl_context = ctx
        if self._server is not None:
            self._server.ssl_context = ctx

    @classmethod
    def from_options(
        cls, options: ServingFlags, registry: CollectorRegistry, pod_ip: str | None = None
    ) -> SecureServer | None:
        """The server the flags ask for (``scheduler.config.options.ServingOptions``),
        or None for ``--secure-port=0``."""
        if options.secure_port == 0:
            return None
        return cls(
            registry,
            bind_address=options.bind_address,
            port=options.secure_port,
            cert_file=options.tls_cert_file,
            key_file=options.tls_private_key_file,
            pod_ip=pod_ip,
            delegation=Delegation.from_options(options.authentication, options.authorization),
        )

    def add_check(self, name: str, check: Check, endpoints: Iterable[str] = ALL_ENDPOINTS) -> None:
        """Run ``check`` for each of ``endpoints`` (healthz, livez, readyz), after those added before."""
        endpoints = tuple(endpoints)
        if not name or "/" in name:
            raise ValueError(f"invalid check name {name!r}")
        with self._lock:
            for e in endpoints:
                if e not in self._checks:
                    raise ValueError(f"unknown endpoint {e!r}; known: {', '.join(ALL_ENDPOINTS)}")
                if any(n == name for n, _ in self._checks[e]):
                    raise ValueError(f"check {name!r} is already registered for /{e}")
            for e in endpoints:
                self._checks[e] = (*self._checks[e], (name, check))

    def add_json(self, path: str, answer: JsonEndpoint) -> None:
        """Serve ``answer(query)`` as JSON at ``path`` (``query``: parse_qs of the query string).
        A ValueError it raises is a 400 with its message."""
        if not path.startswith("/") or path in ("/metrics", *(f"/{e}" for e in ALL_ENDPOINTS)):
            raise ValueError(f"invalid path {path!r}")
        with self._lock:
            self._json[path] = answer

    @property
    def port(self) -> int:
        """The bound port once started (useful with port 0), else the configured one."""
        return self._server.server_port if self._server else self._requested_port

    def start(self) -> None:
        """Listen and serve in a daemon thread; returns once listening."""
        if self._server is not None:
            raise RuntimeError("server already started")
        family = socket.AF_INET6 if ":" in self.bind_address else socket.AF_INET
        where = _host_port(self.bind_address, self._requested_port)
        try:
            server = _Server(
                (self.bind_address, self._requested_port),
                family,
                self.ssl_context,
                self._app,
                max_connections=self.max_connections,
                timeout=self.timeout,
            )
        except OSError as e:
            raise ServingError(f"failed to listen on {where}: {e.strerror or e}") from None
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="secure-serving", daemon=True
        )
        self._thread.start()
        if self.delegation is not None:
            self.delegation.start()
        logger.info("Serving securely on", extra=kv(address=_host_port(self.bind_address, self.port)))

    def stop(self) -> None:
        """Stop accepting and close the socket (requests in flight finish in their threads)."""
        server, self._server = self._server, None
        if server is None:
            return
        if self.delegation is not None:
            self.delegation.stop()
        server.closing.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()
        logger.info(
            "Stopped serving securely", extra=kv(address=_host_port(self.bind_address, server.server_port))
        )

    # --- request handling ---------------------------------------------------------------

    @property
    def waiting_for_slot(self) -> threading.Event | None:
        """Set while every serving thread is busy and a new connection waits (None: not started)."""
        return self._server.waiting_for_slot if self._server else None

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        method = environ["REQUEST_METHOD"]
        try:
            denied = self._authorize(environ)
            if denied is not None:
                status, headers, body = denied
            elif method not in ("GET", "HEAD"):
                status, headers, body = (
                    "405 Method Not Allowed",
                    [*_TEXT, ("Allow", "GET, HEAD")],
                    b"method not allowed\n",
                )
            elif environ.get("PATH_INFO") == "/metrics":
                status, headers, body = self._metrics(environ)
            elif environ.get("PATH_INFO") in self._json:
                status, headers, body = self._answer_json(environ)
            else:
                status, headers, body = self._health(
                    environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", "")
                )
        except Exception:
            logger.exception("Error answering a request", extra=kv(URI=environ.get("PATH_INFO")))
            status, headers, body = "500 Internal Server Error", list(_TEXT), b"internal server error\n"
        start_response(status, [*headers, ("Content-Length", str(len(body)))])
        return [] if method == "HEAD" else [body]

    def _authorize(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes] | None:
        """None when the request may go on, else the 401, 403 or 500 answer."""
        if self.delegation is None:
            return None
        path = environ.get("PATH_INFO", "")
        verb = environ["REQUEST_METHOD"].lower()
        creds = Credentials(headers=environ.get(_HEADERS, {}), peer_certificate=environ.get(_PEER_CERT))
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

    def _answer_json(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        answer = self._json[environ["PATH_INFO"]]
        try:
            doc = answer(parse_qs(environ.get("QUERY_STRING", "")))
        except ValueError as e:
            return "400 Bad Request", list(_TEXT), f"{e}\n".encode()
        return "200 OK", list(_JSON), json.dumps(doc).encode() + b"\n"

    def _metrics(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        got: list[Any] = []
        body = b"".join(
            self._metrics_app(
                {**environ, "REQUEST_METHOD": "GET"}, lambda status, headers: got.extend((status, headers))
            )
        )
        return got[0], list(got[1]), body

    def _health(self, path: str, query: str) -> tuple[str, list[tuple[str, str]], bytes]:
        endpoint, sub, name = path[1:].partition("/")
        checks = self._checks.get(endpoint) if path.startswith("/") else None
        if checks is None or (sub and name not in dict(checks)):
            return "404 Not Found", list(_TEXT), b"404 page not found\n"
        if name:
            reason = _run(dict(checks)[name])
            if reason is None:
                return "200 OK", list(_TEXT), b"ok"
            logger.log(V(2), "Health check failed", extra=kv(check=name, endpoint=endpoint, reason=reason))
            return "500 Internal Server Error", list(_TEXT), f"internal server error: {reason}\n".encode()

        params = parse_qs(query, keep_blank_values=True)
        excluded = set(params.get("exclude", ()))
        lines, failed = [], []
        for check_name, check in checks:
            if check_name in excluded:
                excluded.discard(check_name)
                lines.append(f"[+]{check_name} excluded: ok")
                continue
            reason = _run(check)
            if reason is None:
                lines.append(f"[+]{check_name} ok")
            else:
                lines.append(f"[-]{check_name} failed: {reason}")
                failed.append(f"{check_name}: {reason}")
        if excluded:
            quoted = ",".join(f'"{n}"' for n in sorted(excluded))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
        if failed:
            logger.log(V(2), "Health check failed", extra=kv(endpoint=endpoint, failed="; ".join(failed)))
            body = "\n".join([*lines, f"{endpoint} check failed"]) + "\n"
            return "500 Internal Server Error", list(_TEXT), body.encode()
        if "verbose" not in params:
            return "200 OK", list(_TEXT), b"ok"
        return "200 OK", list(_TEXT), ("\n".join([*lines, f"{endpoint} check passed"]) + "\n").encode()


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


def _run(check: Check) -> str | None:
    try:
        reason = check()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None if reason is None else str(reason)


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
