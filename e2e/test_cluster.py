"""The cluster itself works: the ground every other suite stands on.

Nodes Ready, kube-proxy and CoreDNS running, the node DaemonSets on Linux nodes
only, a pod on a worker reaches the API server through the ``kubernetes``
Service and resolves Service names through cluster DNS, and a PVC of the
default StorageClass binds and is writable.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.kube import run_pod
from scheduler.polling import poll

pytestmark = pytest.mark.cluster


def _ready(node: client.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or ())


def test_three_nodes_ready(core: client.CoreV1Api) -> None:
    nodes = core.list_node().items
    roles = sorted(
        "control-plane" if "node-role.kubernetes.io/control-plane" in (n.metadata.labels or {}) else "worker"
        for n in nodes
    )
    assert roles == ["control-plane", "worker", "worker"]
    poll(
        lambda: all(_ready(n) for n in core.list_node().items),
        120,
        "all nodes Ready",
        interval=0.5,
        retry_on=(ApiException,),
    )


@pytest.mark.parametrize("selector", ["k8s-app=kube-proxy", "k8s-app=kube-dns"])
def test_system_pods_running(core: client.CoreV1Api, selector: str) -> None:
    pods = poll(
        lambda: [
            p
            for p in core.list_namespaced_pod("kube-system", label_selector=selector).items
            if p.status.phase == "Running"
        ],
        120,
        f"{selector} pods Running",
        interval=0.5,
        retry_on=(ApiException,),
    )
    assert pods


def test_node_daemonsets_select_linux_nodes(core: client.CoreV1Api) -> None:
    """kube-proxy and the pod network run only on nodes labelled ``kubernetes.io/os=linux``
    (stock kind's kindnetd selects them so; the offline image's stand-in must too), so that
    simulated nodes without a kubelet (``make bench``'s kwok nodes) get no pod of theirs."""
    daemonsets = client.AppsV1Api(core.api_client).list_namespaced_daemon_set("kube-system").items
    assert {"kindnet", "kube-proxy"} <= {ds.metadata.name for ds in daemonsets}
    for ds in daemonsets:
        selector = ds.spec.template.spec.node_selector or {}
        assert selector.get("kubernetes.io/os") == "linux", f"{ds.metadata.name}: nodeSelector {selector}"


def _worker(core: client.CoreV1Api) -> str:
    return next(
        n.metadata.name
        for n in core.list_node().items
        if "node-role.kubernetes.io/control-plane" not in (n.metadata.labels or {})
    )


def test_pod_reaches_api_server_and_cluster_dns(
    core: client.CoreV1Api, namespace: str, test_image: str
) -> None:
    svc_ip = core.read_namespaced_service("kubernetes", "default").spec.cluster_ip
    script = """
import json, socket, ssl, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
ctx = ssl.create_default_context(cafile=sa + "/ca.crt")
req = urllib.request.Request("https://kubernetes.default.svc/version",
                             headers={"Authorization": "Bearer " + open(sa + "/token").read()})
version = json.load(urllib.request.urlopen(req, context=ctx, timeout=20))
print(json.dumps({"dns": socket.gethostbyname("kubernetes.default.svc.cluster.local"),
                  "gitVersion": version["gitVersion"]}))
"""
    out = json.loads(
        run_pod(core, namespace, "probe", test_image, script, node=_worker(core)).strip().splitlines()[-1]
    )
    assert out["dns"] == svc_ip
    assert out["gitVersion"].startswith("v1.")


def test_default_storage_class_binds_and_is_writable(
    core: client.CoreV1Api, namespace: str, test_image: str
) -> None:
    core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}},
        },
    )
    script = "open('/data/hello', 'w').write('hello'); print(open('/data/hello').read())"
    out = run_pod(
        core,
        namespace,
        "writer",
        test_image,
        script,
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        mounts=[{"name": "data", "mountPath": "/data"}],
        timeout=180,
    )
    assert out.strip() == "hello"
    pvc = core.read_namespaced_persistent_volume_claim("data", namespace)
    assert pvc.status.phase == "Bound"
