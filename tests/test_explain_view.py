"""scheduler.explain.view.seed_placements: the hot value rebuilt from the pods' PodScheduled times."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scheduler.explain.view import seed_placements


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float]] = []

    def note_bound(self, uid: str, node: str, ago: float = 0.0) -> None:
        self.calls.append((uid, node, ago))


def pod(uid: str, node: str, scheduled: str | None, status: str = "True") -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T00:00:00Z"}]
    if scheduled:
        conditions.append({"type": "PodScheduled", "status": status, "lastTransitionTime": scheduled})
    return {
        "metadata": {"uid": uid},
        "spec": {"nodeName": node} if node else {},
        "status": {"conditions": conditions},
    }


def test_each_bound_pod_is_told_with_how_long_ago_it_was_scheduled():
    now = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC).timestamp()
    r = Recorder()
    pods = [
        pod("a", "n1", "2026-12-01T11:59:30Z"),
        pod("b", "n2", "2026-12-01T11:00:00Z"),
        pod("pending", "", None),
        pod("no-condition", "n1", None),
        pod("not-scheduled", "n1", "2026-12-01T11:59:00Z", status="False"),
        pod("future", "n3", "2026-12-01T12:00:05Z"),  # clocks disagree: not in the future
    ]
    assert seed_placements(r, pods, now=now) == 3
    assert r.calls == [("a", "n1", 30.0), ("b", "n2", 3600.0), ("future", "n3", 0.0)]
