"""Load a KubeSchedulerConfiguration file into the effective :class:`SchedulerConfig`.

Reading goes: YAML (strict: duplicate keys are errors, as in kube-scheduler),
``apiVersion``/``kind``, the typed fields (:mod:`scheduler.config.types`),
then per profile the plugin expansion (:mod:`scheduler.config.expansion`) and
the typed plugin args (:mod:`scheduler.config.pluginargs`). When a profile
enables ``Dynamic``, its policy file is loaded too, so a bad policy fails the
start like a bad configuration. Every problem is a :class:`ConfigError`
naming the file, the field path and what was expected.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Any

import yaml

from scheduler.config.decode import decode, describe, join
from scheduler.config.documents import load_yaml
from scheduler.config.effective import Profile, SchedulerConfig
from scheduler.config.errors import ConfigError
from scheduler.config.expansion import check_names, expand, merge_plugins, warn_not_implemented
from scheduler.config.pluginargs import ARGS_TYPES, decode_args
from scheduler.config.registry import NOT_IMPLEMENTED, PLUGIN_POINTS, default_plugins
from scheduler.config.types import (
    API_VERSION,
    API_VERSIONS,
    DEFAULT_SCHEDULER_NAME,
    KIND,
    KubeSchedulerConfiguration,
    ProfileConfig,
)

logger = logging.getLogger(__name__)

DYNAMIC = "Dynamic"
_V1BETA2_ONLY = ("healthzBindAddress", "metricsBindAddress")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str | int | float | bool):
                continue  # a mapping or list as a key: SafeLoader refuses it as unhashable
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f'duplicate key "{key}"', key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str, file: str | None) -> Any:
    """One YAML document; syntax errors name the line and column."""
    try:
        docs = [d for d in load_yaml(text, file, _StrictLoader) if d is not None]
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = ", ".join(p for p in (e.context, e.problem) if p) or "not YAML"
        raise ConfigError(file, where, f"invalid YAML: {what}") from None
    except yaml.YAMLError as e:
        raise ConfigError(file, "", f"invalid YAML: {e}") from None
    if not docs:
        raise ConfigError(file, "", f"expected a {KIND} document, got an empty file")
    if len(docs) > 1:
        raise ConfigError(file, "", f"expected one YAML document, got {len(docs)}")
    return docs[0]


def read_file(path: str | os.PathLike[str]) -> str:
    try:
        with open(path, encoding="utf-8-sig") as f:
            return f.read()
    except UnicodeDecodeError:
        raise ConfigError(os.fspath(path), "", "expected UTF-8 text") from None
    except OSError as e:
        raise ConfigError(os.fspath(path), "", f"cannot read the file: {e.strerror or e}") from None


def load_config(path: str | os.PathLike[str], *, policies: bool = True) -> SchedulerConfig:
    """Load, default and check a configuration file.

    With ``policies`` (the default) the Dynamic plugin's policy files are
    loaded as well; ``--write-config-to`` skips them, as it does not start.
    """
    file = os.fspath(path)
    return parse_config(read_file(file), file=file, policies=policies)


def parse_config(text: str, *, file: str | None = None, policies: bool = True) -> SchedulerConfig:
    """:func:`load_config` for text already read (``file`` names it in errors)."""
    document = parse_yaml(text, file)
    try:
        config = build_config(document)
    except ConfigError as e:
        raise ConfigError(file, e.path, e.message) from None
    config = replace(config, source=file)
    if policies:
        config = with_dynamic_policies(config)
    return config


def default_config() -> SchedulerConfig:
    """The configuration kube-scheduler runs without ``--config``."""
    return build_config({"apiVersion": API_VERSION, "kind": KIND})


def build_config(document: Any) -> SchedulerConfig:
    """The effective configuration of a parsed document (errors carry no file name)."""
    if not isinstance(document, dict):
        raise ConfigError(None, "", f"expected a {KIND} mapping, got {describe(document)}")
    body = dict(document)
    version, kind = body.pop("apiVersion", None), body.pop("kind", None)
    if version not in API_VERSIONS:
        versions = ", ".join(f'"{v}"' for v in API_VERSIONS)
        if version is None:
            raise ConfigError(None, "apiVersion", f"required; expected one of {versions}")
        raise ConfigError(None, "apiVersion", f"expected one of {versions}, got {describe(version)}")
    if kind != KIND:
        if kind is None:
            raise ConfigError(None, "kind", f'required; expected "{KIND}"')
        raise ConfigError(None, "kind", f'expected "{KIND}", got {describe(kind)}')
    if version.endswith("/v1beta2"):
        for key in _V1BETA2_ONLY:
            if body.pop(key, None):
                raise ConfigError(
                    None,
                    key,
                    "expected no value: the insecure endpoints were removed; "
                    "use --secure-port and --bind-address",
                )
    raw = decode(KubeSchedulerConfiguration, body)
    return _effective(raw, version)


def _effective(raw: KubeSchedulerConfiguration, version: str = API_VERSION) -> SchedulerConfig:
    profiles_raw = raw.profiles or (ProfileConfig(),)
    warned: set[str] = set()
    profiles: list[Profile] = []
    names: dict[str, int] = {}
    for i, pc in enumerate(profiles_raw):
        path = join("profiles", i)
        name = pc.scheduler_name
        if name is None:
            if len(profiles_raw) > 1:
                raise ConfigError(
                    None,
                    join(path, "schedulerName"),
                    "required when there are several profiles; expected a unique name",
                )
            name = DEFAULT_SCHEDULER_NAME
        if name in names:
            raise ConfigError(
                None,
                join(path, "schedulerName"),
                f'expected a unique name, got "{name}" (also profiles[{names[name]}])',
            )
        names[name] = i
        profiles.append(_profile(pc, name, path, warned, version))
    _check_common_queue_sort(profiles)
    contention = raw.enable_contention_profiling
    return SchedulerConfig(
        profiles=tuple(profiles),
        leader_election=raw.leader_election,
        client_connection=raw.client_connection,
        parallelism=raw.parallelism,
        percentage_of_nodes_to_score=raw.percentage_of_nodes_to_score,
        pod_initial_backoff_seconds=raw.pod_initial_backoff_seconds,
        pod_max_backoff_seconds=raw.pod_max_backoff_seconds,
        enable_profiling=raw.enable_profiling,
        enable_contention_profiling=raw.enable_profiling if contention is None else contention,
    )


def _profile(pc: ProfileConfig, name: str, path: str, warned: set[str], version: str) -> Profile:
    custom = check_names(pc.plugins, join(path, "plugins"), warned) if pc.plugins is not None else None
    merged = merge_plugins(default_plugins(version), custom)
    plugins, weights = expand(merged)
    if len(plugins.queue_sort) != 1:
        raise ConfigError(
            None,
            join(join(path, "plugins"), "queueSort"),
            f"expected exactly one queueSort plugin, got {len(plugins.queue_sort)}",
        )
    if not plugins.bind:
        raise ConfigError(
            None, join(join(path, "plugins"), "bind"), "expected at least one bind plugin, got none"
        )
    enabled = plugins.names()
    args: dict[str, Any] = {}
    configured: set[str] = set()
    for j, entry in enumerate(pc.plugin_config):
        at = join(join(path, "pluginConfig"), j)
        if entry.name in configured:
            raise ConfigError(
                None, join(at, "name"), f'expected one entry per plugin, got "{entry.name}" again'
            )
        if entry.name not in PLUGIN_POINTS:
            if entry.name in NOT_IMPLEMENTED:
                warn_not_implemented(entry.name, warned)
                continue
            raise ConfigError(
                None,
                join(at, "name"),
                f'unknown plugin "{entry.name}"; known plugins: {", ".join(sorted(PLUGIN_POINTS))}',
            )
        if entry.name not in enabled:
            raise ConfigError(
                None,
                join(at, "name"),
                f'expected a plugin this profile enables, got "{entry.name}" (not enabled in profile '
                f'"{name}")',
            )
        configured.add(entry.name)
        decoded = decode_args(entry.name, entry.args, join(at, "args"))
        if decoded is not None:
            args[entry.name] = decoded
    for plugin in enabled:
        if plugin in args or plugin not in ARGS_TYPES:
            continue
        args[plugin] = decode_args(plugin, None, join(path, "pluginConfig"))
    return Profile(
        scheduler_name=name,
        plugins=plugins,
        score_weights=weights,
        args=args,
        percentage_of_nodes_to_score=pc.percentage_of_nodes_to_score,
        configured=merged,
    )


def _check_common_queue_sort(profiles: list[Profile]) -> None:
    first = profiles[0]
    for i, p in enumerate(profiles[1:], start=1):
        if p.plugins.queue_sort != first.plugins.queue_sort:
            raise ConfigError(
                None,
                join(join(join("profiles", i), "plugins"), "queueSort"),
                f"expected the same queueSort plugins as profiles[0] {list(first.plugins.queue_sort)}, "
                f"got {list(p.plugins.queue_sort)}",
            )


def with_dynamic_policies(config: SchedulerConfig) -> SchedulerConfig:
    """Load the policy file of every profile that enables Dynamic (each path once)."""
    paths: list[str] = []
    for p in config.profiles:
        args = p.args.get(DYNAMIC)
        if args is not None and args.policy_config_path not in paths:
            paths.append(args.policy_config_path)
    if not paths:
        return config
    try:
        from scheduler.plugins.dynamic.policy import load_policy
    except ImportError as e:
        if e.name not in ("scheduler.plugins.dynamic", "scheduler.plugins.dynamic.policy"):
            raise
        raise ConfigError(
            config.source, "profiles", "the Dynamic plugin is not available in this build"
        ) from None
    policies = {path: load_policy(path) for path in paths}
    return replace(config, dynamic_policies=policies)
