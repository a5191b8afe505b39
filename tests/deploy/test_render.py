"""The rendered manifests: content, order, determinism, offline schema validation, and the render command."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from scheduler.config import parse_config
from scheduler.deploy import render as render_cmd
from scheduler.deploy.templates import RANKS, UNKNOWN_RANK, RenderError, apply_order, delete_order, render
from scheduler.plugins.dynamic.policy import parse_policy
from tests.apiserver import CA
from tests.deploy.util import MANIFESTS, METHODS, all_objects, rendered, run_main, values

K8S_VERSION = "1.37.0"
REPO = Path(__file__).resolve().parents[2]


def kinds(r: Any) -> list[tuple[str, str]]:
    return [(o["kind"], o["metadata"]["name"]) for o in r.objects]


def by_kind(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


# --- what each method renders ------------------------------------------------------------------


def test_lease_objects_in_apply_order() -> None:
    assert kinds(rendered("lease")) == [
        ("Namespace", "crane-system"),
        ("ServiceAccount", "dynamic-scheduler"),
        ("ConfigMap", "scheduler-config"),
        ("Role", "dynamic-scheduler:leader-election"),
        ("ClusterRole", "dynamic-scheduler"),
        ("RoleBinding", "dynamic-scheduler:extension-apiserver-authentication-reader"),
        ("RoleBinding", "dynamic-scheduler:leader-election"),
        ("ClusterRoleBinding", "dynamic-scheduler"),
        ("ClusterRoleBinding", "dynamic-scheduler:auth-delegator"),
        ("Service", "dynamic-scheduler-metrics"),
        ("Deployment", "dynamic-scheduler"),
    ]


def test_prometheus_objects_in_apply_order() -> None:
    assert kinds(rendered("prometheus")) == [
        ("Namespace", "crane-system"),
        ("ServiceAccount", "prometheus"),
        ("ConfigMap", "prometheus-config"),
        ("ConfigMap", "dynamic-scheduler-dashboard"),
        ("ClusterRole", "dynamic-scheduler:prometheus"),
        ("ClusterRoleBinding", "dynamic-scheduler:prometheus"),
        ("Service", "prometheus"),
        ("Deployment", "prometheus"),
    ]


def test_static_objects_and_files() -> None:
    beside = rendered("static")
    assert kinds(beside) == [
        ("Role", "dynamic-scheduler:my-scheduler-lease"),
        ("RoleBinding", "dynamic-scheduler:my-scheduler-lease"),
    ]
    assert list(beside.node_files) == [
        "/etc/kubernetes/dynamic-scheduler/scheduler-config.yaml",
        "/etc/kubernetes/dynamic-scheduler/policy.yaml",
        "/etc/kubernetes/manifests/my-scheduler.yaml",
    ]
    assert rendered("static", "static.mode=replace").objects == []


def test_apply_order_is_lightkubes_and_stable() -> None:
    objs = [
        {"kind": k, "metadata": {"name": str(i)}}
        for i, k in enumerate(
            ["Deployment", "Service", "ClusterRoleBinding", "Namespace", "Widget", "ConfigMap", "Deployment"]
        )
    ]
    ordered = apply_order(objs)
    assert [o["kind"] for o in ordered] == [
        "Namespace",
        "ConfigMap",
        "ClusterRoleBinding",
        "Service",
        "Deployment",
        "Widget",
        "Deployment",
    ]
    assert [o["metadata"]["name"] for o in ordered if o["kind"] == "Deployment"] == ["0", "6"]
    assert delete_order(objs) == list(reversed(ordered))
    for method in METHODS:
        ranks = [RANKS.get(o["kind"], UNKNOWN_RANK) for o in rendered(method).objects]
        assert ranks == sorted(ranks)


RENDER_ALL = """
import sys
from scheduler.deploy.render import main
for method in ("lease", "static", "prometheus"):
    assert main([method]) == 0
"""


def test_rendering_is_deterministic() -> None:
    """The same output from two processes with different hash seeds (set and dict order)."""
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", RENDER_ALL],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=60,
            check=True,
        )
        outputs.add(out.stdout)
    (text,) = outputs
    assert text.count("kind: Deployment") == 2 and "kind: Pod" in text
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", text), "a timestamp in the output"


# --- offline schema validation -----------------------------------------------------------------


@pytest.mark.parametrize(
    "sets",
    [
        (),
        ("static.mode=replace", "nodeName=kind-worker", "takeover=false"),
        (
            "prometheus.discovery=static",
            "prometheus.nodes={a: 10.0.0.1:10250, b: 10.0.0.2:10250}",
            "prometheus.kubeletTLS.insecureSkipVerify=false",
        ),
    ],
)
@pytest.mark.parametrize("method", METHODS)
def test_every_object_is_valid_for_kubernetes_1_37_strict(method: str, sets: tuple[str, ...]) -> None:
    assert kubernetes_validate.utils.latest_version().startswith("1.37")
    for obj in all_objects(rendered(method, *sets)):
        assert kubernetes_validate.validate(obj, K8S_VERSION, strict=True) == "1.37", obj["kind"]


def test_strict_validation_rejects_an_unknown_field() -> None:
    """The check above can fail: a field the schema does not know is an error in strict mode."""
    dep = rendered("lease").objects[-1]
    dep["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, K8S_VERSION, strict=True)


def test_the_stream_is_what_kubectl_reads() -> None:
    r = rendered("lease")
    text = r.stream()
    assert text.startswith("---\n")
    assert list(yaml.safe_load_all(text)) == r.objects


# --- the scheduler's configuration -------------------------------------------------------------


def scheduler_files(method: str, *sets: str) -> tuple[Any, Any]:
    r = rendered(method, *sets)
    if method == "lease":
        data = by_kind(r.objects, "ConfigMap")["data"]
        cfg_text, policy_text = data["scheduler-config.yaml"], data["policy.yaml"]
    else:
        cfg_text, policy_text = r.files["scheduler-config.yaml"], r.files["policy.yaml"]
    return parse_config(cfg_text, file="scheduler-config.yaml", policies=False), parse_policy(
        yaml.safe_load(policy_text), "policy.yaml"
    )


@pytest.mark.parametrize(
    ("method", "sets", "profile", "lease", "policy_path"),
    [
        ("lease", (), "default-scheduler", "kube-scheduler", "/etc/kubernetes/policy.yaml"),
        ("static", (), "my-scheduler", "my-scheduler", "/etc/kubernetes/dynamic-scheduler/policy.yaml"),
        (
            "static",
            ("static.mode=replace",),
            "default-scheduler",
            "kube-scheduler",
            "/etc/kubernetes/dynamic-scheduler/policy.yaml",
        ),
    ],
)
def test_scheduler_configuration(
    method: str, sets: tuple[str, ...], profile: str, lease: str, policy_path: str
) -> None:
    cfg, policy = scheduler_files(method, *sets)
    assert cfg.scheduler_names() == (profile,)
    le = cfg.leader_election
    assert (le.leader_elect, le.resource_namespace, le.resource_name) == (True, "kube-system", lease)
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (15.0, 10.0, 2.0)
    plugins = cfg.profiles[0].plugins
    for point in ("filter", "score", "reserve", "post_bind"):
        assert "Dynamic" in getattr(plugins, point)
    args = cfg.profiles[0].args["Dynamic"]
    assert args.prome_addr == "http://prometheus.crane-system.svc.cluster.local:9090"
    assert (args.metrics_update_period, args.cluster_name, args.stale_grace, args.policy_config_path) == (
        300.0,
        "",
        300.0,
        policy_path,
    )
    assert [p.name for p in policy.predicate] == [
        "cpu_usage_avg_5m",
        "cpu_usage_max_avg_1h",
        "mem_usage_avg_5m",
        "mem_usage_max_avg_1h",
    ]


def test_score_weight_is_a_value() -> None:
    r = rendered("lease", "dynamic.scoreWeight=7")
    cfg = yaml.safe_load(by_kind(r.objects, "ConfigMap")["data"]["scheduler-config.yaml"])
    assert cfg["profiles"][0]["plugins"]["score"]["enabled"] == [{"name": "Dynamic", "weight": 7}]


@pytest.mark.parametrize(("value", "seconds"), [("0s", 0.0), ("90s", 90.0), ("1h", 3600.0)])
def test_stale_grace_is_a_value(value: str, seconds: float) -> None:
    cfg, _ = scheduler_files("lease", f"dynamic.staleGrace={value}")
    assert cfg.profiles[0].args["Dynamic"].stale_grace == seconds


def test_a_negative_stale_grace_is_refused() -> None:
    from scheduler.config import ConfigError

    with pytest.raises(ConfigError, match=r'dynamic.staleGrace: expected a Go duration >= 0.*"-1s"'):
        rendered("lease", "dynamic.staleGrace=-1s")


@pytest.mark.parametrize("method", ["lease", "static"])
def test_the_estimator_follows_the_prometheus_windows_unless_set(method: str) -> None:
    est = scheduler_files(method)[0].profiles[0].args["Dynamic"].estimator
    # scrapeInterval 15s + evaluationInterval 15s; rateWindow 1m + windows.avg5m 5m
    assert (est.enabled, est.metrics_lag, est.metrics_window) == (True, 30.0, 360.0)
    short = ("prometheus.scrapeInterval=10s", "prometheus.rateWindow=20s", "prometheus.windows.avg5m=30s")
    est = scheduler_files(method, *short)[0].profiles[0].args["Dynamic"].estimator
    assert (est.metrics_lag, est.metrics_window) == (25.0, 50.0)
    est = (
        scheduler_files(
            method, *short, "dynamic.estimator.metricsWindow=2m", "dynamic.estimator.enabled=false"
        )[0]
        .profiles[0]
        .args["Dynamic"]
        .estimator
    )
    assert (est.enabled, est.metrics_lag, est.metrics_window) == (False, 25.0, 120.0)


def test_the_active_metrics_get_windows_of_their_own() -> None:
    est = scheduler_files("lease")[0].profiles[0].args["Dynamic"].estimator
    # cpu_usage_active: the rate over rateWindow 1m; mem_usage_active: the last scrape (15s)
    assert est.metric_windows == {"cpu_usage_active": 60.0, "mem_usage_active": 15.0}
    est = scheduler_files("static", "prometheus.rateWindow=2m")[0].profiles[0].args["Dynamic"].estimator
    assert est.metric_windows["cpu_usage_active"] == 120.0


def test_the_manifests_relax_the_limits_when_nothing_fits_unless_told_not_to() -> None:
    assert scheduler_files("lease")[0].profiles[0].args["Dynamic"].relax_when_nothing_fits is True
    off = scheduler_files("static", "dynamic.relaxWhenNothingFits=false")[0]
    assert off.profiles[0].args["Dynamic"].relax_when_nothing_fits is False


def test_bad_estimator_values_are_refused_with_their_path() -> None:
    from scheduler.config import ConfigError

    with pytest.raises(
        ConfigError, match=r"dynamic.estimator.metricResources.load1: expected .cpu. or .memory."
    ):
        rendered("lease", "dynamic.estimator.metricResources.load1=gpu")
    with pytest.raises(
        ConfigError, match=r'dynamic.estimator.metricLag: unknown field \(did you mean "metricsLag"\?\)'
    ):
        rendered("lease", "dynamic.estimator.metricLag=1m")
    with pytest.raises(
        ConfigError,
        match=r'dynamic.estimator.metricWindows.cpu_usage_active: expected a duration > 0, like "1m", got "0s"',
    ):
        rendered("lease", "dynamic.estimator.metricWindows.cpu_usage_active=0s")
    with pytest.raises(ConfigError, match=r"dynamic.estimator.metricWindows.load1: expected a Go duration"):
        rendered("lease", "dynamic.estimator.metricWindows.load1=soon")


def test_a_configuration_the_scheduler_refuses_is_a_render_error() -> None:
    from scheduler.config import ConfigError

    with pytest.raises(
        ConfigError,
        match=r"^rendered scheduler-config.yaml: leaderElection.leaseDuration: "
        r"expected more than renewDeadline",
    ):
        rendered("lease", "leaderElection.renewDeadline=30s")


# --- the lease Deployment ----------------------------------------------------------------------


def scheduler_pod(*sets: str) -> dict[str, Any]:
    return by_kind(rendered("lease", *sets).objects, "Deployment")["spec"]["template"]


def test_deployment_runs_hardened_and_spread() -> None:
    dep = by_kind(rendered("lease").objects, "Deployment")
    assert dep["spec"]["replicas"] == 3
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "dynamic-scheduler"
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert "nodeName" not in pod
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (c,) = pod["containers"]
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert c["args"] == [
        "--config=/etc/kubernetes/scheduler-config.yaml",
        "--secure-port=10259",
        "--leader-elect-takeover",
        "--v=2",
    ]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    assert c["ports"] == [{"name": "https", "containerPort": 10259, "protocol": "TCP"}]
    assert {
        "key": "node-role.kubernetes.io/control-plane",
        "operator": "Exists",
        "effect": "NoSchedule",
    } in pod["tolerations"]
    (spread,) = pod["topologySpreadConstraints"]
    assert (spread["topologyKey"], spread["whenUnsatisfiable"]) == (
        "kubernetes.io/hostname",
        "ScheduleAnyway",
    )
    assert spread["labelSelector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]


def test_deployment_values() -> None:
    pod = scheduler_pod(
        "takeover=false",
        "nodeName=kind-control-plane",
        "verbosity=4",
        "securePort=10300",
        "image.name=reg.example/ds:1",
        "image.pullPolicy=Always",
    )
    c = pod["spec"]["containers"][0]
    assert c["args"] == ["--config=/etc/kubernetes/scheduler-config.yaml", "--secure-port=10300", "--v=4"]
    assert (c["image"], c["imagePullPolicy"]) == ("reg.example/ds:1", "Always")
    assert c["ports"][0]["containerPort"] == 10300
    assert pod["spec"]["nodeName"] == "kind-control-plane"


def test_a_new_configuration_rolls_the_pods() -> None:
    key = "dynamic-scheduler.io/config-sha256"
    a = scheduler_pod()["metadata"]["annotations"][key]
    assert scheduler_pod("dynamic.clusterName=c2")["metadata"]["annotations"][key] != a
    assert scheduler_pod("replicas=5")["metadata"]["annotations"][key] == a


# --- the static pod ----------------------------------------------------------------------------


def static_pod(*sets: str) -> dict[str, Any]:
    return yaml.safe_load(rendered("static", *sets).files["pod.yaml"])


def test_static_pod() -> None:
    pod = static_pod()
    assert (pod["metadata"]["name"], pod["metadata"]["namespace"]) == ("my-scheduler", "kube-system")
    assert pod["metadata"]["labels"]["component"] == "my-scheduler"
    spec = pod["spec"]
    assert spec["hostNetwork"] is True and spec["priorityClassName"] == "system-node-critical"
    (c,) = spec["containers"]
    assert c["command"] == [
        "dynamic-scheduler",
        "--config=/etc/kubernetes/dynamic-scheduler/scheduler-config.yaml",
        "--kubeconfig=/etc/kubernetes/scheduler.conf",
        # as kubeadm's kube-scheduler: its identity reviews the secure port's requests
        "--authentication-kubeconfig=/etc/kubernetes/scheduler.conf",
        "--authorization-kubeconfig=/etc/kubernetes/scheduler.conf",
        "--bind-address=127.0.0.1",
        "--secure-port=12345",
        "--v=2",
    ]
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert c[probe]["httpGet"] == {"host": "127.0.0.1", "path": path, "port": 12345, "scheme": "HTTPS"}
    mounts = {v["name"]: v["hostPath"] for v in spec["volumes"] if "hostPath" in v}
    assert mounts == {
        "kubeconfig": {"path": "/etc/kubernetes/scheduler.conf", "type": "File"},
        "config": {"path": "/etc/kubernetes/dynamic-scheduler", "type": "Directory"},
    }
    assert "admin.conf" not in rendered("static").files["pod.yaml"]
    assert all(m["readOnly"] for m in c["volumeMounts"] if m["name"] != "tmp")


def test_static_replace_mode_takes_over_the_default_lease() -> None:
    c = static_pod("static.mode=replace")["spec"]["containers"][0]
    assert "--leader-elect-takeover" in c["command"]
    assert "--leader-elect-takeover" not in static_pod()["spec"]["containers"][0]["command"]


def test_static_files_stay_out_of_the_manifest_dir() -> None:
    r = rendered("static", "static.configDir=/var/lib/ds", "static.manifestDir=/etc/kubelet.d")
    assert list(r.node_files) == [
        "/var/lib/ds/scheduler-config.yaml",
        "/var/lib/ds/policy.yaml",
        "/etc/kubelet.d/my-scheduler.yaml",
    ]


def test_static_revision_follows_the_pod() -> None:
    key = "dynamic-scheduler.io/revision"
    a = static_pod()["metadata"]["annotations"][key]
    assert static_pod("image.name=ds:2")["metadata"]["annotations"][key] != a
    assert static_pod("replicas=9")["metadata"]["annotations"][key] == a


# --- prometheus --------------------------------------------------------------------------------


def prometheus_files(*sets: str) -> tuple[dict[str, Any], dict[str, Any]]:
    r = rendered("prometheus", *sets)
    return yaml.safe_load(r.files["prometheus.yml"]), yaml.safe_load(r.files["rules.yml"])


def test_prometheus_scrapes_each_kubelet_directly() -> None:
    cfg, _ = prometheus_files()
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert sorted(jobs) == ["dynamic-scheduler", "kubelet-cadvisor", "kubelet-resource"]
    for name, path in (("kubelet-resource", "/metrics/resource"), ("kubelet-cadvisor", "/metrics/cadvisor")):
        job = jobs[name]
        assert job["kubernetes_sd_configs"] == [{"role": "node"}]
        # the node's own address and kubelet port (discovery's __address__), not the API server
        assert (job["scheme"], job["metrics_path"]) == ("https", path)
        assert job["relabel_configs"] == [
            {"source_labels": ["__meta_kubernetes_node_name"], "target_label": "node"},
            {"source_labels": ["node"], "target_label": "instance"},
        ]
        assert job["authorization"] == {
            "credentials_file": "/var/run/secrets/kubernetes.io/serviceaccount/token"
        }
        # a kubelet's default serving certificate is self-signed: not verified unless told
        assert job["tls_config"] == {"insecure_skip_verify": True}
    assert "proxy" not in rendered("prometheus").files["prometheus.yml"]


@pytest.mark.parametrize(
    ("ca_file", "want"),
    [
        ("", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"),
        ("/etc/prometheus/kubelet-ca.crt", "/etc/prometheus/kubelet-ca.crt"),
    ],
)
def test_prometheus_verifies_the_kubelets_certificates_when_told(ca_file: str, want: str) -> None:
    cfg, _ = prometheus_files(
        "prometheus.kubeletTLS.insecureSkipVerify=false", f"prometheus.kubeletTLS.caFile={ca_file}"
    )
    kubelets = [j for j in cfg["scrape_configs"] if j["job_name"].startswith("kubelet-")]
    assert [j["tls_config"] for j in kubelets] == [{"ca_file": want}] * 2


def test_prometheus_static_discovery() -> None:
    cfg, _ = prometheus_files(
        "prometheus.discovery=static", 'prometheus.nodes={n2: "10.0.0.2:10250", n1: "[fd00::1]:10250"}'
    )
    for job in cfg["scrape_configs"][:2]:
        assert "kubernetes_sd_configs" not in job
        assert job["static_configs"] == [
            {"targets": ["[fd00::1]:10250"], "labels": {"node": "n1"}},
            {"targets": ["10.0.0.2:10250"], "labels": {"node": "n2"}},
        ]
        assert job["relabel_configs"] == [{"source_labels": ["node"], "target_label": "instance"}]
    from scheduler.config import ConfigError

    with pytest.raises(ConfigError, match=r"^prometheus.nodes: expected at least one node"):
        rendered("prometheus", "prometheus.discovery=static")


def test_prometheus_scrapes_every_replica_of_the_scheduler() -> None:
    cfg, _ = prometheus_files()
    (job,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "dynamic-scheduler"]
    # the lease method's headless Service: one address per Ready replica, whatever the discovery
    assert job["dns_sd_configs"] == [
        {"names": ["dynamic-scheduler-metrics.crane-system.svc"], "type": "A", "port": 10259}
    ]
    assert job["scheme"] == "https"
    assert job["authorization"] == {"credentials_file": "/var/run/secrets/kubernetes.io/serviceaccount/token"}
    service = by_kind(rendered("lease").objects, "Service", "dynamic-scheduler-metrics")
    assert service["spec"]["clusterIP"] == "None"
    deployment = by_kind(rendered("lease").objects, "Deployment", "dynamic-scheduler")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    (port,) = service["spec"]["ports"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}
    assert port["port"] == job["dns_sd_configs"][0]["port"]


def prometheus_rules(*sets: str) -> list[dict[str, Any]]:
    (role,) = [o for o in rendered("prometheus", *sets).objects if o["kind"] == "ClusterRole"]
    return role["rules"]


def test_prometheus_may_read_the_kubelets_metrics_and_nothing_else_of_them() -> None:
    metrics = {"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]}
    scheduler = {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}  # the scheduler's own /metrics
    # kubernetes_sd_configs: an informer on the nodes (list, watch)
    assert prometheus_rules() == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
        metrics,
        scheduler,
    ]
    # static targets: no API object to read
    assert prometheus_rules("prometheus.discovery=static", "prometheus.nodes={n: 10.0.0.1:10250}") == [
        metrics,
        scheduler,
    ]
    assert "nodes/proxy" not in rendered("prometheus").stream()


def test_recording_rules_produce_the_policys_metrics() -> None:
    _, rules = prometheus_files("prometheus.windows.avg5m=30s", "prometheus.rateWindow=40s")
    records = {r["record"]: r["expr"] for r in rules["groups"][0]["rules"]}
    policy = values().data["dynamic"]["policy"]["spec"]
    assert {p["name"] for p in policy["syncPolicy"]} <= set(records)
    assert records["cpu_usage_avg_5m"] == "avg_over_time(cpu_usage_active[30s])"
    assert "[40s]" in records["cpu_usage_active"]
    assert records["mem_usage_max_avg_1d"] == "max_over_time(mem_usage_avg_5m[1d])"


PROMTOOL = shutil.which("promtool")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60, check=False)


def promtool_knows_kubernetes_sd(tmp_path: Path) -> bool:
    probe = tmp_path / "probe.yml"
    probe.write_text("scrape_configs:\n- job_name: p\n  kubernetes_sd_configs:\n  - role: node\n")
    return promtool("check", "config", str(probe)).returncode == 0


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed")
@pytest.mark.parametrize("skip_verify", [True, False])
@pytest.mark.parametrize("discovery", ["kubernetes", "static"])
def test_promtool_accepts_the_config_and_rules(tmp_path: Path, discovery: str, skip_verify: bool) -> None:
    if discovery == "kubernetes" and not promtool_knows_kubernetes_sd(tmp_path):
        pytest.skip("this promtool is built without Kubernetes discovery (Debian's package)")
    r = rendered(
        "prometheus",
        f"prometheus.discovery={discovery}",
        "prometheus.nodes={kind-worker: 172.18.0.3:10250}",
        f"prometheus.kubeletTLS.insecureSkipVerify={str(skip_verify).lower()}",
    )
    (tmp_path / "rules.yml").write_text(r.files["rules.yml"])
    (tmp_path / "prometheus.yml").write_text(
        r.files["prometheus.yml"].replace("/etc/prometheus/rules.yml", str(tmp_path / "rules.yml"))
    )
    rules = promtool("check", "rules", str(tmp_path / "rules.yml"))
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "8 rules found" in rules.stdout
    # check config reads the credentials file the SA would mount: point it at a file that exists
    cfg = (
        (tmp_path / "prometheus.yml")
        .read_text()
        .replace("/var/run/secrets/kubernetes.io/serviceaccount", str(tmp_path))
    )
    (tmp_path / "ca.crt").write_bytes(CA().pem)  # read when the kubelets' certificates are verified
    (tmp_path / "token").write_text("t")
    (tmp_path / "prometheus.yml").write_text(cfg)
    check = promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert check.returncode == 0, check.stdout + check.stderr


# --- strictness of the templates ---------------------------------------------------------------


def test_a_typo_in_a_template_names_the_template_and_line(tmp_path: Path) -> None:
    root = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, root)
    path = root / "lease" / "serviceaccount.yaml.j2"
    path.write_text(path.read_text().replace("values.namespace", "values.namespce"))
    with pytest.raises(RenderError, match=r"^lease/serviceaccount.yaml.j2:5: .*namespce"):
        render("lease", values(), root)


def test_a_template_that_is_not_an_object(tmp_path: Path) -> None:
    root = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, root)
    (root / "lease" / "extra.yaml.j2").write_text("just: text\n")
    with pytest.raises(RenderError, match=r"^lease/extra.yaml.j2: document 1 is not a Kubernetes object"):
        render("lease", values(), root)


# --- the render command ------------------------------------------------------------------------


def test_render_command_prints_the_stream(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(render_cmd.main, ["lease", "--set", "replicas=2"], capsys)
    assert code == 0
    assert out == rendered("lease", "replicas=2").stream()


def test_render_static_prints_the_pod(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(render_cmd.main, ["static"], capsys)
    assert code == 0
    assert yaml.safe_load(out)["kind"] == "Pod"


def test_render_output_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(render_cmd.main, ["static", "--output-dir", str(tmp_path)], capsys)
    assert (code, out) == (0, "")
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert files == [
        "cluster-objects.yaml",
        "etc/kubernetes/dynamic-scheduler/policy.yaml",
        "etc/kubernetes/dynamic-scheduler/scheduler-config.yaml",
        "etc/kubernetes/manifests/my-scheduler.yaml",
    ]
    code, _, _ = run_main(render_cmd.main, ["prometheus", "--output-dir", str(tmp_path / "p")], capsys)
    assert code == 0 and (tmp_path / "p" / "prometheus.yaml").read_text() == rendered("prometheus").stream()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["lease", "--set", "replicas=x"],
            'error: render: --set replicas=x: replicas: expected an integer >= 1, got "x"',
        ),
        (
            ["lease", "--set", "namespace=Bad"],
            "error: render: --set namespace=Bad: namespace: expected a DNS-1123 label",
        ),
        (
            ["lease", "--set", "image.name="],
            "error: render: --set image.name=: image.name: expected a non-empty image",
        ),
        (["lease", "--set", "nope=1"], "error: render: --set nope=1: nope: unknown field"),
        (
            ["lease", "-f", "/nonexistent.yaml"],
            "error: render: /nonexistent.yaml: cannot read the values file",
        ),
        (["sideways"], "error: render: lease|static|prometheus|shadow: invalid choice: 'sideways'"),
        (
            ["lease", "--manifests", "/nonexistent"],
            "error: render: --manifests: expected a folder with values.yaml",
        ),
    ],
)
def test_render_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(render_cmd.main, argv, capsys)
    assert code == 1 and out == ""
    assert err.startswith(message)
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("command", ["render", "deploy", "restore", "churn", "finalize-namespace"])
def test_the_dynamic_scheduler_command_reaches_each_module(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from scheduler.cli import main

    assert main([command, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: dynamic-scheduler {command} ")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["lease", "--set", "takeover=false"],
            "error: deploy: --method=takeover: the values say takeover: false",
        ),
        (
            ["lease", "--seed-max-tries", "3"],
            "error: deploy: --seed-repeat-every/--seed-max-tries: only with --method=seed",
        ),
        (["lease", "--method", "magic"], "error: deploy: --method: invalid choice: 'magic'"),
        (
            ["static", "--kind-cluster", "k", "--manifest-dir", "/m"],
            "error: deploy: --kind-cluster and --manifest-dir: give one",
        ),
        (
            ["lease", "--kubeconfig", "/nonexistent/kubeconfig"],
            "error: deploy: --kubeconfig: cannot load /nonexistent/kubeconfig",
        ),
        (["lease", "--timeout", "0"], "error: deploy: --timeout: expected a number of seconds > 0"),
    ],
)
def test_deploy_usage_errors_come_before_any_cluster_call(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from scheduler.deploy import deploy

    code, out, err = run_main(deploy.main, argv, capsys)
    assert (code, out) == (1, "")
    assert err.startswith(message) and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "methods"),
    [
        ([], []),
        (["lease"], ["lease"]),
        (["lease", "prometheus"], ["lease", "prometheus"]),
        (["all"], ["all"]),
    ],
)
def test_restore_takes_no_method_or_several(argv: list[str], methods: list[str]) -> None:
    from scheduler.deploy import restore

    assert restore.build_parser().parse_args(argv).methods == methods


def test_restore_refuses_an_unknown_method(capsys: pytest.CaptureFixture[str]) -> None:
    from scheduler.deploy import restore

    code, out, err = run_main(restore.main, ["sideways"], capsys)
    assert (code, out) == (1, "")
    assert err.startswith("error: restore: lease|static|prometheus|shadow|all: invalid choice: 'sideways'")


def test_shadow_takes_no_lease_and_runs_shadow_mode():
    r = rendered("shadow")
    config = yaml.safe_load(r.files["scheduler-config.yaml"])
    assert config["leaderElection"]["leaderElect"] is False
    dep = next(o for o in r.objects if o["kind"] == "Deployment")
    assert dep["metadata"]["name"] == "dynamic-scheduler-shadow" and dep["spec"]["replicas"] == 1
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--shadow" in args
    # No access review either: nothing it serves needs one, and a review is a create.
    assert "--authentication-skip-lookup" in args
    allow = next(a for a in args if a.startswith("--authorization-always-allow-paths="))
    assert "/shadow/decisions" in allow.split("=", 1)[1].split(",")
    assert dep["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "shadow"
    # Beside the lease method in the same namespace: no object of the same kind and name.
    lease = {(o["kind"], o["metadata"]["name"]) for o in rendered("lease").objects}
    assert {(o["kind"], o["metadata"]["name"]) for o in r.objects} & lease == {("Namespace", "crane-system")}
    assert rendered("lease").files["scheduler-config.yaml"].count("leaderElect: true") == 1
