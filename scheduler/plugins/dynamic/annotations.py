"""Node load from crane-scheduler-controller's node annotations (crane's own data path).

crane-scheduler-controller queries Prometheus (dividing crane's percent series
by 100) and writes, on each Node, one annotation per policy metric, named after
the metric, and ``node_hot_value``::

    cpu_usage_avg_5m: "0.30000,2026-12-01T17:04:05Z"
    node_hot_value:   "2,2026-12-01T17:04:05Z"

The value is a fraction 0..1 (the hot value a count), then the time it was
written. The time ends in a literal ``Z`` but is the controller's *local* time
in the zone of its ``TZ`` (crane's default ``Asia/Shanghai``), and crane's
scheduler reads it in the zone of its own ``TZ`` (same default): read as UTC,
every annotation would live 8 hours too long. ``time_zone`` is that zone.

Crane's rules (``pkg/plugins/dynamic/stats.go``), kept as they are:

- a metric's annotation is fresh while now is before its time plus the metric's
  ``syncPolicy`` period plus 5 minutes (``ExtraActivePeriod``: the plugin's
  ``staleGrace``, whose default it is); a metric without a ``syncPolicy`` period
  never is;
- ``node_hot_value`` is fresh for 5 minutes;
- a value that is not ``<number>,<time>``, has a malformed time, or is negative
  is no data (so are NaN and infinities, which crane would let through);
- a time ahead of this scheduler's clock counts as the moment the value was
  first read (crane would keep it fresh until that future time has passed).

What the plugin then does with missing data is its own (``missingDataPolicy``,
the median for scores; see ``plugin``). Values are parsed once per Node object
(kept in ``NodeInfo.node_memo``, which the cache clears when the Node changes),
and the cluster-wide medians at most every ``median_refresh`` seconds.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from scheduler.plugins.dynamic.samples import Sample

logger = logging.getLogger(__name__)

CRANE_TIME_ZONE = "Asia/Shanghai"
"""crane-scheduler's ``DefaultTimeZone``, used when ``TZ`` is not set."""
CRANE_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
"""Go's ``2006-01-02T15:04:05Z``, the ``Z`` a literal."""
HOT_VALUE_KEY = "node_hot_value"
HOT_VALUE_ACTIVE_PERIOD = 300.0
MIN_TIMESTAMP_LENGTH = 5
MEDIAN_REFRESH = 5.0
_MEMO = "Dynamic/annotations"


def time_zone(name: str) -> ZoneInfo:
    """The zone called ``name``; ValueError naming it when it is unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f'unknown time zone "{name}" (an IANA name like "Asia/Shanghai" or "UTC")') from None


def parse_annotation(text: str, zone: ZoneInfo) -> tuple[float, float] | None:
    """``"<value>,<time>"`` as (value, epoch seconds), or None when crane would not use it."""
    parts = text.split(",")
    if len(parts) != 2 or len(parts[1]) < MIN_TIMESTAMP_LENGTH:
        return None
    try:
        written = datetime.strptime(parts[1], CRANE_TIME_FORMAT).replace(tzinfo=zone).timestamp()
        value = float(parts[0])
    except ValueError:
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return value, written


class AnnotationSource:
    """The policy metrics (and the hot value) as crane's annotations on the cached Nodes.

    ``periods``: each metric's ``syncPolicy`` period (seconds); metrics without one are
    never fresh. ``snapshot`` lists the NodeInfos (the scheduler's cache)."""

    def __init__(
        self,
        snapshot: Any,
        periods: Mapping[str, float],
        *,
        zone: ZoneInfo,
        grace: float = 300.0,
        clock: Callable[[], float] = time.time,
        median_refresh: float = MEDIAN_REFRESH,
    ) -> None:
        self._snapshot = snapshot
        self._periods = dict(periods)
        self._grace = grace
        self._keys = (*self._periods, HOT_VALUE_KEY)
        self._zone = zone
        self._clock = clock
        self._median_refresh = median_refresh
        self._medians: dict[str, float | None] = {}
        self._medians_at = -math.inf
        self.generation = 0
        """Bumped whenever the medians are recomputed."""

    def start(self) -> None:
        """Nothing runs in the background: the Nodes come with the scheduler's own watch."""

    def stop(self) -> None:
        return None

    # --- per node ---

    def _parsed(self, node: Any) -> dict[str, tuple[float, float] | None]:
        memo = node.node_memo.get(_MEMO)
        if memo is None:
            annotations = ((node.node or {}).get("metadata") or {}).get("annotations") or {}
            memo = {}
            now = self._clock()
            for key in self._keys:
                text = annotations.get(key)
                got = parse_annotation(text, self._zone) if isinstance(text, str) else None
                # A time ahead of ours counts as the time we first read it: not fresh for ever.
                memo[key] = None if got is None else (got[0], min(got[1], now))
            node.node_memo[_MEMO] = memo
        return memo

    def sample(self, metric: str, node: Any) -> Sample | None:
        """The node's annotation of ``metric``, its time being the time it was written
        (the plugin's freshness rule is crane's: that time + period + 5m)."""
        if metric not in self._periods:
            return None
        got = self._parsed(node).get(metric)
        return None if got is None else Sample(got[0], got[1], got[1])

    def hot_value(self, node: Any, now: float | None = None) -> int | None:
        """The node's fresh ``node_hot_value`` (crane: 5 minutes), or None."""
        got = self._parsed(node).get(HOT_VALUE_KEY)
        if got is None:
            return None
        at = self._clock() if now is None else now
        return int(got[0]) if at < got[1] + HOT_VALUE_ACTIVE_PERIOD else None

    # --- across the cluster ---

    def current_generation(self) -> int:
        """The generation, after recomputing the medians if they are older than ``median_refresh``."""
        now = self._clock()
        if now - self._medians_at >= self._median_refresh:
            self._refresh_medians(now)
        return self.generation

    def median(self, metric: str) -> tuple[float | None, float]:
        """The median of the fresh annotations of ``metric``, and when it was computed."""
        return self._medians.get(metric), self._medians_at

    def _refresh_medians(self, now: float) -> None:
        values: dict[str, list[float]] = {m: [] for m in self._periods}
        for ni in self._snapshot.list():
            parsed = self._parsed(ni)
            for metric, period in self._periods.items():
                got = parsed.get(metric)
                if got is not None and now < got[1] + period + self._grace:
                    values[metric].append(got[0])
        medians = {m: (statistics.median(v) if v else None) for m, v in values.items()}
        self._medians_at = now
        if medians != self._medians:
            self._medians = medians
            self.generation += 1
