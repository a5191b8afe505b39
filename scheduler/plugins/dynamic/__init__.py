"""crane-scheduler's load-aware ``Dynamic`` plugin, reading Prometheus directly.

- ``policy``: the ``DynamicSchedulerPolicy`` file (crane's format) and Go durations;
- ``source``: node load from Prometheus's HTTP API, refreshed in background threads;
- ``hotvalue``: recent placements per node, counted from this scheduler's own binds;
- ``plugin``: the ``Dynamic`` filter and score.
"""

from scheduler.plugins.dynamic.plugin import Dynamic

__all__ = ["Dynamic"]
