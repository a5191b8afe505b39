"""The dynamic-scheduler command: flags, their precedence over --config, errors, subcommands."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler import __version__
from scheduler.cli import main
from scheduler.config import load_config, parse_config
from scheduler.config.options import Options
from scheduler.version import KUBERNETES_RELEASE

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "tests" / "config" / "data" / "seed-scheduler-config.yaml"


class FakeApp:
    def __init__(self, code: int = 0) -> None:
        self.calls: list[Options] = []
        self.code = code

    def run(self, options: Options) -> int:
        self.calls.append(options)
        return self.code


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> FakeApp:
    fake = FakeApp()
    module = types.ModuleType("scheduler.app")
    module.run = fake.run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "scheduler.app", module)
    return fake


def run_ok(app: FakeApp, *argv: str) -> Options:
    assert main(list(argv)) == 0
    (options,) = app.calls
    return options


def run_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run, expecting exit code 1 and one line on stderr; return that line."""
    assert main(list(argv)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("error: ")]
    assert len(errors) == 1, err
    assert "Traceback" not in "\n".join(err)
    return errors[0]


def write(tmp_path: Path, body: str, name: str = "sched.yaml") -> str:
    f = tmp_path / name
    f.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        + textwrap.dedent(body)
    )
    return str(f)


# --- run: defaults and flags ------------------------------------------------------------------


def test_no_arguments_runs_with_kube_scheduler_defaults(app: FakeApp) -> None:
    options = run_ok(app)
    assert options.config.scheduler_names() == ("default-scheduler",)
    assert options.leader_election.leader_elect is True
    assert (options.serving.secure_port, options.serving.bind_address) == (10259, "0.0.0.0")
    assert (options.logging.verbosity, options.logging.format) == (0, "text")
    assert options.leader_elect_takeover is False
    assert options.config_file is None


def test_delegated_authentication_and_authorization_flags(app: FakeApp, tmp_path: Path) -> None:
    default = run_ok(app).serving
    assert default.authentication.kubeconfig is None
    assert default.authentication.tolerate_lookup_failure is True  # kube-scheduler's setting
    assert default.authentication.requestheader_username_headers == ("x-remote-user",)
    assert default.authorization.always_allow_paths == ("/healthz", "/readyz", "/livez")
    assert (default.authentication.cache_ttl, default.authorization.allow_cache_ttl) == (10.0, 10.0)

    kc = tmp_path / "kubeconfig"
    kc.write_text("{}")
    app.calls.clear()
    serving = run_ok(
        app,
        f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}",
        "--authentication-skip-lookup",
        "--authentication-tolerate-lookup-failure=false",
        "--authentication-token-webhook-cache-ttl=1m",
        "--authorization-webhook-cache-unauthorized-ttl=5s",
        # pflag's string slices: the first use replaces the default, a later one adds
        "--authorization-always-allow-paths=/healthz,/metrics",
        "--authorization-always-allow-paths=/debug/*",
        "--requestheader-group-headers=",
    ).serving
    assert (serving.authentication.kubeconfig, serving.authorization.kubeconfig) == (str(kc), str(kc))
    assert serving.authentication.skip_lookup is True
    assert serving.authentication.tolerate_lookup_failure is False
    assert serving.authentication.cache_ttl == 60.0
    assert serving.authorization.deny_cache_ttl == 5.0
    assert serving.authorization.always_allow_paths == ("/healthz", "/metrics", "/debug/*")
    assert serving.authentication.requestheader_group_headers == ()


def test_run_is_the_default_command(app: FakeApp) -> None:
    assert run_ok(app, "--secure-port=0").serving.secure_port == 0
    assert main(["run", "--secure-port=12345"]) == 0
    assert app.calls[-1].serving.secure_port == 12345


def test_exit_code_of_the_application_is_returned(app: FakeApp) -> None:
    app.code = 3
    assert main([]) == 3


@pytest.mark.parametrize("argv", [["-v=4"], ["--v=4"], ["-v", "4"], ["-v4"], ["--v", "4"]])
def test_verbosity_spellings(app: FakeApp, argv: list[str]) -> None:
    assert run_ok(app, *argv).logging.verbosity == 4


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--leader-elect=false"], False),
        (["--leader-elect=true"], True),
        (["--leader-elect"], True),
        (["--leader-elect", "false"], False),
    ],
)
def test_leader_elect_bool(app: FakeApp, argv: list[str], expected: bool) -> None:
    assert run_ok(app, *argv).leader_election.leader_elect is expected


def test_leader_election_flags(app: FakeApp) -> None:
    options = run_ok(
        app,
        "--leader-elect-lease-duration=30s",
        "--leader-elect-renew-deadline=20s",
        "--leader-elect-retry-period=4s",
        "--leader-elect-resource-name=my-scheduler",
        "--leader-elect-resource-namespace=crane-system",
        "--leader-elect-resource-lock=leases",
        "--leader-elect-takeover",
    )
    le = options.leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (30.0, 20.0, 4.0)
    assert (le.resource_name, le.resource_namespace) == ("my-scheduler", "crane-system")
    assert options.leader_elect_takeover is True


def test_serving_and_logging_flags(app: FakeApp, tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_text("cert")
    key.write_text("key")
    options = run_ok(
        app,
        "--secure-port=12345",
        "--bind-address=127.0.0.1",
        f"--tls-cert-file={cert}",
        f"--tls-private-key-file={key}",
        "--logging-format=json",
    )
    assert options.serving.secure_port == 12345
    assert options.serving.bind_address == "127.0.0.1"
    assert (options.serving.tls_cert_file, options.serving.tls_private_key_file) == (str(cert), str(key))
    assert options.logging.format == "json"


def test_set_flags_win_over_the_file_and_unset_ones_do_not(app: FakeApp, tmp_path: Path) -> None:
    config = write(
        tmp_path,
        """\
        leaderElection: {leaseDuration: 40s, renewDeadline: 30s, resourceName: from-file, resourceNamespace: ns}
        clientConnection: {kubeconfig: /file.conf, qps: 5, burst: 7}
        """,
    )
    options = run_ok(
        app,
        f"--config={config}",
        "--leader-elect-resource-name=from-flag",
        "--kubeconfig=/flag.conf",
        "--kube-api-qps=80",
        "--leader-elect=false",
    )
    le, cc = options.leader_election, options.client_connection
    assert (le.resource_name, le.resource_namespace, le.lease_duration, le.leader_elect) == (
        "from-flag",
        "ns",
        40.0,
        False,
    )
    assert (cc.kubeconfig, cc.qps, cc.burst) == ("/flag.conf", 80.0, 7)
    assert options.config_file == config
    assert options.config.source == config


def test_file_values_stay_without_flags(app: FakeApp, tmp_path: Path) -> None:
    config = write(tmp_path, "leaderElection: {leaderElect: false, resourceName: x}\n")
    options = run_ok(app, "--config", config)
    assert options.config == load_config(config, policies=False)


def test_static_pod_command_of_the_field_note(app: FakeApp, tmp_path: Path) -> None:
    config = write(tmp_path, "profiles: [{schedulerName: my-scheduler}]\n")
    options = run_ok(
        app,
        "--v=3",
        "--leader-elect=true",
        f"--config={config}",
        "--secure-port=12345",
        "--kubeconfig=/etc/kubernetes/scheduler.conf",
    )
    assert options.logging.verbosity == 3
    assert options.serving.secure_port == 12345
    assert options.client_connection.kubeconfig == "/etc/kubernetes/scheduler.conf"
    assert options.config.scheduler_names() == ("my-scheduler",)


def test_dynamic_policy_is_loaded_before_the_start(app: FakeApp, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        textwrap.dedent("""\
        apiVersion: scheduler.policy.crane.io/v1alpha1
        kind: DynamicSchedulerPolicy
        spec:
          syncPolicy: [{name: cpu_usage_avg_5m, period: 3m}]
          predicate: [{name: cpu_usage_avg_5m, maxLimitPecent: 0.65}]
        """)
    )
    config = tmp_path / "seed.yaml"
    config.write_text(SEED.read_text(encoding="utf-8").replace("/etc/kubernetes/policy.yaml", str(policy)))
    options = run_ok(app, f"--config={config}")
    assert list(options.config.dynamic_policies) == [str(policy)]


# --- errors: one line, exit code 1, nothing started ------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--secure-port=abc"], 'error: --secure-port: expected an integer 0..65535, got "abc"'),
        (["--secure-port=70000"], "error: --secure-port: expected an integer 0..65535, got 70000"),
        (["--leader-elect=maybe"], 'error: --leader-elect: expected true or false, got "maybe"'),
        (
            ["--leader-elect-lease-duration=15"],
            'error: --leader-elect-lease-duration: expected a Go duration like "15s", got "15" '
            '(time: missing unit in duration "15")',
        ),
        (
            ["--leader-elect-retry-period=0s"],
            "error: --leader-elect-retry-period: expected a Go duration greater than 0",
        ),
        (
            ["--leader-elect-lease-duration=5s"],
            "error: --leader-elect-lease-duration: expected more than renewDeadline",
        ),
        (
            ["--leader-elect-resource-lock=endpoints"],
            'error: --leader-elect-resource-lock: expected "leases"',
        ),
        (["--logging-format=xml"], 'error: --logging-format: expected "text" or "json", got "xml"'),
        (
            ["--bind-address=localhost"],
            'error: --bind-address: expected an IP address like 0.0.0.0, got "localhost"',
        ),
        (["--kube-api-qps=0"], 'error: --kube-api-qps: expected a number > 0, got "0"'),
        (["--kube-api-burst=-1"], "error: --kube-api-burst: expected an integer >= 1, got -1"),
        (["-v=high"], 'error: -v/--v: expected an integer >= 0, got "high"'),
        (["--tls-cert-file=/x"], "error: --tls-private-key-file: required with --tls-cert-file"),
        (
            ["--tls-cert-file=/no/such.crt", "--tls-private-key-file=/no/such.key"],
            'error: --tls-cert-file: expected a readable file, got "/no/such.crt"',
        ),
        (
            ["--authentication-kubeconfig=/no/such"],
            'error: --authentication-kubeconfig: expected a readable file, got "/no/such"',
        ),
        (
            ["--client-ca-file=/no/such.crt"],
            'error: --client-ca-file: expected a readable file, got "/no/such.crt"',
        ),
        (
            ["--authorization-always-allow-paths=/a*b"],
            'error: --authorization-always-allow-paths: only a trailing * is allowed, got "/a*b"',
        ),
        (
            ["--requestheader-username-headers=X-Remote-User,bad header"],
            'error: --requestheader-username-headers: expected HTTP header names, got "bad header"',
        ),
        (
            ["--authorization-webhook-cache-authorized-ttl=10"],
            "error: --authorization-webhook-cache-authorized-ttl: expected a Go duration",
        ),
        (["--no-such-flag"], "error: unrecognized arguments: --no-such-flag"),
        (["--leader-elec=false"], "error: unrecognized arguments: --leader-elec=false"),
        (["--config"], "error: --config: expected one argument"),
    ],
)
def test_bad_flags(app: FakeApp, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    assert run_error(capsys, *argv).startswith(expected)
    assert app.calls == []


def test_bad_config_file(app: FakeApp, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = write(
        tmp_path,
        "profiles: [{schedulerName: a, pluginConfig: [{name: InterPodAffinity, "
        "args: {hardPodAffinityWeight: x}}]}]\n",
    )
    line = run_error(capsys, f"--config={config}")
    assert line == (
        f"error: {config}: profiles[0].pluginConfig[0].args.hardPodAffinityWeight: "
        'expected an integer 0..100, got "x"'
    )
    assert app.calls == []


def test_missing_config_file(app: FakeApp, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert (
        run_error(capsys, f"--config={missing}")
        == f"error: {missing}: cannot read the file: No such file or directory"
    )


def test_a_missing_policy_fails_the_start(app: FakeApp, capsys: pytest.CaptureFixture[str]) -> None:
    line = run_error(capsys, f"--config={SEED}")  # its policy, /etc/kubernetes/policy.yaml, is not here
    assert line.startswith("error: /etc/kubernetes/policy.yaml: ")
    assert app.calls == []


def test_missing_application(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "scheduler.app", None)
    assert (
        run_error(capsys)
        == "error: run: the scheduler application (scheduler.app) is not available in this build"
    )


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert main(["version"]) == 0
    assert capsys.readouterr().out == out
    lines = out.splitlines()
    assert lines[0] == f"dynamic-scheduler v{__version__}"
    assert re.fullmatch(r"commit: ([0-9a-f]{40}(-dirty)?|unknown)", lines[1]), lines[1]
    assert lines[2] == f"kubernetes: {KUBERNETES_RELEASE} (tested against)"


def test_the_kubernetes_release_is_the_pinned_one() -> None:
    go_mod = (Path(__file__).parents[1] / "hack" / "tools" / "go.mod").read_text()
    pinned = re.search(r"^\s*k8s\.io/kubernetes (v\S+)", go_mod, re.M)
    assert pinned is not None and pinned.group(1) == KUBERNETES_RELEASE


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("run", "render", "churn", "finalize-namespace"):
        assert command in out
    assert main(["run", "--help"]) == 0
    assert "--leader-elect-takeover" in capsys.readouterr().out


# --- --write-config-to ------------------------------------------------------------------------


def test_write_config_to_a_file_applies_flags_and_round_trips(app: FakeApp, tmp_path: Path) -> None:
    out = tmp_path / "effective.yaml"
    assert (
        main(
            [
                f"--config={SEED}",
                f"--write-config-to={out}",
                "--leader-elect-lease-duration=20s",
                "--leader-elect-renew-deadline=15s",
            ]
        )
        == 0
    )
    assert app.calls == []
    written = load_config(out, policies=False)
    assert (written.leader_election.lease_duration, written.leader_election.renew_deadline) == (20.0, 15.0)
    assert written.profiles == load_config(SEED, policies=False).profiles


def test_write_config_to_stdout(app: FakeApp, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--write-config-to=-"]) == 0
    out = capsys.readouterr().out
    assert yaml.safe_load(out)["kind"] == "KubeSchedulerConfiguration"
    assert parse_config(out) == parse_config(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    )


def test_write_config_to_an_unwritable_path(
    app: FakeApp, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "no" / "such" / "dir.yaml"
    assert run_error(capsys, f"--write-config-to={target}").startswith(f"error: {target}: cannot write")


def _command() -> list[str]:
    script = Path(sys.executable).with_name("dynamic-scheduler")
    return [str(script)] if script.exists() else [sys.executable, "-m", "scheduler"]


def test_console_script_prints_the_effective_seed_config() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [*_command(), "--config", str(SEED), "--write-config-to", "-"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load(proc.stdout)
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert doc["leaderElection"]["leaseDuration"] == "15s"
    (profile,) = doc["profiles"]
    assert profile["schedulerName"] == "default-scheduler"
    assert {"name": "Dynamic", "weight": 3} in profile["plugins"]["score"]["enabled"]
    assert parse_config(proc.stdout, policies=False) == load_config(SEED, policies=False)


def test_console_script_error_is_one_line() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [*_command(), "--leader-elect-resource-lock=configmaps"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 1
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith('error: --leader-elect-resource-lock: expected "leases"')
    )
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


# --- delegated subcommands ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "module"),
    [
        ("render", "scheduler.deploy.render"),
        ("churn", "scheduler.deploy.churn"),
        ("finalize-namespace", "scheduler.deploy.finalize_namespace"),
    ],
)
def test_subcommands_are_handed_their_arguments(
    monkeypatch: pytest.MonkeyPatch, command: str, module: str
) -> None:
    seen: list[list[str]] = []

    def fake_main(argv: list[str]) -> int:
        seen.append(argv)
        return 5

    fake: Any = types.ModuleType(module)
    fake.main = fake_main
    monkeypatch.setitem(sys.modules, module, fake)
    assert main([command, "--namespace=x", "-h"]) == 5
    assert seen == [["--namespace=x", "-h"]]


@pytest.mark.parametrize("command", ["render", "churn", "finalize-namespace"])
def test_missing_subcommand_module(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    module = {"finalize-namespace": "scheduler.deploy.finalize_namespace"}.get(
        command, f"scheduler.deploy.{command}"
    )
    monkeypatch.setitem(sys.modules, module, None)
    assert run_error(capsys, command) == f"error: {command}: not available in this build"
