"""The lease method's ServiceAccount: exactly the access the scheduler's code uses; and
Prometheus's: the node list and watch of its discovery, the kubelets' metrics, nothing else.

Two sides, both against the real API server:

- *nothing more*: a SelfSubjectRulesReview as the ServiceAccount, minus what any
  authenticated ServiceAccount may do, equals the expected list, rule by rule;
- *nothing less*: as the ServiceAccount, the scheduler's own code does its work:
  the informers list and watch every resource of ``scheduler.cluster.informers``,
  the Binder binds and writes the PodScheduled condition, the EventRecorder
  writes events, the PreemptionExecutor marks and deletes a victim, the
  LeaderElector takes, renews and releases the Lease.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import ApiClient, AuthorizationV1Api, CoreV1Api
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.binder import Binder
from scheduler.cluster.client import api_request
from scheduler.cluster.events import EventRecorder
from scheduler.cluster.leaderelection import LeaderElectionConfig, LeaderElector
from scheduler.cluster.preemption import PreemptionExecutor
from scheduler.cluster.store import RESOURCES
from scheduler.config.options import AuthenticationOptions, AuthorizationOptions
from scheduler.core.podinfo import PodInfo
from scheduler.core.preemption import Preemption
from scheduler.deploy.kube import Cluster
from scheduler.deploy.waiting import poll
from scheduler.plugins.dynamicresources.extended import in_memory_claim
from scheduler.plugins.dynamicresources.writes import (
    bind_claim,
    create_claim,
    delete_claim,
    remove_reservation,
)
from scheduler.serving.authentication import Credentials
from scheduler.serving.authorization import Decision
from scheduler.serving.delegation import Delegation
from tests.access import grants_of, wait_until_allowed
from tests.apiserver import ControlPlane
from tests.deploy.cluster_util import make_pod, service_account_client
from tests.deploy.util import rendered

pytestmark = pytest.mark.apiserver

Rule = tuple[str, str, str, str]
"""(verb, apiGroup, resource, resourceName or "")."""

CLUSTER_WIDE: set[Rule] = {
    *{(v, "", "pods", "") for v in ("get", "list", "watch", "delete")},
    *{
        (v, "", r, "")
        for v in ("list", "watch")
        for r in ("namespaces", "nodes", "persistentvolumeclaims", "persistentvolumes")
    },
    *{
        (v, "storage.k8s.io", r, "")
        for v in ("list", "watch")
        for r in ("csidrivers", "csinodes", "csistoragecapacities", "storageclasses", "volumeattachments")
    },
    *{(v, "policy", "poddisruptionbudgets", "") for v in ("list", "watch")},
    *{
        (v, "resource.k8s.io", r, "")
        for v in ("list", "watch")
        for r in ("deviceclasses", "devicetaintrules", "resourceslices")
    },
    *{
        (v, "resource.k8s.io", "resourceclaims", "")
        for v in ("get", "list", "watch", "patch", "create", "delete")
    },
    *{
        (v, "resource.k8s.io", r, "")
        for v in ("update", "patch")
        for r in ("resourceclaims/status", "resourceclaims/binding")
    },
    ("create", "", "pods/binding", ""),
    ("patch", "", "pods/status", ""),
    ("patch", "", "persistentvolumeclaims", ""),
    ("patch", "", "persistentvolumes", ""),
    ("create", "events.k8s.io", "events", ""),
    ("patch", "events.k8s.io", "events", ""),
    ("create", "authentication.k8s.io", "tokenreviews", ""),
    ("create", "authorization.k8s.io", "subjectaccessreviews", ""),
}
AUTHENTICATION_CONFIG: set[Rule] = {
    (v, "", "configmaps", "extension-apiserver-authentication") for v in ("get", "list", "watch")
}
LEADER_ELECTION: set[Rule] = {
    ("create", "coordination.k8s.io", "leases", ""),
    ("get", "coordination.k8s.io", "leases", "kube-scheduler"),
    ("update", "coordination.k8s.io", "leases", "kube-scheduler"),
    ("list", "coordination.k8s.io", "leases", "kube-scheduler"),
    ("watch", "coordination.k8s.io", "leases", "kube-scheduler"),
}


@pytest.fixture
def deployed(apiserver: ControlPlane, admin: ApiClient) -> Iterator[str]:
    """The lease method's objects in a fresh namespace, whose Leases go in that namespace too
    (kube-system/kube-scheduler is left to the tests of scheduler/cluster)."""
    ns = f"r-{uuid.uuid4().hex[:8]}"
    objects = rendered("lease", f"namespace={ns}", f"leaderElection.resourceNamespace={ns}").objects
    cluster = Cluster(admin)
    cluster.apply(objects)
    try:
        wait_until_allowed(admin, grants_of(admin, objects))
        yield ns
    finally:
        cluster.delete([o for o in objects if o["kind"] != "Deployment"])


def rules(api: ApiClient, namespace: str) -> set[Rule]:
    review = AuthorizationV1Api(api).create_self_subject_rules_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": namespace},
        }
    )
    assert not review.status.incomplete, review.status.evaluation_error
    out: set[Rule] = set()
    for r in review.status.resource_rules:
        for verb in r.verbs:
            for group in r.api_groups or [""]:
                for resource in r.resources or []:
                    for name in r.resource_names or [""]:
                        out.add((verb, group, resource, name))
    return out


def test_the_service_account_may_do_exactly_this(
    apiserver: ControlPlane, admin: ApiClient, deployed: str
) -> None:
    ns = deployed
    ours = service_account_client(apiserver, ns, "dynamic-scheduler")
    anyone = service_account_client(apiserver, ns, "someone-else")  # bound to nothing of ours
    other_ns = "default"
    baseline = rules(anyone, other_ns)
    assert rules(ours, other_ns) - baseline == CLUSTER_WIDE
    assert rules(ours, ns) - rules(anyone, ns) == CLUSTER_WIDE | LEADER_ELECTION
    assert rules(ours, "kube-system") - rules(anyone, "kube-system") == CLUSTER_WIDE | AUTHENTICATION_CONFIG


def test_the_service_account_runs_the_schedulers_code(
    apiserver: ControlPlane, admin: ApiClient, deployed: str
) -> None:
    ns = deployed
    sa = service_account_client(apiserver, ns, "dynamic-scheduler")
    # the informers: a list and a watch of each resource
    for res in RESOURCES.values():
        api_request(sa, "GET", res.path, query=[("limit", 1)])
        resp = sa.call_api(
            res.path,
            "GET",
            query_params=[("watch", "true"), ("timeoutSeconds", 1)],
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
        resp.release_conn()
    core = CoreV1Api(admin)
    node = f"n-{ns}"
    core.create_node({"metadata": {"name": node}})
    try:
        # the binder: a bind, and PodScheduled=False on a pod that fits nowhere
        a, b = make_pod(admin, ns, "a"), make_pod(admin, ns, "b")
        assert Binder(sa).bind(ns, "a", a.metadata.uid, node).bound
        assert core.read_namespaced_pod("a", ns).spec.node_name == node
        assert Binder(sa).set_unschedulable(admin.sanitize_for_serialization(b), "0/1 nodes are available")
        # events
        recorder = EventRecorder(sa).start()
        recorder.scheduled(
            admin.sanitize_for_serialization(core.read_namespaced_pod("a", ns)), node, "default-scheduler"
        )
        assert recorder.flush(10)
        recorder.stop()
        assert (recorder.stats.written, recorder.stats.failed) == (1, 0)
        # a series update is a patch of the event (as the recorder does for repeats)
        (ev,) = api_request(admin, "GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
        api_request(
            sa,
            "PATCH",
            f"/apis/events.k8s.io/v1/namespaces/{ns}/events/{ev['metadata']['name']}",
            body={"series": {"count": 2, "lastObservedTime": ev["eventTime"]}},
            content_type="application/merge-patch+json",
        )
        # preemption: a victim marked DisruptionTarget and deleted, a nomination cleared
        c = make_pod(admin, ns, "c")
        assert Binder(sa).bind(ns, "c", c.metadata.uid, node).bound
        victim = PodInfo.from_pod(admin.sanitize_for_serialization(core.read_namespaced_pod("c", ns)))
        b_raw = admin.sanitize_for_serialization(core.read_namespaced_pod("b", ns))
        b_raw["status"]["nominatedNodeName"] = node  # as if written earlier
        preemptor = PodInfo.from_pod(admin.sanitize_for_serialization(core.read_namespaced_pod("a", ns)))
        recorder = EventRecorder(sa).start()
        done = threading.Event()
        executor = PreemptionExecutor(Binder(sa), recorder)
        executor.preempt(
            Preemption(preemptor, node, (victim,), (PodInfo.from_pod(b_raw),)), "x", lambda ok: done.set()
        )
        assert done.wait(15)
        executor.stop()
        assert recorder.flush(10)
        recorder.stop()
        assert (recorder.stats.written, recorder.stats.failed) == (1, 0)
        gone = core.read_namespaced_pod("c", ns)
        assert gone.metadata.deletion_timestamp is not None  # no kubelet: it stays terminating
        assert [c.type for c in gone.status.conditions or [] if c.type == "DisruptionTarget"]
        # DynamicResources' PreBind: the finalizer, then the allocation and the reservation
        claim = api_request(
            admin,
            "POST",
            f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims",
            body={
                "metadata": {"name": "claim"},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "any"}}]}},
            },
        )
        result = {"request": "r", "driver": "d.example.com", "pool": node, "device": "dev-0"}
        bind_claim(sa, claim, preemptor, {"devices": {"results": [result]}}, threading.Event())
        written = api_request(admin, "GET", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/claim")
        assert written["status"]["allocation"]["devices"]["results"] == [result]
        assert [r["uid"] for r in written["status"]["reservedFor"]] == [preemptor.uid]
        # ... and Unreserve takes the reservation back; a claim for extended resources is
        # created, written and deleted
        remove_reservation(sa, written, preemptor)
        written = api_request(admin, "GET", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/claim")
        assert not written["status"].get("reservedFor")
        planned = in_memory_claim(preemptor)
        planned["spec"] = claim["spec"]
        created = create_claim(sa, planned)
        bind_claim(sa, created, preemptor, {"devices": {"results": [result]}}, threading.Event())
        delete_claim(sa, created)
    finally:
        core.delete_node(node)
    # the secure port: the client CA read from the cluster, a token reviewed, a request authorized
    delegation = Delegation(AuthenticationOptions(), AuthorizationOptions(), authn_client=sa, authz_client=sa)
    assert delegation.client_ca_bundle().startswith(b"-----BEGIN CERTIFICATE-----")
    token = api_request(
        admin, "POST", f"/api/v1/namespaces/{ns}/serviceaccounts/dynamic-scheduler/token", body={"spec": {}}
    )["status"]["token"]
    user = delegation.authenticator.authenticate(Credentials({"authorization": [f"Bearer {token}"]}))
    assert user.name == f"system:serviceaccount:{ns}:dynamic-scheduler"
    assert (
        delegation.authorizer(user, "get", "/metrics").decision is Decision.NO_OPINION
    )  # reviewed: no right
    # leader election: take, renew, release the Lease named kube-scheduler
    elector = LeaderElector(
        sa,
        LeaderElectionConfig(
            namespace=ns, name="kube-scheduler", lease_duration=3, renew_deadline=2, retry_period=0.5
        ),
    ).start()
    try:
        assert elector.leading.wait(15), "never led"
        first = _lease(admin, ns)["renewTime"]
        poll(
            "a renewal",
            lambda: (_lease(admin, ns)["renewTime"] != first, "not renewed yet"),
            10,
            interval=0.1,
        )
    finally:
        elector.stop(release=True)
    assert not elector.lost.is_set()
    lease = api_request(admin, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/kube-scheduler")
    assert not lease["spec"].get("holderIdentity")


def _lease(admin: ApiClient, ns: str) -> Any:
    return api_request(admin, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/kube-scheduler")[
        "spec"
    ]


def test_and_nothing_else(apiserver: ControlPlane, admin: ApiClient, deployed: str) -> None:
    ns = deployed
    sa = service_account_client(apiserver, ns, "dynamic-scheduler")
    refused = [
        ("GET", "/api/v1/nodes/any"),
        ("DELETE", "/api/v1/nodes/any"),
        ("PATCH", f"/api/v1/namespaces/{ns}/pods/any"),
        ("GET", "/api/v1/secrets"),
        ("PUT", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/another"),
        ("POST", f"/api/v1/namespaces/{ns}/events"),
    ]
    for method, path in refused:
        with pytest.raises(ApiException) as info:
            api_request(
                sa,
                method,
                path,
                body={} if method in ("PUT", "POST", "PATCH") else None,
                content_type="application/merge-patch+json" if method == "PATCH" else None,
            )
        assert info.value.status == 403, (method, path)


# --- Prometheus's ServiceAccount -----------------------------------------------------------------

NODE_DISCOVERY: set[Rule] = {("list", "", "nodes", ""), ("watch", "", "nodes", "")}
KUBELET_METRICS: set[Rule] = {("get", "", "nodes/metrics", "")}


@pytest.fixture(params=["kubernetes", "static"])
def prometheus_rbac(request: pytest.FixtureRequest, admin: ApiClient) -> Iterator[tuple[str, str]]:
    """Prometheus's ServiceAccount and RBAC as deploy applies them, in a fresh namespace (without the
    Deployment, which never rolls out here); (namespace, discovery)."""
    ns = f"p-{uuid.uuid4().hex[:8]}"
    discovery = request.param
    sets = [f"namespace={ns}", f"prometheus.discovery={discovery}", "prometheus.nodes={n: 10.0.0.1:10250}"]
    objects = [o for o in rendered("prometheus", *sets).objects if o["kind"] != "Deployment"]
    cluster = Cluster(admin)
    cluster.apply(objects)
    try:
        wait_until_allowed(admin, grants_of(admin, objects))
        yield ns, discovery
    finally:
        cluster.delete(objects)


def kubelet_asks(admin: ApiClient, ns: str, subresource: str) -> bool:
    """The kubelet's question for a request of Prometheus's ServiceAccount to ``/metrics/...`` (or,
    for ``proxy``, to any path it does not name): a SubjectAccessReview on the node."""
    review = AuthorizationV1Api(admin).create_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{ns}:prometheus",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"],
                "resourceAttributes": {
                    "verb": "get",
                    "resource": "nodes",
                    "subresource": subresource,
                    "name": "kind-worker",
                    "version": "v1",
                },
            },
        }
    )
    return bool(review.status.allowed)


def non_resource_rules(api: ApiClient) -> set[tuple[str, str]]:
    """(verb, path) the caller may use beyond what every authenticated user may."""
    review = AuthorizationV1Api(api).create_self_subject_rules_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": "default"},
        }
    )
    return {(v, p) for r in review.status.non_resource_rules for v in r.verbs for p in r.non_resource_urls}


def test_prometheus_may_read_the_kubelets_metrics_and_nothing_else_of_them(
    apiserver: ControlPlane, admin: ApiClient, prometheus_rbac: tuple[str, str]
) -> None:
    ns, discovery = prometheus_rbac
    prom = service_account_client(apiserver, ns, "prometheus")
    anyone = service_account_client(apiserver, ns, "someone-else")
    want = KUBELET_METRICS | (NODE_DISCOVERY if discovery == "kubernetes" else set())
    assert rules(prom, "default") - rules(anyone, "default") == want
    # the scheduler's own /metrics (its delegated authorization asks exactly this)
    assert non_resource_rules(prom) - non_resource_rules(anyone) == {("get", "/metrics")}
    if discovery == "kubernetes":  # what the node informer of kubernetes_sd_configs does
        api_request(prom, "GET", "/api/v1/nodes", query=[("limit", 1)])
        prom.call_api(
            "/api/v1/nodes",
            "GET",
            query_params=[("watch", "true"), ("timeoutSeconds", 1)],
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        ).release_conn()
    assert kubelet_asks(admin, ns, "metrics")
    for other in ("proxy", "stats", "log", "pods", "configz", "checkpoint"):
        assert not kubelet_asks(admin, ns, other), other
    # nor through the API server's node proxy
    with pytest.raises(ApiException) as info:
        api_request(prom, "GET", "/api/v1/nodes/kind-worker/proxy/metrics/resource")
    assert info.value.status == 403


def _group(res: Any) -> str:
    """The API group of an informer's resource, from its path (/api/v1/... is the core group)."""
    parts = res.path.split("/")
    return "" if parts[1] == "api" else parts[2]


SHADOW: set[Rule] = {(v, _group(r), r.plural, "") for r in RESOURCES.values() for v in ("list", "watch")}
"""Shadow mode: the informers' reads, and not one write."""


def test_the_shadow_may_read_what_the_informers_read_and_nothing_else(
    apiserver: ControlPlane, admin: ApiClient
) -> None:
    ns = f"s-{uuid.uuid4().hex[:8]}"
    objects = [o for o in rendered("shadow", f"namespace={ns}").objects if o["kind"] != "Deployment"]
    cluster = Cluster(admin)
    cluster.apply(objects)
    try:
        wait_until_allowed(admin, grants_of(admin, objects))
        shadow = service_account_client(apiserver, ns, "dynamic-scheduler-shadow")
        anyone = service_account_client(apiserver, ns, "someone-else")
        for where in (ns, "default", "kube-system"):
            assert rules(shadow, where) - rules(anyone, where) == SHADOW
        for res in RESOURCES.values():
            api_request(shadow, "GET", res.path, query=[("limit", 1)])
    finally:
        cluster.delete(objects)
