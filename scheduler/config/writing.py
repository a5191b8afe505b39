"""The effective configuration as a v1 KubeSchedulerConfiguration (``--write-config-to``).

The output has every default spelled out, plugin sets merged with the
defaults and a ``pluginConfig`` entry for every enabled plugin that takes
args, as kube-scheduler writes it; durations are Go strings ("15s").
Loading it again gives the same effective configuration.
"""

from __future__ import annotations

from typing import Any

import yaml

from scheduler.config.decode import camel, encode
from scheduler.config.effective import Profile, SchedulerConfig
from scheduler.config.types import API_VERSION, EXTENSION_POINTS, KIND


def _plugins(profile: Profile) -> dict[str, Any]:
    out: dict[str, Any] = {}
    merged = profile.configured
    for point in ("multi_point", *EXTENSION_POINTS):
        pset = encode(merged.point(point))
        pset = {k: v for k, v in pset.items() if v}
        if pset:
            out[camel(point)] = pset
    return out


def _profile(profile: Profile) -> dict[str, Any]:
    out: dict[str, Any] = {"schedulerName": profile.scheduler_name}
    if profile.percentage_of_nodes_to_score is not None:
        out["percentageOfNodesToScore"] = profile.percentage_of_nodes_to_score
    out["plugins"] = _plugins(profile)
    out["pluginConfig"] = [{"name": name, "args": encode(args)} for name, args in profile.args.items()]
    return out


def config_document(config: SchedulerConfig) -> dict[str, Any]:
    """The configuration as a v1 document (a plain dict, ready for YAML)."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "clientConnection": encode(config.client_connection),
        "enableContentionProfiling": config.enable_contention_profiling,
        "enableProfiling": config.enable_profiling,
        "leaderElection": encode(config.leader_election),
        "parallelism": config.parallelism,
        "percentageOfNodesToScore": config.percentage_of_nodes_to_score,
        "podInitialBackoffSeconds": config.pod_initial_backoff_seconds,
        "podMaxBackoffSeconds": config.pod_max_backoff_seconds,
        "profiles": [_profile(p) for p in config.profiles],
    }


class _Dumper(yaml.SafeDumper):
    """Block style, lists indented under their key, no aliases."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_config(config: SchedulerConfig) -> str:
    """The configuration as v1 YAML text."""
    return yaml.dump(
        config_document(config), Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True
    )
