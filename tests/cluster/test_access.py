"""tests.access against the private API server: it waits for a binding made after it started,
returns only once the right is usable, and names what is still refused at its deadline."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import ApiClient

from scheduler.cluster.client import api_request
from scheduler.polling import PollTimeoutError
from tests.access import RBAC, Right, Subject, grants_of, wait_until_allowed
from tests.apiserver import ControlPlane

pytestmark = pytest.mark.apiserver


class _Refusals(logging.Handler):
    """Sets ``seen`` once the helper has logged a refusal (so it has asked, and been told no)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "waiting for the API server's authorizer":
            self.seen.set()


@pytest.fixture
def refusals() -> Iterator[_Refusals]:
    handler = _Refusals()
    log = logging.getLogger("tests.access")
    log.addHandler(handler)
    level = log.level
    log.setLevel(logging.INFO)
    yield handler
    log.removeHandler(handler)
    log.setLevel(level)


def _role_and_binding(name: str, namespace: str, user: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    ]


def test_it_waits_for_a_binding_created_after_it_started(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, refusals: _Refusals
) -> None:
    user = f"late-{uuid.uuid4().hex[:6]}"
    role, binding = _role_and_binding(user, namespace, user)
    api_request(admin, "POST", f"{RBAC}/namespaces/{namespace}/roles", body=role)
    right = Right("create", resource="configmaps", namespace=namespace)
    outcome: list[Any] = []

    def wait() -> None:
        try:
            outcome.append(wait_until_allowed(admin, [(Subject(user), right)], timeout=60))
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread
            outcome.append(e)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    assert refusals.seen.wait(30), "the helper never reported a refusal"
    assert waiter.is_alive() and not outcome, outcome  # refused, so still waiting
    api_request(admin, "POST", f"{RBAC}/namespaces/{namespace}/rolebindings", body=binding)
    waiter.join(60)
    assert not waiter.is_alive()
    assert isinstance(outcome[0], float), outcome
    # and the right is there for the subject's own request, the very next moment
    as_user = apiserver.api_client(user=user)
    try:
        api_request(
            as_user,
            "POST",
            f"/api/v1/namespaces/{namespace}/configmaps",
            body={"metadata": {"name": "granted"}},
        )
    finally:
        as_user.close()


def test_at_its_deadline_it_names_what_is_still_refused(admin: ApiClient, namespace: str) -> None:
    subject = Subject(f"nobody-{uuid.uuid4().hex[:6]}")
    right = Right("delete", resource="pods", namespace=namespace)
    with pytest.raises(PollTimeoutError) as info:
        wait_until_allowed(admin, [(subject, right)], timeout=0.5)
    message = str(info.value)
    assert f"{subject.user} may not delete pods in namespace {namespace}" in message, message


def test_grants_of_asks_one_right_per_rule_of_each_bound_role(
    apiserver: ControlPlane, admin: ApiClient, namespace: str
) -> None:
    """A Role among the objects, a ClusterRole read from the server, URLs, names, subresources,
    and each kind of subject; applied, the API server grants what was asked."""
    tag = uuid.uuid4().hex[:6]
    api_request(
        admin,
        "POST",
        f"{RBAC}/clusterroles",
        body={
            "metadata": {"name": f"reader-{tag}"},
            "rules": [
                {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
            ],
        },
    )
    group = "rbac.authorization.k8s.io"
    objects = [
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"reader-{tag}"},
            "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": f"reader-{tag}"},
            "subjects": [
                {"apiGroup": group, "kind": "Group", "name": f"readers-{tag}"},
                {"kind": "ServiceAccount", "name": "sa", "namespace": namespace},
            ],
        },
        {
            "kind": "Role",
            "metadata": {"name": "lease", "namespace": namespace},
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": ["kube-scheduler"],
                    "verbs": ["update", "get"],
                }
            ],
        },
        {
            "kind": "RoleBinding",
            "metadata": {"name": "lease", "namespace": namespace},
            "roleRef": {"apiGroup": group, "kind": "Role", "name": "lease"},
            "subjects": [{"apiGroup": group, "kind": "User", "name": f"u-{tag}"}],
        },
    ]
    readers, sa = Subject("", (f"readers-{tag}",)), Subject.service_account(namespace, "sa")
    lease = Right(
        "update", resource="leases", group="coordination.k8s.io", namespace=namespace, name="kube-scheduler"
    )
    assert grants_of(admin, objects) == [
        (readers, Right("get", path="/metrics")),
        (readers, Right("create", resource="pods/binding")),
        (sa, Right("get", path="/metrics")),
        (sa, Right("create", resource="pods/binding")),
        (Subject(f"u-{tag}"), lease),
    ]
    plural = {"ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings"}
    for o in objects:
        where = "" if o["kind"].startswith("Cluster") else f"/namespaces/{namespace}"
        api_request(admin, "POST", f"{RBAC}{where}/{plural[o['kind']]}", body=o)
    wait_until_allowed(admin, grants_of(admin, objects), timeout=60)
    # a member of the group reads /metrics with its own request
    member = apiserver.api_client(user=f"member-{tag}", groups=(f"readers-{tag}",))
    try:
        resp = member.call_api(
            "/metrics",
            "GET",
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
        assert resp.status == 200 and resp.read()
    finally:
        member.close()


def test_a_binding_to_a_role_without_rules_is_refused_with_its_name(admin: ApiClient, namespace: str) -> None:
    tag = uuid.uuid4().hex[:6]
    api_request(admin, "POST", f"{RBAC}/clusterroles", body={"metadata": {"name": f"empty-{tag}"}})
    binding = {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"b-{tag}"},
        "roleRef": {"kind": "ClusterRole", "name": f"empty-{tag}"},
        "subjects": [{"kind": "User", "name": "x"}],
    }
    with pytest.raises(
        ValueError, match=rf"ClusterRoleBinding b-{tag}: its ClusterRole empty-{tag} has no rules"
    ):
        grants_of(admin, [binding])
