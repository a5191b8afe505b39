"""The Dynamic plugin's data for the benchmark: a synthetic exporter and a real Prometheus.

The exporter (prometheus_client, served by this process) has one gauge per
metric of the policy, one series per kwok node: ``cpu_usage_avg_5m{instance="kwok-node-00042"}``
and so on, as fractions 0..1, fixed per node (seeded by its name). About 1 node
in 20 is above the default policy's 0.65 limit on ``cpu_usage_avg_5m``, so the
Dynamic filter rejects some nodes. Prometheus (the local binary, Debian's
``/usr/bin/prometheus`` by default) scrapes it with ``honor_labels`` so that
``instance`` stays the node name, and the scheduler queries Prometheus as it
would in a cluster.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bench.procstat import stop_process
from scheduler.polling import poll


def node_load(node: str) -> dict[str, float]:
    """The fixed synthetic usage of one node: the 5-minute averages, and the 1-hour and
    1-day maxima at or above them (as max_over_time of those averages would be)."""
    rng = random.Random(node)
    out = {}
    for res in ("cpu", "mem"):
        avg = rng.uniform(0.05, 0.55) if rng.random() > 0.05 else rng.uniform(0.66, 0.9)
        h1 = min(1.0, avg + rng.uniform(0.0, 0.15))
        d1 = min(1.0, h1 + rng.uniform(0.0, 0.1))
        out[f"{res}_usage_avg_5m"] = round(avg, 4)
        out[f"{res}_usage_max_avg_1h"] = round(h1, 4)
        out[f"{res}_usage_max_avg_1d"] = round(d1, 4)
    return out


class LoadCollector(Collector):
    def __init__(self, metrics: list[str], nodes: list[str]) -> None:
        self.metrics = metrics
        self.loads = {n: node_load(n) for n in nodes}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for m in self.metrics:
            g = GaugeMetricFamily(
                m, f"Synthetic node usage (fraction) for the benchmark: {m}", labels=["instance"]
            )
            for node, load in self.loads.items():
                g.add_metric([node], load.get(m, 0.3))
            yield g


class LoadExporter:
    """Serves the collector over HTTP on 127.0.0.1:``port``."""

    def __init__(self, metrics: list[str], nodes: list[str], port: int) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = LoadCollector(metrics, nodes)
        self.registry.register(self.collector)
        self.port = port
        self.server: Any = None

    def start(self) -> None:
        self.server, _thread = start_http_server(self.port, addr="127.0.0.1", registry=self.registry)

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def exporter_scrape(port: int) -> list[dict[str, Any]]:
    """The scrape configuration of the synthetic exporter on ``port``."""
    return [
        {
            "job_name": "bench-node-load",
            "honor_labels": True,
            "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
        }
    ]


class LocalPrometheus:
    """Prometheus as a local process: ``scrape_configs`` every ``scrape_interval``, and the rules
    of ``rules`` (a rule file's text) every ``evaluation_interval``."""

    def __init__(
        self,
        binary: str,
        workdir: Path,
        port: int,
        scrape_configs: list[dict[str, Any]],
        scrape_interval: str = "15s",
        *,
        evaluation_interval: str = "",
        rules: str = "",
    ) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = port
        self.scrape_configs = scrape_configs
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval or scrape_interval
        self.rules = rules
        self.log_path = workdir / "prometheus.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, keep_data: bool = False) -> None:
        """Start (again, with the data so far if ``keep_data``)."""
        data = self.workdir / "prometheus-data"
        if not keep_data:
            shutil.rmtree(data, ignore_errors=True)
        config = self.workdir / "prometheus.yml"
        doc: dict[str, Any] = {
            "global": {
                "scrape_interval": self.scrape_interval,
                "evaluation_interval": self.evaluation_interval,
            },
            "scrape_configs": self.scrape_configs,
        }
        if self.rules:
            rules = self.workdir / "rules.yml"
            rules.write_text(self.rules, encoding="utf-8")
            doc["rule_files"] = [str(rules)]
        config.write_text(yaml.safe_dump(doc), encoding="utf-8")
        cmd = [
            self.binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--storage.tsdb.retention.time=1d",
        ]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def query(self, promql: str) -> list[dict[str, Any]]:
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.loads(r.read())
        return doc["data"]["result"]

    def wait_series(
        self,
        metrics: list[str],
        count: int,
        timeout: float = 180,
        progress: Callable[[str], None] = lambda s: None,
    ) -> None:
        """Until every metric has ``count`` series (an error reaching Prometheus counts as not yet)."""

        def complete() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode} (log: {self.log_path})")
            have = {
                m: int(float(r[0]["value"][1])) if (r := self.query(f"count({m})")) else 0 for m in metrics
            }
            if any(v < count for v in have.values()):
                progress(f"waiting for {count} series of each metric in Prometheus: {have}")
                return False
            return True

        what = f"Prometheus to have {count} series of each metric (log: {self.log_path})"
        poll(complete, timeout, what, 1, retry_on=(OSError,))

    def stop(self) -> None:
        stop_process(self.proc)
