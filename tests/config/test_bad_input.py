"""Bad input ends in one ``error:`` line and exit code 1, never a traceback, a hang or a flood.

Property tests (hypothesis) feed the configuration loader, the policy loader and the
command line with arbitrary documents, text and flags, each within a time bound; then
one test per class of input that once broke through: deep nesting, YAML aliases that
expand to billions of values or contain themselves, integers beyond int32 or beyond
what Python converts, long values in error messages.
"""

from __future__ import annotations

import contextlib
import io
import logging
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduler.cli import main
from scheduler.config.errors import ConfigError
from scheduler.plugins.dynamic.policy import load_policy

MAX_ERROR = 600
"""Characters an error line may have at most (file, field path, what was expected)."""
BOUND = settings(
    max_examples=150,
    deadline=timedelta(seconds=3),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

KEYS = st.sampled_from(
    [
        "apiVersion",
        "kind",
        "profiles",
        "schedulerName",
        "plugins",
        "pluginConfig",
        "name",
        "args",
        "weight",
        "enabled",
        "disabled",
        "score",
        "filter",
        "multiPoint",
        "parallelism",
        "leaderElection",
        "leaseDuration",
        "percentageOfNodesToScore",
        "spec",
        "syncPolicy",
        "predicate",
        "priority",
        "hotValue",
        "period",
        "maxLimitPecent",
        "timeRange",
        "count",
        "promeAddr",
        "x",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(
        [
            "kubescheduler.config.k8s.io/v1",
            "kubescheduler.config.k8s.io/v1beta2",
            "KubeSchedulerConfiguration",
            "scheduler.policy.crane.io/v1alpha1",
            "DynamicSchedulerPolicy",
            "Dynamic",
            "NodeResourcesFit",
            "5m",
            "-1s",
            "*",
        ]
    ),
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=5)),
    max_leaves=30,
)
YAML_TEXT = st.lists(
    st.sampled_from(list("ab:-[]{}&*!|>'\"#%@`,?\n ") + ["  ", "- ", ": ", "&a ", "*a", "9" * 30]),
    max_size=80,
).map("".join)


def run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    root = logging.getLogger()
    for h in list(root.handlers):  # main() logs to the stderr it was given
        root.removeHandler(h)
    return code, err.getvalue()


def assert_clean_refusal(code: int, stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert code in (0, 1), (code, stderr)
    if code == 1:
        errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, stderr
        assert len(errors[0]) <= MAX_ERROR, errors[0][:2000]


def config_file(text: str) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False, encoding="utf-8") as f:
        f.write(text)
    return f.name


def write_config(text: str) -> tuple[int, str]:
    path = config_file(text)
    try:
        return run(["--config", path, "--write-config-to", "/dev/null"])
    finally:
        Path(path).unlink()


# --- properties ---------------------------------------------------------------------------------


@BOUND
@given(DOCUMENTS)
def test_any_document_is_a_configuration_or_one_error(doc: Any) -> None:
    text = (
        yaml.safe_dump(
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", **doc}
        )
        if isinstance(doc, dict)
        else yaml.safe_dump(doc)
    )
    assert_clean_refusal(*write_config(text))


@BOUND
@given(YAML_TEXT)
@example("? ?")  # a mapping as a key: unhashable (found by this test)
@example("{[1]: 2}")
def test_any_text_is_a_configuration_or_one_error(text: str) -> None:
    assert_clean_refusal(*write_config(text))


@BOUND
@given(st.one_of(DOCUMENTS, YAML_TEXT))
def test_any_policy_is_a_policy_or_one_config_error(doc: Any) -> None:
    text = (
        doc
        if isinstance(doc, str)
        else yaml.safe_dump(
            {"apiVersion": "scheduler.policy.crane.io/v1alpha1", "kind": "DynamicSchedulerPolicy", **doc}
            if isinstance(doc, dict)
            else doc
        )
    )
    path = config_file(text)
    try:
        load_policy(path)
    except ConfigError as e:
        assert len(str(e)) <= MAX_ERROR, str(e)[:2000]
    finally:
        Path(path).unlink()


FLAGS = st.sampled_from(
    [
        "--kube-api-qps",
        "--kube-api-burst",
        "--leader-elect",
        "--leader-elect-lease-duration",
        "--leader-elect-renew-deadline",
        "--leader-elect-retry-period",
        "--leader-elect-resource-lock",
        "--leader-elect-resource-name",
        "--secure-port",
        "--bind-address",
        "-v",
        "--logging-format",
        "--config",
        "--feature-gates",
        "--nonsense",
    ]
)
VALUES = st.one_of(
    st.text(max_size=20), st.integers(-(2**40), 2**40).map(str), st.sampled_from(["15s", "true", "-1", "0"])
)


@BOUND
@given(st.lists(st.tuples(FLAGS, VALUES), max_size=5))
def test_any_flags_are_taken_or_one_error(flags: list[tuple[str, str]]) -> None:
    argv = [f"{flag}={value}" for flag, value in flags if flag != "--config"]
    assert_clean_refusal(*run([*argv, "--write-config-to", "/dev/null"]))


# --- the classes that once broke through ------------------------------------------------------------


def refusal(text: str) -> str:
    code, stderr = write_config(text)
    assert_clean_refusal(code, stderr)
    assert code == 1, stderr
    return next(line for line in stderr.splitlines() if line.startswith("error: "))


HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


@pytest.mark.parametrize("depth", [150, 5000, 50_000])
def test_deep_nesting(depth: int) -> None:
    assert "nests deeper than 100 levels" in refusal(HEAD + "profiles: " + "[" * depth + "]" * depth + "\n")


def test_aliases_that_expand_to_a_billion_values() -> None:
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
    for i in range(1, 9):
        refs = ",".join([f"*{chr(96 + i)}"] * 10)
        bomb += f"{chr(97 + i)}: &{chr(97 + i)} [{refs}]\n"
    assert "more than 100000 values" in refusal(HEAD + bomb)


def test_a_value_that_contains_itself() -> None:
    assert "contains itself" in refusal(HEAD + "profiles: &p [*p]\n")


@pytest.mark.parametrize(
    ("field", "value"),
    [("parallelism", 2**31), ("percentageOfNodesToScore", -(2**31) - 1)],
)
def test_integers_beyond_int32(field: str, value: int) -> None:
    assert "(32-bit)" in refusal(HEAD + f"{field}: {value}\n")


def test_backoffs_are_int64_as_in_kube_scheduler() -> None:
    code, stderr = write_config(HEAD + f"podMaxBackoffSeconds: {2**40}\npodInitialBackoffSeconds: 1\n")
    assert code == 0, stderr


def test_integers_python_does_not_convert() -> None:
    line = refusal(HEAD + "parallelism: " + "9" * 5000 + "\n")
    assert "invalid YAML value" in line


def test_long_values_are_cut_in_messages() -> None:
    line = refusal(HEAD + "profiles: [{schedulerName: " + "x" * 100_000 + ", plugins: 3}]\n")
    assert "(100000 characters)" in line or "expected a mapping" in line


def test_the_policy_loader_refuses_the_same_shapes(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("spec: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match="nests deeper"):
        load_policy(str(policy))
    policy.write_text("spec: &s {syncPolicy: *s}\n")
    with pytest.raises(ConfigError, match="contains itself"):
        load_policy(str(policy))


def test_validate_checks_the_policy_file_too(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        HEAD + "profiles: [{plugins: {score: {enabled: [{name: Dynamic, weight: 3}]}},"
        f" pluginConfig: [{{name: Dynamic, args: {{policyConfigPath: {tmp_path / 'missing.yaml'}}}}}]}}]\n"
    )
    code, stderr = run(["--config", str(config), "--validate"])
    assert code == 1 and "missing.yaml: cannot read the policy file" in stderr
    code, stderr = run(["--config", str(config), "--write-config-to", "/dev/null"])
    assert code == 0 and "A start with this configuration would fail" in stderr
