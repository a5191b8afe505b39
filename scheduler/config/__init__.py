"""Configuration: KubeSchedulerConfiguration files, their defaults, and the plugins' args.

The entry points::

    config = load_config("scheduler-config.yaml")     # or default_config()
    profile = config.profile("default-scheduler")
    profile.plugins.filter       # ("NodeUnschedulable", "NodeName", ...)
    profile.scores()             # (("TaintToleration", 3), ...)
    profile.args_for("Dynamic")  # a DynamicArgs
    dump_config(config)          # v1 YAML, as --write-config-to writes it

Every problem is a :class:`ConfigError` naming the file, the field path and
what was expected.
"""

from scheduler.config.durations import DurationError, duration_seconds, format_duration, parse_duration
from scheduler.config.effective import EnabledPlugins, Profile, SchedulerConfig
from scheduler.config.errors import ConfigError
from scheduler.config.loading import default_config, load_config, parse_config
from scheduler.config.options import LoggingOptions, Options, ServingOptions
from scheduler.config.types import ClientConnection, LeaderElection
from scheduler.config.writing import config_document, dump_config

__all__ = [
    "ClientConnection",
    "ConfigError",
    "DurationError",
    "EnabledPlugins",
    "LeaderElection",
    "LoggingOptions",
    "Options",
    "Profile",
    "SchedulerConfig",
    "ServingOptions",
    "config_document",
    "default_config",
    "dump_config",
    "duration_seconds",
    "format_duration",
    "load_config",
    "parse_config",
    "parse_duration",
]
