"""What a soak does and when: its settings, and the timeline of its disruptions."""

from __future__ import annotations

from dataclasses import dataclass

LEADER = "leader"
"""Delete the pod of our replica that holds the Lease."""
NODES = "nodes"
"""Add a kwok node, then drain and delete the oldest one."""
PROMETHEUS = "prometheus"
"""Delete Prometheus's pod (its Deployment starts a new one)."""


@dataclass(frozen=True)
class Settings:
    minutes: float = 120.0
    pods_per_second: float = 2.0
    pod_life_s: tuple[float, float] = (120.0, 360.0)
    """Each pod is deleted a uniformly drawn number of seconds after its creation."""
    nodes: int = 16
    node_every_s: float = 300.0
    leader_every_s: float = 600.0
    sample_every_s: float = 60.0
    warmup_s: float = 600.0
    """The leader's RSS after this is held against its RSS before (see ``report``)."""
    rss_growth_limit: float = 0.10
    pending_grace_s: float = 60.0
    """A pod Pending longer than this while a node has room for it counts against the soak."""
    seed: int = 1

    def __post_init__(self) -> None:
        checks = {
            "minutes": self.minutes > 0,
            "pods_per_second": self.pods_per_second > 0,
            "pod_life_s": 0 < self.pod_life_s[0] <= self.pod_life_s[1],
            "nodes": self.nodes >= 2,
            "node_every_s": self.node_every_s > 0,
            "leader_every_s": self.leader_every_s > 0,
            "sample_every_s": self.sample_every_s > 0,
            "warmup_s": self.warmup_s >= 0,
            "rss_growth_limit": self.rss_growth_limit >= 0,
            "pending_grace_s": self.pending_grace_s >= 0,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            values = ", ".join(f"{name}={getattr(self, name)!r}" for name in bad)
            raise ValueError(f"soak settings out of range: {values}")

    @property
    def seconds(self) -> float:
        return self.minutes * 60.0


def disruptions(s: Settings) -> list[tuple[float, str]]:
    """(seconds since the start, what) in time order: the leader deleted every
    ``leader_every_s``; a node turn every ``node_every_s``, half a period off (so that it never
    falls on a leader's deletion when one period divides the other); Prometheus restarted once,
    halfway between the two leader deletions nearest the middle."""
    out: list[tuple[float, str]] = []
    for every, offset, what in ((s.node_every_s, s.node_every_s / 2, NODES), (s.leader_every_s, 0.0, LEADER)):
        t = every - offset
        while t < s.seconds:
            out.append((t, what))
            t += every
    middle = s.seconds / 2
    at = (middle // s.leader_every_s) * s.leader_every_s + s.leader_every_s / 2
    if at >= s.seconds:
        at = middle
    out.append((at, PROMETHEUS))
    return sorted(out)
