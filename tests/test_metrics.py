"""The metrics as Prometheus sees them: scraped from the registry's text exposition."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.app import LoopMetrics
from scheduler.core.cache import Cache
from scheduler.core.eventhandlers import EventHandlers
from scheduler.core.framework import unschedulable
from scheduler.core.loop import BindOutcome, Scheduler
from scheduler.core.profile import Profile
from scheduler.core.queue import SchedulingQueue
from scheduler.metrics import ERROR, SCHEDULED, UNSCHEDULABLE, Metrics
from tests.core.util import node, pod


def scrape(m: Metrics) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(generate_latest(m.registry).decode())}


def value(m: Metrics, sample: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(sample, labels)


def bucket_bounds(m: Metrics, family: str) -> list[str]:
    fam = scrape(m)[family]
    first = None
    bounds = []
    for s in fam.samples:
        if s.name != family + "_bucket":
            continue
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        first = first or key
        if key == first:
            bounds.append(s.labels["le"])
    return bounds


def test_attempts_are_counted_and_timed_by_result_and_profile():
    m = Metrics()
    m.schedule_attempt(SCHEDULED, "default-scheduler", 0.003)
    m.schedule_attempt(SCHEDULED, "default-scheduler", 0.020)
    m.schedule_attempt(UNSCHEDULABLE, "default-scheduler", 0.5)
    m.schedule_attempt(ERROR, "dynamic", 0.001)

    assert value(m, "scheduler_schedule_attempts_total", result=SCHEDULED, profile="default-scheduler") == 2
    assert (
        value(m, "scheduler_schedule_attempts_total", result=UNSCHEDULABLE, profile="default-scheduler") == 1
    )
    assert value(m, "scheduler_schedule_attempts_total", result=ERROR, profile="dynamic") == 1
    hist = "scheduler_scheduling_attempt_duration_seconds"
    assert value(m, hist + "_count", result=SCHEDULED, profile="default-scheduler") == 2
    assert value(m, hist + "_sum", result=SCHEDULED, profile="default-scheduler") == pytest.approx(0.023)
    assert value(m, hist + "_bucket", result=SCHEDULED, profile="default-scheduler", le="0.004") == 1


def test_an_unknown_result_is_refused():
    m = Metrics()
    with pytest.raises(ValueError, match="result must be one of scheduled, unschedulable, error"):
        m.schedule_attempt("bound", "default-scheduler", 0.1)


def test_histograms_use_kube_schedulers_buckets():
    m = Metrics()
    m.schedule_attempt(SCHEDULED, "p", 0.01)
    m.scheduling_algorithm(0.01)
    m.extension_point("Filter", "Success", "p", 0.001)
    m.pod_bound(1, 0.5)
    m.preemption_attempt(2)

    assert bucket_bounds(m, "scheduler_scheduling_attempt_duration_seconds") == [
        "0.001",
        "0.002",
        "0.004",
        "0.008",
        "0.016",
        "0.032",
        "0.064",
        "0.128",
        "0.256",
        "0.512",
        "1.024",
        "2.048",
        "4.096",
        "8.192",
        "16.384",
        "+Inf",
    ]
    assert bucket_bounds(m, "scheduler_scheduling_algorithm_duration_seconds") == bucket_bounds(
        m, "scheduler_scheduling_attempt_duration_seconds"
    )
    assert bucket_bounds(m, "scheduler_framework_extension_point_duration_seconds") == [
        "0.0001",
        "0.0002",
        "0.0004",
        "0.0008",
        "0.0016",
        "0.0032",
        "0.0064",
        "0.0128",
        "0.0256",
        "0.0512",
        "0.1024",
        "0.2048",
        "+Inf",
    ]
    assert bucket_bounds(m, "scheduler_pod_scheduling_attempts") == [
        "1.0",
        "2.0",
        "4.0",
        "8.0",
        "16.0",
        "+Inf",
    ]
    sli = bucket_bounds(m, "scheduler_pod_scheduling_sli_duration_seconds")
    assert (sli[0], sli[-2], len(sli)) == ("0.01", "5242.88", 21)
    assert bucket_bounds(m, "scheduler_preemption_victims")[-2] == "64.0"


def test_bound_pods_record_attempts_and_the_sli_with_a_capped_attempts_label():
    m = Metrics()
    m.pod_bound(3, 1.5)
    m.pod_bound(20, 90.0)
    m.pod_bound(15, 60.0)

    assert value(m, "scheduler_pod_scheduling_attempts_count") == 3
    assert value(m, "scheduler_pod_scheduling_attempts_bucket", le="4.0") == 1
    sli = "scheduler_pod_scheduling_sli_duration_seconds"
    assert value(m, sli + "_count", attempts="3") == 1
    assert value(m, sli + "_count", attempts="15+") == 2
    assert value(m, sli + "_count", attempts="20") is None


def test_extension_points_are_timed_per_profile_and_status():
    m = Metrics()
    observe = m.extension_point_observer("dynamic")
    observe("Filter", "Success", 0.0003)
    observe("Filter", "Success", 0.0003)
    observe("Bind", "Error", 0.05)

    hist = "scheduler_framework_extension_point_duration_seconds_count"
    assert value(m, hist, extension_point="Filter", status="Success", profile="dynamic") == 2
    assert value(m, hist, extension_point="Bind", status="Error", profile="dynamic") == 1


class NotTooBig:
    """Rejects the pods labelled ``too-big``."""

    name = "NotTooBig"

    def filter(self, state, p, ni):
        return unschedulable("too big") if "too-big" in p.labels else None


class BindingIO:
    """Answers each bind with the next outcome; records the rest of what the loop asks."""

    def __init__(self, outcomes: list[BindOutcome]) -> None:
        self.outcomes = outcomes
        self.failures: list[str] = []

    def bind(self, p, node_name):
        return self.outcomes.pop(0), ""

    def scheduled(self, p, node_name, profile):
        pass

    def relaxed(self, p, node_name, profile, plugins, why):
        pass

    def unschedulable(self, p, message, profile, reason, nominated_node=""):
        self.failures.append(p.key)

    def preempt(self, preemption, profile, done):
        done(True)


@pytest.fixture
def loop() -> Iterator[tuple[Metrics, EventHandlers, SchedulingQueue, Scheduler, BindingIO]]:
    m = Metrics()
    cache, queue = Cache(), SchedulingQueue()
    prof = Profile("p", [NotTooBig()], filters=["NotTooBig"], observe=m.extension_point_observer("p"))
    io = BindingIO([BindOutcome.BOUND, BindOutcome.FAILED])
    sched = Scheduler(cache, queue, {"p": prof}, io, LoopMetrics(m), bind_workers=1)
    handlers = EventHandlers(cache, queue, {"p"})
    handlers.on_node_add(node("n1"))
    yield m, handlers, queue, sched, io
    queue.close()
    sched.shutdown(2)


def test_the_loop_times_the_algorithm_and_the_bind(loop):
    m, handlers, queue, sched, io = loop
    for name, labels in (("a", {}), ("b", {}), ("c", {"too-big": "1"})):
        handlers.on_pod_add(pod(name, scheduler="p", labels=labels))
    for _ in range(3):
        qp = queue.pop(timeout=1)
        assert qp is not None
        sched.schedule_one(qp)
    assert sched.wait_idle(5)

    # kube-scheduler's schedulingAlgorithm: every attempt, the one that found no node too
    assert value(m, "scheduler_scheduling_algorithm_duration_seconds_count") == 3
    point = "scheduler_framework_extension_point_duration_seconds_count"
    assert value(m, point, extension_point="Bind", status="Success", profile="p") == 1
    assert value(m, point, extension_point="Bind", status="Error", profile="p") == 1
    assert sorted(io.failures) == ["default/b", "default/c"]


def test_pending_pods_follow_the_queue_counts():
    m = Metrics()
    m.set_pending_pods({"active": 4, "backoff": 2, "unschedulable": 7, "gated": 0, "in-flight": 1})
    m.set_pending_pods({"active": 3})

    got = {
        q: value(m, "scheduler_pending_pods", queue=q)
        for q in ("active", "backoff", "unschedulable", "gated")
    }
    assert got == {"active": 3, "backoff": 2, "unschedulable": 7, "gated": 0}
    assert value(m, "scheduler_pending_pods", queue="in-flight") is None


def test_queue_events_are_counted_by_queue_and_event():
    m = Metrics()
    m.pod_enqueued("active", "PodAdd")
    m.pod_enqueued("active", "PodAdd")
    m.pod_enqueued("backoff", "ScheduleAttemptFailure")

    assert value(m, "scheduler_queue_incoming_pods_total", queue="active", event="PodAdd") == 2
    assert (
        value(m, "scheduler_queue_incoming_pods_total", queue="backoff", event="ScheduleAttemptFailure") == 1
    )


def test_each_instance_has_its_own_registry_with_process_metrics():
    a, b = Metrics(), Metrics()
    a.schedule_attempt(SCHEDULED, "p", 0.1)

    assert value(a, "scheduler_schedule_attempts_total", result=SCHEDULED, profile="p") == 1
    assert value(b, "scheduler_schedule_attempts_total", result=SCHEDULED, profile="p") is None
    text = generate_latest(b.registry).decode()
    assert "process_cpu_seconds_total" in text
    assert "process_resident_memory_bytes" in text
    assert "python_info{" in text


def test_an_existing_registry_gets_only_the_scheduler_metrics():
    registry = CollectorRegistry()
    m = Metrics(registry)
    m.schedule_attempt(SCHEDULED, "p", 0.1)

    text = generate_latest(registry).decode()
    assert "scheduler_schedule_attempts_total" in text
    assert "process_cpu_seconds_total" not in text


def test_exposition_reads_like_kube_scheduler():
    m = Metrics()
    m.schedule_attempt(SCHEDULED, "p", 0.1)
    m.pod_enqueued("active", "PodAdd")

    text = generate_latest(m.registry).decode()
    assert "# HELP scheduler_schedule_attempts_total [STABLE] Number of attempts to schedule pods" in text
    assert "# TYPE scheduler_pod_scheduling_sli_duration_seconds histogram" in text
    assert (
        "# HELP scheduler_scheduling_algorithm_duration_seconds [BETA] Scheduling algorithm latency" in text
    )
    assert "_created" not in text


def test_cache_size_is_read_from_the_cache_when_scraped():
    m = Metrics()
    assert "scheduler_cache_size{" not in generate_latest(m.registry).decode()  # no cache yet
    sizes = {"assumed_pods": 1, "pods": 7, "nodes": 3}
    m.cache_sizes = lambda: sizes
    text = generate_latest(m.registry).decode()
    assert "# HELP scheduler_cache_size [ALPHA] Number of nodes, pods, and assumed (bound) pods" in text
    assert 'scheduler_cache_size{type="pods"} 7.0' in text
    sizes["pods"] = 8
    assert 'scheduler_cache_size{type="pods"} 8.0' in generate_latest(m.registry).decode()
