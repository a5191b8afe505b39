"""HTTPS serving of /healthz, /livez, /readyz and /metrics, as kube-scheduler's secure port.

Endpoints (GET and HEAD only; any other path is 404, any other method 405):

- ``/healthz``, ``/livez``, ``/readyz`` run the checks registered for them and
  answer ``200 ok``. With ``?verbose`` the body lists every check,
  ``[+]ping ok`` ... ``healthz check passed``; ``?exclude=<name>`` skips a
  check. If one fails the answer is ``500`` with the list, the failed check as
  ``[-]<name> failed: <reason>``, and ``<endpoint> check failed``.
  ``/<endpoint>/<check>`` runs one check: ``ok``, or ``500 internal server
  error: <reason>``. kube-apiserver's library withholds the reason on the
  aggregate endpoint ("reason withheld"); ours are plain status texts, so we
  show them.
- ``/metrics`` is the registry in Prometheus' text format, or OpenMetrics when
  the Accept header asks for it, gzipped when accepted; ``?name[]=`` filters
  (all of it is prometheus_client's exposition).

**Security.** kube-scheduler protects ``/metrics`` with delegated
authentication and authorization (TokenReview/SubjectAccessReview). This
server does not: ``/metrics`` (and every health endpoint) is readable by
anyone who can reach the port. Restrict it with a NetworkPolicy.

**Checks.** A check is a callable returning ``None`` when healthy, or the
reason it is not (an exception counts as a failure too); register it with
:meth:`SecureServer.add_check` for some of the endpoints. ``ping`` is built
in. kube-scheduler's set, which the application is expected to register:

======================  ======================  ==================================
check                   endpoints               fails when
======================  ======================  ==================================
``leaderElection``      healthz, livez, readyz  leading, but the lease was last
                                                renewed over leaseDuration + 20 s
                                                ago (a wedged leader: restart it)
``shutdown``            readyz                  the process is shutting down
``sched-handler-sync``  readyz                  informer caches are not synced yet
======================  ======================  ==================================

**Standby replicas.** With leader election on, a replica waiting for the lease
is healthy, live and ready once its caches are synced, exactly as
kube-scheduler (its informers start before it campaigns; the watchdog passes
when not leading). This matters: if standbys stayed unready, a rolling update
of a two-replica Deployment would wait forever for the new pod, a standby
while the old pod holds the lease. An application that syncs caches only
after winning the lease must therefore make ``sched-handler-sync`` pass while
it waits for the lease.

The server runs in daemon threads (one per connection, TLS handshake
included) and never blocks the caller. Handshake errors, typically TCP probes
and port scans, are logged at V(4).
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import socket
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import TCPServer, ThreadingMixIn
from typing import Any, Protocol
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from prometheus_client import CollectorRegistry, make_wsgi_app

from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

DEFAULT_SECURE_PORT = 10259
HEALTHZ, LIVEZ, READYZ = "healthz", "livez", "readyz"
ALL_ENDPOINTS = (HEALTHZ, LIVEZ, READYZ)

Check = Callable[[], str | None]
"""``check()`` returns None when healthy, else the reason it is not."""

_TEXT = [("Content-Type", "text/plain; charset=utf-8"), ("X-Content-Type-Options", "nosniff")]


class ServingError(Exception):
    """The server cannot start: unreadable or mismatched certificate files, or the port is taken.

    ``str()`` is one line, fit for the command line."""


# --- checks ---------------------------------------------------------------------------


def ping() -> None:
    """Always healthy: the server answers."""
    return None


def leader_election_watchdog(
    is_leader: Callable[[], bool],
    last_renewed: Callable[[], float | None],
    lease_duration: float,
    lease_name: str,
    tolerance: float = 20.0,
    clock: Callable[[], float] = time.monotonic,
) -> Check:
    """client-go's leader-election WatchDog (kube-scheduler registers it as ``leaderElection``).

    Healthy while not leading. While leading, unhealthy once the last successful
    renewal (``last_renewed()``, on ``clock``) is more than ``lease_duration +
    tolerance`` seconds old: the lease has surely expired and the process should
    have stopped leading, so it is wedged and the kubelet should restart it.
    """
    limit = lease_duration + tolerance

    def check() -> str | None:
        if not is_leader():
            return None
        renewed = last_renewed()
        if renewed is None or clock() - renewed > limit:
            return f"failed election to renew leadership on lease {lease_name} (not renewed for {limit:g}s)"
        return None

    return check


def handler_sync_check(synced: Callable[[], bool]) -> Check:
    """kube-scheduler's ``sched-handler-sync``: ready once the informer caches are synced."""
    return lambda: None if synced() else "handlers are not fully synchronized"


def shutdown_check(stopping: Callable[[], bool]) -> Check:
    """The ``shutdown`` readiness check: not ready once shutting down (e.g. ``event.is_set``)."""
    return lambda: "process is shutting down" if stopping() else None


# --- TLS --------------------------------------------------------------------------------


def self_signed_certificate(hosts: Iterable[str]) -> tuple[bytes, bytes]:
    """A self-signed ECDSA P-256 serving certificate for ``hosts`` (names or IPs), valid
    from an hour ago (clock skew) for a year, as kube's. Returns PEM (certificate, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for host in dict.fromkeys(h for h in hosts if h):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{socket.gethostname()}@{int(time.time())}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def read_key_pair(cert_file: str, key_file: str) -> tuple[bytes, bytes]:
    """Read and check a PEM certificate (chain) and its private key; ServingError says what is wrong."""
    pems = []
    for what, path in (("certificate", cert_file), ("private key", key_file)):
        try:
            with open(path, "rb") as f:
                pems.append(f.read())
        except OSError as e:
            raise ServingError(f"unable to read serving {what} {path}: {e.strerror or e}") from None
    cert_pem, key_pem = pems
    try:
        cert = x509.load_pem_x509_certificates(cert_pem)[0]
    except ValueError:
        raise ServingError(f"serving certificate {cert_file}: no PEM certificate found") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:
        raise ServingError(f"serving private key {key_file}: encrypted keys are not supported") from None
    except (ValueError, UnsupportedAlgorithm):
        raise ServingError(f"serving private key {key_file}: no PEM private key found") from None
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if cert.public_key().public_bytes(*spki) != key.public_key().public_bytes(*spki):
        raise ServingError(f"serving certificate {cert_file} does not match private key {key_file}")
    return cert_pem, key_pem


def load_pem_chain(ctx: ssl.SSLContext, pem: bytes) -> None:
    """``ctx.load_cert_chain`` from PEM in memory (certificates, then the key).

    OpenSSL reads only files: on Linux the PEM goes to an anonymous memory file
    (memfd), never to disk; elsewhere to a private temporary directory that is
    removed as soon as it is loaded."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("serving-cert", os.MFD_CLOEXEC)
        try:
            with open(fd, "wb", closefd=False) as f:
                f.write(pem)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
    else:
        load_pem_chain_via_tempdir(ctx, pem)


def load_pem_chain_via_tempdir(ctx: ssl.SSLContext, pem: bytes, parent: str | None = None) -> None:
    with tempfile.TemporaryDirectory(prefix="serving-", dir=parent) as d:  # mode 0700
        path = os.path.join(d, "tls.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path)


# --- HTTP -------------------------------------------------------------------------------


class _Handler(WSGIRequestHandler):
    timeout = 10.0  # seconds a client may take for the handshake and request; bounds slow clients

    def setup(self) -> None:
        # The handshake happens here, in the connection's thread, not in the accept loop.
        self.request.settimeout(self.timeout)
        self.request = self.server.ssl_context.wrap_socket(self.request, server_side=True)  # type: ignore[attr-defined]
        super().setup()

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

    def __init__(self, address: tuple[str, int], family: int, ssl_context: ssl.SSLContext, app: Any) -> None:
        self.address_family = family
        self.ssl_context = ssl_context
        super().__init__(address, _Handler)
        self.set_app(app)

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


class SecureServer:
    """The HTTPS server of ``--bind-address``/``--secure-port`` (see the module docstring).

    Without ``cert_file``/``key_file`` it serves a self-signed certificate made at
    construction for localhost, 127.0.0.1, the hostname, ``pod_ip`` and a specific
    ``bind_address``. ``port=0`` binds an ephemeral port (see :attr:`port`), whereas
    ``--secure-port=0`` means "no server": :meth:`from_options` returns None for it.
    Certificate problems raise :class:`ServingError` here, a taken port in :meth:`start`.
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
    ) -> None:
        self.bind_address = bind_address
        self._requested_port = port
        self._metrics_app = make_wsgi_app(registry)
        self._checks: dict[str, tuple[tuple[str, Check], ...]] = {e: (("ping", ping),) for e in ALL_ENDPOINTS}
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
        self.ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ssl_context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            load_pem_chain(self.ssl_context, cert_pem.rstrip(b"\n") + b"\n" + key_pem)
        except ssl.SSLError as e:
            what = f"{cert_file} and key {key_file}" if cert_file else "(self-signed)"
            raise ServingError(f"unable to load serving certificate {what}: {e.reason or e}") from None

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
            server = _Server((self.bind_address, self._requested_port), family, self.ssl_context, self._app)
        except OSError as e:
            raise ServingError(f"failed to listen on {where}: {e.strerror or e}") from None
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="secure-serving", daemon=True
        )
        self._thread.start()
        logger.info("Serving securely on", extra=kv(address=_host_port(self.bind_address, self.port)))

    def stop(self) -> None:
        """Stop accepting and close the socket (requests in flight finish in their threads)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()
        logger.info(
            "Stopped serving securely", extra=kv(address=_host_port(self.bind_address, server.server_port))
        )

    # --- request handling ---------------------------------------------------------------

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        method = environ["REQUEST_METHOD"]
        try:
            if method not in ("GET", "HEAD"):
                status, headers, body = (
                    "405 Method Not Allowed",
                    [*_TEXT, ("Allow", "GET, HEAD")],
                    b"method not allowed\n",
                )
            elif environ.get("PATH_INFO") == "/metrics":
                status, headers, body = self._metrics(environ)
            else:
                status, headers, body = self._health(
                    environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", "")
                )
        except Exception:
            logger.exception("Error answering a request", extra=kv(URI=environ.get("PATH_INFO")))
            status, headers, body = "500 Internal Server Error", list(_TEXT), b"internal server error\n"
        start_response(status, [*headers, ("Content-Length", str(len(body)))])
        return [] if method == "HEAD" else [body]

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


def _run(check: Check) -> str | None:
    try:
        reason = check()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None if reason is None else str(reason)


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
