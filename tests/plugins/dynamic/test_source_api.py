"""PrometheusSource against a local server speaking Prometheus's API: matching series to
nodes, odd values, failures of every kind, logging once per change, metrics, threads."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from scheduler.plugins.dynamic.samples import split_host_port
from scheduler.plugins.dynamic.source import PrometheusSource
from scheduler.polling import poll
from scheduler.settings import PrometheusSettings

from .clocks import ManualClock
from .promapi import FakePrometheus, Scripted, error_body, vector

SOURCE_LOGGER = "scheduler.plugins.dynamic.source"


@pytest.fixture
def make_source(fake_prom: FakePrometheus, registry: CollectorRegistry) -> Iterator[type[PrometheusSource]]:
    made: list[PrometheusSource] = []

    def make(periods: dict[str, float] | None = None, **kw: object) -> PrometheusSource:
        kw.setdefault("address", fake_prom.url)
        kw.setdefault("registry", registry)
        kw.setdefault("query_timeout", 2.0)
        source = PrometheusSource(periods=periods or {"cpu": 60.0}, **kw)  # type: ignore[arg-type]
        made.append(source)
        return source

    yield make  # type: ignore[misc]
    fake_prom.release()
    for s in made:
        s.stop(timeout=5)


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


@pytest.mark.parametrize(
    ("key", "host"),
    [
        ("10.0.0.1:9100", "10.0.0.1"),
        ("node-a:9100", "node-a"),
        ("[fd00::1]:9100", "fd00::1"),
        ("10.0.0.1", None),
        ("fd00::1", None),
        ("node-a", None),
        ("node-a:", None),
        (":9100", None),
        ("node-a:http", None),
    ],
)
def test_split_host_port(key: str, host: str | None) -> None:
    assert split_host_port(key) == host


def test_series_match_nodes_by_name_internal_ip_or_ip_port(fake_prom: FakePrometheus, make_source) -> None:
    fake_prom.eval_time = 1234.5
    fake_prom.set(
        "cpu",
        ({"instance": "node-a"}, "0.7"),
        ({"instance": "10.0.0.2"}, "0.3"),
        ({"instance": "10.0.0.3:9100"}, "0.2"),
        ({"instance": "[fd00::4]:9100"}, "0.4"),
        ({"instance": "node-e:9100"}, "0.5"),
        ({"instance": "10.0.0.6", "job": "a"}, "0.1"),
        ({"instance": "10.0.0.6", "job": "b"}, "0.6"),
    )
    source = make_source()
    assert source.refresh("cpu") is True
    view = source.view("cpu")

    def value(name: str, ip: str) -> float | None:
        s = view.lookup(name, ip)
        return None if s is None else s.value

    assert value("node-a", "10.9.9.9") == 0.7
    assert value("node-b", "10.0.0.2") == 0.3
    assert value("node-c", "10.0.0.3") == 0.2
    assert value("node-d", "fd00::4") == 0.4
    assert value("node-e", "") == 0.5
    assert value("node-f", "10.0.0.6") == 0.6  # two series for one node: the higher load counts
    assert value("node-g", "10.0.0.7") is None
    assert value("node-x", "") is None
    s = view.lookup("node-a", "")
    assert s is not None and s.sample_time == 1234.5
    # per node (the higher of node-f's two): 0.2 0.3 0.4 | 0.5 0.6 0.7
    assert view.median == pytest.approx((0.4 + 0.5) / 2)


def test_name_match_wins_over_address_match(fake_prom: FakePrometheus, make_source) -> None:
    fake_prom.set("cpu", ({"instance": "10.0.0.1:9100"}, "0.9"), ({"instance": "node-a"}, "0.1"))
    source = make_source()
    source.refresh("cpu")
    assert source.view("cpu").lookup("node-a", "10.0.0.1").value == 0.1  # type: ignore[union-attr]


def test_cluster_matcher_and_node_label(fake_prom: FakePrometheus, make_source) -> None:
    fake_prom.set(
        "cpu",
        ({"cluster": "cs-test-2", "node": "node-a", "instance": "x:1"}, "0.4"),
        ({"cluster": "other", "node": "node-b"}, "0.5"),
        ({"cluster": "cs-test-2", "instance": "node-c"}, "0.6"),
    )
    source = make_source(cluster_name="cs-test-2", cluster_label="cluster", node_label="node")
    assert source.query_for("cpu") == 'cpu{cluster="cs-test-2"}'
    assert source.refresh("cpu") is True
    assert fake_prom.queries[-1]["query"] == ['cpu{cluster="cs-test-2"}']
    view = source.view("cpu")
    assert set(view.by_key) == {"node-a"}
    assert make_source(cluster_name="").query_for("cpu") == "cpu"
    assert make_source(cluster_name='a"b').query_for("cpu") == 'cpu{cluster="a\\"b"}'


def test_query_carries_the_timeout_to_prometheus(fake_prom: FakePrometheus, make_source) -> None:
    fake_prom.set("cpu")
    make_source(query_timeout=2.5).refresh("cpu")
    assert fake_prom.queries[-1]["timeout"] == ["2.5"]


def test_values_that_are_not_fractions_make_the_node_missing_and_are_logged_once(
    fake_prom: FakePrometheus, make_source, registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    bad = {
        "n-nan": "NaN",
        "n-inf": "+Inf",
        "n-ninf": "-Inf",
        "n-neg": "-0.1",
        "n-big": "1.5",
        "n-percent": "45",
        "n-text": "high",
    }
    good = {"n-zero": "0", "n-one": "1", "n-half": "0.5"}
    fake_prom.set(
        "cpu", *[({"instance": k}, v) for k, v in {**bad, **good}.items()], ({"job": "no-instance"}, "0.3")
    )
    source = make_source(scale="fraction")
    caplog.set_level(logging.INFO, logger=SOURCE_LOGGER)

    assert source.refresh("cpu") is True
    assert source.refresh("cpu") is True
    view = source.view("cpu")
    assert {k: s.value for k, s in view.by_key.items()} == {"n-zero": 0.0, "n-one": 1.0, "n-half": 0.5}
    assert sample(registry, "dynamic_scheduler_metric_invalid_series", metric="cpu") == len(bad) + 1
    warnings = [r for r in caplog.records if r.name == SOURCE_LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "metricScale" in warnings[0].getMessage()

    fake_prom.set("cpu", *[({"instance": k}, v) for k, v in good.items()])
    caplog.clear()
    assert source.refresh("cpu") is True
    assert sample(registry, "dynamic_scheduler_metric_invalid_series", metric="cpu") == 0
    assert [
        r.getMessage() for r in caplog.records if r.name == SOURCE_LOGGER and r.levelno == logging.INFO
    ] == ["All series of the metric are valid again"]


def values(source: PrometheusSource, metric: str = "cpu") -> dict[str, float]:
    return {k: s.value for k, s in source.view(metric).by_key.items()}


def test_percent_scale_divides_by_100(fake_prom: FakePrometheus, make_source) -> None:
    fake_prom.set("cpu", ({"instance": "a"}, "45"), ({"instance": "b"}, "0.5"), ({"instance": "c"}, "150"))
    source = make_source(scale="percent")
    assert source.refresh("cpu")
    assert values(source) == {"a": 0.45, "b": 0.005}  # 150 % is no usage: ignored
    assert source.scale_of("cpu") == "percent"


def test_auto_scale_turns_percent_at_the_first_series_above_2_and_stays(
    fake_prom: FakePrometheus, make_source
) -> None:
    source = make_source(periods={"cpu": 60.0, "mem": 60.0})
    fake_prom.set("cpu", ({"instance": "a"}, "0.7"), ({"instance": "b"}, "1.03"))  # rate noise past 1
    assert source.refresh("cpu")
    assert values(source) == {"a": 0.7} and source.scale_of("cpu") == "fraction"
    fake_prom.set("cpu", ({"instance": "a"}, "0.7"), ({"instance": "b"}, "42"))
    assert source.refresh("cpu")
    assert values(source) == pytest.approx({"a": 0.007, "b": 0.42}) and source.scale_of("cpu") == "percent"
    fake_prom.set("cpu", ({"instance": "a"}, "0.7"), ({"instance": "b"}, "1.5"))  # quiet again: still percent
    assert source.refresh("cpu")
    assert values(source) == pytest.approx({"a": 0.007, "b": 0.015})
    assert source.scale_of("mem") == "fraction"  # each metric on its own


FAILURES = [
    pytest.param(Scripted(500, b"internal error"), "HTTP 500: internal error", id="http-500"),
    pytest.param(
        Scripted(422, error_body("execution", "query timed out")),
        "HTTP 422: execution: query timed out",
        id="http-422-prometheus-error",
    ),
    pytest.param(
        Scripted(200, error_body("bad_data", "parse error")),
        "status 'error': bad_data: parse error",
        id="status-error",
    ),
    pytest.param(Scripted(200, b"<html>proxy login</html>"), "response is not JSON", id="garbage"),
    pytest.param(Scripted(200, b"[1, 2]"), "not a JSON object", id="json-list"),
    pytest.param(
        Scripted(200, b"[" * 100_000 + b"]" * 100_000), "response nests too deep", id="deeply-nested-json"
    ),
    pytest.param(Scripted(500, b"[" * 4096), "HTTP 500: [[[", id="http-500-deeply-nested-body"),
    pytest.param(
        Scripted(200, vector(({"instance": "n"}, "0.1"), result_type="matrix")),
        "expected an instant vector, got resultType 'matrix'",
        id="matrix",
    ),
    pytest.param(
        Scripted(200, b'{"status": "success", "data": {"resultType": "scalar", "result": [1, "2"]}}'),
        "expected an instant vector",
        id="scalar",
    ),
    pytest.param(Scripted(200, b"", delay=30), "no answer within 0.3s", id="slow"),
    pytest.param(
        Scripted(200, vector(({"instance": "n"}, "0.1")), drip=0.1),
        "no answer within 0.3s",
        id="dripping-body",
    ),
    pytest.param(None, "cannot reach Prometheus", id="connection-refused"),
]


@pytest.mark.parametrize(("scripted", "reason"), FAILURES)
def test_a_failed_query_keeps_the_last_view_and_never_raises(
    fake_prom: FakePrometheus,
    make_source,
    registry: CollectorRegistry,
    caplog: pytest.LogCaptureFixture,
    scripted: Scripted | None,
    reason: str,
) -> None:
    fake_prom.set("cpu", ({"instance": "node-a"}, "0.4"))
    # Only the cases about a slow Prometheus need a short timeout; the others answer at once,
    # and a timeout that short could fail them on a loaded machine.
    timeout = 0.3 if reason.startswith("no answer within") else 10.0
    source = make_source(query_timeout=timeout)
    assert source.refresh("cpu")  # the view to keep
    generation = source.generation
    if scripted is not None:
        fake_prom.scripted["cpu"] = scripted
    else:
        fake_prom.close()  # nothing listens on its port any more
    caplog.set_level(logging.INFO, logger=SOURCE_LOGGER)

    started = time.monotonic()
    results = [source.refresh("cpu") for _ in range(3)]
    elapsed = time.monotonic() - started

    assert results == [False, False, False]
    assert elapsed < 3 * (timeout + 1.0)  # bounded by the query timeout, not by the server
    assert source.generation == generation
    assert source.view("cpu").lookup("node-a", "").value == 0.4  # type: ignore[union-attr]
    assert sample(registry, "dynamic_scheduler_prometheus_query_errors_total", metric="cpu") == 3
    assert sample(registry, "dynamic_scheduler_prometheus_up") == 0
    assert sample(registry, "dynamic_scheduler_prometheus_query_duration_seconds_count") == 4
    warnings = [r for r in caplog.records if r.name == SOURCE_LOGGER and r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert reason in warnings[0].__dict__["kv"]["reason"]


def test_recovery_is_logged_once_and_up_follows_every_metric(
    fake_prom: FakePrometheus, make_source, registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    fake_prom.set("cpu", ({"instance": "node-a"}, "0.4"))
    fake_prom.set("mem", ({"instance": "node-a"}, "0.5"))
    source = make_source(periods={"cpu": 60.0, "mem": 60.0})
    caplog.set_level(logging.INFO, logger=SOURCE_LOGGER)
    assert sample(registry, "dynamic_scheduler_prometheus_up") == 0  # nothing fetched yet

    assert source.refresh("cpu")
    assert sample(registry, "dynamic_scheduler_prometheus_up") == 0  # mem not yet
    assert source.refresh("mem")
    assert sample(registry, "dynamic_scheduler_prometheus_up") == 1

    fake_prom.scripted["mem"] = Scripted(503, b"unavailable")
    assert not source.refresh("mem")
    assert sample(registry, "dynamic_scheduler_prometheus_up") == 0
    del fake_prom.scripted["mem"]
    caplog.clear()
    assert source.refresh("mem") and source.refresh("mem")
    assert sample(registry, "dynamic_scheduler_prometheus_up") == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO] == [
        "Prometheus queries succeed again"
    ]


def test_metric_age_is_measured_from_the_sample_timestamp(
    fake_prom: FakePrometheus, make_source, registry: CollectorRegistry
) -> None:
    clock = ManualClock(10_000.0)
    fake_prom.eval_time = 9_990.0
    fake_prom.set("cpu", ({"instance": "node-a"}, "0.4"))
    source = make_source(clock=clock)
    assert sample(registry, "dynamic_scheduler_metric_age_seconds", metric="cpu") == math.inf
    source.refresh("cpu")
    assert sample(registry, "dynamic_scheduler_metric_age_seconds", metric="cpu") == 10.0
    clock.advance(50)
    assert sample(registry, "dynamic_scheduler_metric_age_seconds", metric="cpu") == 60.0
    s = source.view("cpu").lookup("node-a", "")
    assert s is not None and (s.sample_time, s.fetched_at) == (9_990.0, 10_000.0)


def test_an_empty_answer_means_no_node_has_data(fake_prom: FakePrometheus, make_source) -> None:
    fake_prom.set("cpu", ({"instance": "node-a"}, "0.4"))
    source = make_source()
    source.refresh("cpu")
    fake_prom.set("cpu")
    assert source.refresh("cpu")
    assert source.view("cpu").lookup("node-a", "") is None
    assert source.view("cpu").median is None


def test_background_threads_refresh_each_period_and_stop_promptly(
    fake_prom: FakePrometheus, make_source
) -> None:
    fake_prom.set("cpu", ({"instance": "node-a"}, "0.1"))
    fake_prom.set("mem", ({"instance": "node-a"}, "0.2"))
    source = make_source(periods={"cpu": 0.05, "mem": 3600.0})
    source.start()
    deadline = time.monotonic() + 10
    # Both metrics are fetched at start, each by its own thread, in either order.
    while any(source.view(m).lookup("node-a", "") is None for m in ("cpu", "mem")):
        assert source.wait_refreshed(source.generation, timeout=max(0.0, deadline - time.monotonic()))

    fake_prom.set("cpu", ({"instance": "node-a"}, "0.9"))
    while source.view("cpu").lookup("node-a", "").value != 0.9:  # type: ignore[union-attr]
        assert source.wait_refreshed(source.generation, timeout=max(0.0, deadline - time.monotonic()))
    assert source.view("mem").lookup("node-a", "").value == 0.2  # type: ignore[union-attr]
    mem_queries = sum(1 for q in fake_prom.queries if q["query"] == ["mem"])
    assert mem_queries == 1  # its period is an hour

    started = time.monotonic()
    source.stop()
    assert time.monotonic() - started < 1.0
    with pytest.raises(RuntimeError):
        source.start()


def test_a_failing_metric_is_retried_before_its_period(fake_prom: FakePrometheus, make_source) -> None:
    fake_prom.scripted["cpu"] = Scripted(500, b"not yet")
    fake_prom.set("cpu", ({"instance": "node-a"}, "0.3"))
    source = make_source(periods={"cpu": 3600.0}, settings=PrometheusSettings(retry_base=0.02))
    source.start()
    poll(lambda: sum(1 for q in fake_prom.queries if q.get("query") == ["cpu"]) >= 2, 10, "a retry")
    del fake_prom.scripted["cpu"]
    assert source.wait_refreshed(0, timeout=10)
    assert source.view("cpu").lookup("node-a", "").value == 0.3  # type: ignore[union-attr]


def test_stop_does_not_wait_for_a_slow_query(fake_prom: FakePrometheus, make_source) -> None:
    fake_prom.scripted["cpu"] = Scripted(200, b"", delay=30)
    source = make_source(query_timeout=20.0)
    source.start()
    poll(lambda: fake_prom.queries, 10, "the query in flight", 0.01)
    started = time.monotonic()
    source.stop(timeout=0.2)
    assert time.monotonic() - started < 1.0


def test_malformed_series_are_skipped_one_by_one(
    fake_prom: FakePrometheus, make_source, registry: CollectorRegistry
) -> None:
    result = [
        {"metric": {"instance": "node-a"}, "value": [12.0, "0.2"]},
        {"metric": {"instance": "node-b"}, "value": "0.3"},
        {"metric": {"instance": "node-c"}},
        {"metric": {"instance": "node-d"}, "value": ["NaN", "0.3"]},
        {"metric": "instance=node-e", "value": [12.0, "0.1"]},
        "node-f",
    ]
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
    fake_prom.scripted["cpu"] = Scripted(200, body)
    source = make_source()
    assert source.refresh("cpu")
    assert set(source.view("cpu").by_key) == {"node-a"}
    assert sample(registry, "dynamic_scheduler_metric_invalid_series", metric="cpu") == 5


def test_a_sample_time_ahead_of_our_clock_counts_as_now(fake_prom: FakePrometheus, make_source) -> None:
    # A Prometheus whose clock runs a day ahead must not keep its values fresh for a day.
    now = time.time()
    fake_prom.eval_time = now + 86400
    fake_prom.set("cpu", ({"instance": "a"}, "0.5"))
    source = make_source()
    assert source.refresh("cpu")
    (sample,) = source.view("cpu").by_key.values()
    assert now - 5 <= sample.sample_time <= time.time()


def test_an_answer_over_the_body_limit_is_a_failed_query(
    fake_prom: FakePrometheus, make_source, caplog: pytest.LogCaptureFixture
) -> None:
    fake_prom.set("cpu", *(({"instance": f"node-{i:03}"}, "0.4") for i in range(50)))
    assert make_source().refresh("cpu")  # the default limit takes it
    caplog.set_level(logging.INFO, logger=SOURCE_LOGGER)
    source = make_source(settings=PrometheusSettings(max_body=1024))
    assert not source.refresh("cpu")
    assert source.view("cpu").lookup("node-001", "") is None
    warnings = [r for r in caplog.records if r.name == SOURCE_LOGGER and r.levelno >= logging.WARNING]
    assert "response larger than 1024 bytes" in warnings[0].__dict__["kv"]["reason"]
