"""Node load from Prometheus's HTTP API, refreshed in the background, read without locks.

One instant query per metric (``GET /api/v1/query?query=<metric>{<cluster_label>="<cluster_name>"}``,
or just ``<metric>`` without a cluster name) returns every node's series. Each
metric has its own thread that re-queries it every period. A refresh builds a new
immutable :class:`MetricView` and swaps it in whole, so the scheduling hot path is
one dict lookup per node and metric, with no lock.

Values are read on the metric's scale (``scale``): ``fraction`` (0..1, as our
recording rules give them), ``percent`` (0..100, as crane-scheduler's rules give
them; divided by 100), or ``auto``: a metric is read as percent from the first
query in which some series is above 2 (no fraction gets there, even with rate
noise), and stays so until the scheduler restarts; before that, as fractions.
``auto`` misreads a percent metric while every node is under 2 % (0.7 % reads as
70 %): with crane's rules, say ``percent``. A series whose value, so scaled, is
NaN, infinite or outside 0..1 is ignored: that node has no data for the metric
(logged when it starts and stops, not every query).

Nothing here raises into scheduling: a failed query (Prometheus down or slow,
HTTP error, ``status: error``, bad JSON) keeps the previous view, which ages until
the plugin treats it as stale; failures are logged once per change
(healthy → failing → healthy) and counted in metrics.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import statistics
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from scheduler.logs import V, kv
from scheduler.plugins.dynamic.samples import MetricView, Sample, split_host_port
from scheduler.settings import PrometheusSettings

logger = logging.getLogger(__name__)

FRACTION, PERCENT, AUTO = "fraction", "percent", "auto"
SCALES = (FRACTION, PERCENT, AUTO)
AUTO_PERCENT_ABOVE = 2.0
"""``auto``: a metric with a series above this is on the percent scale."""


class QueryError(Exception):
    """One failed query, with a short reason for logs."""


@dataclass(frozen=True, slots=True)
class _SourceMetrics:
    up: Gauge
    errors: Counter
    age: Gauge
    duration: Histogram
    invalid: Gauge


_metrics_lock = threading.Lock()
_metrics_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, _SourceMetrics] = (
    weakref.WeakKeyDictionary()
)


def _metrics_for(registry: CollectorRegistry) -> _SourceMetrics:
    """One set of collectors per registry, shared by every source that registers there."""
    with _metrics_lock:
        m = _metrics_by_registry.get(registry)
        if m is None:
            m = _SourceMetrics(
                up=Gauge(
                    "dynamic_scheduler_prometheus_up",
                    "1 when the latest query of every Dynamic metric succeeded, else 0.",
                    registry=registry,
                ),
                errors=Counter(
                    "dynamic_scheduler_prometheus_query_errors_total",
                    "Failed Prometheus queries, by metric.",
                    ["metric"],
                    registry=registry,
                ),
                age=Gauge(
                    "dynamic_scheduler_metric_age_seconds",
                    "Seconds since the evaluation time of the metric's latest successful query "
                    "(the age of its oldest node sample); +Inf before the first success.",
                    ["metric"],
                    registry=registry,
                ),
                duration=Histogram(
                    "dynamic_scheduler_prometheus_query_duration_seconds",
                    "Duration of Prometheus queries, failed ones included.",
                    registry=registry,
                ),
                invalid=Gauge(
                    "dynamic_scheduler_metric_invalid_series",
                    "Series ignored in the metric's latest query: no node label, or a value "
                    "that is not a fraction 0..1.",
                    ["metric"],
                    registry=registry,
                ),
            )
            _metrics_by_registry[registry] = m
        return m


class PrometheusSource:
    """Every node's latest value of each metric, kept fresh by background threads.

    ``periods`` maps each metric to fetch to its refresh period in seconds.
    ``clock`` gives epoch seconds (compared with Prometheus's sample timestamps).
    A failed query is retried after ``settings.retry_base`` seconds, doubling up to
    ``settings.retry_max``, never later than the period
    (:class:`scheduler.settings.PrometheusSettings`).
    """

    def __init__(
        self,
        address: str,
        periods: Mapping[str, float],
        *,
        cluster_label: str = "cluster",
        cluster_name: str = "",
        node_label: str = "instance",
        query_timeout: float = 5.0,
        registry: CollectorRegistry = REGISTRY,
        clock: Callable[[], float] = time.time,
        scale: str = AUTO,
        settings: PrometheusSettings | None = None,
    ) -> None:
        if scale not in SCALES:
            raise ValueError(f"scale: expected one of {', '.join(SCALES)}, got {scale!r}")
        self._scale = scale
        self._percent: set[str] = set()
        """Metrics read as percent (``scale`` percent, or ``auto`` once seen above 2)."""
        self._query_url = address.rstrip("/") + "/api/v1/query"
        self._periods = dict(periods)
        self._cluster_label = cluster_label
        self._cluster_name = cluster_name
        self._node_label = node_label
        self._timeout = query_timeout
        self._clock = clock
        self._settings = settings or PrometheusSettings()
        self._views: dict[str, MetricView] = {m: MetricView(m) for m in self._periods}
        self._healthy: dict[str, bool | None] = {m: None for m in self._periods}
        self._invalid: dict[str, frozenset[str]] = {m: frozenset() for m in self._periods}
        self._write_lock = threading.Lock()
        self._refreshed = threading.Condition(self._write_lock)
        self.generation = 0
        """Bumped by every successful refresh of any metric."""
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._metrics = _metrics_for(registry)
        self._metrics.up.set(0)
        for m in self._periods:
            self._metrics.errors.labels(m)
            self._metrics.invalid.labels(m).set(0)
            self._metrics.age.labels(m).set_function(self._age_function(m))

    # --- reading (hot path) ---

    def view(self, metric: str) -> MetricView:
        """The metric's latest view (an empty one for a metric this source does not fetch)."""
        return self._views.get(metric) or MetricView(metric)

    def sample(self, metric: str, node: Any) -> Sample | None:
        """The node's (a NodeInfo) latest sample of the metric: by name, InternalIP or ``IP:port``."""
        return self.view(metric).lookup(node.name, node.internal_ip())

    def median(self, metric: str) -> tuple[float | None, float]:
        """The median of the metric across the cluster, and its sample time."""
        view = self.view(metric)
        return view.median, view.sample_time

    def current_generation(self) -> int:
        return self.generation

    def scale_of(self, metric: str) -> str:
        """How the metric is read now: ``fraction`` or ``percent``."""
        return PERCENT if self._scale == PERCENT or metric in self._percent else FRACTION

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(self._periods)

    def period(self, metric: str) -> float:
        return self._periods[metric]

    def query_for(self, metric: str) -> str:
        """The PromQL instant query that fetches the metric for every node."""
        if not self._cluster_name:
            return metric
        return f"{metric}{{{self._cluster_label}={json.dumps(self._cluster_name)}}}"

    # --- refreshing ---

    def refresh(self, metric: str) -> bool:
        """Query the metric once and publish the result; False (and the old view kept) on failure."""
        started = time.monotonic()
        try:
            result, eval_time = self._query(self.query_for(metric))
        except QueryError as e:
            self._metrics.duration.observe(time.monotonic() - started)
            self._metrics.errors.labels(metric).inc()
            self._set_health(metric, False, str(e))
            return False
        self._metrics.duration.observe(time.monotonic() - started)
        view, invalid, invalid_examples = self._build_view(metric, result, eval_time)
        self._report_invalid(metric, invalid, invalid_examples)
        with self._write_lock:
            views = dict(self._views)
            views[metric] = view
            self._views = views
            self.generation += 1
            self._refreshed.notify_all()
        self._set_health(metric, True, "")
        logger.log(
            V(5),
            "Refreshed load metric",
            extra=kv(metric=metric, series=len(view.by_key), ignored=len(invalid)),
        )
        return True

    def refresh_all(self) -> bool:
        """Query every metric once, in turn; True when all succeeded."""
        return all([self.refresh(m) for m in self._periods])

    def wait_refreshed(self, after_generation: int, timeout: float) -> bool:
        """Block until a refresh newer than ``after_generation`` was published, or the timeout."""
        with self._refreshed:
            return self._refreshed.wait_for(lambda: self.generation > after_generation, timeout)

    def wait_answered(self, timeout: float) -> list[str]:
        """Wait until every metric's first query has ended, well or not (at most ``timeout``);
        the metrics whose last query failed or has not ended."""
        deadline = time.monotonic() + timeout
        while any(h is None for h in self._healthy.values()) and time.monotonic() < deadline:
            self._stop.wait(0.05)
        return [m for m, h in self._healthy.items() if not h]

    def start(self) -> None:
        """Start one refresh thread per metric (each queries at once, then every period)."""
        if self._stop.is_set():
            raise RuntimeError("a stopped PrometheusSource cannot be restarted")
        if self._threads:
            return
        for m in self._periods:
            t = threading.Thread(target=self._run, args=(m,), name=f"dynamic-metric-{m}", daemon=True)
            self._threads.append(t)
            t.start()
        logger.info(
            "Started fetching node load from Prometheus",
            extra=kv(url=self._query_url, metrics=",".join(self._periods)),
        )

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the refresh threads. Waits at most ``timeout`` seconds for a query in flight
        (a thread still in one exits when it returns)."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def _run(self, metric: str) -> None:
        period = self._periods[metric]
        failures = 0
        while not self._stop.is_set():
            try:
                ok = self.refresh(metric)
            except Exception:  # a bug must not end the thread silently
                logger.exception("Refreshing a load metric failed unexpectedly", extra=kv(metric=metric))
                ok = False
            failures = 0 if ok else failures + 1
            delay = (
                period
                if ok
                else min(
                    period, self._settings.retry_max, self._settings.retry_base * 2 ** min(failures - 1, 10)
                )
            )
            if self._stop.wait(delay):
                return

    # --- internals ---

    def _query(self, promql: str) -> tuple[list[Any], float]:
        params = urllib.parse.urlencode({"query": promql, "timeout": f"{self._timeout:g}"})
        request = urllib.request.Request(
            f"{self._query_url}?{params}", headers={"Accept": "application/json"}
        )
        deadline = time.monotonic() + self._timeout
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                body = _read_until(response, deadline, self._settings.max_body)
        except urllib.error.HTTPError as e:
            try:
                detail = _error_detail(e.read(4096))
            finally:
                e.close()
            raise QueryError(f"HTTP {e.code}{': ' + detail if detail else ''}") from None
        except urllib.error.URLError as e:
            raise QueryError(f"cannot reach Prometheus: {e.reason}") from None
        except (TimeoutError, OSError, http.client.HTTPException) as e:
            reason = f"no answer within {self._timeout:g}s" if isinstance(e, TimeoutError) else repr(e)
            raise QueryError(reason) from None
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise QueryError(f"response is not JSON: {body[:80]!r}") from None
        except RecursionError:  # arrays in arrays, deeper than the interpreter's stack
            raise QueryError(f"response nests too deep to decode ({len(body)} bytes)") from None
        if not isinstance(doc, dict):
            raise QueryError("response is not a JSON object")
        if doc.get("status") != "success":
            raise QueryError(
                f"status {doc.get('status')!r}: {doc.get('errorType', '')}: {doc.get('error', '')}"
            )
        data = doc.get("data")
        if (
            not isinstance(data, dict)
            or data.get("resultType") != "vector"
            or not isinstance(data.get("result"), list)
        ):
            kind = data.get("resultType") if isinstance(data, dict) else None
            raise QueryError(f"expected an instant vector, got resultType {kind!r}")
        return data["result"], self._clock()

    def _divisor(self, metric: str, result: list[Any]) -> float:
        """100 for a metric on the percent scale, else 1 (``auto`` decides from ``result``)."""
        if self._scale == AUTO and metric not in self._percent:
            for series in result:
                try:
                    value = float(series["value"][1])
                except (TypeError, ValueError, KeyError, IndexError):
                    continue
                if math.isfinite(value) and value > AUTO_PERCENT_ABOVE:
                    self._percent.add(metric)
                    logger.info(
                        "Reading a load metric as percent (a series is above 2)",
                        extra=kv(metric=metric, value=value),
                    )
                    break
        return 100.0 if self.scale_of(metric) == PERCENT else 1.0

    def _build_view(
        self, metric: str, result: list[Any], fetched_at: float
    ) -> tuple[MetricView, frozenset[str], list[str]]:
        by_key: dict[str, Sample] = {}
        invalid: set[str] = set()
        examples: list[str] = []
        eval_time = -math.inf
        divisor = self._divisor(metric, result)
        for series in result:
            key, sample = self._parse_series(series, fetched_at, divisor)
            if isinstance(sample, str):
                invalid.add(key)
                if len(examples) < 3:
                    examples.append(sample)
                continue
            eval_time = max(eval_time, sample.sample_time)
            old = by_key.get(key)
            if old is None or sample.value > old.value:
                by_key[key] = sample
        by_host: dict[str, Sample] = {}
        for key, sample in by_key.items():
            host = split_host_port(key)
            if host is not None:
                old = by_host.get(host)
                if old is None or sample.value > old.value:
                    by_host[host] = sample
        median = statistics.median(s.value for s in by_key.values()) if by_key else None
        if eval_time == -math.inf:  # nothing valid: the query still tells us "nothing" as of now
            eval_time = fetched_at
        view = MetricView(metric, by_key, by_host, eval_time, median)
        return view, frozenset(invalid), examples

    def _parse_series(self, series: Any, fetched_at: float, divisor: float = 1.0) -> tuple[str, Sample | str]:
        """The series' node key and its sample (the value divided by ``divisor``), or what is wrong."""
        labels = series.get("metric") if isinstance(series, dict) else None
        key = labels.get(self._node_label) if isinstance(labels, dict) else None
        if not isinstance(key, str) or not key:
            return (
                f"<no {self._node_label} label: {labels!r}>",
                f"a series has no {self._node_label!r} label: {labels!r}",
            )
        point = series.get("value")
        try:
            ts, raw = point
            value, sample_time = float(raw) / divisor, float(ts)
        except (TypeError, ValueError):
            return key, f"{key}: malformed value {point!r}"
        if not math.isfinite(sample_time):
            return key, f"{key}: malformed timestamp {ts!r}"
        if not 0.0 <= value <= 1.0:  # NaN fails this too
            scale = "a percentage 0..100" if divisor != 1.0 else "a fraction 0..1"
            return key, f"{key}={raw} is not {scale}"
        # A time ahead of ours (a skewed clock) counts as now: it must not keep the value fresh.
        return key, Sample(value, min(sample_time, fetched_at), fetched_at)

    def _report_invalid(self, metric: str, invalid: frozenset[str], examples: list[str]) -> None:
        self._metrics.invalid.labels(metric).set(len(invalid))
        before = self._invalid[metric]
        self._invalid[metric] = invalid
        if invalid - before:
            logger.warning(
                "Ignoring series that name no node or hold no usage on the metric's scale; "
                "those nodes have no data for this metric (see the Dynamic args' metricScale)",
                extra=kv(metric=metric, series=len(invalid), examples="; ".join(examples)),
            )
        elif before and not invalid:
            logger.info("All series of the metric are valid again", extra=kv(metric=metric))

    def _set_health(self, metric: str, ok: bool, reason: str) -> None:
        before = self._healthy[metric]
        self._healthy[metric] = ok
        self._metrics.up.set(1 if all(self._healthy.values()) else 0)
        if ok and before is False:
            logger.info("Prometheus queries succeed again", extra=kv(metric=metric))
        elif not ok and before is not False:
            logger.warning(
                "Prometheus query failed; keeping the last values until they go stale",
                extra=kv(metric=metric, url=self._query_url, reason=reason),
            )
        elif not ok:
            logger.log(V(4), "Prometheus query still failing", extra=kv(metric=metric, reason=reason))

    def _age_function(self, metric: str) -> Callable[[], float]:
        def age() -> float:
            return max(0.0, self._clock() - self._views[metric].sample_time)

        return age


def _read_until(response: Any, deadline: float, max_body: int) -> bytes:
    """The body, read by what has arrived (``read1``), not by full blocks: ``read(n)`` waits
    for n bytes, so a server dripping a byte a second would hold the query for as long as it
    likes, each byte within the socket timeout. Past ``deadline``, TimeoutError; past
    ``max_body`` bytes, QueryError."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = response.read1(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > max_body:
            raise QueryError(f"response larger than {max_body} bytes")
        if time.monotonic() > deadline:
            raise TimeoutError
        chunks.append(chunk)


def _error_detail(body: bytes) -> str:
    try:
        doc = json.loads(body)
        return f"{doc.get('errorType', '')}: {doc.get('error', '')}" if isinstance(doc, dict) else ""
    except (ValueError, UnicodeDecodeError, RecursionError):
        return body[:120].decode("utf-8", "replace").strip()
