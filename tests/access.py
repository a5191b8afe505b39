"""Rights granted, then used: wait until the API server's authorizer says yes.

kube-apiserver's RBAC authorizer reads Roles, ClusterRoles and their bindings
from informers. For a moment after a binding is created (longer on a busy
machine) a request of its subject is still refused, and a review asked of the
API server on the subject's behalf (our secure port's SubjectAccessReview,
the kubelet's) is answered "no". Every test, e2e suite and fixture that grants
rights and then uses them goes through :func:`wait_until_allowed` first: it
asks the API server the same question with SubjectAccessReviews, as the
subject, until every answer is yes.

:func:`grants_of` turns the bindings among applied objects into the questions
to ask: one per rule of each bound role, for each subject.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes.client import ApiClient

from scheduler.cluster.client import api_request
from scheduler.logs import kv
from scheduler.polling import PollTimeoutError, poll

logger = logging.getLogger(__name__)

RBAC = "/apis/rbac.authorization.k8s.io/v1"
BINDINGS = ("RoleBinding", "ClusterRoleBinding")


@dataclass(frozen=True)
class Subject:
    """Who asks: a user name and the groups the authenticator gives them."""

    user: str = ""
    groups: tuple[str, ...] = ()

    @classmethod
    def service_account(cls, namespace: str, name: str) -> Subject:
        """A ServiceAccount as its token authenticates it."""
        return cls(
            f"system:serviceaccount:{namespace}:{name}",
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
        )

    @classmethod
    def of(cls, subject: dict[str, Any], binding_namespace: str = "") -> Subject:
        """A subject of a RoleBinding or ClusterRoleBinding."""
        kind, name = subject.get("kind"), subject.get("name", "")
        if kind == "ServiceAccount":
            return cls.service_account(subject.get("namespace") or binding_namespace, name)
        if kind == "User":
            return cls(name)
        if kind == "Group":
            return cls("", (name,))
        raise ValueError(f"binding subject {subject!r}: expected kind ServiceAccount, User or Group")

    def __str__(self) -> str:
        return self.user or f"group {','.join(self.groups)}"


@dataclass(frozen=True)
class Right:
    """What is asked: a resource request (``verb`` on ``resource``, ``pods/binding`` with its
    subresource) or, with ``path``, a non-resource URL such as ``/metrics``."""

    verb: str
    resource: str = ""
    group: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    def attributes(self) -> dict[str, Any]:
        """The SubjectAccessReview spec's attributes field."""
        if self.path:
            return {"nonResourceAttributes": {"path": self.path, "verb": self.verb}}
        resource, _, subresource = self.resource.partition("/")
        attrs = {
            "verb": self.verb,
            "group": self.group,
            "resource": resource,
            "subresource": subresource,
            "namespace": self.namespace,
            "name": self.name,
        }
        return {"resourceAttributes": {k: v for k, v in attrs.items() if v}}

    def __str__(self) -> str:
        if self.path:
            return f"{self.verb} {self.path}"
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        named = f" {self.name}" if self.name else ""
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.verb} {what}{named}{where}"


Grant = tuple[Subject, Right]


def allowed(api: ApiClient, subject: Subject, right: Right) -> tuple[bool, str]:
    """The API server's answer to one SubjectAccessReview: (allowed, its reason)."""
    spec: dict[str, Any] = {**right.attributes()}
    if subject.user:
        spec["user"] = subject.user
    if subject.groups:
        spec["groups"] = list(subject.groups)
    review = api_request(
        api,
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        body={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
    )
    status = review.get("status") or {}
    return bool(status.get("allowed")), status.get("reason") or status.get("evaluationError") or ""


def wait_until_allowed(api: ApiClient, grants: Sequence[Grant], timeout: float = 60.0) -> float:
    """Ask the API server (``api`` may create SubjectAccessReviews) until it answers yes to
    every (subject, right) of ``grants``; the seconds it took.

    Logs the rights still refused whenever they change; at the deadline raises
    :class:`~scheduler.polling.PollTimeoutError` naming them."""
    start = time.monotonic()
    pending = list(dict.fromkeys(grants))
    last: list[str] = []

    def all_allowed() -> bool:
        refused = []
        for subject, right in pending:
            yes, reason = allowed(api, subject, right)
            if not yes:
                refused.append(f"{subject} may not {right}" + (f" ({reason})" if reason else ""))
        if refused != last:
            last[:] = refused
            if refused:
                logger.info(
                    "waiting for the API server's authorizer",
                    extra=kv(refused="; ".join(refused), elapsed=f"{time.monotonic() - start:.2f}s"),
                )
        return not refused

    what = "the API server to allow " + "; ".join(f"{s} to {r}" for s, r in pending)
    try:
        poll(all_allowed, timeout, what, 0.1)
    except PollTimeoutError:
        raise PollTimeoutError(what, timeout, "; ".join(last)) from None
    return time.monotonic() - start


def grants_of(api: ApiClient, objects: Iterable[dict[str, Any]]) -> list[Grant]:
    """What the RoleBindings and ClusterRoleBindings among ``objects`` grant: for each subject,
    one right per rule of the bound role (its first verb on its first resource, or its first
    URL). Every rule is asked, so that a right the subject had before the binding does not
    end the wait early. The role is taken from ``objects`` when it is one of them, else read
    from the API server."""
    objects = list(objects)
    roles = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
        for o in objects
        if o.get("kind") in ("Role", "ClusterRole")
    }
    out: list[Grant] = []
    for binding in objects:
        if binding.get("kind") not in BINDINGS:
            continue
        ns = binding["metadata"].get("namespace", "") if binding["kind"] == "RoleBinding" else ""
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], ns if ref["kind"] == "Role" else "", ref["name"]))
        if role is None:
            where = f"/namespaces/{ns}/roles" if ref["kind"] == "Role" else "/clusterroles"
            role = api_request(api, "GET", f"{RBAC}{where}/{ref['name']}")
        rights = [_first_right(rule, ns) for rule in role.get("rules") or []]
        if not rights:
            raise ValueError(
                f"{binding['kind']} {binding['metadata']['name']}: its {ref['kind']} {ref['name']} "
                "has no rules (yet), so there is nothing to wait for"
            )
        for s in binding.get("subjects") or []:
            out += [(Subject.of(s, ns), r) for r in rights]
    return out


def _first_right(rule: dict[str, Any], namespace: str) -> Right:
    verb = rule["verbs"][0]
    if rule.get("nonResourceURLs"):
        return Right(verb, path=rule["nonResourceURLs"][0])
    names = rule.get("resourceNames") or [""]
    return Right(
        verb,
        resource=rule["resources"][0],
        group=(rule.get("apiGroups") or [""])[0],
        namespace=namespace,
        name=names[0],
    )
