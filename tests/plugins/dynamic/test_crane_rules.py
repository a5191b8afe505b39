"""crane-scheduler's own recording rules (examples/crane-scheduler/prometheus-rules.yaml) in a real
Prometheus, read by the source on the percent scale.

The rules' expressions are crane's, unchanged; only their groups' intervals become 1 s
(one group), so that the 5m/1h/1d windows hold a first value within seconds. The
exporter stands in for node-exporter: a fixed idle-CPU counter (irate 0, so 100 % busy)
and memory gauges (a quarter available, so 75 % used).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from scheduler.plugins.dynamic.source import PrometheusSource
from scheduler.polling import poll

from .realprom import INSTALL_HINT, Exporter, PrometheusServer, find_prometheus

RULES_FILE = Path(__file__).parents[3] / "examples" / "crane-scheduler" / "prometheus-rules.yaml"
METRICS = (
    "cpu_usage_avg_5m",
    "cpu_usage_max_avg_1h",
    "cpu_usage_max_avg_1d",
    "mem_usage_avg_5m",
    "mem_usage_max_avg_1h",
    "mem_usage_max_avg_1d",
)


def crane_rules() -> list[dict[str, str]]:
    doc = yaml.safe_load(RULES_FILE.read_text())
    return [rule for group in doc["spec"]["groups"] for rule in group["rules"]]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    binary = find_prometheus()
    if binary is None:
        pytest.fail(INSTALL_HINT, pytrace=False)
    exporter = Exporter()
    for node in ("node-a", "node-b"):
        exporter.set(f'node_cpu_seconds_total{{instance="{node}",cpu="0",mode="idle"}}', "1000")
        exporter.set(f'node_memory_MemTotal_bytes{{instance="{node}"}}', "4000")
    exporter.set('node_memory_MemAvailable_bytes{instance="node-a"}', "1000")
    exporter.set('node_memory_MemAvailable_bytes{instance="node-b"}', "3000")
    server = PrometheusServer(
        binary, tmp_path_factory.mktemp("prometheus"), [exporter.address], crane_rules()
    )
    try:
        server.wait_ready()
        poll(
            lambda: all(len(server.query(m)) == 2 for m in METRICS),
            timeout=60,
            what="crane's six series for both nodes",
        )
        yield server
    finally:
        server.stop()
        exporter.close()


def read(prometheus: PrometheusServer, scale: str) -> dict[str, dict[str, float]]:
    source = PrometheusSource(
        prometheus.url, dict.fromkeys(METRICS, 60.0), registry=CollectorRegistry(), scale=scale
    )
    assert source.refresh_all()
    return {m: {k: s.value for k, s in source.view(m).by_key.items()} for m in METRICS}


def test_cranes_rules_record_percentages_that_read_as_fractions(prometheus: PrometheusServer) -> None:
    # Prometheus holds crane's percentages
    assert {r["metric"]["instance"]: float(r["value"][1]) for r in prometheus.query("mem_usage_avg_5m")} == {
        "node-a": 75.0,
        "node-b": 25.0,
    }
    for scale in ("percent", "auto"):
        got = read(prometheus, scale)
        for m in ("mem_usage_avg_5m", "mem_usage_max_avg_1h", "mem_usage_max_avg_1d"):
            assert got[m] == pytest.approx({"node-a": 0.75, "node-b": 0.25}), (scale, m)
        for m in ("cpu_usage_avg_5m", "cpu_usage_max_avg_1h", "cpu_usage_max_avg_1d"):
            assert got[m] == pytest.approx({"node-a": 1.0, "node-b": 1.0}), (scale, m)


def test_as_fractions_cranes_series_are_no_data(prometheus: PrometheusServer) -> None:
    got = read(prometheus, "fraction")
    assert all(not values for values in got.values())
