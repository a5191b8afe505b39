"""scheduler.cluster.binder against a real API server: binding, conflicts, retries, the condition."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import CoreV1Api, V1Binding, V1ObjectMeta, V1ObjectReference
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.binder import Binder, binding_body
from scheduler.cluster.client import ClientOptions, api_request, new_api_client
from scheduler.core.loop import BindOutcome
from scheduler.polling import poll
from scheduler.settings import BindingSettings
from tests.apiserver import ControlPlane
from tests.cluster.netproxy import TCPProxy
from tests.cluster.util import make_node, make_pod
from tests.cluster.webhook import scripted_webhook

pytestmark = pytest.mark.apiserver


def pod_of(admin, ns: str, name: str) -> dict:
    return api_request(admin, "GET", f"/api/v1/namespaces/{ns}/pods/{name}")


def test_bind_sets_node_name_where_the_naive_client_call_raises(admin, namespace: str) -> None:
    node = make_node(admin)["metadata"]["name"]
    ours, naive = make_pod(admin, namespace), make_pod(admin, namespace)

    result = Binder(admin).bind(namespace, ours["metadata"]["name"], ours["metadata"]["uid"], node)
    assert result.status is BindOutcome.BOUND and result.attempts == 1
    got = pod_of(admin, namespace, ours["metadata"]["name"])
    assert got["spec"]["nodeName"] == node
    assert {"type": "PodScheduled", "status": "True"}.items() <= next(
        c for c in got["status"]["conditions"] if c["type"] == "PodScheduled"
    ).items()

    # The library's typed call binds too, then fails to read the Status answer as a V1Binding.
    name = naive["metadata"]["name"]
    body = V1Binding(metadata=V1ObjectMeta(name=name), target=V1ObjectReference(kind="Node", name=node))
    with pytest.raises(ValueError, match="target"):
        CoreV1Api(admin).create_namespaced_pod_binding(name, namespace, body)
    assert pod_of(admin, namespace, name)["spec"]["nodeName"] == node


def test_legacy_bindings_collection_drops_the_uid_precondition(admin, namespace: str) -> None:
    """Why the binder does not use create_namespaced_binding (POST .../bindings): there the
    API server wipes metadata.uid, so a re-created pod gets bound by a stale decision."""
    node = make_node(admin)["metadata"]["name"]
    old = make_pod(admin, namespace)
    name = old["metadata"]["name"]
    api_request(admin, "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")
    make_pod(admin, namespace, name)
    CoreV1Api(admin).create_namespaced_binding(
        namespace, binding_body(namespace, name, old["metadata"]["uid"], node), _preload_content=False
    ).release_conn()
    assert pod_of(admin, namespace, name)["spec"]["nodeName"] == node


def test_second_bind_is_a_conflict_to_drop(admin, namespace: str) -> None:
    n1, n2 = make_node(admin)["metadata"]["name"], make_node(admin)["metadata"]["name"]
    pod = make_pod(admin, namespace)
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    binder = Binder(admin)
    assert binder.bind(namespace, name, uid, n1).bound
    again = binder.bind(namespace, name, uid, n2)
    assert again.status is BindOutcome.GONE and again.drop and again.code == 409
    assert again.attempts == 1  # a conflict is never retried
    assert again.message == f"bound to {n1} by someone else"
    assert pod_of(admin, namespace, name)["spec"]["nodeName"] == n1


def test_a_conflict_onto_our_node_with_no_earlier_send_is_someone_elses_bind(admin, namespace: str) -> None:
    """Two leaders that chose the same node: the second Binding's 409 is not its success
    (no event, no metric), although the pod sits where it wanted it."""
    node = make_node(admin)["metadata"]["name"]
    pod = make_pod(admin, namespace)
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    assert Binder(admin).bind(namespace, name, uid, node).bound  # the other leader
    ours = Binder(admin).bind(namespace, name, uid, node)
    assert ours.status is BindOutcome.GONE and ours.code == 409 and ours.attempts == 1, ours
    assert ours.message == f"bound to {node} by someone else"


def test_bind_of_a_deleted_pod_is_gone(admin, namespace: str) -> None:
    node = make_node(admin)["metadata"]["name"]
    pod = make_pod(admin, namespace)
    api_request(admin, "DELETE", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}")
    result = Binder(admin).bind(namespace, pod["metadata"]["name"], pod["metadata"]["uid"], node)
    assert result.status is BindOutcome.GONE and result.code == 404


def test_bind_of_a_recreated_pod_is_refused_by_its_uid(admin, namespace: str) -> None:
    node = make_node(admin)["metadata"]["name"]
    old = make_pod(admin, namespace)
    name = old["metadata"]["name"]
    api_request(admin, "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")
    make_pod(admin, namespace, name)
    result = Binder(admin).bind(namespace, name, old["metadata"]["uid"], node)
    assert result.status is BindOutcome.GONE and result.code == 409
    assert "nodeName" not in pod_of(admin, namespace, name)["spec"]


def test_bind_retries_429_honouring_retry_after(apiserver: ControlPlane, admin, namespace: str) -> None:
    node = make_node(admin)["metadata"]["name"]
    pod = make_pod(admin, namespace)
    with scripted_webhook(apiserver, admin, namespace, deny=[(429, 1), (503, None)]) as hook:
        start = time.monotonic()
        result = Binder(admin, BindingSettings(initial_wait=0.05, max_wait=0.1)).bind(
            namespace, pod["metadata"]["name"], pod["metadata"]["uid"], node
        )
        elapsed = time.monotonic() - start
    assert result.status is BindOutcome.BOUND and result.attempts == 3
    assert hook.calls == 3
    assert elapsed >= 1.0  # the API server's Retry-After: 1, not our 0.05 s backoff


def test_bind_gives_up_after_bounded_attempts(apiserver: ControlPlane, admin, namespace: str) -> None:
    node = make_node(admin)["metadata"]["name"]
    pod = make_pod(admin, namespace)
    with scripted_webhook(apiserver, admin, namespace, deny=[(500, None)] * 10) as hook:
        result = Binder(admin, BindingSettings(attempts=3, initial_wait=0.01, max_wait=0.02)).bind(
            namespace, pod["metadata"]["name"], pod["metadata"]["uid"], node
        )
    assert result.status is BindOutcome.FAILED and result.code == 500 and result.attempts == 3
    assert hook.calls == 3
    assert "nodeName" not in pod_of(admin, namespace, pod["metadata"]["name"])["spec"]


def test_unschedulable_condition_written_once_per_change(
    apiserver: ControlPlane, admin, namespace: str
) -> None:
    pod = make_pod(admin, namespace)
    name = pod["metadata"]["name"]
    binder = Binder(admin)
    assert binder.set_unschedulable(pod, "0/3 nodes are available: 3 Insufficient cpu.")
    got = pod_of(admin, namespace, name)
    cond = next(c for c in got["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False",
        "Unschedulable",
        "0/3 nodes are available: 3 Insufficient cpu.",
    )
    assert cond["observedGeneration"] == got["metadata"]["generation"]
    first_transition = cond["lastTransitionTime"]

    # Same verdict on the pod as now stored: nothing to write (as kube-scheduler's updatePod).
    assert not binder.set_unschedulable(got, "0/3 nodes are available: 3 Insufficient cpu.")
    # A new message is written; the transition time stays (status did not flip).
    assert binder.set_unschedulable(got, "0/4 nodes are available: 4 Insufficient memory.")
    got2 = pod_of(admin, namespace, name)
    cond2 = next(c for c in got2["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond2["message"] == "0/4 nodes are available: 4 Insufficient memory."
    assert cond2["lastTransitionTime"] == first_transition
    assert len([c for c in got2["status"]["conditions"] if c["type"] == "PodScheduled"]) == 1


def test_condition_of_a_recreated_pod_is_not_written(admin, namespace: str) -> None:
    old = make_pod(admin, namespace)
    name = old["metadata"]["name"]
    api_request(admin, "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")
    make_pod(admin, namespace, name)
    assert not Binder(admin).set_unschedulable(old, "nope")
    assert not (pod_of(admin, namespace, name).get("status") or {}).get("conditions")


def test_binder_works_with_kube_schedulers_rbac(apiserver: ControlPlane, admin, namespace: str) -> None:
    """Bind and status patch as system:kube-scheduler: the built-in ClusterRole suffices."""
    kc = apiserver.kubeconfig_for("system:kube-scheduler")
    api = new_api_client(ClientOptions(kubeconfig=str(kc)))
    node = make_node(admin)["metadata"]["name"]
    a, b = make_pod(admin, namespace), make_pod(admin, namespace)
    binder = Binder(api)
    assert binder.bind(namespace, a["metadata"]["name"], a["metadata"]["uid"], node).bound
    assert binder.set_unschedulable(b, "no nodes")
    # and a user without those rights is refused (403 is neither retried nor "gone").
    nobody = new_api_client(ClientOptions(kubeconfig=str(apiserver.kubeconfig_for("nobody"))))
    r = Binder(nobody).bind(namespace, b["metadata"]["name"], b["metadata"]["uid"], node)
    assert r.status is BindOutcome.FAILED and r.code == 403 and r.attempts == 1
    with pytest.raises(ApiException) as e:
        Binder(nobody).set_unschedulable(a | {"status": {}}, "x")
    assert e.value.status == 403
    assert json.loads(e.value.body)["reason"] == "Forbidden"


# --- the write path under faults: timeouts and dropped connections, through a real proxy ------


@pytest.fixture
def proxied(apiserver: ControlPlane) -> Iterator[tuple[TCPProxy, Any]]:
    """A TCP proxy in front of the API server, and a scheduler client (new_api_client) through it."""
    proxy = TCPProxy(apiserver.port)
    kc = apiserver.kubeconfig_for("admin", ("system:masters",), server=proxy.url)
    try:
        yield proxy, new_api_client(ClientOptions(kubeconfig=str(kc), qps=0))
    finally:
        proxy.close()


def test_a_bind_whose_answer_is_lost_is_known_bound_from_the_conflict(
    proxied: tuple[TCPProxy, Any], admin, namespace: str
) -> None:
    """The Binding reaches the API server, the connection drops before the answer: the request
    sent again (by libcurl on a new connection, or by our retry) gets 409, and the pod, read
    back, is bound to our node with our UID: BOUND, not GONE."""
    proxy, api = proxied
    node = make_node(admin)["metadata"]["name"]
    pod = make_pod(admin, namespace)
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    binder = Binder(api, BindingSettings(initial_wait=0.01, max_wait=0.02))
    api_request(api, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}")  # a pooled connection
    proxy.drop_next_reply()
    result = binder.bind(namespace, name, uid, node)
    assert proxy.dropped_replies == 1
    assert result.status is BindOutcome.BOUND, result
    assert pod_of(admin, namespace, name)["spec"]["nodeName"] == node


def test_a_lost_answer_then_a_bind_elsewhere_is_gone(
    proxied: tuple[TCPProxy, Any], admin, namespace: str
) -> None:
    """The same conflict, but the pod sits on another node: someone else bound it."""
    proxy, api = proxied
    mine, theirs = make_node(admin)["metadata"]["name"], make_node(admin)["metadata"]["name"]
    pod = make_pod(admin, namespace)
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    # Bound elsewhere first; our Binding then is refused, and its 409 reply dropped once.
    assert Binder(admin).bind(namespace, name, uid, theirs).bound
    api_request(api, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    proxy.drop_next_reply()
    result = Binder(api, BindingSettings(initial_wait=0.01, max_wait=0.02)).bind(namespace, name, uid, mine)
    assert proxy.dropped_replies == 1
    assert result.status is BindOutcome.GONE and result.code == 409, result
    assert pod_of(admin, namespace, name)["spec"]["nodeName"] == theirs


def test_a_bind_that_times_out_is_retried_then_fails_within_its_bounds(
    proxied: tuple[TCPProxy, Any], admin, namespace: str
) -> None:
    proxy, api = proxied
    node = make_node(admin)["metadata"]["name"]
    pod = make_pod(admin, namespace)
    settings = BindingSettings(attempts=2, initial_wait=0.01, max_wait=0.02, timeout=(0.5, 0.5))
    proxy.partition("blackhole")
    start = time.monotonic()
    result = Binder(api, settings).bind(namespace, pod["metadata"]["name"], pod["metadata"]["uid"], node)
    elapsed = time.monotonic() - start
    proxy.heal()
    assert result.status is BindOutcome.FAILED and result.attempts == 2 and result.code is None
    assert "timed out" in result.message.lower()
    # Two tries and the read-back, each cut at its timeout (1 s: connect and read).
    assert elapsed < 6, elapsed
    assert "nodeName" not in pod_of(admin, namespace, pod["metadata"]["name"])["spec"]


def test_a_bind_retries_through_a_refused_connection(
    proxied: tuple[TCPProxy, Any], admin, namespace: str
) -> None:
    """The API server goes away (every connection reset) and is back before the next try."""
    proxy, api = proxied
    node = make_node(admin)["metadata"]["name"]
    pod = make_pod(admin, namespace)
    proxy.partition("refuse")

    def heal_once_refused() -> None:
        poll(lambda: proxy.refused > 0, timeout=10, what="a refused connection")
        proxy.heal()

    healer = threading.Thread(target=heal_once_refused)
    healer.start()
    result = Binder(api, BindingSettings(initial_wait=0.3, max_wait=0.3)).bind(
        namespace, pod["metadata"]["name"], pod["metadata"]["uid"], node
    )
    healer.join()
    assert result.status is BindOutcome.BOUND and result.attempts == 2
    assert pod_of(admin, namespace, pod["metadata"]["name"])["spec"]["nodeName"] == node


@pytest.mark.parametrize("code", [500, 502, 503, 504])
def test_each_retriable_5xx_is_retried_then_bound(
    apiserver: ControlPlane, admin, namespace: str, code: int
) -> None:
    node = make_node(admin)["metadata"]["name"]
    pod = make_pod(admin, namespace)
    with scripted_webhook(apiserver, admin, namespace, deny=[(code, None)]) as hook:
        result = Binder(admin, BindingSettings(initial_wait=0.01, max_wait=0.02)).bind(
            namespace, pod["metadata"]["name"], pod["metadata"]["uid"], node
        )
    assert result.status is BindOutcome.BOUND and result.attempts == 2 and hook.calls == 2
