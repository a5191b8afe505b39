"""The values schema: defaults, overlays, and one clear line for every bad value."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.config import ConfigError
from scheduler.deploy.values import load_values, parse_set, prometheus_seconds
from tests.deploy.util import DEFAULTS, values


def error(*sets: str, files: tuple[str, ...] = ()) -> str:
    with pytest.raises(ConfigError) as info:
        values(*sets, files=files)
    return str(info.value)


def test_defaults() -> None:
    v = values()
    t = v.typed
    assert (t.namespace, t.image.name, t.image.pull_policy, t.replicas) == (
        "crane-system",
        "dynamic-scheduler:dev",
        "IfNotPresent",
        3,
    )
    assert (t.scheduler_name, t.static.scheduler_name, t.static.mode) == (
        "default-scheduler",
        "my-scheduler",
        "beside",
    )
    assert (t.secure_port, t.static.secure_port, t.takeover, t.node_name) == (10259, 12345, True, "")
    assert t.dynamic.prometheus_address == "http://prometheus.crane-system.svc.cluster.local:9090"
    assert (t.leader_election.resource_namespace, t.leader_election.resource_name) == (
        "kube-system",
        "kube-scheduler",
    )
    assert v.data["image"] == {"name": "dynamic-scheduler:dev", "pullPolicy": "IfNotPresent"}


def test_set_reads_yaml_scalars() -> None:
    v = values(
        "replicas=5",
        "takeover=false",
        "nodeName=kind-worker",
        "dynamic.clusterName=",
        "resources.limits.cpu=2",
    )
    assert (v.typed.replicas, v.typed.takeover, v.typed.node_name) == (5, False, "kind-worker")
    assert v.data["dynamic"]["clusterName"] == ""
    assert v.data["resources"] == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": 2, "memory": "512Mi"},
    }


def test_set_string_keeps_text() -> None:
    v = load_values(DEFAULTS, set_strings=["dynamic.clusterName=123"])
    assert v.data["dynamic"]["clusterName"] == "123"
    with pytest.raises(ConfigError, match=r"^--set-string takeover=true: takeover: expected a boolean"):
        load_values(DEFAULTS, set_strings=["takeover=true"])


def test_files_merge_and_later_wins(tmp_path: Path) -> None:
    a = tmp_path / "a.yaml"
    a.write_text("image: {name: reg.example/ds:1}\nreplicas: 2\n")
    b = tmp_path / "b.yaml"
    b.write_text("replicas: 4\nstatic: {mode: replace}\n")
    v = values("replicas=6", files=(str(a), str(b)))
    assert v.data["image"] == {"name": "reg.example/ds:1", "pullPolicy": "IfNotPresent"}  # merged key by key
    assert v.typed.static.mode == "replace" and v.typed.static.name == "my-scheduler"
    assert v.typed.replicas == 6  # --set after the files


def test_lists_are_replaced_whole(tmp_path: Path) -> None:
    f = tmp_path / "cpu-only.yaml"
    f.write_text("dynamic: {policy: {spec: {priority: [{name: cpu_usage_avg_5m, weight: 1}]}}}\n")
    v = values(files=(str(f),))
    spec = v.data["dynamic"]["policy"]["spec"]
    assert spec["priority"] == [{"name": "cpu_usage_avg_5m", "weight": 1}]
    assert spec["syncPolicy"] == values().data["dynamic"]["policy"]["spec"]["syncPolicy"]


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (("replicas=x",), '--set replicas=x: replicas: expected an integer >= 1, got "x"'),
        (("replicas=0",), "--set replicas=0: replicas: expected an integer >= 1, got 0"),
        (("namespace=Crane_System",), "--set namespace=Crane_System: namespace: expected a DNS-1123 label"),
        (("namespace=" + "a" * 64,), "namespace: expected a DNS-1123 label"),
        (("image.name=",), "--set image.name=: image.name: expected a non-empty image reference"),
        (("image.name=a b",), "image.name: expected a non-empty image reference"),
        (
            ("image.pullPolicy=Sometimes",),
            'image.pullPolicy: expected one of "Always", "IfNotPresent", "Never", got "Sometimes"',
        ),
        (("image=foo",), '--set image=foo: image: expected a mapping, got "foo"'),
        (("imagee.name=x",), '--set imagee.name=x: imagee: unknown field (did you mean "image"?)'),
        (
            ("image.nmae=x",),
            '--set image.nmae=x: image.nmae: unknown field (did you mean "name"?); '
            "expected one of: name, pullPolicy",
        ),
        (("replicas.max=3",), "--set replicas.max=3: replicas: expected a mapping to set 'max' in, got 3"),
        (("takeover=maybe",), 'takeover: expected a boolean (true or false), got "maybe"'),
        (("securePort=70000",), "securePort: expected an integer 1..65535, got 70000"),
        (("nodeName=Node_1",), 'nodeName: expected "" or a node name'),
        (
            ("resources.requests.cpu=lots",),
            'resources.requests.cpu: expected a quantity like "500m" or "128Mi", got "lots"',
        ),
        (("leaderElection.leaseDuration=15",), "leaderElection.leaseDuration: expected a Go duration > 0"),
        (
            ("dynamic.prometheusAddress=prometheus:9090",),
            "dynamic.prometheusAddress: expected an http(s) URL",
        ),
        (("dynamic.policyConfigPath=policy.yaml",), "dynamic.policyConfigPath: expected an absolute path"),
        (
            ("dynamic.policyConfigPath=/etc/x/scheduler-config.yaml",),
            "dynamic.policyConfigPath: expected a file name other than scheduler-config.yaml",
        ),
        (("static.mode=instead",), 'static.mode: expected one of "beside", "replace", got "instead"'),
        (
            ("static.configDir=/etc/kubernetes/manifests/ds",),
            "static.configDir: expected a folder outside manifestDir",
        ),
        (
            ("prometheus.windows.avg5m=5 minutes",),
            "prometheus.windows.avg5m: expected a Prometheus duration > 0",
        ),
        (("prometheus.rateWindow=20s",), "prometheus.rateWindow: expected at least two scrape intervals"),
        (
            ("prometheus.nodes=[kind-worker]",),
            "prometheus.nodes: expected a mapping of node name to kubelet address, like {kind-worker: "
            '"172.18.0.3:10250"}, got a list',
        ),
        (
            ("prometheus.nodes={Bad_Node: 10.0.0.1:10250}",),
            'prometheus.nodes: expected node names as keys, got "Bad_Node"',
        ),
        *(
            (
                (f"prometheus.nodes={{kind-worker: {bad}}}",),
                'prometheus.nodes.kind-worker: expected a kubelet address "host:port", like '
                f'"172.18.0.3:10250" or "[fd00::3]:10250", got {shown}',
            )
            for bad, shown in (
                ("10.0.0.1", '"10.0.0.1"'),
                ("10.0.0.1:0", '"10.0.0.1:0"'),
                ("10.0.0.1:70000", '"10.0.0.1:70000"'),
                ('"fd00::3:10250"', '"fd00::3:10250"'),
                ('"[fd00::zz]:10250"', '"[fd00::zz]:10250"'),
                ("bad_host:10250", '"bad_host:10250"'),
                ("10250", "10250"),
            )
        ),
        (
            ("prometheus.kubeletTLS.insecureSkipVerify=sometimes",),
            'prometheus.kubeletTLS.insecureSkipVerify: expected a boolean (true or false), got "sometimes"',
        ),
        (
            ("prometheus.kubeletTLS.insecureSkipVerify=false", "prometheus.kubeletTLS.caFile=ca.crt"),
            'prometheus.kubeletTLS.caFile: expected "" or an absolute path, got "ca.crt"',
        ),
        (
            ("prometheus.kubeletTLS.caFile=/etc/prometheus/kubelet-ca.crt",),
            'prometheus.kubeletTLS.caFile: expected "" while insecureSkipVerify is true (nothing is '
            "verified against it; set insecureSkipVerify: false to verify), "
            'got "/etc/prometheus/kubelet-ca.crt"',
        ),
        (
            ("prometheus.kubeletTLS.verify=true",),
            "prometheus.kubeletTLS.verify: unknown field; expected one of: caFile, insecureSkipVerify",
        ),
        (("prometheus.discovery=dns",), 'prometheus.discovery: expected one of "kubernetes", "static"'),
    ],
)
def test_bad_set_values(sets: tuple[str, ...], message: str) -> None:
    msg = error(*sets)
    assert msg.startswith(f"--set {sets[-1]}: ")
    assert message in msg
    assert "\n" not in msg


def test_prometheus_static_targets_and_kubelet_tls() -> None:
    v = values(
        "prometheus.discovery=static",
        'prometheus.nodes={kind-worker: "172.18.0.3:10250", n6: "[fd00::3]:10250", dns: "node-1.example:10250"}',
        "prometheus.kubeletTLS.insecureSkipVerify=false",
        "prometheus.kubeletTLS.caFile=/etc/prometheus/kubelet-ca.crt",
    )
    assert v.typed.prometheus.nodes == {
        "kind-worker": "172.18.0.3:10250",
        "n6": "[fd00::3]:10250",
        "dns": "node-1.example:10250",
    }
    tls = v.typed.prometheus.kubelet_tls
    assert (tls.insecure_skip_verify, tls.ca_file) == (False, "/etc/prometheus/kubelet-ca.crt")
    defaults = values().typed.prometheus
    assert defaults.nodes == {}
    assert (defaults.kubelet_tls.insecure_skip_verify, defaults.kubelet_tls.ca_file) == (True, "")
    # one node at a time, by key
    assert values("prometheus.nodes.kind-worker=172.18.0.4:10250").typed.prometheus.nodes == {
        "kind-worker": "172.18.0.4:10250"
    }


def test_policy_errors_name_the_field() -> None:
    msg = error("dynamic.policy.spec.predicate=[{name: cpu_usage_avg_5m, maxLimitPecent: 65}]")
    assert "dynamic.policy.spec.predicate[0].maxLimitPecent: expected a number between 0 and 1, got 65" in msg


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("image:\n  nmae: x\n")
    assert error(files=(str(bad),)).startswith(f'{bad}: image.nmae: unknown field (did you mean "name"?)')
    good = tmp_path / "good.yaml"
    good.write_text("replicas: 2\n")
    # the error names the overlay that introduced it, not a later one
    assert error("replicas=y", files=(str(good),)).startswith("--set replicas=y: replicas:")
    lst = tmp_path / "list.yaml"
    lst.write_text("- a\n- b\n")
    assert error(files=(str(lst),)) == f"{lst}: expected a mapping of values, got a list"
    broken = tmp_path / "broken.yaml"
    broken.write_text("replicas: [1\n")
    assert error(files=(str(broken),)).startswith(f"{broken}: expected YAML at line 2")
    missing = tmp_path / "missing.yaml"
    assert error(files=(str(missing),)).startswith(f"{missing}: cannot read the values file")


@pytest.mark.parametrize("assignment", ["replicas", "=3", "a..b=1"])
def test_malformed_set(assignment: str) -> None:
    with pytest.raises(ConfigError, match=r"^--set "):
        parse_set(assignment)


def test_an_assignment_with_a_newline_is_quoted_so_the_error_stays_one_line() -> None:
    with pytest.raises(ConfigError) as e:
        load_values(DEFAULTS, set_strings=["image.name=a\nb"])
    assert str(e.value).startswith('--set-string "image.name=a\\nb": image.name: ')
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        parse_set("a\tb")
    assert str(e.value) == '--set "a\\tb": expected key.path=value'


def test_null_in_a_file_is_not_a_default(tmp_path: Path) -> None:
    f = tmp_path / "null.yaml"
    f.write_text("namespace:\n")
    assert (
        error(files=(str(f),)) == f"{f}: namespace: required; expected a DNS-1123 label (lower-case letters, "
        "digits and '-', at most 63 characters)"
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("1h30m", 5400),
        ("1d", 86400),
        ("2w", 14 * 86400),
        ("500ms", 0.5),
        ("", None),
        ("5", None),
        ("1.5h", None),
        ("5 m", None),
        ("m", None),
        ("0s", 0),
    ],
)
def test_prometheus_durations(text: str, seconds: float | None) -> None:
    assert prometheus_seconds(text) == seconds
