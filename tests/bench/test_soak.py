"""bench.soak's logic: its timeline, what it reads from crictl and /metrics, room for a Pending
pod, the leader's RSS growth and the goals."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from bench.soak import plan, report
from bench.soak.churn import NODE_ALLOCATABLE, SHAPES, soak_pod
from bench.soak.sample import KUBE_SCHEDULER, container_stats, fits_somewhere, free_room, pending_queues


def test_the_default_timeline_deletes_the_leader_every_ten_minutes_and_restarts_prometheus_once() -> None:
    s = plan.Settings()
    events = plan.disruptions(s)
    leaders = [t for t, what in events if what == plan.LEADER]
    turns = [t for t, what in events if what == plan.NODES]
    prometheus = [t for t, what in events if what == plan.PROMETHEUS]
    assert leaders == [600.0 * k for k in range(1, 12)]
    assert turns == [150.0 + 300.0 * k for k in range(24)]
    assert len(prometheus) == 1 and abs(prometheus[0] - s.seconds / 2) <= s.leader_every_s
    assert len({t for t, _ in events}) == len(events), "two disruptions at the same moment"
    assert [t for t, _ in events] == sorted(t for t, _ in events)
    assert all(0 < t < s.seconds for t, _ in events)


def test_a_short_soak_still_restarts_prometheus_within_it() -> None:
    s = plan.Settings(minutes=3, leader_every_s=600)
    assert plan.disruptions(s) == [(90.0, plan.PROMETHEUS), (150.0, plan.NODES)]


def test_settings_out_of_range_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"nodes=1\b.*pod_life_s=\(5, 1\)|pod_life_s=\(5, 1\).*nodes=1\b"):
        plan.Settings(nodes=1, pod_life_s=(5, 1))


def test_soak_pods_are_drawn_from_the_shapes_and_repeat_with_the_seed() -> None:
    a = [soak_pod(f"p{i}", random.Random(3)) for i in range(5)]
    b = [soak_pod(f"p{i}", random.Random(3)) for i in range(5)]
    assert a == b
    rng = random.Random(1)
    seen = {
        tuple(soak_pod("p", rng)["spec"]["containers"][0]["resources"]["requests"].values())
        for _ in range(200)
    }
    assert seen == set(SHAPES)


CRICTL = {
    "stats": [
        {
            "attributes": {
                "id": "a1",
                "labels": {"io.kubernetes.container.name": "scheduler", "io.kubernetes.pod.name": "ds-1"},
            },
            "cpu": {"usageCoreNanoSeconds": {"value": "2500000000"}},
            "memory": {"rssBytes": {"value": str(120 * 2**20)}, "workingSetBytes": {"value": "1"}},
        },
        {  # another container of the namespace
            "attributes": {
                "id": "b2",
                "labels": {"io.kubernetes.container.name": "prometheus", "io.kubernetes.pod.name": "prom-1"},
            },
            "cpu": {"usageCoreNanoSeconds": {"value": "1"}},
            "memory": {"rssBytes": {"value": "1"}},
        },
        {  # a container just started: no memory figures yet
            "attributes": {
                "id": "c3",
                "labels": {"io.kubernetes.container.name": "scheduler", "io.kubernetes.pod.name": "ds-2"},
            },
            "cpu": {"usageCoreNanoSeconds": {"value": "7"}},
            "memory": {},
        },
    ]
}


def test_container_stats_reads_rss_and_cpu_of_the_scheduler_containers_only() -> None:
    assert container_stats(json.dumps(CRICTL)) == {"ds-1": (120 * 2**20, 2_500_000_000)}


def test_pending_queues_reads_each_queue_of_scheduler_pending_pods() -> None:
    text = "\n".join(
        [
            "# HELP scheduler_pending_pods Number of pending pods",
            'scheduler_pending_pods{queue="active"} 3.0',
            'scheduler_pending_pods{queue="backoff"} 0.0',
            'scheduler_pending_pods{queue="unschedulable"} 12.0',
            'scheduler_pending_pods_other{queue="active"} 99.0',
        ]
    )
    assert pending_queues(text) == {"active": 3.0, "backoff": 0.0, "unschedulable": 12.0}


def pod(node: str | None, cpu: str, memory: str = "1Gi", phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            **({"nodeName": node} if node else {}),
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        },
        "status": {"phase": phase},
    }


def test_free_room_subtracts_what_bound_pods_hold_and_ignores_finished_and_foreign_ones() -> None:
    alloc = (4000, 8 * 2**30, 3)
    pods = [
        pod("a", "3"),
        pod("a", "2", phase="Succeeded"),  # holds nothing
        pod("b", "1", memory="7Gi"),
        pod("elsewhere", "1"),
        pod(None, "1"),
    ]
    free = free_room(pods, alloc, ["a", "b", "c"])
    assert free == {"a": (1000, 7 * 2**30, 2), "b": (3000, 2**30, 2), "c": alloc}
    assert fits_somewhere((1000, 2**30), free) == "a"
    assert fits_somewhere((2000, 2**30), free) == "b"
    assert fits_somewhere((5000, 2**30), free) is None
    assert fits_somewhere((100, 1), {"full": (4000, 2**30, 0)}) is None  # no pod slot left


def sample(t: float, leader: str, rss: dict[str, float | None], stuck: int = 0) -> dict[str, Any]:
    return {
        "t": t,
        "leader": leader,
        "replicas": {n: {"rss_mib": v, "cpu_cores": 0.1, "restarts": 0} for n, v in rss.items()},
        "queues": {"active": 0.0},
        "pending": stuck,
        "pending_with_room": [{"pod": f"p{i}"} for i in range(stuck)],
    }


def test_rss_growth_follows_whichever_replica_leads_and_skips_kube_scheduler() -> None:
    samples = [
        sample(60, "a", {"a": 100.0, "b": 90.0}),
        sample(540, "a", {"a": 120.0, "b": 95.0}),
        sample(660, KUBE_SCHEDULER, {"b": 500.0}),  # not ours: not counted
        sample(720, "b", {"b": 118.0, "c": 60.0}),
        sample(4320, "c", {"c": 126.0}),
    ]
    g = report.rss_growth(samples, warmup_s=600)
    assert g["warmup_peak_mib"] == 120.0 and g["after_peak_mib"] == 126.0
    assert g["ratio"] == pytest.approx(1.05)
    assert g["slope_mib_per_hour"] == pytest.approx(8 / 1.0, rel=1e-6)  # 8 MiB over 3600 s


def doc(samples: list[dict[str, Any]], **pods: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "minutes": samples[-1]["t"] / 60,
        "settings": {"warmup_s": 600.0, "rss_growth_limit": 0.10, "pending_grace_s": 60.0},
        "samples": samples,
        "restarts": 0,
        "pods": {
            "bound_twice": [],
            "reported_twice": [],
            "unreported": 0,
            "overcommits": [],
            "pending_at_end": [],
            **pods,
        },
    }
    d["rss"] = report.rss_growth(samples, 600.0)
    return d


def missed(d: dict[str, Any]) -> list[str]:
    return [g["goal"] for g in report.goals(d) if not g["met"]]


def test_goals_are_met_by_a_clean_long_soak_and_each_fails_on_its_own() -> None:
    clean = [sample(t, "a", {"a": 100.0 + t / 1000}) for t in range(60, 7261, 600)]
    assert missed(doc(clean)) == []
    short = [sample(t, "a", {"a": 100.0}) for t in (60, 600, 1200)]
    assert missed(doc(short)) == ["ours leading for at least 2 hours under churn"]
    leak = [*clean, sample(7300, "a", {"a": 112.0})]
    assert missed(doc(leak)) == [
        "the leader's RSS after the first 10 minutes at most 10% above its peak in them"
    ]
    stuck = [*clean[:-1], sample(7260, "a", {"a": 100.0}, stuck=1)]
    assert missed(doc(stuck)) == ["no pod Pending longer than 60 s while a node has room for it"]
    for key, value, goal in (
        ("bound_twice", ["p"], "every pod bound at most once (one nodeName, at most one Scheduled event)"),
        ("reported_twice", ["p"], "every pod bound at most once (one nodeName, at most one Scheduled event)"),
        ("unreported", 1, "every bind reported (a Scheduled event)"),
        ("overcommits", ["n: requests"], "every pod bound where it fits"),
        ("pending_at_end", ["p"], "no pod left Pending at the end"),
    ):
        assert missed(doc(clean, **{key: value})) == [goal], key
    restarted = doc(clean)
    restarted["restarts"] = 1
    assert missed(restarted) == ["no restart of ours beyond the soak's deletions"]


def test_the_report_is_written_with_its_chart(tmp_path: Path) -> None:
    samples = [sample(t, "a", {"a": 100.0, "b": 90.0}) for t in (60, 120, 180)]
    d = doc(samples)
    d.update(
        started="2026-12-06T00:00:00Z",
        image="dynamic-scheduler:dev",
        machine={"cpu_model": "cpu", "cores": 2},
        failovers=[{"t": 100.0, "gap_s": 17.5}],
        disruptions=[{"t": 100.0, "what": plan.LEADER, "detail": "deleted a"}],
    )
    d["settings"].update(asdict_defaults())
    d["pods"].update(created=10, bound=10, by_kube_scheduler=0, deleted=5, drained=0, create_failed=0)
    d["goals"] = report.goals(d)
    paths = report.write(d, tmp_path)
    assert json.loads(paths["json"].read_text())["goals"] == d["goals"]
    md = paths["md"].read_text()
    assert "| ours leading for at least 2 hours under churn | 3.000 minutes | **no** |" in md
    assert "after each: 17.5 to 17.5 s" in md
    # every sample is in the warm-up: nothing to hold the leader's RSS against
    assert (
        "| the leader's RSS after the first 10 minutes at most 10% above its peak in them | – ratio | **no** |"
        in md
    )
    assert paths["png"].stat().st_size > 10_000


def asdict_defaults() -> dict[str, Any]:
    from dataclasses import asdict

    return {k: v for k, v in asdict(plan.Settings()).items() if k not in ("warmup_s", "rss_growth_limit")}


def test_the_longest_gap_after_a_deletion_counts_the_wait_for_the_first_bind() -> None:
    binds = [1.0, 2.0, 10.5, 11.0, 30.0, 200.0]
    assert report.longest_gap(binds, 5.0, 60.0) == 19.0  # 11.0 -> 30.0
    assert report.longest_gap(binds, 2.5, 20.0) == 8.0  # 2.5 -> 10.5, then 11.0
    assert report.longest_gap(binds, 31.0, 60.0) is None  # no bind in the window
    assert report.longest_gap(binds, 2.0, 0.0) == 0.0  # a bind at the deletion itself


def test_node_allocatable_is_the_kwok_nodes() -> None:
    assert NODE_ALLOCATABLE == (32000, 256 * 2**30, 110)
