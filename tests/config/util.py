"""Helpers for the configuration tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from scheduler.config import ConfigError, SchedulerConfig, parse_config

DATA = Path(__file__).parent / "data"
SEED = DATA / "seed-scheduler-config.yaml"
V1 = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

DYNAMIC_CONFIG = '{name: Dynamic, args: {promeAddr: "http://prometheus:9090"}}'
"""A pluginConfig entry for Dynamic, in YAML flow style."""


def load(body: str, header: str = V1) -> SchedulerConfig:
    """The effective configuration of a v1 file whose body is ``body`` (dedented)."""
    return parse_config(header + textwrap.dedent(body), file="sched.yaml", policies=False)


def error(body: str, header: str = V1) -> ConfigError:
    """The error loading such a file raises."""
    with pytest.raises(ConfigError) as info:
        load(body, header)
    assert info.value.file == "sched.yaml"
    return info.value
