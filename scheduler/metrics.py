"""The scheduler's Prometheus metrics, named and labelled as kube-scheduler's.

Dashboards and alerts written for kube-scheduler (``pkg/scheduler/metrics``)
work unchanged: names, label sets, bucket boundaries and the ``[STABLE]`` /
``[BETA]`` / ``[ALPHA]`` prefix of each HELP text are kube-scheduler's.

Every metric lives on the ``CollectorRegistry`` of one :class:`Metrics`
object, so tests and several schedulers in one process do not collide.
The scheduling loop records through the small methods below; each caches its
labelled children, so a call on the hot path is a dict lookup plus the
increment.

Bind latency has no metric of its own: kube-scheduler dropped
``scheduler_binding_duration_seconds`` and records binding as
``scheduler_framework_extension_point_duration_seconds{extension_point="Bind"}``;
so do we. ``scheduler_plugin_execution_duration_seconds`` (sampled per
plugin in kube-scheduler) is not provided.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily, Metric

logger = logging.getLogger(__name__)

# Values of the ``result`` label.
SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"
RESULTS = (SCHEDULED, UNSCHEDULABLE, ERROR)

# Values of the ``queue`` label of scheduler_pending_pods.
PENDING_QUEUES = ("active", "backoff", "unschedulable", "gated")

# The attempts label of the SLI histogram is capped, as kube-scheduler's, to bound cardinality.
_MAX_ATTEMPTS_LABEL = 15


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    """Prometheus' ExponentialBuckets: ``start * factor**i`` for i in 0..count-1."""
    return [start * factor**i for i in range(count)]


class Metrics:
    """kube-scheduler's metrics on a registry of their own.

    ``Metrics()`` makes a new registry that also carries the process, platform
    and GC collectors (``process_cpu_seconds_total``,
    ``process_resident_memory_bytes``, ``python_info``, ...), as Go components
    export their process metrics. Pass ``registry`` to register on an existing
    one instead (nothing else is added to it).

    Counters and histograms have no ``*_created`` series (kube-scheduler's
    don't): the constructor turns prometheus_client's process-wide
    ``_created`` switch off.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        disable_created_metrics()
        if registry is None:
            registry = CollectorRegistry(auto_describe=True)
            ProcessCollector(registry=registry)
            PlatformCollector(registry=registry)
            GCCollector(registry=registry)
        self.registry = registry
        r = registry

        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts_total",
            "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=r,
        )
        self.scheduling_attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.scheduling_algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "[BETA] Scheduling algorithm latency in seconds",
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "[STABLE] Number of pending pods, by the queue type. 'active' means number of pods in "
            "activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of "
            "pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' "
            "is the number of unschedulable pods that the scheduler never attempted to schedule "
            "because they are gated.",
            ["queue"],
            registry=r,
        )
        self.pod_scheduling_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "[STABLE] Number of attempts to successfully schedule a pod.",
            buckets=exponential_buckets(1, 2, 5),
            registry=r,
        )
        self.pod_scheduling_sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "[BETA] E2e latency for a pod being scheduled, from the time the pod enters the "
            "scheduling queue and might involve multiple scheduling attempts.",
            ["attempts"],
            buckets=exponential_buckets(0.01, 2, 20),
            registry=r,
        )
        self.framework_extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "[STABLE] Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12),
            registry=r,
        )
        self.queue_incoming_pods = Counter(
            "scheduler_queue_incoming_pods_total",
            "[STABLE] Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            registry=r,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts_total",
            "[STABLE] Total preemption attempts in the cluster till now",
            registry=r,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "[STABLE] Number of selected preemption victims",
            buckets=exponential_buckets(1, 2, 7),
            registry=r,
        )
        # Set by the leader elector (scheduler.cluster.leaderelection), given it as its gauge.
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "[ALPHA] Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease. Please "
            "make sure to group by name.",
            ["name"],
            registry=r,
        )

        self.cache_sizes: Callable[[], Mapping[str, int]] | None = None
        """The scheduler cache's sizes by ``type`` (nodes, pods, assumed_pods), read when scraped
        (``scheduler_cache_size``; the App sets it to ``Cache.sizes``)."""
        r.register(_CacheSizeCollector(self))

        self._pending = {q: self.pending_pods.labels(q) for q in PENDING_QUEUES}
        self._attempt: dict[tuple[str, str], tuple[Callable[[], None], Callable[[float], None]]] = {}
        self._point: dict[tuple[str, str, str], Callable[[float], None]] = {}
        self._incoming: dict[tuple[str, str], Callable[[], None]] = {}
        self._sli: dict[int, Callable[[float], None]] = {}

    # --- one scheduling attempt ------------------------------------------------

    def schedule_attempt(self, result: str, profile: str, seconds: float) -> None:
        """Count one attempt and observe its latency (``result`` is one of :data:`RESULTS`)."""
        pair = self._attempt.get((result, profile))
        if pair is None:
            if result not in RESULTS:
                raise ValueError(f"result must be one of {', '.join(RESULTS)}, not {result!r}")
            pair = (
                self.schedule_attempts.labels(result, profile).inc,
                self.scheduling_attempt_duration.labels(result, profile).observe,
            )
            self._attempt[(result, profile)] = pair
        pair[0]()
        pair[1](seconds)

    def scheduling_algorithm(self, seconds: float) -> None:
        """Observe the algorithm of an attempt: from its start until a node is chosen or, when
        none fits, until PostFilter is done (kube-scheduler's ``schedulingAlgorithm``)."""
        self.scheduling_algorithm_duration.observe(seconds)

    def pod_bound(self, attempts: int, seconds_since_enqueued: float) -> None:
        """A pod was bound after ``attempts`` attempts: observes the attempts histogram
        and the SLI, ``seconds_since_enqueued`` since the pod first entered the active
        queue (kube's InitialAttemptTimestamp: time spent gated does not count)."""
        self.pod_scheduling_attempts.observe(attempts)
        key = min(attempts, _MAX_ATTEMPTS_LABEL)
        observe = self._sli.get(key)
        if observe is None:
            observe = self.pod_scheduling_sli_duration.labels(_attempts_label(key)).observe
            self._sli[key] = observe
        observe(seconds_since_enqueued)

    # --- framework ---------------------------------------------------------------

    def extension_point(self, extension_point: str, status: str, profile: str, seconds: float) -> None:
        """Observe one run of all plugins of an extension point.

        ``status`` is the framework's status code as kube-scheduler spells it:
        ``Success``, ``Error``, ``Unschedulable``, ``UnschedulableAndUnresolvable``,
        ``Skip``. Binding is ``extension_point="Bind"``.
        """
        observe = self._point.get((extension_point, status, profile))
        if observe is None:
            observe = self.framework_extension_point_duration.labels(extension_point, status, profile).observe
            self._point[(extension_point, status, profile)] = observe
        observe(seconds)

    def extension_point_observer(self, profile: str) -> Callable[[str, str, float], None]:
        """``observe(extension_point, status, seconds)`` for one profile."""

        def observe(extension_point: str, status: str, seconds: float) -> None:
            self.extension_point(extension_point, status, profile, seconds)

        return observe

    def preemption_attempt(self, victims: int | None) -> None:
        """One preemption attempt (``DefaultPreemption.PostFilter``); ``victims``: how many pods
        it chose to evict, None when it chose no node (the histogram counts only preemptions)."""
        self.preemption_attempts.inc()
        if victims is not None:
            self.preemption_victims.observe(victims)

    # --- queue ---------------------------------------------------------------------

    def set_pending_pods(self, counts: Mapping[str, int]) -> None:
        """Set the pending-pods gauges from ``{"active": n, "backoff": n, ...}``.

        Queues absent from ``counts`` keep their value; unknown queues are ignored."""
        for queue, n in counts.items():
            gauge = self._pending.get(queue)
            if gauge is not None:
                gauge.set(n)

    def pod_enqueued(self, queue: str, event: str) -> None:
        """A pod entered ``queue`` (active, backoff, unschedulable, gated) because of
        ``event`` (kube's names: PodAdd, ScheduleAttemptFailure, BackoffComplete,
        UnschedulableTimeout, NodeAdd, AssignedPodDelete, ...)."""
        inc = self._incoming.get((queue, event))
        if inc is None:
            inc = self.queue_incoming_pods.labels(queue, event).inc
            self._incoming[(queue, event)] = inc
        inc()


class _CacheSizeCollector:
    """``scheduler_cache_size{type}``, read from the cache when scraped (kube-scheduler's cache
    sets it every second, ``updateMetrics``)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "scheduler_cache_size",
            "[ALPHA] Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            labels=["type"],
        )

    def describe(self) -> list[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        sizes = self._metrics.cache_sizes
        if sizes is not None:
            for kind, n in sizes().items():
                family.add_metric([kind], n)
        yield family


def _attempts_label(attempts: int) -> str:
    return f"{_MAX_ATTEMPTS_LABEL}+" if attempts >= _MAX_ATTEMPTS_LABEL else str(attempts)
