"""A real Prometheus server for tests, scraping a tiny exporter the test controls.

Prometheus runs from the distribution's binary (Debian: ``apt-get install prometheus``)
on a free local port, with 1 s scrape and rule intervals and a throwaway TSDB.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from scheduler.polling import poll

PROMETHEUS_BIN_ENV = "PROMETHEUS_BIN"
INSTALL_HINT = (
    "the Prometheus server binary is needed for these tests: install it with "
    "`apt-get install prometheus` (or point $PROMETHEUS_BIN at one)"
)


def find_prometheus() -> str | None:
    explicit = os.environ.get(PROMETHEUS_BIN_ENV)
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    if os.access("/usr/bin/prometheus", os.X_OK):
        return "/usr/bin/prometheus"
    return shutil.which("prometheus")


class Exporter:
    """Serves ``/metrics`` in the text exposition format from lines the test sets."""

    def __init__(self) -> None:
        self._lines: dict[str, str] = {}
        self._lock = threading.Lock()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                with exporter._lock:
                    body = "".join(
                        f"{series} {value}\n" for series, value in exporter._lines.items()
                    ).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host}:{port}"

    def set(self, series: str, value: str) -> None:
        """``set('cpu{instance="node-a"}', "0.7")``."""
        with self._lock:
            self._lines[series] = value

    def remove(self, series: str) -> None:
        with self._lock:
            self._lines.pop(series, None)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrometheusServer:
    """``prometheus`` scraping ``targets`` every second and evaluating ``rules`` every second."""

    def __init__(self, binary: str, workdir: Path, targets: list[str], rules: list[dict[str, str]]) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (workdir / "rules.yaml").write_text(
            yaml.safe_dump({"groups": [{"name": "load", "interval": "1s", "rules": rules}]})
        )
        (workdir / "prometheus.yaml").write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(workdir / "rules.yaml")],
                    # honor_labels keeps the exporter's own instance="node-a" labels
                    "scrape_configs": [
                        {"job_name": "nodes", "honor_labels": True, "static_configs": [{"targets": targets}]}
                    ],
                }
            )
        )
        self.log_path = workdir / "prometheus.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yaml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 20.0) -> None:
        def ready() -> bool:
            if self._proc.poll() is not None:
                raise AssertionError(f"prometheus exited with {self._proc.returncode}:\n{self.log()}")
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                return r.status == 200

        poll(ready, timeout, f"prometheus to be ready on {self.url}", retry_on=(OSError,))

    def query(self, promql: str) -> list[dict[str, Any]]:
        with urllib.request.urlopen(
            f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql}), timeout=5
        ) as r:
            return json.load(r)["data"]["result"]

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=10)
        self._log.close()
