"""The secure port's delegated authentication and authorization against a real API server.

The scheduler reviews with the identity the manifests give it: a user bound to
``system:auth-delegator`` and, in kube-system, to
``extension-apiserver-authentication-reader``. Callers are service accounts with
TokenRequest tokens, client certificates of the API server's CA (found through
the ConfigMap kube-apiserver keeps), and a front proxy with its own CA.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from kubernetes.client import ApiClient

from scheduler.cluster.client import api_request
from scheduler.config.options import AuthenticationOptions, AuthorizationOptions
from scheduler.metrics import Metrics
from scheduler.serving import SecureServer
from scheduler.serving.delegation import Delegation
from tests.access import grants_of, wait_until_allowed
from tests.apiserver import CA, ControlPlane

pytestmark = pytest.mark.apiserver

RBAC = "/apis/rbac.authorization.k8s.io/v1"


class Answer:
    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body = status, body

    @property
    def json(self) -> dict:
        return json.loads(self.body)


def get(
    server: SecureServer,
    path: str,
    *,
    token: str | None = None,
    cert: tuple[Path, Path] | None = None,
    headers: dict[str, str | list[str]] | None = None,
    method: str = "GET",
) -> Answer:
    ctx = ssl.create_default_context(cadata=server.certificate_pem.decode())
    if cert is not None:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost", "Connection: close"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    for k, v in (headers or {}).items():
        lines += [f"{k}: {x}" for x in ([v] if isinstance(v, str) else v)]
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as sock,
    ):
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        resp = http.client.HTTPResponse(sock, method=method)
        resp.begin()
        return Answer(resp.status, resp.read())


def _apply(admin: ApiClient, path: str, body: dict) -> None:
    api_request(admin, "POST", path, body=body)


def _bind_cluster_role(admin: ApiClient, role: str, subject: dict) -> dict:
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"t-{uuid.uuid4().hex[:8]}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject],
    }
    _apply(admin, f"{RBAC}/clusterrolebindings", binding)
    return binding


@pytest.fixture(scope="module")
def world(apiserver: ControlPlane, admin: ApiClient, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The scheduler's delegation identity, a metrics reader role, and two service accounts."""
    tag = uuid.uuid4().hex[:6]
    delegator = f"delegator-{tag}"
    bindings = [
        _bind_cluster_role(
            admin,
            "system:auth-delegator",
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": delegator},
        )
    ]
    bindings.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"t-{tag}", "namespace": "kube-system"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "extension-apiserver-authentication-reader",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": delegator}],
        }
    )
    _apply(admin, f"{RBAC}/namespaces/kube-system/rolebindings", bindings[-1])
    reader_role = f"metrics-reader-{tag}"
    _apply(
        admin,
        f"{RBAC}/clusterroles",
        {"metadata": {"name": reader_role}, "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
    )
    ns = f"t-{tag}"
    _apply(admin, "/api/v1/namespaces", {"metadata": {"name": ns}})
    tokens = {}
    for sa in ("reader", "nobody"):
        _apply(admin, f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": sa}})
        out = api_request(
            admin,
            "POST",
            f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token",
            body={"spec": {"expirationSeconds": 3600}},
        )
        tokens[sa] = out["status"]["token"]
    bindings.append(
        _bind_cluster_role(admin, reader_role, {"kind": "ServiceAccount", "name": "reader", "namespace": ns})
    )
    bindings.append(
        _bind_cluster_role(
            admin,
            reader_role,
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": f"proxied-{tag}"},
        )
    )
    wait_until_allowed(admin, grants_of(admin, bindings))
    d = tmp_path_factory.mktemp("auth")

    def cert(ca: CA, cn: str, orgs: tuple[str, ...] = ()) -> tuple[Path, Path]:
        c, k = ca.issue(cn, orgs)
        (d / f"{cn}.crt").write_bytes(c)
        (d / f"{cn}.key").write_bytes(k)
        return d / f"{cn}.crt", d / f"{cn}.key"

    proxy_ca = CA("front-proxy-ca")  # its own name: TLS finds issuers by name
    (d / "proxy-ca.crt").write_bytes(proxy_ca.pem)
    return {
        "ns": ns,
        "tag": tag,
        "kubeconfig": str(apiserver.kubeconfig_for(delegator)),
        "no_rights_kubeconfig": str(apiserver.kubeconfig_for(f"nobody-{tag}")),
        "tokens": tokens,
        "admin_cert": cert(apiserver.ca, f"admin-{tag}", ("system:masters",)),
        "plain_cert": cert(apiserver.ca, f"plain-{tag}"),
        "proxy_ca": str(d / "proxy-ca.crt"),
        "proxy_cert": cert(proxy_ca, "front-proxy"),
        "rogue_proxy_cert": cert(proxy_ca, "rogue-proxy"),
    }


@pytest.fixture
def serve() -> Iterator[Callable[..., SecureServer]]:
    started: list[SecureServer] = []

    def start(authn: AuthenticationOptions, authz: AuthorizationOptions) -> SecureServer:
        server = SecureServer(
            Metrics().registry,
            bind_address="127.0.0.1",
            port=0,
            delegation=Delegation.from_options(authn, authz),
        )
        server.start()
        started.append(server)
        return server

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def server(world: dict, serve: Callable[..., SecureServer]) -> SecureServer:
    kc = world["kubeconfig"]
    return serve(AuthenticationOptions(kubeconfig=kc), AuthorizationOptions(kubeconfig=kc))


def test_anonymous_is_forbidden_metrics_as_kube_scheduler_answers(server):
    r = get(server, "/metrics")
    assert r.status == 403
    assert r.json == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'forbidden: User "system:anonymous" cannot get path "/metrics"',
        "reason": "Forbidden",
        "details": {},
        "code": 403,
    }


def test_a_token_the_api_server_does_not_know_is_unauthorized(server):
    r = get(server, "/metrics", token="not-a-token")
    assert r.status == 401
    assert r.json["reason"] == "Unauthorized" and r.json["code"] == 401
    # authentication comes first: a bad token is refused on the open paths too
    assert get(server, "/healthz", token="not-a-token").status == 401


def test_a_token_without_the_right_is_forbidden_with_it_served(server, world):
    r = get(server, "/metrics", token=world["tokens"]["nobody"])
    assert r.status == 403
    user = f"system:serviceaccount:{world['ns']}:nobody"
    assert r.json["message"] == f'forbidden: User "{user}" cannot get path "/metrics"'

    r = get(server, "/metrics", token=world["tokens"]["reader"])
    assert r.status == 200
    assert b"# TYPE " in r.body
    # the right is for get: other verbs are reviewed as such
    assert get(server, "/metrics", token=world["tokens"]["reader"], method="POST").status == 403


def test_health_paths_are_open_to_anyone_and_others_are_not(server):
    for path in ("/healthz", "/livez", "/readyz"):
        assert (get(server, path).status, get(server, path).body) == (200, b"ok"), path
    # only the exact paths: a single check is reviewed (system:public-info-viewer does not cover it)
    assert get(server, "/healthz/ping").status == 403


def test_reviews_are_cached(server, world):
    token = world["tokens"]["reader"]
    authn = server.delegation.authenticator.token
    webhook = server.delegation.authorizer.authorizers[-1]
    before = (authn.reviews, webhook.reviews)
    for _ in range(3):
        assert get(server, "/metrics", token=token).status == 200
    assert (authn.reviews, webhook.reviews) == (before[0] + 1, before[1] + 1)


def test_client_certificates_of_the_clusters_ca_are_users(server, world):
    # the client CA comes from kube-system/extension-apiserver-authentication
    assert get(server, "/metrics", cert=world["admin_cert"]).status == 200  # system:masters
    r = get(server, "/metrics", cert=world["plain_cert"])
    assert r.status == 403
    assert f'User "plain-{world["tag"]}"' in r.json["message"]


def test_without_the_lookup_certificates_are_not_asked_for(world, serve):
    kc = world["kubeconfig"]
    server = serve(
        AuthenticationOptions(kubeconfig=kc, skip_lookup=True), AuthorizationOptions(kubeconfig=kc)
    )
    # no client CA: the TLS layer does not ask, the request is anonymous
    assert get(server, "/metrics", cert=world["admin_cert"]).status == 403


def test_a_front_proxy_vouches_for_the_user_in_its_headers(world, serve):
    kc = world["kubeconfig"]
    authn = AuthenticationOptions(
        kubeconfig=kc,
        requestheader_client_ca_file=world["proxy_ca"],
        requestheader_allowed_names=("front-proxy",),
    )
    server = serve(authn, AuthorizationOptions(kubeconfig=kc))
    vouched = {"X-Remote-User": "carol", "X-Remote-Group": ["other", f"proxied-{world['tag']}"]}
    assert get(server, "/metrics", cert=world["proxy_cert"], headers=vouched).status == 200
    r = get(server, "/metrics", cert=world["proxy_cert"], headers={"X-Remote-User": "carol"})
    assert r.status == 403 and 'User "carol"' in r.json["message"]
    # a proxy whose name is not allowed is refused, whatever its headers say
    assert get(server, "/metrics", cert=world["rogue_proxy_cert"], headers=vouched).status == 401
    # without the headers the proxy's own certificate is no user (not the client CA's)
    assert get(server, "/metrics", cert=world["proxy_cert"]).status == 401


def test_a_failed_review_is_an_internal_error(world, serve):
    server = serve(
        AuthenticationOptions(kubeconfig=world["kubeconfig"]),
        AuthorizationOptions(kubeconfig=world["no_rights_kubeconfig"]),
    )
    r = get(server, "/metrics", token=world["tokens"]["reader"])
    assert r.status == 500
    assert r.body.startswith(b'Internal Server Error: "/metrics": ')
    assert get(server, "/healthz").status == 200


def test_always_allow_paths_are_configurable(world, serve):
    kc = world["kubeconfig"]
    base = AuthorizationOptions(kubeconfig=kc)
    server = serve(AuthenticationOptions(kubeconfig=kc), replace(base, always_allow_paths=("/metr*",)))
    assert get(server, "/metrics").status == 200
    # /healthz is no longer always allowed: it is reviewed (and RBAC's public-info-viewer allows it)
    webhook = server.delegation.authorizer.authorizers[-1]
    before = webhook.reviews
    assert get(server, "/healthz").status == 200
    assert webhook.reviews == before + 1
    assert get(server, "/livez/ping").status == 403


def test_the_default_open_paths_are_not_reviewed(server):
    webhook = server.delegation.authorizer.authorizers[-1]
    before = webhook.reviews
    assert get(server, "/readyz").status == 200
    assert webhook.reviews == before
