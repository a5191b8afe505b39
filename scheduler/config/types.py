"""KubeSchedulerConfiguration as the file spells it (kubescheduler.config.k8s.io/v1).

These dataclasses mirror kube-scheduler's v1 types, field for field, with
kube-scheduler's defaults (``pkg/scheduler/apis/config/v1/defaults.go``).
The older v1beta2 and v1beta3 files use the same fields and are read into the
same types. Durations are float seconds; plugin ``args`` stay raw mappings
here and are decoded per plugin by :mod:`scheduler.config.pluginargs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler.config.decode import (
    GO_DURATION,
    NON_EMPTY,
    Check,
    at_least,
    between,
    camel,
    join,
    yaml_field,
)
from scheduler.config.errors import ConfigError

GROUP = "kubescheduler.config.k8s.io"
API_VERSION = f"{GROUP}/v1"
API_VERSIONS = (API_VERSION, f"{GROUP}/v1beta3", f"{GROUP}/v1beta2")
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

_POSITIVE_DURATION = Check('a Go duration greater than 0, like "15s"', lambda v: v > 0)
_JITTER_FACTOR = 1.2
"""client-go's leaderelection.JitterFactor: renewDeadline must exceed retryPeriod times this."""


@dataclass(frozen=True)
class LeaderElection:
    """``leaderElection``: the Lease this scheduler competes for (client-go semantics)."""

    leader_elect: bool = yaml_field(True)
    lease_duration: float = yaml_field(15.0, codec=GO_DURATION, check=_POSITIVE_DURATION)
    """How long a follower waits, after the last renewal it saw, before taking over."""
    renew_deadline: float = yaml_field(10.0, codec=GO_DURATION, check=_POSITIVE_DURATION)
    """How long the leader keeps retrying a renewal before it gives up leading."""
    retry_period: float = yaml_field(2.0, codec=GO_DURATION, check=_POSITIVE_DURATION)
    """The wait between two attempts to acquire or renew."""
    resource_lock: str = yaml_field("leases")
    resource_name: str = yaml_field("kube-scheduler", check=NON_EMPTY)
    resource_namespace: str = yaml_field("kube-system", check=NON_EMPTY)

    def validate(self, path: str) -> None:
        def at(key: str) -> str:
            return f"{path}.{key}" if path else key

        if self.resource_lock != "leases":
            raise ConfigError(
                None,
                at("resourceLock"),
                f'expected "leases" (the only lock this scheduler supports; '
                f'"endpoints", "configmaps" and their combinations were removed from '
                f'Kubernetes), got "{self.resource_lock}"',
            )
        if not self.leader_elect:
            return
        if self.lease_duration <= self.renew_deadline:
            raise ConfigError(
                None,
                at("leaseDuration"),
                f"expected more than renewDeadline ({GO_DURATION.encode(self.renew_deadline)}), "
                f'got "{GO_DURATION.encode(self.lease_duration)}"',
            )
        if self.renew_deadline <= _JITTER_FACTOR * self.retry_period:
            raise ConfigError(
                None,
                at("renewDeadline"),
                f"expected more than {_JITTER_FACTOR} x retryPeriod "
                f"({GO_DURATION.encode(self.retry_period)}), "
                f'got "{GO_DURATION.encode(self.renew_deadline)}"',
            )


@dataclass(frozen=True)
class ClientConnection:
    """``clientConnection``: how to reach the API server, and how fast."""

    kubeconfig: str = yaml_field("")
    """Empty: the in-cluster service account."""
    qps: float = yaml_field(50.0, check=Check("a number > 0", lambda v: v > 0))
    burst: int = yaml_field(100, check=at_least(1))
    content_type: str = yaml_field("application/vnd.kubernetes.protobuf")
    """Accepted for compatibility; the Python client always speaks JSON."""
    accept_content_types: str = yaml_field("")


@dataclass(frozen=True)
class PluginRef:
    """One entry of ``enabled``/``disabled``: a plugin name and, at score, its weight."""

    name: str = yaml_field(check=NON_EMPTY)
    weight: int | None = yaml_field(None, check=at_least(0))


@dataclass(frozen=True)
class PluginSet:
    enabled: tuple[PluginRef, ...] = yaml_field(factory=tuple)
    disabled: tuple[PluginRef, ...] = yaml_field(factory=tuple)
    """``{name: "*"}`` disables every default plugin of the extension point."""


EXTENSION_POINTS: tuple[str, ...] = (
    "pre_enqueue",
    "queue_sort",
    "pre_filter",
    "filter",
    "post_filter",
    "pre_score",
    "score",
    "reserve",
    "permit",
    "pre_bind",
    "bind",
    "post_bind",
)
"""The extension points, in the order a pod meets them (attribute names)."""

POD_GROUP_POINTS: tuple[str, ...] = ("placement_generate", "placement_score", "pod_group_post_filter")
"""kube-scheduler v1.37's extension points of pod group scheduling (``Plugins.validate``)."""


@dataclass(frozen=True)
class Plugins:
    """``plugins``: per extension point, what to enable and disable on top of the defaults."""

    pre_enqueue: PluginSet = yaml_field(factory=PluginSet)
    queue_sort: PluginSet = yaml_field(factory=PluginSet)
    pre_filter: PluginSet = yaml_field(factory=PluginSet)
    filter: PluginSet = yaml_field(factory=PluginSet)
    post_filter: PluginSet = yaml_field(factory=PluginSet)
    pre_score: PluginSet = yaml_field(factory=PluginSet)
    score: PluginSet = yaml_field(factory=PluginSet)
    reserve: PluginSet = yaml_field(factory=PluginSet)
    permit: PluginSet = yaml_field(factory=PluginSet)
    pre_bind: PluginSet = yaml_field(factory=PluginSet)
    bind: PluginSet = yaml_field(factory=PluginSet)
    post_bind: PluginSet = yaml_field(factory=PluginSet)
    multi_point: PluginSet = yaml_field(factory=PluginSet)
    """Plugins enabled here run at every extension point they implement."""
    placement_generate: PluginSet = yaml_field(factory=PluginSet)
    placement_score: PluginSet = yaml_field(factory=PluginSet)
    pod_group_post_filter: PluginSet = yaml_field(factory=PluginSet)
    """The pod group (workload) points of kube-scheduler v1.37 (``POD_GROUP_POINTS``):
    accepted, as its own written configuration has them, but no plugin here implements
    them, so nothing may be enabled there."""

    def point(self, name: str) -> PluginSet:
        return getattr(self, name)

    def validate(self, path: str) -> None:
        for point in POD_GROUP_POINTS:
            for i, ref in enumerate(self.point(point).enabled):
                raise ConfigError(
                    None,
                    join(join(join(path, camel(point)), "enabled"), i),
                    f"pod group (workload) scheduling is not supported: no plugin may be enabled "
                    f"here, got {ref.name!r}",
                )


@dataclass(frozen=True)
class PluginConfig:
    """One ``pluginConfig`` entry; ``args`` is decoded later, per plugin."""

    name: str = yaml_field(check=NON_EMPTY)
    args: dict[str, Any] | None = yaml_field(None)


@dataclass(frozen=True)
class ProfileConfig:
    """One entry of ``profiles``, as written."""

    scheduler_name: str | None = yaml_field(None, check=NON_EMPTY)
    percentage_of_nodes_to_score: int | None = yaml_field(None, check=between(0, 100))
    plugins: Plugins | None = yaml_field(None)
    plugin_config: tuple[PluginConfig, ...] = yaml_field(factory=tuple)


@dataclass(frozen=True)
class KubeSchedulerConfiguration:
    """The file's body, without ``apiVersion``/``kind``."""

    parallelism: int = yaml_field(16, check=at_least(1))
    leader_election: LeaderElection = yaml_field(factory=LeaderElection)
    client_connection: ClientConnection = yaml_field(factory=ClientConnection)
    percentage_of_nodes_to_score: int = yaml_field(0, check=between(0, 100))
    """0 means adaptive: max(5, 50 - nodes/125) percent, at least 100 nodes."""
    pod_initial_backoff_seconds: int = yaml_field(1, check=at_least(1), int64=True)
    pod_max_backoff_seconds: int = yaml_field(10, check=at_least(1), int64=True)
    enable_profiling: bool = yaml_field(True)
    enable_contention_profiling: bool | None = yaml_field(None)
    """Defaults to ``enableProfiling``."""
    profiles: tuple[ProfileConfig, ...] = yaml_field(factory=tuple)
    extenders: tuple[dict[str, Any], ...] = yaml_field(factory=tuple)
    """Accepted only empty: extenders are not supported."""
    delay_cache_until_active: bool = yaml_field(False)
    """Accepted only false."""

    def validate(self, path: str) -> None:
        if self.pod_max_backoff_seconds < self.pod_initial_backoff_seconds:
            raise ConfigError(
                None,
                "podMaxBackoffSeconds",
                f"expected an integer >= podInitialBackoffSeconds "
                f"({self.pod_initial_backoff_seconds}), got {self.pod_max_backoff_seconds}",
            )
        if self.extenders:
            raise ConfigError(
                None, "extenders", "expected no extenders (scheduler extenders are not supported)"
            )
        if self.delay_cache_until_active:
            raise ConfigError(None, "delayCacheUntilActive", "expected false (not supported)")
