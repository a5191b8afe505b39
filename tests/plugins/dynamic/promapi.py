"""A local HTTP server speaking Prometheus's ``/api/v1/query`` JSON, for answers a real
Prometheus does not give on demand: odd values, errors, garbage, slowness, chosen timestamps.

It evaluates the only queries the source sends: ``metric`` or ``metric{label="value"}``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

_SELECTOR = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([a-zA-Z_][a-zA-Z0-9_]*)=("(?:[^"\\]|\\.)*")\})?')


@dataclass
class Scripted:
    """A fixed answer for one metric's query."""

    status: int = 200
    body: bytes = b""
    delay: float = 0.0
    drip: float = 0.0
    """Seconds between the body's bytes (the headers go at once); 0: all at once."""


class FakePrometheus:
    def __init__(self) -> None:
        self.series: dict[str, list[tuple[dict[str, str], str]]] = {}
        """metric -> [(labels, value as Prometheus writes it: "0.5", "NaN", "+Inf")]."""
        self.eval_time: float | None = None
        """The timestamp of every answer; None: the time of the request."""
        self.scripted: dict[str, Scripted] = {}
        self.queries: list[dict[str, list[str]]] = []
        self._release = threading.Event()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                fake._handle(self)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), name="fake-prometheus", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def set(self, metric: str, *series: tuple[dict[str, str], str]) -> None:
        with self._lock:
            self.series[metric] = list(series)

    def release(self) -> None:
        """End scripted delays now (those requests get no answer)."""
        self._release.set()

    def close(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _handle(self, req: BaseHTTPRequestHandler) -> None:
        url = urlsplit(req.path)
        params = parse_qs(url.query)
        with self._lock:
            self.queries.append(params)
        if url.path != "/api/v1/query" or "query" not in params:
            self._send(req, 404, b"404 page not found\n", "text/plain")
            return
        m = _SELECTOR.fullmatch(params["query"][0])
        if m is None:
            self._send(req, 400, _error("bad_data", f"unsupported query {params['query'][0]!r}"))
            return
        metric, label, quoted = m.groups()
        with self._lock:
            scripted = self.scripted.get(metric)
            series = list(self.series.get(metric, ()))
            ts = self.eval_time if self.eval_time is not None else time.time()
        if scripted is not None:
            if scripted.delay and self._release.wait(scripted.delay):
                return
            self._send(req, scripted.status, scripted.body, drip=scripted.drip, release=self._release)
            return
        want = json.loads(quoted) if label else None
        result = [
            {"metric": {"__name__": metric, **labels}, "value": [ts, value]}
            for labels, value in series
            if label is None or labels.get(label) == want
        ]
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})
        self._send(req, 200, body.encode())

    @staticmethod
    def _send(
        req: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        *,
        drip: float = 0.0,
        release: threading.Event | None = None,
    ) -> None:
        try:
            req.send_response(status)
            req.send_header("Content-Type", content_type)
            req.send_header("Content-Length", str(len(body)))
            req.end_headers()
            if not drip:
                req.wfile.write(body)
                return
            for i in range(len(body)):
                req.wfile.write(body[i : i + 1])
                req.wfile.flush()
                if release is not None and release.wait(drip):
                    return
        except OSError:  # the client gave up (a timeout under test)
            pass


def _error(kind: str, message: str) -> bytes:
    return json.dumps({"status": "error", "errorType": kind, "error": message}).encode()


def vector(*series: tuple[dict[str, str], str], ts: float = 1.0, result_type: str = "vector") -> bytes:
    """A success body, for scripted answers."""
    result = [{"metric": labels, "value": [ts, value]} for labels, value in series]
    return json.dumps({"status": "success", "data": {"resultType": result_type, "result": result}}).encode()


error_body = _error
