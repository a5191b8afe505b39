"""The deploy commands' promises, on kind (issue "Deploy both ways", Done-when).

- every rendered manifest (lease, static's cluster objects and pod, prometheus)
  passes ``kubectl apply --dry-run=server``;
- the lease method's ServiceAccount may do exactly what the scheduler needs
  (``kubectl auth can-i --list``, less what any ServiceAccount may do);
- the scheduler image renders the manifests it carries (`docker run IMAGE render`);
- a static deploy whose kube-scheduler manifest or staticPodPath is not where
  expected stops with one clear line and changes nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.deploying import cli, kind_flags, values_args
from e2e.nodes import control_plane, node_listing
from e2e.schedulers import OUR_NS
from scheduler.deploy.prometheus import kubelet_address
from scheduler.polling import poll
from tests.access import grants_of, wait_until_allowed

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

SA = f"system:serviceaccount:{OUR_NS}:dynamic-scheduler"
BASELINE_SA = f"system:serviceaccount:{OUR_NS}:default"  # no bindings of its own

# manifests/README.md, "RBAC of the lease method": (resource, resourceName, verb).
CLUSTER_WIDE = {
    *(("pods", "", v) for v in ("get", "list", "watch", "delete")),
    *(
        (r, "", v)
        for r in ("namespaces", "nodes", "persistentvolumeclaims", "persistentvolumes")
        for v in ("list", "watch")
    ),
    *(
        (r, "", v)
        for r in (
            "csidrivers.storage.k8s.io",
            "csinodes.storage.k8s.io",
            "csistoragecapacities.storage.k8s.io",
            "storageclasses.storage.k8s.io",
            "volumeattachments.storage.k8s.io",
        )
        for v in ("list", "watch")
    ),
    *(("poddisruptionbudgets.policy", "", v) for v in ("list", "watch")),
    *(
        (r, "", v)
        for r in (
            "deviceclasses.resource.k8s.io",
            "devicetaintrules.resource.k8s.io",
            "resourceslices.resource.k8s.io",
        )
        for v in ("list", "watch")
    ),
    *(
        ("resourceclaims.resource.k8s.io", "", v)
        for v in ("get", "list", "watch", "patch", "create", "delete")
    ),
    *(
        (r, "", v)
        for r in ("resourceclaims.resource.k8s.io/status", "resourceclaims.resource.k8s.io/binding")
        for v in ("update", "patch")
    ),
    ("pods/binding", "", "create"),
    ("pods/status", "", "patch"),
    ("persistentvolumeclaims", "", "patch"),
    ("persistentvolumes", "", "patch"),
    ("events.events.k8s.io", "", "create"),
    ("events.events.k8s.io", "", "patch"),
    ("tokenreviews.authentication.k8s.io", "", "create"),
    ("subjectaccessreviews.authorization.k8s.io", "", "create"),
}
AUTHENTICATION_CONFIG = {
    ("configmaps", "extension-apiserver-authentication", v) for v in ("get", "list", "watch")
}
IN_LEASE_NAMESPACE = {
    ("leases.coordination.k8s.io", "", "create"),
    ("leases.coordination.k8s.io", "kube-scheduler", "get"),
    ("leases.coordination.k8s.io", "kube-scheduler", "update"),
    ("leases.coordination.k8s.io", "kube-scheduler", "list"),
    ("leases.coordination.k8s.io", "kube-scheduler", "watch"),
}


def kubectl(
    kind_cluster, *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(kind_cluster.kubectl_path), "--kubeconfig", str(kind_cluster.kubeconfig_path), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}\n{proc.stdout}"
        )
    return proc


def render(method: str, *extra: str, output_dir: Path | None = None) -> str:
    args = ["render", method, *values_args(), *extra]
    if output_dir is not None:
        args += ["--output-dir", str(output_dir)]
    return cli(*args).stdout


@pytest.fixture(scope="module")
def our_namespace(kind_cluster, core: client.CoreV1Api) -> Iterator[str]:
    """crane-system, so that the objects in it can be dry-run (the server checks the namespace exists)."""
    os.environ.setdefault("KUBECONFIG", str(kind_cluster.kubeconfig_path))

    def phase() -> str | None:
        try:
            return core.read_namespace(OUR_NS).status.phase
        except client.ApiException as e:
            if e.status == 404:
                return None
            raise

    poll(
        lambda: phase() != "Terminating",
        120,
        f"namespace {OUR_NS} not terminating",
        interval=0.5,
        retry_on=(ApiException,),
    )
    made = phase() is None
    if made:
        core.create_namespace(
            {"metadata": {"name": OUR_NS, "labels": {"e2e.dynamic-scheduler.io/test": "true"}}}
        )
    yield OUR_NS
    if made:
        core.delete_namespace(OUR_NS)


def test_every_rendered_manifest_passes_a_server_dry_run(
    kind_cluster, core: client.CoreV1Api, our_namespace: str, tmp_path: Path
) -> None:
    kubelets = {n.metadata.name: kubelet_address(n) for n in core.list_node().items}
    streams = {
        "lease": render("lease"),
        "prometheus": render("prometheus", "--set", f"prometheus.nodes={json.dumps(kubelets)}"),
    }
    for mode in ("beside", "replace"):
        out = tmp_path / mode
        render("static", "--set", f"static.mode={mode}", output_dir=out)
        streams[f"static {mode}: the pod"] = (out / "etc/kubernetes/manifests/my-scheduler.yaml").read_text()
        if (out / "cluster-objects.yaml").exists():
            streams[f"static {mode}: cluster objects"] = (out / "cluster-objects.yaml").read_text()
    assert "static beside: cluster objects" in streams
    for what, stream in streams.items():
        # The static pod is a file for the kubelet; as an API object it belongs to kube-system.
        ns = ["-n", "kube-system"] if what.endswith("the pod") else []
        res = kubectl(
            kind_cluster,
            "apply",
            "--dry-run=server",
            "--server-side",
            "--field-manager=e2e",
            *ns,
            "-f",
            "-",
            stdin=stream,
        )
        applied = [ln for ln in res.stdout.splitlines() if ln.strip()]
        assert applied and all("(server dry run)" in ln for ln in applied), f"{what}:\n{res.stdout}"


def can_i(kind_cluster, user: str, namespace: str) -> set[tuple[str, str, str]]:
    """``kubectl auth can-i --list``: (resource or non-resource URL, resourceName, verb) triples."""
    out = kubectl(kind_cluster, "auth", "can-i", "--list", f"--as={user}", "-n", namespace).stdout
    rules: set[tuple[str, str, str]] = set()
    for line in out.splitlines()[1:]:
        if "[" not in line:
            continue
        resource = line[: line.index("[")].strip()
        urls, names, verbs = (g.split() for g in re.findall(r"\[([^\]]*)\]", line)[-3:])
        for what in [resource] if resource else urls:
            for name in names or [""]:
                rules.update((what, name, v) for v in verbs)
    return rules


@pytest.fixture
def lease_rbac(kind_cluster, api: client.ApiClient, our_namespace: str) -> Iterator[None]:
    """The lease method's ServiceAccount and RBAC, as deploy applies them (without the Deployment:
    no takeover needed to ask what the account may do), once the API server grants them."""
    kinds = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    docs = [
        d for d in render("lease").split("\n---\n") if re.search(rf"^kind: ({'|'.join(kinds)})$", d, re.M)
    ]
    stream = "\n---\n".join(docs)
    assert len(docs) == 7, stream
    kubectl(kind_cluster, "apply", "--server-side", "--field-manager=e2e", "-f", "-", stdin=stream)
    try:
        wait_until_allowed(api, grants_of(api, [yaml.safe_load(d) for d in docs]))
        yield
    finally:
        kubectl(kind_cluster, "delete", "--ignore-not-found", "-f", "-", stdin=stream)


def test_the_service_account_may_do_only_what_the_scheduler_needs(kind_cluster, lease_rbac) -> None:
    for namespace, want in (
        (OUR_NS, CLUSTER_WIDE),
        ("default", CLUSTER_WIDE),
        ("kube-system", CLUSTER_WIDE | IN_LEASE_NAMESPACE | AUTHENTICATION_CONFIG),
    ):
        granted = can_i(kind_cluster, SA, namespace) - can_i(kind_cluster, BASELINE_SA, namespace)
        assert granted == want, (
            f"in {namespace}: beyond the list: {sorted(granted - want)}; missing: {sorted(want - granted)}"
        )


@pytest.mark.parametrize(
    "settings,reason",
    [
        (
            ["--set", "static.manifestDir=/nonexistent"],
            r"/nonexistent is not a folder: expected the kubelet's staticPodPath; nothing was changed",
        ),
        (
            ["--set", "static.mode=replace", "--set", "static.manifestDir=/etc/kubernetes/pki"],
            r"/etc/kubernetes/pki/kube-scheduler\.yaml not found: replace mode moves kubeadm's kube-scheduler manifest "
            r"aside, and it is not where expected; nothing was changed",
        ),
    ],
    ids=["no-static-pod-path", "no-kube-scheduler-manifest"],
)
def test_static_deploy_stops_when_the_manifests_are_not_where_expected(
    kind_cluster, api: client.ApiClient, core: client.CoreV1Api, settings: list[str], reason: str
) -> None:
    os.environ.setdefault("KUBECONFIG", str(kind_cluster.kubeconfig_path))
    node = control_plane(core).metadata.name
    dirs = ("/etc/kubernetes", "/etc/kubernetes/manifests", "/nonexistent")
    before = node_listing(node, *dirs)
    res = cli("deploy", "static", *values_args(), *kind_flags(), *settings, check=False)
    assert res.code == 1
    lines = res.stderr.strip().splitlines()
    assert re.fullmatch(rf"error: deploy: {re.escape(node)}: {reason}", lines[-1]), res.stderr
    assert node_listing(node, *dirs) == before
    rbac = client.RbacAuthorizationV1Api(api)
    with pytest.raises(client.ApiException) as e:
        rbac.read_namespaced_role("dynamic-scheduler:my-scheduler-lease", "kube-system")
    assert e.value.status == 404
    assert not core.list_namespaced_pod("kube-system", label_selector="component=my-scheduler").items


@pytest.mark.parametrize("method", ["lease", "shadow"])
def test_the_image_renders_the_manifests_it_carries(test_image: str, method: str) -> None:
    """``docker run --rm IMAGE render`` prints what the checkout renders: the manifests travel
    inside the package (setup.py), not only in a checkout."""
    docker = subprocess.run(
        ["docker", "run", "--rm", test_image, "render", method], capture_output=True, text=True, timeout=120
    )
    assert docker.returncode == 0, docker.stderr
    local = cli("render", method)
    assert docker.stdout == local.stdout
    version = subprocess.run(
        ["docker", "run", "--rm", test_image, "version"], capture_output=True, text=True, timeout=120
    )
    assert version.returncode == 0 and re.search(
        r"^commit: ([0-9a-f]{40}(-dirty)?)$", version.stdout, re.M
    ), version
