"""The secure port's listening socket and connections: a threaded WSGI server over TLS.

Each connection is served in a daemon thread (TLS handshake included, so a
slow client holds only its own), at most ``max_connections`` at once: further
connections wait in the listen backlog until one ends. Every connection has
``timeout`` seconds for its handshake and request. Handshake errors,
typically TCP probes and port scans, are logged at V(4); requests at V(5).

The WSGI environ of a request also carries every value of every header
(:data:`ENVIRON_HEADERS`) and the client's certificate
(:data:`ENVIRON_PEER_CERTIFICATE`), for the authenticators.
"""

from __future__ import annotations

import logging
import ssl
import sys
import threading
from socketserver import TCPServer, ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

ENVIRON_HEADERS = "dynamic_scheduler.headers"
"""Header name (lower case) -> its values, in the order received."""
ENVIRON_PEER_CERTIFICATE = "dynamic_scheduler.peer_certificate"
"""DER of the client's certificate, or None when it sent none."""


class _Handler(WSGIRequestHandler):
    timeout = 10.0  # seconds a client may take for the handshake and request; bounds slow clients

    def setup(self) -> None:
        # The handshake happens here, in the connection's thread, not in the accept loop.
        self.timeout = self.server.timeout_seconds  # type: ignore[attr-defined,misc]
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
        env[ENVIRON_HEADERS] = headers
        env[ENVIRON_PEER_CERTIFICATE] = self.peer_certificate
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


class TLSServer(ThreadingMixIn, WSGIServer):
    """Serves ``app`` on ``address`` over TLS, a thread a connection (see the module docstring)."""

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

    def close(self) -> None:
        """Stop the accept loop (:meth:`serve_forever` returns) and close the socket."""
        self.closing.set()
        self.shutdown()
        self.server_close()
