"""The secure port: kube-scheduler's HTTPS server of health and metrics.

:class:`SecureServer` is what ``--bind-address``/``--secure-port`` ask for. It
puts together the serving certificate and TLS context
(:mod:`scheduler.serving.tls`), the threaded TLS server
(:mod:`scheduler.serving.transport`), and the WSGI application that
authenticates, authorizes and answers (:mod:`scheduler.serving.handler`) with
the health checks (:mod:`scheduler.serving.checks`) and the metrics registry.
It starts, stops, and renews the TLS context when the client CAs change.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from scheduler.logs import kv
from scheduler.serving.checks import ALL_ENDPOINTS, Check, HealthChecks
from scheduler.serving.delegation import Delegation
from scheduler.serving.handler import HandlerChain, JsonEndpoint, Setter
from scheduler.serving.tls import ServingError, server_context, serving_key_pair
from scheduler.serving.transport import TLSServer
from scheduler.settings import ServingSettings

logger = logging.getLogger(__name__)

DEFAULT_SECURE_PORT = 10259


class ServingFlags(Protocol):
    @property
    def secure_port(self) -> int: ...
    @property
    def bind_address(self) -> str: ...
    @property
    def tls_cert_file(self) -> str | None: ...
    @property
    def tls_private_key_file(self) -> str | None: ...
    @property
    def authentication(self) -> Any: ...
    @property
    def authorization(self) -> Any: ...


class SecureServer:
    """The HTTPS server of ``--bind-address``/``--secure-port``.

    Without ``cert_file``/``key_file`` it serves a self-signed certificate made at
    construction for localhost, 127.0.0.1, the hostname, ``pod_ip`` and a specific
    ``bind_address``. ``port=0`` binds an ephemeral port (see :attr:`port`), whereas
    ``--secure-port=0`` means "no server": :meth:`from_options` returns None for it.
    Certificate problems raise :class:`ServingError` here, a taken port in :meth:`start`.

    Without ``delegation`` every request is served (tests of the serving alone);
    :meth:`from_options` always delegates. At most ``settings.max_connections`` are
    served at once, each with ``settings.request_timeout`` seconds for its handshake and
    request.
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
        settings: ServingSettings | None = None,
    ) -> None:
        self.bind_address = bind_address
        self.delegation = delegation
        self.settings = settings or ServingSettings()
        self._requested_port = port
        self._checks = HealthChecks()
        self._handler = HandlerChain(registry, self._checks, delegation)
        self._server: TLSServer | None = None
        self._thread: threading.Thread | None = None

        cert_pem, self._key_pem = serving_key_pair(cert_file, key_file, bind_address, pod_ip)
        self.certificate_pem = cert_pem
        """The serving certificate (chain), PEM: a client's CA for the self-signed one."""
        self._what = f"{cert_file} and key {key_file}" if cert_file else "(self-signed)"
        self.ssl_context = self._new_context()
        if delegation is not None:
            delegation.on_change = self._client_cas_changed

    def _new_context(self) -> ssl.SSLContext:
        cas = self.delegation.client_ca_bundle() if self.delegation is not None else b""
        return server_context(self.certificate_pem, self._key_pem, cas, self._what)

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
        cls,
        options: ServingFlags,
        registry: CollectorRegistry,
        pod_ip: str | None = None,
        settings: ServingSettings | None = None,
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
            delegation=Delegation.from_options(options.authentication, options.authorization, settings),
            settings=settings,
        )

    def add_check(self, name: str, check: Check, endpoints: Iterable[str] = ALL_ENDPOINTS) -> None:
        """Run ``check`` for each of ``endpoints`` (healthz, livez, readyz), after those added before."""
        self._checks.add(name, check, endpoints)

    def add_json(self, path: str, answer: JsonEndpoint) -> None:
        """Serve ``answer(query)`` as JSON at ``path`` (see :meth:`HandlerChain.add_json`)."""
        self._handler.add_json(path, answer)

    def add_setter(self, path: str, setter: Setter) -> None:
        """Take PUTs at ``path`` (see :meth:`HandlerChain.add_setter`)."""
        self._handler.add_setter(path, setter)

    def add_metrics(self, path: str, registry: CollectorRegistry, serving: Callable[[], bool]) -> None:
        """Serve ``registry`` at ``path`` while ``serving()`` (see :meth:`HandlerChain.add_metrics`)."""
        self._handler.add_metrics(path, registry, serving)

    @property
    def port(self) -> int:
        """The bound port once started (useful with port 0), else the configured one."""
        return self._server.server_port if self._server else self._requested_port

    @property
    def waiting_for_slot(self) -> threading.Event | None:
        """Set while every serving thread is busy and a new connection waits (None: not started)."""
        return self._server.waiting_for_slot if self._server else None

    def start(self) -> None:
        """Listen and serve in a daemon thread; returns once listening."""
        if self._server is not None:
            raise RuntimeError("server already started")
        family = socket.AF_INET6 if ":" in self.bind_address else socket.AF_INET
        where = _host_port(self.bind_address, self._requested_port)
        try:
            server = TLSServer(
                (self.bind_address, self._requested_port),
                family,
                self.ssl_context,
                self._handler,
                max_connections=self.settings.max_connections,
                timeout=self.settings.request_timeout,
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
        server.close()
        if self._thread is not None:
            self._thread.join()
        logger.info(
            "Stopped serving securely", extra=kv(address=_host_port(self.bind_address, server.server_port))
        )


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
