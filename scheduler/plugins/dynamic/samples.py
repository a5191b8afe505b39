"""What a Prometheus query leaves for scheduling: one :class:`Sample` per node, in a :class:`MetricView`.

A view is built whole by each successful query and never changed, so the
scheduling path reads it without a lock. Nodes are found by the series'
node label: the node's name, its InternalIP, or either with a port
(``10.0.0.1:9100``, as node-exporter's ``instance`` label has it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Sample:
    value: float
    """A fraction 0..1."""
    sample_time: float
    """The timestamp Prometheus gave the value (epoch seconds): for an instant query, its
    evaluation time; Prometheus itself drops series not updated within its lookback (5m)."""
    fetched_at: float
    """When this process received it (epoch seconds)."""


def split_host_port(key: str) -> str | None:
    """The host of ``"10.0.0.1:9100"`` / ``"[fd00::1]:9100"`` / ``"node-a:9100"``; None without a port."""
    if key.startswith("["):
        host, sep, port = key[1:].partition("]:")
    else:
        host, sep, port = key.rpartition(":")
        if ":" in host:  # a bare IPv6 address, no port
            return None
    return host if sep and host and port.isdigit() else None


@dataclass(frozen=True, slots=True)
class MetricView:
    """One metric's latest successful query. Never mutated: a refresh builds a new one."""

    metric: str
    by_key: Mapping[str, Sample] = field(default_factory=dict)
    """node_label value -> sample (the highest value when several series share the value)."""
    by_host: Mapping[str, Sample] = field(default_factory=dict)
    """Host part of ``host:port`` label values -> sample (highest value)."""
    sample_time: float = -math.inf
    """The query's evaluation time; -inf before the first success."""
    median: float | None = None
    """Median of the values across all series, None when there are none."""

    def lookup(self, node_name: str, internal_ip: str) -> Sample | None:
        """The node's sample: label equal to the node name, its InternalIP, or ``IP:port``
        (or ``name:port``), in that order of preference."""
        s = self.by_key.get(node_name)
        if s is None and internal_ip:
            s = self.by_key.get(internal_ip) or self.by_host.get(internal_ip)
        if s is None:
            s = self.by_host.get(node_name)
        return s
