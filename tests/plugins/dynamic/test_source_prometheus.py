"""PrometheusSource against a real Prometheus scraping a test exporter and running crane-style
recording rules: what reaches the source, how series map to nodes, updates and disappearances."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from scheduler.plugins.dynamic.source import PrometheusSource
from scheduler.polling import poll

from .realprom import INSTALL_HINT, Exporter, PrometheusServer, find_prometheus

# crane's recording rule, made to produce a fraction (crane's produces a percentage)
RULES = [{"record": "cpu_usage_avg_5m", "expr": "avg_over_time(cpu_usage_active[5m]) / 100"}]

SERIES = {
    'direct_cpu{instance="node-a"}': "0.7",
    'direct_cpu{instance="10.0.0.2:9100"}': "0.3",
    "direct_cpu": "0.2",  # no instance label: Prometheus adds the target's, "127.0.0.1:<port>"
    'cpu_usage_active{instance="node-a"}': "42",
    'cpu_usage_active{instance="node-b"}': "7.5",
    'odd_cpu{instance="n-nan"}': "NaN",
    'odd_cpu{instance="n-inf"}': "+Inf",
    'odd_cpu{instance="n-neg"}': "-0.5",
    'odd_cpu{instance="n-ok"}': "0.5",
    'clustered_cpu{cluster="c1",instance="node-a"}': "0.1",
    'clustered_cpu{cluster="c2",instance="node-a"}': "0.9",
}


@pytest.fixture(scope="module")
def exporter() -> Iterator[Exporter]:
    e = Exporter()
    for series, value in SERIES.items():
        e.set(series, value)
    yield e
    e.close()


@pytest.fixture(scope="module")
def prometheus(exporter: Exporter, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    binary = find_prometheus()
    if binary is None:
        pytest.fail(INSTALL_HINT, pytrace=False)
    server = PrometheusServer(binary, tmp_path_factory.mktemp("prometheus"), [exporter.address], RULES)
    try:
        server.wait_ready()
        # Prometheus scrapes new targets after about 5 s (service discovery's fixed update
        # interval); one scrape brings every series, and the rule's output follows it
        poll(
            lambda: len(server.query("cpu_usage_avg_5m")) == 2,
            timeout=30,
            what="the first scrape and rule evaluation",
        )
        yield server
    finally:
        server.stop()


@pytest.fixture
def make_source(prometheus: PrometheusServer) -> Iterator[type[PrometheusSource]]:
    made: list[PrometheusSource] = []

    def make(metric: str, period: float = 60.0, **kw: object) -> PrometheusSource:
        source = PrometheusSource(prometheus.url, {metric: period}, registry=CollectorRegistry(), **kw)  # type: ignore[arg-type]
        made.append(source)
        return source

    yield make  # type: ignore[misc]
    for s in made:
        s.stop()


def values(source: PrometheusSource, metric: str) -> dict[str, float]:
    return {k: s.value for k, s in source.view(metric).by_key.items()}


def test_every_nodes_series_arrives_in_one_query_and_maps_to_nodes(make_source, exporter: Exporter) -> None:
    source = make_source("direct_cpu")
    before = time.time()
    assert source.refresh("direct_cpu")
    view = source.view("direct_cpu")
    assert values(source, "direct_cpu") == {"node-a": 0.7, "10.0.0.2:9100": 0.3, exporter.address: 0.2}
    assert view.lookup("node-a", "10.0.0.1").value == 0.7  # type: ignore[union-attr]
    assert view.lookup("node-b", "10.0.0.2").value == 0.3  # type: ignore[union-attr]
    assert view.lookup("node-c", "127.0.0.1").value == 0.2  # type: ignore[union-attr]
    assert view.lookup("node-d", "10.0.0.4") is None
    s = view.lookup("node-a", "")
    assert s is not None and before - 5 <= s.sample_time <= time.time() + 5


def test_recording_rule_turns_cranes_percentages_into_fractions(make_source) -> None:
    fractions = make_source("cpu_usage_avg_5m", scale="fraction")
    assert fractions.refresh("cpu_usage_avg_5m")
    assert values(fractions, "cpu_usage_avg_5m") == pytest.approx({"node-a": 0.42, "node-b": 0.075})


def test_percent_series_need_their_scale(make_source) -> None:
    as_fractions = make_source("cpu_usage_active", scale="fraction")
    assert as_fractions.refresh("cpu_usage_active")
    assert values(as_fractions, "cpu_usage_active") == {}  # 42 and 7.5 are not fractions: ignored
    for scale in ("percent", "auto"):
        source = make_source("cpu_usage_active", scale=scale)
        assert source.refresh("cpu_usage_active")
        assert values(source, "cpu_usage_active") == pytest.approx({"node-a": 0.42, "node-b": 0.075})


def test_nan_infinite_and_negative_samples_are_missing(make_source) -> None:
    source = make_source("odd_cpu")
    assert source.refresh("odd_cpu")
    assert values(source, "odd_cpu") == {"n-ok": 0.5}


def test_cluster_matcher_selects_one_clusters_series(make_source) -> None:
    c1 = make_source("clustered_cpu", cluster_name="c1")
    assert c1.refresh("clustered_cpu")
    assert values(c1, "clustered_cpu") == {"node-a": 0.1}
    both = make_source("clustered_cpu")
    assert both.refresh("clustered_cpu")
    assert values(both, "clustered_cpu") == {"node-a": 0.9}  # two series for one node: the higher


def test_background_refresh_follows_changes_and_disappearances(
    make_source, exporter: Exporter, prometheus: PrometheusServer
) -> None:
    exporter.set('moving_cpu{instance="node-a"}', "0.1")
    exporter.set('moving_cpu{instance="node-b"}', "0.2")
    source = make_source("moving_cpu", period=0.2)
    source.start()

    def sees(expected: dict[str, float]) -> bool:
        return values(source, "moving_cpu") == expected

    poll(lambda: sees({"node-a": 0.1, "node-b": 0.2}), timeout=10, what="the first values")
    exporter.set('moving_cpu{instance="node-a"}', "0.8")
    poll(lambda: sees({"node-a": 0.8, "node-b": 0.2}), timeout=10, what="the changed value")
    exporter.remove('moving_cpu{instance="node-b"}')  # Prometheus marks it stale at the next scrape
    poll(lambda: sees({"node-a": 0.8}), timeout=10, what="node-b to go missing")

    started = time.monotonic()
    source.stop()
    assert time.monotonic() - started < 1.0
