"""crane-scheduler's ``DynamicSchedulerPolicy`` file: load and check.

The format is crane's, unchanged (``pkg/plugins/apis/policy/v1alpha1/types.go``)::

    apiVersion: scheduler.policy.crane.io/v1alpha1
    kind: DynamicSchedulerPolicy
    spec:
      syncPolicy: [{name: cpu_usage_avg_5m, period: 3m}, ...]
      predicate:  [{name: cpu_usage_avg_5m, maxLimitPecent: 0.65}, ...]   # sic: "Pecent"
      priority:   [{name: cpu_usage_avg_5m, weight: 0.2}, ...]
      hotValue:   [{timeRange: 5m, count: 5}, ...]

Durations (``period``, ``timeRange``) are Go durations, read with Go's rules.

Checked more strictly than crane (which accepts almost anything and fails at run
time): every problem is a :class:`ConfigError` naming the file, the field path
(``spec.predicate[1].maxLimitPecent``) and what was expected. One addition: a
``syncPolicy`` entry may omit ``period``; the plugin's ``metrics_update_period``
then applies (crane would start a zero-period ticker and panic).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import yaml

from scheduler.config.decode import describe, shorten
from scheduler.config.documents import load_yaml
from scheduler.config.durations import DurationError, parse_duration
from scheduler.config.errors import ConfigError

API_VERSION = "scheduler.policy.crane.io/v1alpha1"
KIND = "DynamicSchedulerPolicy"

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")

# --- the policy ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetricPolicy:
    """An entry of ``syncPolicy``, ``predicate`` or ``priority``: each names one metric."""

    name: str
    """A Prometheus metric name (one instant query fetches every node's series)."""


@dataclass(frozen=True, slots=True)
class SyncPolicy(MetricPolicy):
    period: float | None
    """Seconds between refreshes; None when the entry omits ``period``."""


@dataclass(frozen=True, slots=True)
class PredicatePolicy(MetricPolicy):
    max_limit_percent: float
    """``maxLimitPecent``: a fraction 0..1; usage above it rejects the node; 0 disables the check."""


@dataclass(frozen=True, slots=True)
class PriorityPolicy(MetricPolicy):
    weight: float
    """Non-negative; a node's load score is Σ weight·(1−usage) / Σ weight."""


@dataclass(frozen=True, slots=True)
class HotValuePolicy:
    time_range: float
    """Seconds to look back over this scheduler's binds."""
    count: int
    """Every ``count`` binds within ``time_range`` add 1 to the node's hot value."""


@dataclass(frozen=True, slots=True)
class DynamicPolicy:
    sync_policy: tuple[SyncPolicy, ...] = ()
    predicate: tuple[PredicatePolicy, ...] = ()
    priority: tuple[PriorityPolicy, ...] = ()
    hot_value: tuple[HotValuePolicy, ...] = ()

    def metrics_in_use(self) -> tuple[str, ...]:
        """The metrics the filter or the score reads, in policy order, each once."""
        seen: dict[str, None] = {}
        for p in (*self.predicate, *self.priority):
            seen.setdefault(p.name, None)
        return tuple(seen)

    def periods(self, default: float) -> dict[str, float]:
        """Refresh period in seconds of each metric in use (``default`` where period is omitted)."""
        by_name = {s.name: s.period for s in self.sync_policy}
        return {m: by_name[m] or default for m in self.metrics_in_use()}

    def sync_periods(self) -> dict[str, float]:
        """The ``syncPolicy`` period of each metric in use that has one (crane's annotations of
        the others are never fresh: ``getActiveDuration``)."""
        by_name = {s.name: s.period for s in self.sync_policy}
        return {m: period for m in self.metrics_in_use() if (period := by_name.get(m))}


# --- loading ----------------------------------------------------------------------------------

T = TypeVar("T")


class _Reader:
    """Reads one file's parsed YAML, raising ConfigError with the file and field path."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, path: str, message: str) -> ConfigError:
        return ConfigError(self.file, path, message)

    def mapping(self, value: Any, path: str, known: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {_describe(value)}")
        for key in value:
            if key not in known:
                raise self.fail(
                    _join(path, shorten(str(key))),
                    f"unknown field {describe(str(key))}; expected one of: {', '.join(known)}",
                )
        return value

    def items(
        self,
        spec: dict[str, Any],
        key: str,
        path: str,
        read_one: Callable[[dict[str, Any], str], T],
        known: tuple[str, ...],
    ) -> tuple[T, ...]:
        raw = spec.get(key)
        if raw is None:
            return ()
        where = _join(path, key)
        if not isinstance(raw, list):
            raise self.fail(where, f"expected a list, got {_describe(raw)}")
        return tuple(
            read_one(self.mapping(item, f"{where}[{i}]", known), f"{where}[{i}]")
            for i, item in enumerate(raw)
        )

    def name(self, item: dict[str, Any], path: str) -> str:
        value = item.get("name")
        if value is None:
            raise self.fail(_join(path, "name"), "required field missing: expected a Prometheus metric name")
        if not isinstance(value, str) or not _METRIC_NAME.fullmatch(value):
            raise self.fail(
                _join(path, "name"),
                f"expected a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), got {describe(value)}",
            )
        return value

    def number(
        self, item: dict[str, Any], key: str, path: str, expected: str, ok: Callable[[float], bool]
    ) -> float:
        value = item.get(key)
        where = _join(path, key)
        if value is None:
            raise self.fail(where, f"required field missing: expected {expected}")
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not ok(float(value))
        ):
            raise self.fail(where, f"expected {expected}, got {describe(value)}")
        return float(value)

    def count(self, item: dict[str, Any], key: str, path: str) -> int:
        value = item.get(key)
        where = _join(path, key)
        if value is None:
            raise self.fail(where, "required field missing: expected a whole number >= 1")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(where, f"expected a whole number >= 1, got {describe(value)}")
        return value

    def required_duration(self, item: dict[str, Any], key: str, path: str) -> float:
        seconds = self.duration(item, key, path)
        if seconds is None:
            raise self.fail(_join(path, key), 'required field missing: expected a Go duration such as "5m"')
        return seconds

    def duration(self, item: dict[str, Any], key: str, path: str) -> float | None:
        value = item.get(key)
        where = _join(path, key)
        if value is None:
            return None
        expected = 'a positive Go duration such as "3m" or "1h30m"'
        if not isinstance(value, str):
            raise self.fail(where, f"expected {expected}, got {describe(value)}")
        try:
            ns = parse_duration(value)
        except DurationError as e:
            raise self.fail(where, f"expected {expected}, got {describe(value)} ({e})") from None
        if ns <= 0:
            raise self.fail(where, f"expected {expected}, got {describe(value)}")
        return ns / 1e9


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _describe(value: Any) -> str:
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {describe(value)}"


def _check_unique(reader: _Reader, items: tuple[MetricPolicy, ...], section: str) -> None:
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        if item.name in first:
            raise reader.fail(
                f"spec.{section}[{i}].name",
                f"duplicate metric {describe(item.name)}, already at spec.{section}[{first[item.name]}]",
            )
        first[item.name] = i


def parse_policy(document: Any, file: str) -> DynamicPolicy:
    """Check a parsed policy document (as ``yaml.safe_load`` returns it)."""
    r = _Reader(file)
    top = r.mapping(document, "", ("apiVersion", "kind", "metadata", "spec"))
    if top.get("apiVersion") != API_VERSION:
        raise r.fail("apiVersion", f'expected "{API_VERSION}", got {describe(top.get("apiVersion"))}')
    if top.get("kind") != KIND:
        raise r.fail("kind", f'expected "{KIND}", got {describe(top.get("kind"))}')
    if top.get("metadata") is not None and not isinstance(top["metadata"], dict):
        raise r.fail("metadata", f"expected a mapping, got {_describe(top['metadata'])}")
    if top.get("spec") is None:
        raise r.fail(
            "spec", "required field missing: expected a mapping with syncPolicy, predicate, priority"
        )
    spec = r.mapping(top["spec"], "spec", ("syncPolicy", "predicate", "priority", "hotValue"))

    sync = r.items(
        spec,
        "syncPolicy",
        "spec",
        lambda it, p: SyncPolicy(name=r.name(it, p), period=r.duration(it, "period", p)),
        ("name", "period"),
    )
    predicate = r.items(
        spec,
        "predicate",
        "spec",
        lambda it, p: PredicatePolicy(
            name=r.name(it, p),
            max_limit_percent=r.number(
                it, "maxLimitPecent", p, "a number between 0 and 1", lambda v: 0 <= v <= 1
            ),
        ),
        ("name", "maxLimitPecent"),
    )
    priority = r.items(
        spec,
        "priority",
        "spec",
        lambda it, p: PriorityPolicy(
            name=r.name(it, p), weight=r.number(it, "weight", p, "a non-negative number", lambda v: v >= 0)
        ),
        ("name", "weight"),
    )
    hot = r.items(
        spec,
        "hotValue",
        "spec",
        lambda it, p: HotValuePolicy(
            time_range=r.required_duration(it, "timeRange", p), count=r.count(it, "count", p)
        ),
        ("timeRange", "count"),
    )

    for section, items in (("syncPolicy", sync), ("predicate", predicate), ("priority", priority)):
        _check_unique(r, items, section)
    synced = {s.name for s in sync}
    for section, items in (("predicate", predicate), ("priority", priority)):
        for i, item in enumerate(items):
            if item.name not in synced:
                raise r.fail(
                    f"spec.{section}[{i}].name",
                    f"metric {describe(item.name)} has no spec.syncPolicy entry, so it would never be "
                    f"fetched; add {{name: {item.name}, period: ...}} to spec.syncPolicy",
                )
    return DynamicPolicy(sync_policy=sync, predicate=predicate, priority=priority, hot_value=hot)


def load_policy(path: str) -> DynamicPolicy:
    """Read and check a policy file; every problem is a :class:`ConfigError`."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(path, "", f"cannot read the policy file: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(path, "", f"expected UTF-8 text: {e}") from None
    try:
        docs = load_yaml(text, path)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(path, "", f"invalid YAML{where}: {problem}") from None
    docs = [d for d in docs if d is not None]
    if not docs:
        raise ConfigError(path, "", f"the file is empty; expected a {KIND}")
    if len(docs) > 1:
        raise ConfigError(path, "", f"expected one YAML document, got {len(docs)}")
    return parse_policy(docs[0], path)
