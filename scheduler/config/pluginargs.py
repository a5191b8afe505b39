"""Typed plugin arguments (``pluginConfig[].args``), with kube-scheduler's names and defaults.

The kube-scheduler plugins' args follow ``pkg/scheduler/apis/config/v1``
(types_pluginargs.go, defaults.go) and are validated as
``validation_pluginargs.go`` does. :class:`DynamicArgs` is this project's
form of crane-scheduler's ``Dynamic`` plugin arguments, fed by Prometheus.

:data:`ARGS_TYPES` maps a plugin name to its args class; :func:`decode_args`
decodes one plugin's raw args.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from scheduler.config.decode import (
    DURATION_OR_SECONDS,
    GO_DURATION,
    NON_EMPTY,
    Check,
    Codec,
    at_least,
    between,
    decode,
    describe,
    join,
    yaml_field,
)
from scheduler.config.durations import format_seconds
from scheduler.config.errors import ConfigError
from scheduler.config.types import API_VERSIONS
from scheduler.core.resources import QuantityError, parse_quantity

# --- NodeResourcesFit, NodeResourcesBalancedAllocation ------------------------------------------


@dataclass(frozen=True)
class ResourceSpec:
    """A resource and its weight in a score; a weight of 0 (or none) means 1."""

    name: str = yaml_field(check=NON_EMPTY)
    weight: int = yaml_field(1, check=at_least(0))

    def __post_init__(self) -> None:
        if self.weight == 0:
            object.__setattr__(self, "weight", 1)


DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


def _check_resources(resources: tuple[ResourceSpec, ...], path: str, weights: Check) -> None:
    seen: set[str] = set()
    for i, r in enumerate(resources):
        if r.name in seen:
            raise ConfigError(
                None, join(join(path, i), "name"), f'expected each resource once, got "{r.name}" again'
            )
        seen.add(r.name)
        if not weights.ok(r.weight):
            raise ConfigError(
                None, join(join(path, i), "weight"), f"expected {weights.expected}, got {r.weight}"
            )


@dataclass(frozen=True)
class UtilizationShapePoint:
    utilization: int = yaml_field(check=between(0, 100))
    score: int = yaml_field(check=between(0, 10))


@dataclass(frozen=True)
class RequestedToCapacityRatioParam:
    shape: tuple[UtilizationShapePoint, ...] = yaml_field(factory=tuple)

    def validate(self, path: str) -> None:
        validate_shape(self.shape, join(path, "shape"))


def validate_shape(shape: tuple[UtilizationShapePoint, ...], path: str) -> None:
    """kube-scheduler's ``validateFunctionShape``: at least one point, utilization increasing."""
    if not shape:
        raise ConfigError(None, path, "expected at least one point")
    for i in range(1, len(shape)):
        if shape[i].utilization <= shape[i - 1].utilization:
            raise ConfigError(
                None,
                join(join(path, i), "utilization"),
                f"expected utilization values in increasing order, got "
                f"{shape[i].utilization} after {shape[i - 1].utilization}",
            )


ScoringStrategyType = Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]


@dataclass(frozen=True)
class ScoringStrategy:
    type: ScoringStrategyType = yaml_field("LeastAllocated")
    resources: tuple[ResourceSpec, ...] = yaml_field(DEFAULT_RESOURCES)
    """An empty list means the default, cpu and memory with weight 1."""
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = yaml_field(None)

    def __post_init__(self) -> None:
        if not self.resources:
            object.__setattr__(self, "resources", DEFAULT_RESOURCES)

    def validate(self, path: str) -> None:
        _check_resources(self.resources, join(path, "resources"), between(1, 100))
        if self.type == "RequestedToCapacityRatio" and self.requested_to_capacity_ratio is None:
            raise ConfigError(
                None,
                join(path, "requestedToCapacityRatio"),
                'required when type is "RequestedToCapacityRatio"; expected {shape: [...]}',
            )


@dataclass(frozen=True)
class NodeResourcesFitArgs:
    ignored_resources: tuple[str, ...] = yaml_field(factory=tuple)
    ignored_resource_groups: tuple[str, ...] = yaml_field(factory=tuple)
    scoring_strategy: ScoringStrategy = yaml_field(factory=ScoringStrategy)

    def validate(self, path: str) -> None:
        for i, name in enumerate(self.ignored_resources):
            if not name:
                raise ConfigError(
                    None, join(join(path, "ignoredResources"), i), 'expected a resource name, got ""'
                )
        for i, group in enumerate(self.ignored_resource_groups):
            if not group or "/" in group:
                raise ConfigError(
                    None,
                    join(join(path, "ignoredResourceGroups"), i),
                    f'expected a resource group name without "/", got "{group}"',
                )


@dataclass(frozen=True)
class NodeResourcesBalancedAllocationArgs:
    resources: tuple[ResourceSpec, ...] = yaml_field(DEFAULT_RESOURCES)

    def __post_init__(self) -> None:
        if not self.resources:
            object.__setattr__(self, "resources", DEFAULT_RESOURCES)

    def validate(self, path: str) -> None:
        _check_resources(self.resources, join(path, "resources"), Check("1", lambda w: w == 1))


# --- InterPodAffinity, PodTopologySpread, NodeAffinity, VolumeBinding, DefaultPreemption -----


@dataclass(frozen=True)
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int = yaml_field(1, check=between(0, 100))
    ignore_preferred_terms_of_existing_pods: bool = yaml_field(False)


@dataclass(frozen=True)
class DefaultConstraint:
    """A topology spread constraint applied to pods that set none (no selector: it is derived)."""

    max_skew: int = yaml_field(check=at_least(1))
    topology_key: str = yaml_field(check=NON_EMPTY)
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] = yaml_field()
    node_affinity_policy: Literal["Honor", "Ignore"] | None = yaml_field(None)
    node_taints_policy: Literal["Honor", "Ignore"] | None = yaml_field(None)
    label_selector: dict[str, Any] | None = yaml_field(None)

    def validate(self, path: str) -> None:
        if self.label_selector is not None:
            raise ConfigError(
                None,
                join(path, "labelSelector"),
                "expected no selector (a default constraint's selector is derived from the pod)",
            )


@dataclass(frozen=True)
class PodTopologySpreadArgs:
    default_constraints: tuple[DefaultConstraint, ...] = yaml_field(factory=tuple)
    defaulting_type: Literal["System", "List"] = yaml_field("System")
    """System: kube-scheduler's built-in constraints (zone skew 5, hostname skew 3, ScheduleAnyway)."""

    def validate(self, path: str) -> None:
        if self.defaulting_type == "System" and self.default_constraints:
            raise ConfigError(
                None,
                join(path, "defaultConstraints"),
                'expected no constraints when defaultingType is "System" (use "List")',
            )
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(self.default_constraints):
            pair = (c.topology_key, c.when_unsatisfiable)
            if pair in seen:
                raise ConfigError(
                    None,
                    join(join(path, "defaultConstraints"), i),
                    f"expected one constraint per topologyKey and whenUnsatisfiable, got "
                    f'("{pair[0]}", "{pair[1]}") again',
                )
            seen.add(pair)


_NODE_AFFINITY_KEYS = (
    "requiredDuringSchedulingIgnoredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution",
)


@dataclass(frozen=True)
class NodeAffinityArgs:
    added_affinity: dict[str, Any] | None = yaml_field(None)
    """A v1.NodeAffinity every pod of the profile must also satisfy, kept as given."""

    def validate(self, path: str) -> None:
        for key in self.added_affinity or {}:
            if key not in _NODE_AFFINITY_KEYS:
                raise ConfigError(
                    None,
                    join(join(path, "addedAffinity"), str(key)),
                    f"unknown field; expected one of: {', '.join(_NODE_AFFINITY_KEYS)}",
                )


@dataclass(frozen=True)
class VolumeBindingArgs:
    bind_timeout_seconds: int = yaml_field(600, check=at_least(0), int64=True)
    shape: tuple[UtilizationShapePoint, ...] = yaml_field(
        factory=lambda: (UtilizationShapePoint(0, 10), UtilizationShapePoint(100, 0))
    )
    """The StorageCapacityScoring score's shape (on by default in kube-scheduler v1.37): the
    score (0..10) at each utilization (0..100 %) of the storage a pod's claims would take."""

    def validate(self, path: str) -> None:
        validate_shape(self.shape, join(path, "shape"))


@dataclass(frozen=True)
class DefaultPreemptionArgs:
    """How many nodes preemption tries: ``max(percentage% of them, absolute)`` (at most all)."""

    min_candidate_nodes_percentage: int = yaml_field(10, check=between(0, 100))
    min_candidate_nodes_absolute: int = yaml_field(100, check=at_least(0))

    def validate(self, path: str) -> None:
        if self.min_candidate_nodes_percentage == 0 and self.min_candidate_nodes_absolute == 0:
            raise ConfigError(
                None,
                join(path, "minCandidateNodesAbsolute"),
                "expected a value > 0 when minCandidateNodesPercentage is 0",
            )


@dataclass(frozen=True)
class DynamicResourcesArgs:
    """kube-scheduler's ``DynamicResourcesArgs`` (durations as float seconds; "10s" in YAML)."""

    filter_timeout: float = yaml_field(
        10.0, codec=GO_DURATION, check=Check('a duration >= 0, like "10s"', lambda v: v >= 0)
    )
    """How long Filter may search one node's devices; 0: no limit."""
    binding_timeout: float = yaml_field(
        600.0, codec=GO_DURATION, check=Check('a duration > 0, like "10m"', lambda v: v > 0)
    )
    """How long PreBind waits for devices' binding conditions, from the allocation."""


# --- Dynamic -----------------------------------------------------------------------------------

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_LABEL = Check("a Prometheus label name", lambda v: bool(_LABEL_NAME.fullmatch(v)))


def _http_url(v: str) -> bool:
    parts = urlsplit(v)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _time_zone(v: str) -> bool:
    try:
        ZoneInfo(v)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _quantity(v: str) -> bool:
    try:
        return parse_quantity(v) >= 0
    except QuantityError:
        return False


_METRIC_RESOURCES = ("cpu", "memory")


def _decode_windows(raw: Any, path: str) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise ConfigError(None, path, f"expected a mapping of metric to a Go duration, got {describe(raw)}")
    out = {}
    for metric, value in raw.items():
        seconds = GO_DURATION.decode(value, join(path, str(metric)))
        if seconds <= 0:
            raise ConfigError(
                None, join(path, str(metric)), f'expected a duration > 0, like "1m", got {describe(value)}'
            )
        out[str(metric)] = seconds
    return out


_WINDOWS = Codec(_decode_windows, lambda windows: {m: format_seconds(s) for m, s in windows.items()})
"""``metricWindows``: metric -> Go duration, held as float seconds."""


@dataclass(frozen=True)
class DynamicEstimatorArgs:
    """How the ``Dynamic`` plugin counts pods its samples cannot show yet (``plugins.dynamic.estimate``).

    Not in crane-scheduler, which sees a pod only once its metrics do; ``enabled: false`` gives
    crane's verdicts and scores."""

    enabled: bool = yaml_field(True)
    metrics_lag: float = yaml_field(
        60.0, codec=GO_DURATION, check=Check('a duration >= 0, like "1m"', lambda v: v >= 0)
    )
    """How old the data behind a fresh sample is: scrape interval plus rule interval."""
    metrics_window: float = yaml_field(
        300.0, codec=GO_DURATION, check=Check('a duration > 0, like "5m"', lambda v: v > 0)
    )
    """The averaging window of the policy's rules (crane's: 5m)."""
    cpu_scaling_factor: int = yaml_field(85, check=between(0, 100, "a percentage"))
    """A pod's CPU estimate, as a percentage of its request (capped by its limit)."""
    memory_scaling_factor: int = yaml_field(70, check=between(0, 100, "a percentage"))
    default_cpu: str = yaml_field("250m", check=Check('a quantity like "250m"', _quantity))
    """The CPU estimate of a pod that requests none."""
    default_memory: str = yaml_field("200Mi", check=Check('a quantity like "200Mi"', _quantity))
    metric_resources: dict[str, str] = yaml_field(factory=dict)
    """Policy metric -> ``cpu`` or ``memory``; without an entry, by its name (see the module doc)."""
    metric_windows: dict[str, float] = yaml_field(factory=dict, codec=_WINDOWS)
    """Policy metric -> its own averaging window, where it is not ``metrics_window`` (a rate over
    one minute takes a pod in sooner than a five-minute average of it)."""

    def validate(self, path: str) -> None:
        for metric, resource in self.metric_resources.items():
            if resource not in _METRIC_RESOURCES:
                raise ConfigError(
                    None,
                    join(join(path, "metricResources"), metric),
                    f'expected "cpu" or "memory", got {resource!r}',
                )


@dataclass(frozen=True)
class DynamicArgs:
    """The ``Dynamic`` plugin's args: where the node load comes from and how its samples count.

    Without ``promeAddr`` the load comes from crane-scheduler-controller's node annotations,
    as in crane-scheduler (whose only arg is ``policyConfigPath``); with it, from Prometheus.
    Durations are float seconds; in YAML they are Go durations ("5m"), and
    ``metricsUpdatePeriodBySeconds`` may also be a number of seconds.
    """

    prome_addr: str = yaml_field(
        "", check=Check('an http(s) URL like "http://prometheus:9090"', lambda v: v == "" or _http_url(v))
    )
    """Empty: read crane's node annotations instead of Prometheus."""
    metrics_update_period: float = yaml_field(
        300.0,
        key="metricsUpdatePeriodBySeconds",
        codec=DURATION_OR_SECONDS,
        check=Check('a duration > 0, like "5m" or 300', lambda v: v > 0),
    )
    """How often the metrics are queried, unless the policy's syncPolicy gives a period."""
    cluster_name: str = yaml_field("")
    """Empty: no cluster matcher in the queries."""
    cluster_label: str = yaml_field("cluster", check=_LABEL)
    node_label: str = yaml_field("instance", check=_LABEL)
    """The series label whose value is a node name, an InternalIP, or "IP:port"."""
    policy_config_path: str = yaml_field("/etc/kubernetes/dynamic-scheduler-policy.yaml", check=NON_EMPTY)
    """crane-scheduler's default (its shipped configs all name /etc/kubernetes/policy.yaml)."""
    query_timeout: float = yaml_field(
        5.0, codec=DURATION_OR_SECONDS, check=Check('a duration > 0, like "5s"', lambda v: v > 0)
    )
    stale_grace: float = yaml_field(
        300.0, codec=DURATION_OR_SECONDS, check=Check('a duration >= 0, like "5m"', lambda v: v >= 0)
    )
    """A sample is stale once older than its syncPolicy period plus this."""
    missing_data_policy: Literal["FailOpen", "FailClosed"] = yaml_field("FailOpen")
    """FailOpen: a node without fresh data passes Filter; FailClosed: it is rejected."""
    metric_scale: Literal["auto", "fraction", "percent"] = yaml_field("auto")
    """The scale of the Prometheus series: fractions 0..1, percent 0..100 (crane's recording
    rules), or auto (percent once a series is above 2)."""
    annotation_fallback: bool = yaml_field(False)
    """With promeAddr: where Prometheus has no fresh value, use crane's node annotations."""
    time_zone: str = yaml_field(
        "", check=Check('an IANA time zone like "Asia/Shanghai" or "UTC"', lambda v: v == "" or _time_zone(v))
    )
    """The zone of the annotations' times; empty: $TZ, else Asia/Shanghai (crane's rule)."""
    relax_when_nothing_fits: bool = yaml_field(False)
    """When no node is within the limits and passes the other filters, place the pod as if
    the limits were not there (a ``FilterRelaxed`` event says so). Off by default, so that
    crane-scheduler's configurations decide as crane does (the pod waits); the manifests
    turn it on. Missing data under FailClosed still rejects."""
    estimator: DynamicEstimatorArgs = yaml_field(factory=DynamicEstimatorArgs)
    """Pods placed since a node's samples were taken, at an estimate of their usage."""


ARGS_TYPES: dict[str, type] = {
    "NodeResourcesFit": NodeResourcesFitArgs,
    "NodeResourcesBalancedAllocation": NodeResourcesBalancedAllocationArgs,
    "InterPodAffinity": InterPodAffinityArgs,
    "PodTopologySpread": PodTopologySpreadArgs,
    "NodeAffinity": NodeAffinityArgs,
    "VolumeBinding": VolumeBindingArgs,
    "DefaultPreemption": DefaultPreemptionArgs,
    "DynamicResources": DynamicResourcesArgs,
    "Dynamic": DynamicArgs,
}
"""The plugins that take args, and their args type."""


def decode_args(plugin: str, raw: dict[str, Any] | None, path: str) -> Any:
    """Decode one plugin's args (None: all defaults); ``apiVersion``/``kind`` inside are checked and dropped."""
    cls = ARGS_TYPES.get(plugin)
    if cls is None:
        if raw:
            raise ConfigError(None, path, f"expected no args ({plugin} takes none)")
        return None
    if isinstance(raw, dict) and ("apiVersion" in raw or "kind" in raw):
        raw = dict(raw)
        version, kind = raw.pop("apiVersion", None), raw.pop("kind", None)
        if version is not None and version not in API_VERSIONS:
            raise ConfigError(
                None, join(path, "apiVersion"), f'expected one of {", ".join(API_VERSIONS)}, got "{version}"'
            )
        if kind is not None and kind != f"{plugin}Args":
            raise ConfigError(None, join(path, "kind"), f'expected "{plugin}Args", got "{kind}"')
    return decode(cls, raw, path)
