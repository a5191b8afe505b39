"""The Grafana dashboard the prometheus method renders: a ConfigMap Grafana's sidecar picks up,
whose every query names only series the scheduler exports (built as the app builds its
registry) or that Prometheus makes itself."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from scheduler.core.cache import Cache
from scheduler.metrics import Metrics
from scheduler.plugins.dynamic.nodeview import node_view_collector
from scheduler.plugins.dynamic.source import _metrics_for
from scheduler.shadow.judge import Judge
from tests.deploy.util import rendered

PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
    "offset",
}  # fmt: skip
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported() -> set[str]:
    """Every series name the scheduler's /metrics can carry: the registry of ``App`` with the
    collectors its parts add (the Dynamic plugin's, shadow mode's)."""
    m = Metrics()
    _metrics_for(m.registry)
    node_view_collector(m.registry)
    Judge(Cache(), {}, m.registry)
    return {f.name + s for f in m.registry.collect() for s in SUFFIXES.get(f.type, ("",))}


def dashboard() -> dict[str, Any]:
    maps = [
        o
        for o in rendered("prometheus").objects
        if o["kind"] == "ConfigMap" and o["metadata"]["labels"].get("grafana_dashboard") == "1"
    ]
    assert len(maps) == 1, maps
    (text,) = maps[0]["data"].values()
    return json.loads(text)


def queries(d: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and query variable."""
    out = []
    for p in d["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            out.append(
                (f"variable {v['name']}", re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", v["definition"]))
            )
    return out


def series_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (not functions, labels, keywords)."""
    e = re.sub(r'"[^"]*"', '""', expr)  # label values
    e = re.sub(r"\{[^}]*\}", "", e)  # matchers
    e = re.sub(r"\[[^\]]*\]", "", e)  # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)  # label lists
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        word, rest = m.group(0), e[m.end() :].lstrip()
        if rest.startswith("(") or word in PROMQL_WORDS or e[: m.start()].endswith("$"):
            continue
        names.add(word)
    return names


def test_the_dashboard_is_a_configmap_for_grafanas_sidecar() -> None:
    d = dashboard()
    assert d["uid"] == "dynamic-scheduler"
    assert any(p["type"] == "row" for p in d["panels"])
    assert len(queries(d)) >= 15


def test_every_query_names_a_series_the_scheduler_exports() -> None:
    have = exported()
    unknown = [
        f"{where}: {name}"
        for where, expr in queries(dashboard())
        for name in series_names(expr)
        if name not in have
    ]
    assert not unknown, "series no scheduler exports:\n" + "\n".join(unknown)


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        (
            'sum by (profile, result) (rate(scheduler_schedule_attempts_total{profile=~"$profile"}[$__rate_interval]))',
            {"scheduler_schedule_attempts_total"},
        ),
        ("histogram_quantile(0.99, sum by (le) (rate(a_bucket[5m])))", {"a_bucket"}),
        ('max by (node) (x{m="y"}) > 0 and on (node) z', {"x", "z"}),
    ],
)
def test_series_names_finds_the_metrics_of_an_expression(expr: str, want: set[str]) -> None:
    assert series_names(expr) == want


def test_the_check_catches_a_misspelt_metric() -> None:
    d = dashboard()
    d["panels"][1]["targets"][0]["expr"] = "rate(scheduler_schedule_attempt_total[5m])"
    bad = [n for _, e in queries(d) for n in series_names(e) if n not in exported()]
    assert bad == ["scheduler_schedule_attempt_total"]
