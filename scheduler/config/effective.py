"""The effective configuration: what the scheduler runs after defaults and plugin expansion.

:class:`SchedulerConfig` is what :func:`scheduler.config.load_config` returns;
each :class:`Profile` lists, per extension point, the plugins to run in order,
the score weights and every enabled plugin's typed args.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.config.types import EXTENSION_POINTS, ClientConnection, LeaderElection, Plugins


@dataclass(frozen=True)
class EnabledPlugins:
    """Per extension point, the names of the plugins that run there, in order."""

    pre_enqueue: tuple[str, ...] = ()
    queue_sort: tuple[str, ...] = ()
    pre_filter: tuple[str, ...] = ()
    filter: tuple[str, ...] = ()
    post_filter: tuple[str, ...] = ()
    pre_score: tuple[str, ...] = ()
    score: tuple[str, ...] = ()
    reserve: tuple[str, ...] = ()
    permit: tuple[str, ...] = ()
    pre_bind: tuple[str, ...] = ()
    bind: tuple[str, ...] = ()
    post_bind: tuple[str, ...] = ()

    def at(self, point: str) -> tuple[str, ...]:
        """The plugins of one extension point, by attribute name (``"pre_filter"``)."""
        return getattr(self, point)

    def names(self) -> tuple[str, ...]:
        """Every enabled plugin once, in order of first appearance."""
        seen: dict[str, None] = {}
        for point in EXTENSION_POINTS:
            for name in self.at(point):
                seen.setdefault(name)
        return tuple(seen)


@dataclass(frozen=True)
class Profile:
    """One ``schedulerName``, ready to build: plugins per point, weights, args."""

    scheduler_name: str
    plugins: EnabledPlugins
    score_weights: Mapping[str, int]
    """The weight of every plugin enabled at score."""
    args: Mapping[str, Any]
    """Plugin name -> typed args (``scheduler.config.pluginargs``), for every enabled plugin that takes args."""
    percentage_of_nodes_to_score: int | None = None
    """None: the configuration's global value applies."""
    configured: Plugins = field(default_factory=Plugins)
    """The plugin sets merged with the defaults, as ``--write-config-to`` writes them."""

    def scores(self) -> tuple[tuple[str, int], ...]:
        """``(plugin, weight)`` for each score plugin, in order."""
        return tuple((name, self.score_weights[name]) for name in self.plugins.score)

    def args_for(self, plugin: str) -> Any:
        """The plugin's typed args, or None when it takes none."""
        return self.args.get(plugin)


@dataclass(frozen=True)
class SchedulerConfig:
    """The whole effective configuration (``KubeSchedulerConfiguration`` with defaults applied)."""

    profiles: tuple[Profile, ...]
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    client_connection: ClientConnection = field(default_factory=ClientConnection)
    parallelism: int = 16
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    enable_profiling: bool = True
    enable_contention_profiling: bool = True
    source: str | None = field(default=None, compare=False)
    """The file it was loaded from (None: built-in defaults)."""
    dynamic_policies: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """policyConfigPath -> loaded ``DynamicPolicy``, for the profiles that enable Dynamic."""

    def profile(self, scheduler_name: str) -> Profile | None:
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        return None

    def scheduler_names(self) -> tuple[str, ...]:
        return tuple(p.scheduler_name for p in self.profiles)

    def percentage_for(self, profile: Profile) -> int:
        """The profile's percentageOfNodesToScore, or the global one (0: adaptive)."""
        if profile.percentage_of_nodes_to_score is not None:
            return profile.percentage_of_nodes_to_score
        return self.percentage_of_nodes_to_score
