"""The ``Dynamic`` plugin: crane-scheduler's load-aware filter and score.

Where the load comes from
    With ``promeAddr``, from Prometheus (``source``); without, from the node
    annotations crane-scheduler-controller writes (``annotations``), as
    crane-scheduler itself reads them; with ``annotationFallback``, Prometheus
    first and the annotations where it has no fresh value. A fresh
    ``node_hot_value`` annotation counts where annotations are read: the hot
    value is the larger of it and this scheduler's own count.

Filter (crane's ``Dynamic`` predicate)
    A node whose fresh value of a predicate metric is above its ``maxLimitPecent``
    is rejected with ``node(s) had <metric> above <limit>`` (no node name, so the
    reasons aggregate as kube-scheduler's "3 node(s) had ..."). A limit of 0
    disables that check; DaemonSet pods skip the filter, as in crane.

Score (crane's ``Dynamic`` priority)
    trunc(Σ weight·(1−usage)·100 / Σ weight) − 10·hot value, clamped to 0..100
    (truncated as crane's int64() does, after forgiving float noise below 1e-9).
    With no priorities (or all weights 0) the load part is 100 for every node,
    so the hot value still spreads bursts (crane scores everything 0 then).

Fresh and missing data
    A value is fresh while ``now ≤ sample time + the metric's period + stale_grace``;
    a stale value is missing. From Prometheus, the sample time is the timestamp it
    returns (its evaluation time; Prometheus drops series not updated within its 5m
    lookback), so this is in effect the time since the last successful query,
    provided the two clocks roughly agree; from an annotation, the time written in
    it (crane's rule, with its 5m grace as the default ``stale_grace``).
    Missing data never fails a pod by itself unless
    ``missing_data_policy`` is ``FailClosed``:

    - ``FailOpen`` (default): the node passes the metric's check (crane does the same).
    - ``FailClosed``: a node missing any enabled predicate metric is rejected with
      ``node(s) had no fresh load data``.
    - In both, a missing priority metric scores *neutral*: as if the node's usage
      were the median of that metric across the cluster's fresh series, or 0.5
      when there are none. crane counts the term as 0 (fully loaded), which
      pushes new nodes and nodes with a broken exporter to the bottom; the median
      neither favours nor punishes a node for lacking data.

Speed
    The per-node verdict and load score are computed once per node and source
    refresh (and again when a value goes stale or the Node object changes), then
    filter and score are a dict lookup. The hot value, which changes with every
    bind, is read once per cycle in ``pre_score`` and added at score time.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from prometheus_client import REGISTRY, CollectorRegistry

from scheduler.config.errors import ConfigError
from scheduler.config.pluginargs import DynamicArgs
from scheduler.core.framework import MAX_NODE_SCORE, MIN_NODE_SCORE, CycleState, Status, unresolvable
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.logs import kv
from scheduler.plugins.dynamic.annotations import CRANE_TIME_ZONE, AnnotationSource, time_zone
from scheduler.plugins.dynamic.estimate import PLACED, Estimator
from scheduler.plugins.dynamic.hotvalue import HotValueTracker
from scheduler.plugins.dynamic.nodeview import node_view_collector
from scheduler.plugins.dynamic.policy import DynamicPolicy, load_policy
from scheduler.plugins.dynamic.requeue import LoadRequeuer
from scheduler.plugins.dynamic.source import PrometheusSource
from scheduler.settings import PrometheusSettings

logger = logging.getLogger(__name__)

FAIL_OPEN = "FailOpen"
FAIL_CLOSED = "FailClosed"
NO_FRESH_DATA = "node(s) had no fresh load data"
NEUTRAL_USAGE = 0.5
"""Usage assumed for a missing priority metric when no node has fresh data for it."""
HOT_VALUE_PENALTY = 10
_HOT_KEY = "Dynamic/hot"
_FLOAT_NOISE = 1e-9
"""Added before truncating, so 57.99999999999999 from float rounding counts as 58."""


def build_source(
    policy: DynamicPolicy,
    args: DynamicArgs,
    *,
    registry: CollectorRegistry = REGISTRY,
    clock: Callable[[], float] = time.time,
    settings: PrometheusSettings | None = None,
) -> PrometheusSource:
    """The source that fetches the policy's metrics as ``args`` say (not started)."""
    return PrometheusSource(
        args.prome_addr,
        policy.periods(args.metrics_update_period),
        cluster_label=args.cluster_label,
        cluster_name=args.cluster_name,
        node_label=args.node_label,
        query_timeout=args.query_timeout,
        registry=registry,
        clock=clock,
        scale=args.metric_scale,
        settings=settings,
    )


def annotation_zone(args: DynamicArgs) -> Any:
    """The zone of crane's annotation times: the arg, else $TZ, else crane's default."""
    return time_zone(args.time_zone or os.environ.get("TZ") or CRANE_TIME_ZONE)


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """What the plugin concluded about one node from one source generation."""

    node_obj: Any
    """The Node object it was computed for (a new one means the addresses may have changed)."""
    generation: int
    valid_until: float
    """When the first value used goes stale (epoch seconds)."""
    verdict: Status | None
    """The filter's answer for pods other than DaemonSet pods."""
    relaxed_verdict: Status | None
    """Its answer in a relaxed pass (``CycleState.relaxed``): only FailClosed's missing data."""
    score: int
    """The load part of the score, 0..100, before the hot value."""
    usage: dict[str, float]
    """The fresh values used, by metric (with the estimate of pods placed since, if any)."""
    sample_times: dict[str, float]
    """When each value in ``usage`` was sampled."""
    medians: dict[str, float]
    """The fresh medians that stand in for a missing priority metric."""
    unseen: dict[str, float] | None = None
    """What the estimator added to each metric (``estimate``); None when nothing."""


def is_daemonset_pod(pod: PodInfo) -> bool:
    ds = pod.memo.get(Dynamic.name)
    if ds is None:
        refs = pod.pod["metadata"].get("ownerReferences") or ()
        ds = pod.memo[Dynamic.name] = any(r.get("kind") == "DaemonSet" for r in refs)
    return bool(ds)


class Dynamic:
    """Load-aware Filter, PreScore/Score, Reserve/Unreserve and PostBind (see the module doc)."""

    name: ClassVar[str] = "Dynamic"

    def __init__(
        self,
        args: DynamicArgs | None,
        handle: Any,
        *,
        source: PrometheusSource | None = None,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
        hot_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Load the policy and start fetching. ``source`` (not started or stopped by the plugin)
        and the clocks are for embedding and tests. The source's metrics go to ``registry``,
        else to the handle's ``metrics_registry`` (the scheduler's /metrics), else the default one."""
        if registry is None:
            registry = getattr(handle, "metrics_registry", None) or REGISTRY
        if args is None:
            args = DynamicArgs()
        if args.missing_data_policy not in (FAIL_OPEN, FAIL_CLOSED):
            raise ConfigError(
                None,
                "Dynamic.missingDataPolicy",
                f"expected {FAIL_OPEN!r} or {FAIL_CLOSED!r}, got {args.missing_data_policy!r}",
            )
        self.policy = load_policy(args.policy_config_path)
        self._clock = clock
        self._fail_closed = args.missing_data_policy == FAIL_CLOSED
        periods = self.policy.periods(args.metrics_update_period)
        self._max_age = {m: p + args.stale_grace for m, p in periods.items()}
        self._metrics = tuple(periods)
        self._predicates = tuple(
            (p.name, p.max_limit_percent, f"node(s) had {p.name} above {p.max_limit_percent:g}")
            for p in self.policy.predicate
            if p.max_limit_percent > 0
        )
        self._priorities = tuple((p.name, p.weight) for p in self.policy.priority)
        self._weight_sum = sum(w for _, w in self._priorities)
        self.relaxable = args.relax_when_nothing_fits
        self._no_fresh_data = unresolvable(NO_FRESH_DATA)
        """The profile filters again without the limits when no node is within them
        (``Profile.relaxed_pass``)."""
        self.estimator = Estimator(args.estimator, self._metrics) if args.estimator.enabled else None
        self._memo_key = (self.name, object())
        """This instance's adjusted loads in ``NodeInfo.memo`` (profiles configure it apart)."""
        self.hot = HotValueTracker(self.policy.hot_value, clock=hot_clock)
        self._owns_source = source is None
        self.source: PrometheusSource | None = None
        self.annotations: AnnotationSource | None = None
        if args.prome_addr or source is not None:
            self.source = source or build_source(
                self.policy,
                args,
                registry=registry,
                clock=clock,
                settings=getattr(handle, "prometheus", None),
            )
        if not args.prome_addr or args.annotation_fallback:
            try:
                zone = annotation_zone(args)
            except ValueError as e:
                raise ConfigError(None, "Dynamic.timeZone", str(e)) from None
            self.annotations = AnnotationSource(
                getattr(handle, "snapshot", None),
                self.policy.sync_periods(),
                zone=zone,
                grace=args.stale_grace,
                clock=clock,
            )
        self._sources: tuple[Any, ...] = tuple(s for s in (self.source, self.annotations) if s is not None)
        self._cache: dict[str, NodeLoad] = {}
        self._cache_generation = -1
        move_pods = getattr(handle, "move_pods", None)
        self.requeuer: LoadRequeuer | None = None
        if move_pods is not None and self._sources:
            self.requeuer = LoadRequeuer(
                lambda event: move_pods(event, frozenset({self.name})),
                self._generation,
                self._rejection_expiries,
                source=self.source,
                clock=clock,
            )
        logger.info(
            "Dynamic plugin configured",
            extra=kv(
                policy=args.policy_config_path,
                prometheus=args.prome_addr,
                annotations=self.annotations is not None,
                metrics=",".join(self._metrics),
                missingDataPolicy=args.missing_data_policy,
            ),
        )
        self._snapshot = getattr(handle, "snapshot", None)
        if self._snapshot is not None:
            node_view_collector(registry).add(getattr(handle, "scheduler_name", ""), self)
        if self._owns_source and self.source is not None:
            self.source.start()
        if self.requeuer is not None:
            self.requeuer.start()

    def stop(self) -> None:
        """Stop the background refresh (returns within a couple of seconds)."""
        if self.requeuer is not None:
            self.requeuer.stop()
        if self._owns_source and self.source is not None:
            self.source.stop()

    # --- extension points ---

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if is_daemonset_pod(pod):
            return None
        load = self.node_load(node)
        return load.relaxed_verdict if state.relaxed else load.verdict

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        state[_HOT_KEY] = self.hot.values()
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        hot_values = state.get(_HOT_KEY)
        hot = self._hot_value(node, hot_values)
        s = self.node_load(node).score - HOT_VALUE_PENALTY * hot
        return MAX_NODE_SCORE if s > MAX_NODE_SCORE else MIN_NODE_SCORE if s < MIN_NODE_SCORE else s

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        self.hot.record(pod.uid, node_name)
        pod.memo[PLACED] = self._clock()
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.hot.forget(pod.uid)

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.hot.confirm(pod.uid, node_name)

    def note_bound(self, pod_uid: str, node_name: str, ago: float = 0.0) -> None:
        """The pod was bound there ``ago`` seconds before, by another scheduler (shadow mode)
        or before this process started (``explain``): it counts in the hot value, as crane's
        controller counts every Scheduled event."""
        self.hot.confirm(pod_uid, node_name, ago)

    def explain_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> dict[str, Any]:
        """What the verdict and the score on ``node`` were made of, for ``explain``: each
        metric's value (percent), its age and limit, or why there is none; the hot value."""
        now = self._clock()
        limits = {metric: limit for metric, limit, _ in self._predicates}
        metrics: dict[str, Any] = {}
        for metric in self._metrics:
            entry: dict[str, Any] = {}
            for source in self._sources:
                sample = source.sample(metric, node)
                if sample is None:
                    continue
                age = now - sample.sample_time
                entry = {"percent": round(sample.value * 100, 2), "ageSeconds": round(age, 1)}
                if age > self._max_age[metric]:
                    entry["stale"] = True
                    continue
                break
            if not entry:
                entry = {"missing": True}
            if metric in limits:
                entry["limitPercent"] = round(limits[metric] * 100, 2)
            metrics[metric] = entry
        hot = self.hot.value(node.name)
        if self.annotations is not None:
            crane = self.annotations.hot_value(node)
            if crane is not None and crane > hot:
                hot = crane
        load = self.node_load(node)
        for metric, extra in (load.unseen or {}).items():
            metrics[metric]["unseenPercent"] = round(extra * 100, 2)
        return {"metrics": metrics, "hotValue": hot, "loadScore": load.score}

    # --- per-node load ---

    def _hot_value(self, node: NodeInfo, ours: dict[str, int] | None = None) -> int:
        """The larger of this scheduler's count of recent binds and crane's annotation."""
        hot = ours.get(node.name, 0) if ours is not None else self.hot.value(node.name)
        if self.annotations is not None:
            crane = self.annotations.hot_value(node)
            if crane is not None and crane > hot:
                hot = crane
        return hot

    def node_views(self) -> Iterator[tuple[str, dict[str, float], int, bool]]:
        """Every cached node's (name, fresh usage, hot value, rejected), computed now and apart
        from the cycle's cache (``nodeview``: the scheduler's /metrics)."""
        if self._snapshot is None:
            return
        # No _generation(): from the scrape's thread nothing may advance the sources' state.
        now, ours = self._clock(), self.hot.values()
        # The informers add and remove a node's pods while a scrape reads them: the cache's
        # lock (the one a scheduling cycle holds) keeps each node still while its view is
        # computed, and is never held across a yield.
        lock = getattr(self._snapshot, "lock", None) or contextlib.nullcontext()
        for node in self._snapshot.list():
            with lock:
                load = self._compute(node, -1, now)
                if self.estimator is not None and load.sample_times:
                    load = self._with_estimate(node, load, memoize=False)
                row = (node.name, load.usage, self._hot_value(node, ours), load.verdict is not None)
            yield row

    def _generation(self) -> int:
        return sum(s.current_generation() for s in self._sources)

    def _rejection_expiries(self) -> list[float]:
        """When the values behind the current rejections go stale (the requeuer's timer)."""
        return [e.valid_until for e in tuple(self._cache.values()) if e.verdict is not None]

    def node_load(self, node: NodeInfo) -> NodeLoad:
        """The node's verdict and load score from the sources' current data (cached)."""
        generation = self._generation()
        cache = self._cache
        if generation != self._cache_generation:
            cache = self._cache = {}
            self._cache_generation = generation
        now = self._clock()
        entry = cache.get(node.name)
        if (
            entry is None
            or entry.generation != generation
            or entry.node_obj is not node.node
            or now > entry.valid_until
        ):
            entry = cache[node.name] = self._compute(node, generation, now)
        if self.estimator is None or not entry.sample_times:
            return entry
        memo = node.memo.get(self._memo_key)
        if memo is not None and memo[0] is entry:
            return memo[1]
        adjusted = self._with_estimate(node, entry)
        node.memo[self._memo_key] = (entry, adjusted)
        return adjusted

    def _with_estimate(self, node: NodeInfo, load: NodeLoad, *, memoize: bool = True) -> NodeLoad:
        """``load`` with the pods placed since its samples counted (``estimate``): the same
        object when there are none. Depends only on the samples and the node's pods, so it
        holds until either changes. ``memoize=False`` leaves the node's memo alone (for
        threads other than the scheduling one)."""
        est = self.estimator
        assert est is not None
        since = min(load.sample_times.values()) - est.lag - est.window
        recent = est.recent(node, since, memoize=memoize)
        if not recent.placed:
            return load
        unseen = {}
        for metric, sample_time in load.sample_times.items():
            extra = est.unseen(node, recent, metric, sample_time)
            if extra > 0.0:
                unseen[metric] = extra
        if not unseen:
            return load
        usage = {m: v + unseen.get(m, 0.0) for m, v in load.usage.items()}
        verdict, relaxed_verdict, score = self._judge(usage, load.medians)
        return NodeLoad(
            load.node_obj,
            load.generation,
            load.valid_until,
            verdict,
            relaxed_verdict,
            score,
            usage,
            load.sample_times,
            load.medians,
            unseen,
        )

    def _compute(self, node: NodeInfo, generation: int, now: float) -> NodeLoad:
        usage: dict[str, float] = {}
        sample_times: dict[str, float] = {}
        valid_until = math.inf
        medians: dict[str, float] = {}
        for metric in self._metrics:
            max_age = self._max_age[metric]
            for source in self._sources:  # the first with a fresh value wins
                median, median_time = source.median(metric)
                if median is not None and metric not in medians and now <= median_time + max_age:
                    medians[metric] = median
                    valid_until = min(valid_until, median_time + max_age)
                sample = source.sample(metric, node)
                if sample is None:
                    continue
                expires = sample.sample_time + max_age
                if now <= expires:
                    usage[metric] = sample.value
                    sample_times[metric] = sample.sample_time
                    valid_until = min(valid_until, expires)
                    break
        verdict, relaxed_verdict, score = self._judge(usage, medians)
        return NodeLoad(
            node.node, generation, valid_until, verdict, relaxed_verdict, score, usage, sample_times, medians
        )

    def _judge(
        self, usage: dict[str, float], medians: dict[str, float]
    ) -> tuple[Status | None, Status | None, int]:
        """The filter's verdict, its relaxed verdict and the load score from a node's fresh values."""
        reasons = [
            reason for metric, limit, reason in self._predicates if metric in usage and usage[metric] > limit
        ]
        relaxed: Status | None = None
        if self._fail_closed and any(metric not in usage for metric, _, _ in self._predicates):
            relaxed = self._no_fresh_data
        verdict = unresolvable(*reasons) if reasons else relaxed

        if self._weight_sum > 0:
            total = 0.0
            for metric, weight in self._priorities:
                u = usage.get(metric)
                if u is None:
                    u = medians.get(metric, NEUTRAL_USAGE)
                total += (1.0 - u) * weight * MAX_NODE_SCORE
            score = int(total / self._weight_sum + _FLOAT_NOISE)
        else:
            score = MAX_NODE_SCORE
        return verdict, relaxed, score
