"""Hot value: placements per node within each rule's window, from Reserve/Unreserve/PostBind."""

from __future__ import annotations

import threading

from scheduler.plugins.dynamic.hotvalue import HotValueTracker
from scheduler.plugins.dynamic.policy import HotValuePolicy

from .clocks import ManualClock

CRANE_RULES = (HotValuePolicy(300.0, 5), HotValuePolicy(60.0, 2))


def expected_hot(ages: list[float], rules: tuple[HotValuePolicy, ...] = CRANE_RULES) -> int:
    """crane's formula: Σ over rules of floor(placements younger than timeRange / count)."""
    return sum(sum(1 for a in ages if a < r.time_range) // r.count for r in rules)


def test_five_binds_in_the_last_minute_give_three_with_cranes_default_rules() -> None:
    clock = ManualClock()
    hot = HotValueTracker(CRANE_RULES, clock=clock)
    for i in range(5):
        hot.record(f"pod-{i}", "node-a")
        clock.advance(1)
    ages = [5.0, 4.0, 3.0, 2.0, 1.0]
    assert expected_hot(ages) == 1 + 2
    assert hot.value("node-a") == expected_hot(ages)
    assert hot.value("node-b") == 0
    assert hot.values() == {"node-a": 3}


def test_placements_leave_each_window_as_it_passes() -> None:
    clock = ManualClock()
    hot = HotValueTracker(CRANE_RULES, clock=clock)
    for i in range(6):
        hot.record(f"early-{i}", "node-a")
    clock.advance(50)
    for i in range(3):
        hot.record(f"late-{i}", "node-a")
    ages = [50.0] * 6 + [0.0] * 3
    assert hot.value("node-a") == expected_hot(ages) == 9 // 5 + 9 // 2

    clock.advance(15)  # the early six are 65 s old: out of the 1m window, inside 5m
    ages = [65.0] * 6 + [15.0] * 3
    assert hot.value("node-a") == expected_hot(ages) == 9 // 5 + 3 // 2

    clock.advance(240)  # 305 s and 255 s old
    assert hot.value("node-a") == expected_hot([305.0] * 6 + [255.0] * 3) == 0
    assert hot.values() == {}


def test_records_past_the_longest_window_are_pruned() -> None:
    clock = ManualClock()
    hot = HotValueTracker(CRANE_RULES, clock=clock)
    for i in range(100):
        hot.record(f"pod-{i}", f"node-{i % 7}")
    assert len(hot) == 100
    clock.advance(301)
    hot.record("new", "node-0")
    assert len(hot) == 1
    assert hot.values() == {}  # one placement is below every count


def test_memory_is_capped_at_max_records_oldest_first() -> None:
    clock = ManualClock()
    hot = HotValueTracker((HotValuePolicy(300.0, 1),), clock=clock, max_records=10)
    for i in range(25):
        hot.record(f"pod-{i}", "node-a")
        clock.advance(0.001)
    assert len(hot) == 10
    assert hot.value("node-a") == 10


def test_unreserve_forgets_and_a_second_reserve_moves_the_pod() -> None:
    clock = ManualClock()
    rules = (HotValuePolicy(60.0, 1),)
    hot = HotValueTracker(rules, clock=clock)
    hot.record("p1", "node-a")
    hot.record("p2", "node-a")
    hot.forget("p1")
    assert hot.values() == {"node-a": 1}
    hot.record("p2", "node-b")
    assert hot.values() == {"node-b": 1}
    hot.forget("unknown")
    assert hot.values() == {"node-b": 1}


def test_post_bind_confirms_without_double_counting() -> None:
    clock = ManualClock()
    hot = HotValueTracker((HotValuePolicy(60.0, 1),), clock=clock)
    hot.record("p1", "node-a")
    hot.confirm("p1", "node-a")
    assert hot.value("node-a") == 1
    hot.confirm("p2", "node-b")  # bound without a reserve seen here: counted from now
    assert hot.values() == {"node-a": 1, "node-b": 1}


def test_no_rules_means_no_records_and_zero() -> None:
    hot = HotValueTracker(())
    hot.record("p1", "node-a")
    assert len(hot) == 0
    assert hot.value("node-a") == 0
    assert hot.values() == {}


def test_concurrent_reserve_unreserve_and_bind_keep_exact_counts() -> None:
    clock = ManualClock()
    hot = HotValueTracker((HotValuePolicy(60.0, 1),), clock=clock)
    threads = 8
    per_thread = 500
    start = threading.Barrier(threads)

    def work(t: int) -> None:
        start.wait(timeout=10)
        for i in range(per_thread):
            uid = f"t{t}-p{i}"
            hot.record(uid, f"node-{i % 4}")
            if i % 2:
                hot.forget(uid)
            else:
                hot.confirm(uid, f"node-{i % 4}")
            hot.values()

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
        assert not w.is_alive()
    # even i are kept; i % 4 is 0 or 2 for even i, each half of them
    kept_per_node = threads * per_thread // 4
    assert hot.values() == {"node-0": kept_per_node, "node-2": kept_per_node}
    assert len(hot) == threads * per_thread // 2
