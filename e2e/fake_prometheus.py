"""A Prometheus that answers badly, for the Prometheus fault suite (run in a pod; stdlib only).

``python3 fake_prometheus.py garbage``: every instant query (``/api/v1/query``)
gets the next of ANSWERS in turn: an HTML page, cut-off JSON, JSON of the
wrong shape, series whose values are not numbers, JSON nested 100000 deep,
Prometheus's own error answer, a 503, random bytes, and a body dripped a byte
a second (slower than any query timeout).

``python3 fake_prometheus.py future``: a well-formed instant vector with one
series per node of ``$NODES`` (comma-separated, as ``instance``), each at
``$VALUE`` (default 0.99), timestamped an hour ahead of this clock.

Listens on ``$PORT`` (default 9090); one line per answer on stdout
(``served <answer>``), which the test reads from the pod's log.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VECTOR = '{{"status": "success", "data": {{"resultType": "vector", "result": {}}}}}'
BAD_SERIES = [
    {"metric": {"instance": "a"}, "value": [1, "NaN"]},
    {"metric": {"instance": "b"}, "value": [1, "abc"]},
    {"metric": {"instance": "c"}, "value": [1, "-5"]},
    {"metric": {"instance": "d"}, "value": [1, "1e309"]},
    {"metric": {"instance": "e"}},
    {"metric": {}, "value": [1, "0.5"]},
    {"metric": {"instance": "f"}, "value": ["soon", "0.5"]},
    "not a series",
]
ANSWERS: list[tuple[str, int, bytes]] = [
    ("html", 200, b"<html><body><h1>502 Bad Gateway</h1></body></html>"),
    ("truncated", 200, b'{"status": "success", "data": {"resultType": "vec'),
    ("wrong-shape", 200, b'{"status": "success", "data": {"resultType": "matrix", "result": {"a": 1}}}'),
    ("bad-values", 200, VECTOR.format(json.dumps(BAD_SERIES)).encode()),
    ("deep", 200, b"[" * 100_000 + b"]" * 100_000),
    ("error-status", 200, b'{"status": "error", "errorType": "bad_data", "error": "garbage"}'),
    ("unavailable", 503, b"Service Unavailable"),
    ("random-bytes", 200, bytes(range(256)) * 16),
    ("drip", 200, b'{"status": "success", "data": {"resultType": "vector", "result": []}}'),
]


def say(line: str) -> None:
    """One line of the pod's log, at once."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def future_answer() -> bytes:
    nodes = [n for n in os.environ.get("NODES", "").split(",") if n]
    value = os.environ.get("VALUE", "0.99")
    ahead = time.time() + 3600
    return VECTOR.format(
        json.dumps([{"metric": {"instance": n}, "value": [ahead, value]} for n in nodes])
    ).encode()


def main(mode: str) -> None:
    turn = itertools.cycle(ANSWERS)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if not self.path.startswith("/api/v1/query"):
                self._send("other", 200, b"{}")
                return
            if mode == "future":
                self._send("future", 200, future_answer())
                return
            with lock:
                name, code, body = next(turn)
            self._send(name, code, body, drip=name == "drip")

        def _send(self, name: str, code: int, body: bytes, drip: bool = False) -> None:
            say(f"served {name}")
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not drip:
                    self.wfile.write(body)
                    return
                for i in range(len(body)):
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
                    time.sleep(1)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up: that is the point

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            return

    server = ThreadingHTTPServer(("", int(os.environ.get("PORT", "9090"))), Handler)
    server.daemon_threads = True
    say(f"fake Prometheus ({mode}) listening")
    server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("garbage", "future"):
        sys.exit("usage: fake_prometheus.py garbage|future")
    main(sys.argv[1])
