"""Load the metrics cannot show yet: pods placed on a node since its samples were taken.

A node's sample says how loaded it was when Prometheus last evaluated the policy's rules,
and those rules average over a window (crane's ``cpu_usage_avg_5m``: five minutes) of
scrapes that are themselves some seconds old. A pod placed on the node a minute ago is not in
that number at all, and one placed three minutes ago only in part, so a burst of pods all see
the same idle node (volcano#2426, koordinator#1327). Here each such pod counts at an estimate
of its usage, for the part of it the sample cannot contain yet:

    unseen(pod) = estimate(pod) × (1 − clamp((sample time − lag − placed) / window, 0, 1))

``lag`` is how old the data behind a fresh evaluation is (scrape interval, rule interval),
``window`` the metric's averaging window (``metricWindows``, else ``metricsWindow``): a pod placed
after ``sample time − lag`` counts in full, one placed a window before that not at all, and
linearly in between, as a running average takes it in. The node's usage of a metric is then its
sample plus Σ unseen / allocatable.

estimate(pod), per resource: the sum over its long-running containers (regular and restartable
init containers) of request × factor, each capped by the container's limit; where a pod
requests nothing of the resource, a default (koordinator's estimator is the anchor: factors 85%
cpu and 70% memory, 250m / 200Mi for a pod without requests; it takes max(request, limit) where
this takes the request, as a limit far above the request says little of typical use).

When a pod was placed: this scheduler's Reserve time for its own placements; else the
``PodScheduled`` condition's transition time, which the API server sets when it binds the pod
(``BindingREST.setPodNodeAndMetadata``), so pods placed by another scheduler or before a
failover count too; else the pod's start or creation time.

Which resource a metric measures: ``metricResources`` of the args, else ``cpu`` when its name
contains "cpu", ``memory`` when it contains "mem"; a metric of neither gets no estimate.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.config.pluginargs import DynamicEstimatorArgs
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo, parse_time
from scheduler.core.resources import CPU, MEMORY, int_value, milli_value

PLACED = ("Dynamic", "placed")
"""``PodInfo.memo`` key: when this scheduler reserved the pod on its node (epoch seconds)."""
_ESTIMATE = ("Dynamic", "estimate")
_RECENT = ("Dynamic", "recent")


def metric_resource(metric: str, overrides: Mapping[str, str]) -> str | None:
    """The resource a policy metric measures: the override, else by its name; None: no estimate."""
    if metric in overrides:
        return overrides[metric]
    name = metric.lower()
    if "cpu" in name:
        return CPU
    if "mem" in name:
        return MEMORY
    return None


def placed_at(pod: PodInfo) -> float:
    """When the pod was placed on its node (epoch seconds); see the module doc."""
    when = pod.memo.get(PLACED)
    if when is not None:
        return float(when)
    status = pod.pod.get("status") or {}
    for c in status.get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "True" and c.get("lastTransitionTime"):
            return parse_time(c["lastTransitionTime"])
    return parse_time(status.get("startTime")) or pod.created


@dataclass(frozen=True, slots=True)
class Recent:
    """Pods on one node that may be unseen, sorted by placement time."""

    placed: tuple[float, ...]
    milli_cpu: tuple[int, ...]
    memory: tuple[int, ...]


_NONE = Recent((), (), ())


class Estimator:
    """The usage of pods the samples do not contain yet (see the module doc)."""

    def __init__(self, args: DynamicEstimatorArgs, metrics: tuple[str, ...]) -> None:
        self.lag = args.metrics_lag
        self.windows = {m: args.metric_windows.get(m, args.metrics_window) for m in metrics}
        """Each metric's averaging window: its own in ``metric_windows``, else ``metrics_window``."""
        self.window = max(self.windows.values(), default=args.metrics_window)
        """The longest of them: how far back a pod may still be unseen by some metric."""
        self._cpu_factor = args.cpu_scaling_factor / 100.0
        self._memory_factor = args.memory_scaling_factor / 100.0
        self._default_milli_cpu = milli_value(args.default_cpu)
        self._default_memory = int_value(args.default_memory)
        self.resources: dict[str, str] = {}
        """metric -> cpu | memory, for the metrics that get an estimate."""
        for m in metrics:
            r = metric_resource(m, args.metric_resources)
            if r is not None:
                self.resources[m] = r

    def pod_estimate(self, pod: PodInfo) -> tuple[int, int]:
        """(milli-CPU, memory bytes) the pod is expected to use (memoized on the pod)."""
        est = pod.memo.get(_ESTIMATE)
        if est is None:
            est = pod.memo[_ESTIMATE] = self._estimate(pod.spec)
        return est

    def _estimate(self, spec: dict[str, Any]) -> tuple[int, int]:
        containers = list(spec.get("containers") or ())
        containers += [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
        cpu = memory = 0.0
        for c in containers:
            res = c.get("resources") or {}
            cpu += self._part(res, CPU, milli_value, self._cpu_factor)
            memory += self._part(res, MEMORY, int_value, self._memory_factor)
        pod_level = spec.get("resources") or {}
        if (pod_level.get("requests") or {}).get(CPU) is not None:
            cpu = self._part(pod_level, CPU, milli_value, self._cpu_factor)
        if (pod_level.get("requests") or {}).get(MEMORY) is not None:
            memory = self._part(pod_level, MEMORY, int_value, self._memory_factor)
        return (int(cpu) or self._default_milli_cpu, int(memory) or self._default_memory)

    @staticmethod
    def _part(res: dict[str, Any], name: str, parse: Any, factor: float) -> float:
        request = (res.get("requests") or {}).get(name)
        if request is None:
            return 0.0
        value = parse(request) * factor
        limit = (res.get("limits") or {}).get(name)
        if limit is not None:
            value = min(value, parse(limit))
        return float(value)

    def recent(self, node: NodeInfo, since: float, *, memoize: bool = True) -> Recent:
        """The node's pods placed after ``since`` (memoized on the node until it changes or an
        older ``since`` is asked for; ``memoize=False`` neither reads nor writes the memo)."""
        memo = node.memo.get(_RECENT) if memoize else None
        if memo is not None and memo[0] <= since:
            return memo[1]
        rows = []
        for pod in node.pods.values():
            when = placed_at(pod)
            if when > since:
                cpu, memory = self.pod_estimate(pod)
                rows.append((when, cpu, memory))
        if rows:
            rows.sort()
            placed, cpu_col, mem_col = zip(*rows, strict=True)
            recent = Recent(placed, cpu_col, mem_col)
        else:
            recent = _NONE
        if memoize:
            node.memo[_RECENT] = (since, recent)
        return recent

    def unseen(self, node: NodeInfo, recent: Recent, metric: str, sample_time: float) -> float:
        """What the pods placed since the metric's sample add to it, as a fraction of the
        node's allocatable (0 for a metric with no resource, or a node with no allocatable)."""
        resource = self.resources.get(metric)
        if resource is None or not recent.placed:
            return 0.0
        window = self.windows.get(metric, self.window)
        seen_until = sample_time - self.lag  # data up to here is in the sample
        start = bisect_right(recent.placed, seen_until - window)
        if start == len(recent.placed):
            return 0.0
        if resource == CPU:
            amounts, allocatable = recent.milli_cpu, node.allocatable.milli_cpu
        else:
            amounts, allocatable = recent.memory, node.allocatable.memory
        if allocatable <= 0:
            return 0.0
        total = 0.0
        for i in range(start, len(recent.placed)):
            seen = (seen_until - recent.placed[i]) / window
            total += amounts[i] * (1.0 - seen if seen > 0.0 else 1.0)
        return total / allocatable
