"""The configuration ``explain`` runs when none is given: the deployed scheduler's.

The lease method keeps the scheduler's configuration and policy in the ConfigMap
``scheduler-config`` (shadow mode in ``shadow-config``), labelled as ours; their keys
are the files' names. The scheduler's ConfigMap is taken first, the shadow's when no
scheduler is deployed; with none (nothing deployed, or the static-pod method, whose
files are on the control-plane node) ``explain`` runs kube-scheduler's default profile
and says so.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scheduler.cluster.client import api_request
from scheduler.config.effective import SchedulerConfig
from scheduler.config.loading import DYNAMIC, parse_config, with_dynamic_policies
from scheduler.deploy.cmdline import UsageError
from scheduler.deploy.templates import labels

CONFIG_KEY = "scheduler-config.yaml"
COMPONENTS = (("scheduler", "the deployed scheduler"), ("shadow", "the deployed shadow"))


@dataclass(frozen=True)
class Deployed:
    config: SchedulerConfig
    source: str
    """``ConfigMap <ns>/<name> (<whose>)``."""


def deployed_config(api: Any, workdir: Path) -> Deployed | None:
    """The configuration of the scheduler deployed by the lease method (or of the shadow), with
    its Dynamic policy written into ``workdir``; None when no such ConfigMap exists."""
    for component, whose in COMPONENTS:
        selector = ",".join(f"{k}={v}" for k, v in labels(component).items())
        found = api_request(api, "GET", "/api/v1/configmaps", query=[("labelSelector", selector)])["items"]
        found = [cm for cm in found if CONFIG_KEY in (cm.get("data") or {})]
        if not found:
            continue
        names = sorted(f"{cm['metadata']['namespace']}/{cm['metadata']['name']}" for cm in found)
        if len(found) > 1:
            raise UsageError(
                f"{len(found)} ConfigMaps of {whose} ({', '.join(names)}): pick the configuration with --config"
            )
        return Deployed(_load(found[0], workdir), f"ConfigMap {names[0]} ({whose})")
    return None


def _load(cm: dict[str, Any], workdir: Path) -> SchedulerConfig:
    meta, data = cm["metadata"], cm["data"]
    where = f"ConfigMap {meta['namespace']}/{meta['name']}"
    cfg = parse_config(data[CONFIG_KEY], file=f"{where}: {CONFIG_KEY}", policies=False)
    profiles = []
    for p in cfg.profiles:
        args = p.args.get(DYNAMIC)
        if args is not None:
            # The policy's path is where the pod mounts the ConfigMap; its key is the file name.
            key = posixpath.basename(args.policy_config_path)
            if key not in data or "/" in key:
                raise UsageError(
                    f"{where}: profile {p.scheduler_name!r} reads its Dynamic policy from "
                    f"{args.policy_config_path}, and the ConfigMap has no key {key!r}"
                )
            path = workdir / key
            path.write_text(data[key], encoding="utf-8")
            p = replace(p, args={**p.args, DYNAMIC: replace(args, policy_config_path=str(path))})
        profiles.append(p)
    return with_dynamic_policies(replace(cfg, profiles=tuple(profiles)))
