"""Loading crane's DynamicSchedulerPolicy: the published default, each kind of mistake, Go durations."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.config.errors import ConfigError
from scheduler.plugins.dynamic.policy import (
    HotValuePolicy,
    PredicatePolicy,
    PriorityPolicy,
    SyncPolicy,
    load_policy,
)

CRANE_DEFAULT = Path(__file__).parents[2] / "data" / "crane-scheduler" / "policy.yaml"

HEADER = "apiVersion: scheduler.policy.crane.io/v1alpha1\nkind: DynamicSchedulerPolicy\n"
GOOD_SPEC = """\
spec:
  syncPolicy:
    - {name: cpu_usage_avg_5m, period: 3m}
    - {name: mem_usage_avg_5m, period: 3m}
  predicate:
    - {name: cpu_usage_avg_5m, maxLimitPecent: 0.65}
    - {name: mem_usage_avg_5m, maxLimitPecent: 0.65}
  priority:
    - {name: cpu_usage_avg_5m, weight: 0.2}
  hotValue:
    - {timeRange: 5m, count: 5}
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_crane_default_policy_loads_as_published() -> None:
    policy = load_policy(str(CRANE_DEFAULT))

    assert policy.sync_policy == (
        SyncPolicy("cpu_usage_avg_5m", 180.0),
        SyncPolicy("cpu_usage_max_avg_1h", 900.0),
        SyncPolicy("cpu_usage_max_avg_1d", 10800.0),
        SyncPolicy("mem_usage_avg_5m", 180.0),
        SyncPolicy("mem_usage_max_avg_1h", 900.0),
        SyncPolicy("mem_usage_max_avg_1d", 10800.0),
    )
    assert policy.predicate == (
        PredicatePolicy("cpu_usage_avg_5m", 0.65),
        PredicatePolicy("cpu_usage_max_avg_1h", 0.75),
        PredicatePolicy("mem_usage_avg_5m", 0.65),
        PredicatePolicy("mem_usage_max_avg_1h", 0.75),
    )
    assert [(p.name, p.weight) for p in policy.priority] == [
        ("cpu_usage_avg_5m", 0.2),
        ("cpu_usage_max_avg_1h", 0.3),
        ("cpu_usage_max_avg_1d", 0.5),
        ("mem_usage_avg_5m", 0.2),
        ("mem_usage_max_avg_1h", 0.3),
        ("mem_usage_max_avg_1d", 0.5),
    ]
    assert policy.hot_value == (HotValuePolicy(300.0, 5), HotValuePolicy(60.0, 2))
    assert policy.metrics_in_use() == (
        "cpu_usage_avg_5m",
        "cpu_usage_max_avg_1h",
        "mem_usage_avg_5m",
        "mem_usage_max_avg_1h",
        "cpu_usage_max_avg_1d",
        "mem_usage_max_avg_1d",
    )


def test_omitted_period_takes_the_default_and_unused_sync_entries_are_not_fetched(tmp_path: Path) -> None:
    policy = load_policy(
        write(
            tmp_path,
            HEADER
            + """\
spec:
  syncPolicy:
    - {name: cpu_usage_avg_5m}
    - {name: mem_usage_avg_5m, period: 1m30s}
    - {name: unused_metric, period: 1h}
  predicate:
    - {name: cpu_usage_avg_5m, maxLimitPecent: 1}
  priority:
    - {name: mem_usage_avg_5m, weight: 0}
""",
        )
    )
    assert policy.sync_policy[0] == SyncPolicy("cpu_usage_avg_5m", None)
    assert policy.periods(default=300.0) == {"cpu_usage_avg_5m": 300.0, "mem_usage_avg_5m": 90.0}
    assert policy.priority == (PriorityPolicy("mem_usage_avg_5m", 0.0),)
    assert policy.hot_value == ()


def test_metadata_is_allowed_and_sections_may_be_empty(tmp_path: Path) -> None:
    policy = load_policy(write(tmp_path, HEADER + "metadata: {name: p}\nspec:\n  syncPolicy: []\n"))
    assert policy.metrics_in_use() == ()


@pytest.mark.parametrize(
    ("text", "path", "message"),
    [
        pytest.param(
            HEADER.replace("v1alpha1", "v1") + GOOD_SPEC,
            "apiVersion",
            'expected "scheduler.policy.crane.io/v1alpha1", got "scheduler.policy.crane.io/v1"',
            id="api-version",
        ),
        pytest.param(
            HEADER.replace("DynamicSchedulerPolicy", "Policy") + GOOD_SPEC,
            "kind",
            'expected "DynamicSchedulerPolicy", got "Policy"',
            id="kind",
        ),
        pytest.param(HEADER, "spec", "required field missing", id="no-spec"),
        pytest.param(HEADER + "spec: [1]\n", "spec", "expected a mapping, got list", id="spec-not-mapping"),
        pytest.param(HEADER + "extra: 1\n" + GOOD_SPEC, "extra", 'unknown field "extra"', id="unknown-top"),
        pytest.param(
            HEADER + GOOD_SPEC + "  hotvalue: []\n",
            "spec.hotvalue",
            'unknown field "hotvalue"; expected one of: syncPolicy, predicate, priority, hotValue',
            id="unknown-spec-key",
        ),
        pytest.param(
            HEADER
            + GOOD_SPEC.replace("maxLimitPecent: 0.65}\n  priority", "maxLimitPercent: 0.65}\n  priority"),
            "spec.predicate[1].maxLimitPercent",
            'unknown field "maxLimitPercent"',
            id="corrected-typo",
        ),
        pytest.param(
            HEADER
            + GOOD_SPEC.replace(
                "mem_usage_avg_5m, maxLimitPecent: 0.65", "mem_usage_avg_5m, maxLimitPecent: 65"
            ),
            "spec.predicate[1].maxLimitPecent",
            "expected a number between 0 and 1, got 65",
            id="percent-threshold",
        ),
        pytest.param(
            HEADER
            + GOOD_SPEC.replace(
                "mem_usage_avg_5m, maxLimitPecent: 0.65", "mem_usage_avg_5m, maxLimitPecent: -0.1"
            ),
            "spec.predicate[1].maxLimitPecent",
            "expected a number between 0 and 1, got -0.1",
            id="negative-threshold",
        ),
        pytest.param(
            HEADER
            + GOOD_SPEC.replace("maxLimitPecent: 0.65}\n  priority", "maxLimitPecent: '0.6'}\n  priority"),
            "spec.predicate[1].maxLimitPecent",
            'expected a number between 0 and 1, got "0.6"',
            id="threshold-string",
        ),
        pytest.param(
            HEADER
            + GOOD_SPEC.replace("maxLimitPecent: 0.65}\n  priority", "maxLimitPecent: .nan}\n  priority"),
            "spec.predicate[1].maxLimitPecent",
            "expected a number between 0 and 1, got NaN",
            id="threshold-nan",
        ),
        pytest.param(
            HEADER
            + GOOD_SPEC.replace("{name: mem_usage_avg_5m, maxLimitPecent: 0.65}", "{name: mem_usage_avg_5m}"),
            "spec.predicate[1].maxLimitPecent",
            "required field missing: expected a number between 0 and 1",
            id="threshold-missing",
        ),
        pytest.param(
            HEADER + GOOD_SPEC.replace("weight: 0.2", "weight: -1"),
            "spec.priority[0].weight",
            "expected a non-negative number, got -1",
            id="negative-weight",
        ),
        pytest.param(
            HEADER + GOOD_SPEC.replace("weight: 0.2", "weight: true"),
            "spec.priority[0].weight",
            "expected a non-negative number, got true",
            id="bool-weight",
        ),
        pytest.param(
            HEADER + GOOD_SPEC.replace("count: 5", "count: 0"),
            "spec.hotValue[0].count",
            "expected a whole number >= 1, got 0",
            id="count-zero",
        ),
        pytest.param(
            HEADER + GOOD_SPEC.replace("count: 5", "count: 2.5"),
            "spec.hotValue[0].count",
            "expected a whole number >= 1, got 2.5",
            id="count-fraction",
        ),
        pytest.param(
            HEADER + GOOD_SPEC.replace("timeRange: 5m", "timeRange: 5"),
            "spec.hotValue[0].timeRange",
            'expected a positive Go duration such as "3m" or "1h30m", got 5',
            id="range-number",
        ),
        pytest.param(
            HEADER + GOOD_SPEC.replace("timeRange: 5m, ", ""),
            "spec.hotValue[0].timeRange",
            "required field missing",
            id="range-missing",
        ),
        pytest.param(
            HEADER + GOOD_SPEC.replace("cpu_usage_avg_5m, period: 3m", "cpu_usage_avg_5m, period: 3d"),
            "spec.syncPolicy[0].period",
            'got "3d" (time: unknown unit "d" in duration "3d")',
            id="period-unit",
        ),
        pytest.param(
            HEADER + GOOD_SPEC.replace("cpu_usage_avg_5m, period: 3m", "cpu_usage_avg_5m, period: -3m"),
            "spec.syncPolicy[0].period",
            "expected a positive Go duration",
            id="period-negative",
        ),
        pytest.param(
            HEADER + GOOD_SPEC.replace("cpu_usage_avg_5m, period: 3m", "cpu_usage_avg_5m, period: '0'"),
            "spec.syncPolicy[0].period",
            "expected a positive Go duration",
            id="period-zero",
        ),
        pytest.param(
            HEADER + GOOD_SPEC.replace("    - {name: mem_usage_avg_5m, period: 3m}\n", ""),
            "spec.predicate[1].name",
            'metric "mem_usage_avg_5m" has no spec.syncPolicy entry',
            id="predicate-not-synced",
        ),
        pytest.param(
            HEADER
            + GOOD_SPEC.replace("{name: cpu_usage_avg_5m, weight: 0.2}", "{name: disk_usage, weight: 0.2}"),
            "spec.priority[0].name",
            'metric "disk_usage" has no spec.syncPolicy entry',
            id="priority-not-synced",
        ),
        pytest.param(
            HEADER
            + GOOD_SPEC.replace(
                "{name: mem_usage_avg_5m, period: 3m}", "{name: cpu_usage_avg_5m, period: 1m}"
            ),
            "spec.syncPolicy[1].name",
            'duplicate metric "cpu_usage_avg_5m", already at spec.syncPolicy[0]',
            id="duplicate",
        ),
        pytest.param(
            HEADER
            + GOOD_SPEC.replace(
                "{name: cpu_usage_avg_5m, weight: 0.2}", "{name: 'cpu{job=\"x\"}', weight: 0.2}"
            ),
            "spec.priority[0].name",
            "expected a Prometheus metric name",
            id="name-not-a-metric",
        ),
        pytest.param(
            HEADER + GOOD_SPEC.replace("{name: cpu_usage_avg_5m, weight: 0.2}", "{weight: 0.2}"),
            "spec.priority[0].name",
            "required field missing",
            id="name-missing",
        ),
        pytest.param(
            HEADER
            + GOOD_SPEC.replace(
                "  priority:\n    - {name: cpu_usage_avg_5m, weight: 0.2}\n",
                "  priority: {name: cpu_usage_avg_5m}\n",
            ),
            "spec.priority",
            "expected a list, got dict",
            id="section-not-list",
        ),
        pytest.param(
            HEADER + GOOD_SPEC.replace("- {timeRange: 5m, count: 5}", "- 5m"),
            "spec.hotValue[0]",
            'expected a mapping, got str "5m"',
            id="item-not-mapping",
        ),
    ],
)
def test_each_mistake_names_the_file_the_field_and_the_expectation(
    tmp_path: Path, text: str, path: str, message: str
) -> None:
    file = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_policy(file)
    assert caught.value.file == file
    assert caught.value.path == path
    assert message in caught.value.message
    assert str(caught.value).startswith(f"{file}: {path}: ")


def test_missing_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="cannot read the policy file: No such file or directory") as caught:
        load_policy(missing)
    assert caught.value.file == missing


def test_bad_yaml_reports_the_position(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match="invalid YAML at line 4, column 14: sequence entries are not allowed"
    ):
        load_policy(write(tmp_path, HEADER + "spec:\n  predicate: - bad\n"))


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="the file is empty"):
        load_policy(write(tmp_path, "# nothing\n"))
