"""The Dynamic plugin's view of each node on ``/metrics``, computed when scraped.

The filter and score read each node's load from the plugin's sources (Prometheus, crane's
annotations) with the policy's staleness rules; these gauges show that same view, so a
dashboard can say why a node is avoided without querying the sources itself:

- ``dynamic_scheduler_node_usage{profile,node,metric}``: the value the plugin uses (a
  fraction): the fresh sample plus the estimate of pods placed since (``estimate``); no
  series while a node has no fresh value of the metric;
- ``dynamic_scheduler_node_hot_value{profile,node}``: the hot value the score subtracts;
- ``dynamic_scheduler_node_rejected{profile,node}``: 1 when the filter rejects the node now.

Nothing is recorded on the scheduling path: a scrape computes the view of every node in the
cache (a few lookups per node and metric), one collector per registry for every profile.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric

USAGE = "dynamic_scheduler_node_usage"
HOT_VALUE = "dynamic_scheduler_node_hot_value"
REJECTED = "dynamic_scheduler_node_rejected"


class NodeViews(Protocol):
    def node_views(self) -> Iterator[tuple[str, dict[str, float], int, bool]]:
        """(node, fresh usage by metric, hot value, rejected) of every node."""
        ...


class NodeViewCollector:
    """One per registry; the plugins of every profile that has Dynamic report through it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._plugins: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()

    def add(self, profile: str, plugin: NodeViews) -> None:
        with self._lock:
            self._plugins[profile] = plugin

    def describe(self) -> list[Metric]:
        return list(self._families())

    def collect(self) -> Iterator[Metric]:
        usage, hot, rejected = self._families()
        with self._lock:
            plugins = sorted(self._plugins.items())
        for profile, plugin in plugins:
            for node, values, hot_value, is_rejected in plugin.node_views():
                for metric, value in values.items():
                    usage.add_metric([profile, node, metric], value)
                hot.add_metric([profile, node], hot_value)
                rejected.add_metric([profile, node], 1.0 if is_rejected else 0.0)
        yield from (usage, hot, rejected)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                USAGE,
                "The Dynamic plugin's value of a policy metric on a node (a fraction): the fresh "
                "sample plus its estimate of pods placed since; absent while the node has no sample.",
                labels=["profile", "node", "metric"],
            ),
            GaugeMetricFamily(
                HOT_VALUE,
                "The hot value the Dynamic score subtracts for a node (recent binds).",
                labels=["profile", "node"],
            ),
            GaugeMetricFamily(
                REJECTED,
                "1 when the Dynamic filter rejects the node now (a metric above its limit, or "
                "no fresh data under FailClosed), else 0.",
                labels=["profile", "node"],
            ),
        )


_collectors: weakref.WeakKeyDictionary[CollectorRegistry, NodeViewCollector] = weakref.WeakKeyDictionary()
_collectors_lock = threading.Lock()


def node_view_collector(registry: CollectorRegistry) -> NodeViewCollector:
    """The registry's collector, registered on first use."""
    with _collectors_lock:
        c = _collectors.get(registry)
        if c is None:
            c = _collectors[registry] = NodeViewCollector()
            registry.register(c)
        return c
