"""The HTTP exchange behind :func:`scheduler.cluster.client.api_request`: libcurl (pycurl).

Why not the client's urllib3 pool: a Binding or an Event create costs about
0.6 ms of CPU through urllib3 and ``http.client`` (header parsing, the
response object, the socket reads in Python), and 0.3 ms through libcurl,
which does all of that in C with the GIL released; with two writes per pod
that is most of a scheduler's fixed cost per pod. Watches stay on urllib3
(a stream read line by line); everything else goes through here.

What is kept from the ``kubernetes.client.Configuration`` of the client: the
server, its CA (or ``insecure-skip-tls-verify``), a client certificate and
key, ``tls-server-name`` (the name TLS checks, through ``CONNECT_TO``), a proxy
and ``no_proxy``. The caller gives the headers, the auth header among them.

One ``pycurl.Curl`` handle per concurrent request, each with its own
keep-alive connection, kept in a pool (last in, first out: warm connections
first) of at most ``maxsize`` idle handles. HTTP/1.1, as the client's
urllib3 pool: one request per connection at a time, so the handles are the
connections.

Timeouts: the connect timeout is libcurl's ``CONNECTTIMEOUT``; the read
timeout bounds the whole exchange after the connection (libcurl has no
per-read timeout): ``TIMEOUT`` is their sum. A timeout raises
:class:`TimeoutError`, any other transport failure (refused, reset, TLS)
:class:`ConnectionError`; both are retried by ``scheduler.cluster.retry``.
libcurl sends a request again on a new connection when a kept-alive one was
closed by the server before it answered anything, as urllib3 does.
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from typing import Any
from urllib.parse import urlsplit

import pycurl

Timeout = float | tuple[float, float]

_TIMED_OUT = pycurl.E_OPERATION_TIMEDOUT


@dataclass(frozen=True)
class Response:
    status: int
    data: bytes
    raw_headers: bytes
    """The header block of the last response (a redirect's or a 100 Continue's are not kept)."""
    resent: bool = False
    """libcurl opened a new connection for a handle that had one: the kept-alive connection
    was dead, found so before the request or after sending it with no answer (then libcurl
    sent it again). Which of the two is not told, so the request may have been sent twice."""

    @property
    def reason(self) -> str:
        """The status line's reason phrase (empty for HTTP/2, which has none)."""
        first = self.raw_headers.split(b"\r\n", 1)[0].decode("latin-1")
        parts = first.split(" ", 2)
        return parts[2] if len(parts) == 3 else ""

    @property
    def headers(self) -> Any:
        """The headers, a case-insensitive mapping (``Retry-After`` and the like)."""
        _, _, block = self.raw_headers.partition(b"\r\n")
        return BytesHeaderParser().parsebytes(block)


class CurlPool:
    """libcurl handles for one API server, as the client's configuration says to reach it."""

    def __init__(self, configuration: Any, maxsize: int = 10) -> None:
        self.maxsize = max(1, maxsize)
        self._free: list[pycurl.Curl] = []
        self._lock = threading.Lock()
        self._options = _options(configuration)
        self.base = _base_url(configuration)
        """Where request URLs start: the server, or with ``tls-server-name`` that name (libcurl
        connects to the server, ``CONNECT_TO``, and checks the certificate for the name)."""

    def _handle(self) -> tuple[pycurl.Curl, bool]:
        """A handle, and whether it is a used one (with a kept-alive connection)."""
        with self._lock:
            if self._free:
                return self._free.pop(), True
        c = pycurl.Curl()
        for opt, value in self._options:
            c.setopt(opt, value)
        return c, False

    def _give_back(self, c: pycurl.Curl) -> None:
        with self._lock:
            if len(self._free) < self.maxsize:
                self._free.append(c)
                return
        c.close()

    def request(
        self,
        method: str,
        url: str,
        headers: list[str],
        body: bytes | None = None,
        timeout: Timeout | None = None,
    ) -> Response:
        """One exchange; raises :class:`TimeoutError` or :class:`ConnectionError` when no
        answer came."""
        c, used = self._handle()
        closed = False
        data = io.BytesIO()
        head: list[bytes] = []
        try:
            c.setopt(pycurl.URL, url)
            c.setopt(pycurl.HTTPHEADER, headers)
            c.setopt(pycurl.WRITEFUNCTION, data.write)
            c.setopt(pycurl.HEADERFUNCTION, _collect(head))
            # HTTPGET undoes what the handle's last request set (a body, another method).
            c.setopt(pycurl.HTTPGET, 1)
            if method == "GET":
                c.unsetopt(pycurl.CUSTOMREQUEST)
            else:
                c.setopt(pycurl.CUSTOMREQUEST, method)
                if body is not None:
                    c.setopt(pycurl.POSTFIELDSIZE, len(body))
                    c.setopt(pycurl.COPYPOSTFIELDS, body)
            connect, total = _timeouts(timeout)
            c.setopt(pycurl.CONNECTTIMEOUT_MS, connect)
            c.setopt(pycurl.TIMEOUT_MS, total)
            try:
                c.perform()
            except pycurl.error as e:
                code, message = e.args[0], e.args[1] if len(e.args) > 1 else ""
                c.close()
                closed = True
                what = f"{method} {_without_query(url)}: {message or f'curl error {code}'}"
                if code == _TIMED_OUT:
                    raise TimeoutError(f"timed out: {what}") from None
                raise ConnectionError(what) from None
            status = c.getinfo(pycurl.RESPONSE_CODE)
            resent = used and c.getinfo(pycurl.NUM_CONNECTS) > 0
        finally:
            if not closed:
                self._give_back(c)
        return Response(status, data.getvalue(), b"".join(head), resent)

    def close(self) -> None:
        with self._lock:
            free, self._free = self._free, []
        for c in free:
            c.close()


def _collect(head: list[bytes]) -> Any:
    """The header callback: lines of the last response only."""

    def on_line(line: bytes) -> None:
        if line[:5] == b"HTTP/":
            head.clear()
        head.append(line)

    return on_line


def _timeouts(t: Timeout | None) -> tuple[int, int]:
    """(connect, total) in milliseconds; 0 is none (libcurl's default)."""
    if not t:
        return 0, 0
    if isinstance(t, tuple):
        connect, read = t
        return int(connect * 1000), int((connect + read) * 1000)
    return int(t * 1000), int(t * 1000)


def _without_query(url: str) -> str:
    return url.split("?", 1)[0]


def _options(cfg: Any) -> list[tuple[int, Any]]:
    """The handle options from a ``kubernetes.client.Configuration``."""
    opts: list[tuple[int, Any]] = [
        (pycurl.NOSIGNAL, 1),
        (pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1),
        (pycurl.TCP_NODELAY, 1),
        (pycurl.TCP_KEEPALIVE, 1),
        (pycurl.FOLLOWLOCATION, 0),
    ]
    if cfg.verify_ssl:
        if cfg.ssl_ca_cert:
            opts.append((pycurl.CAINFO, cfg.ssl_ca_cert))
        opts += [(pycurl.SSL_VERIFYPEER, 1), (pycurl.SSL_VERIFYHOST, 2)]
    else:
        opts += [(pycurl.SSL_VERIFYPEER, 0), (pycurl.SSL_VERIFYHOST, 0)]
    if cfg.cert_file:
        opts.append((pycurl.SSLCERT, cfg.cert_file))
    if cfg.key_file:
        opts.append((pycurl.SSLKEY, cfg.key_file))
    if cfg.proxy:
        opts.append((pycurl.PROXY, cfg.proxy))
        if cfg.no_proxy:
            opts.append((pycurl.NOPROXY, cfg.no_proxy))
    else:
        opts.append((pycurl.NOPROXY, "*"))  # no proxy from the environment: as the client
    server_name = getattr(cfg, "tls_server_name", None)
    if server_name:
        u = urlsplit(cfg.host)
        port = _port(u)
        opts.append((pycurl.CONNECT_TO, [f"{server_name}:{port}:{u.hostname}:{port}"]))
    return opts


def _port(u: Any) -> int:
    return u.port or (443 if u.scheme == "https" else 80)


def _base_url(cfg: Any) -> str:
    """The server URL requests are made to, without a trailing slash."""
    host = cfg.host.rstrip("/")
    server_name = getattr(cfg, "tls_server_name", None)
    if not server_name:
        return host
    u = urlsplit(host)
    return f"{u.scheme}://{server_name}:{_port(u)}{u.path}"
