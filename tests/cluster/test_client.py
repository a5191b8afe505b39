"""scheduler.cluster.client and .curl: configuration, rate limiting, user agent, timeouts, and the
libcurl transport (connections kept alive, every method, errors, auth, TLS as the kubeconfig says)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.client import (
    ClientConfigError,
    ClientOptions,
    TokenBucket,
    api_request,
    new_api_client,
)
from tests.apiserver import CA, ControlPlane
from tests.cluster.netproxy import TCPProxy


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def test_token_bucket_allows_burst_then_paces_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock, sleep=clock.sleep)
    waits = [bucket.acquire() for _ in range(6)]
    assert waits[:3] == [0, 0, 0]
    assert waits[3:] == pytest.approx([0.1, 0.1, 0.1])
    clock.now += 10  # idle: the bucket refills, but only up to burst
    assert [bucket.acquire() for _ in range(4)] == pytest.approx([0, 0, 0, 0.1])


def test_token_bucket_serves_concurrent_callers_in_order_of_reservation() -> None:
    bucket = TokenBucket(qps=1000, burst=1)
    delays: list[float] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(50):
            d = bucket.reserve()
            with lock:
                delays.append(d)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 400 reservations at 1000/s with one token saved: the last one is due ~0.4 s out,
    # and no two callers got the same slot (the debt grew by one token per call).
    assert len(delays) == 400
    assert max(delays) == pytest.approx(0.399, abs=0.05)


def test_no_kubeconfig_outside_a_pod_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(ClientConfigError, match="--kubeconfig"):
        new_api_client(ClientOptions())


def test_missing_kubeconfig_file_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ClientConfigError, match="cannot load kubeconfig"):
        new_api_client(ClientOptions(kubeconfig=str(tmp_path / "nope")))


@pytest.mark.apiserver
def test_requests_carry_our_user_agent(apiserver: ControlPlane) -> None:
    api = new_api_client(ClientOptions(kubeconfig=apiserver.kubeconfig, user_agent_suffix="ua-check"))
    api_request(api, "GET", "/api/v1/namespaces/default")
    agents = {
        e.get("userAgent", "")
        for e in apiserver.audit_events()
        if e.get("requestURI") == "/api/v1/namespaces/default"
    }
    assert any(a.startswith("dynamic-scheduler/") and a.endswith("/ua-check") for a in agents), agents


@pytest.mark.apiserver
def test_client_side_rate_limit_paces_requests(apiserver: ControlPlane) -> None:
    api = new_api_client(ClientOptions(kubeconfig=apiserver.kubeconfig, qps=20, burst=1))
    start = time.monotonic()
    for _ in range(21):
        api_request(api, "GET", "/api/v1/namespaces/default")
    elapsed = time.monotonic() - start
    assert elapsed >= 0.95, elapsed  # 20 tokens at 20/s after the first


@pytest.mark.apiserver
def test_every_request_has_a_timeout(apiserver: ControlPlane) -> None:
    proxy = TCPProxy(apiserver.port)
    try:
        kc = apiserver.kubeconfig_for("admin", ("system:masters",), server=proxy.url)
        api = new_api_client(ClientOptions(kubeconfig=str(kc), timeout=(1.0, 1.0)))
        api_request(api, "GET", "/api/v1/namespaces/default")
        proxy.partition("blackhole")
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            api_request(api, "GET", "/api/v1/namespaces/default")
        assert time.monotonic() - start < 5
    finally:
        proxy.close()


# --- the libcurl transport (scheduler.cluster.curl), against the private API server ------------


def kubeconfig_with(
    apiserver: ControlPlane, tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any]
) -> str:
    """A kubeconfig of the admin's certificate (unless ``user`` replaces it) and ``cluster``'s
    fields over the API server's own."""
    kc = yaml.safe_load(apiserver.kubeconfig_for("admin", ("system:masters",)).read_text())
    kc["clusters"][0]["cluster"].update(cluster)
    if user:
        kc["users"][0]["user"] = user
    for k in [k for k, v in kc["clusters"][0]["cluster"].items() if v is None]:
        del kc["clusters"][0]["cluster"][k]
    path = tmp_path / f"kubeconfig-{uuid.uuid4().hex[:6]}"
    path.write_text(yaml.safe_dump(kc))
    return str(path)


def whoami(api: Any) -> str:
    review = api_request(
        api,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    return review["status"]["userInfo"]["username"]


@pytest.mark.apiserver
def test_a_clients_requests_share_kept_alive_connections(apiserver: ControlPlane) -> None:
    proxy = TCPProxy(apiserver.port)
    try:
        kc = apiserver.kubeconfig_for("admin", ("system:masters",), server=proxy.url)
        api = new_api_client(ClientOptions(kubeconfig=str(kc), qps=0, pool_maxsize=4))
        for _ in range(30):
            api_request(api, "GET", "/api/v1/namespaces/default")
        assert proxy.accepted == 1
        errors: list[BaseException] = []

        def many() -> None:
            try:
                for _ in range(20):
                    api_request(api, "GET", "/api/v1/namespaces/default")
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=many) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        # One connection per request in flight at most; no new one per request.
        assert proxy.accepted <= 1 + 8, proxy.accepted
    finally:
        proxy.close()


@pytest.mark.apiserver
def test_an_error_answer_is_an_api_exception_with_status_body_and_headers(apiserver: ControlPlane) -> None:
    api = new_api_client(ClientOptions(kubeconfig=apiserver.kubeconfig))
    with pytest.raises(ApiException) as e:
        api_request(api, "GET", "/api/v1/namespaces/no-such-namespace")
    assert e.value.status == 404 and e.value.reason == "Not Found"
    assert json.loads(e.value.body)["reason"] == "NotFound"
    assert e.value.headers["content-type"] == "application/json"
    # The connection that carried the 404 serves the next request.
    assert api_request(api, "GET", "/api/v1/namespaces/default")["metadata"]["name"] == "default"


@pytest.mark.apiserver
def test_query_parameters_and_every_method_reach_the_server(apiserver: ControlPlane) -> None:
    api = new_api_client(ClientOptions(kubeconfig=apiserver.kubeconfig))
    name = f"cm-{uuid.uuid4().hex[:6]}"
    path = "/api/v1/namespaces/default/configmaps"
    api_request(
        api, "POST", path, body={"metadata": {"name": name, "labels": {"t": name}}, "data": {"a": "é"}}
    )
    listed = api_request(api, "GET", path, query=[("labelSelector", f"t={name}"), ("limit", 5), ("x", None)])
    assert [c["data"] for c in listed["items"]] == [{"a": "é"}]
    patched = api_request(
        api, "PATCH", f"{path}/{name}", body={"data": {"b": "2"}}, content_type="application/merge-patch+json"
    )
    assert patched["data"] == {"a": "é", "b": "2"}
    patched["data"] = {"c": "3"}
    assert api_request(api, "PUT", f"{path}/{name}", body=patched)["data"] == {"c": "3"}
    # A GET after a body-carrying request on the same handle sends no body and is a GET.
    assert api_request(api, "GET", f"{path}/{name}")["data"] == {"c": "3"}
    api_request(api, "DELETE", f"{path}/{name}", body={"preconditions": {"uid": patched["metadata"]["uid"]}})
    with pytest.raises(ApiException) as e:
        api_request(api, "GET", f"{path}/{name}")
    assert e.value.status == 404


@pytest.mark.apiserver
def test_a_bearer_token_authenticates_and_a_bad_one_is_refused(
    apiserver: ControlPlane, admin: Any, namespace: str, tmp_path: Path
) -> None:
    api_request(
        admin, "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", body={"metadata": {"name": "sa"}}
    )
    token = api_request(
        admin,
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/sa/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )["status"]["token"]
    good = new_api_client(
        ClientOptions(kubeconfig=kubeconfig_with(apiserver, tmp_path, {}, {"token": token}))
    )
    assert whoami(good) == f"system:serviceaccount:{namespace}:sa"
    bad = new_api_client(
        ClientOptions(kubeconfig=kubeconfig_with(apiserver, tmp_path, {}, {"token": "nope"}))
    )
    with pytest.raises(ApiException) as e:
        whoami(bad)
    assert e.value.status == 401


@pytest.mark.apiserver
def test_the_servers_certificate_is_checked_as_the_kubeconfig_says(
    apiserver: ControlPlane, tmp_path: Path
) -> None:
    def client(**cluster: Any) -> Any:
        return new_api_client(ClientOptions(kubeconfig=kubeconfig_with(apiserver, tmp_path, cluster, {})))

    assert whoami(client()) == "admin"  # a client certificate, checked against our CA
    other_ca = tmp_path / "other-ca.crt"
    other_ca.write_bytes(CA().pem)
    with pytest.raises(ConnectionError):
        whoami(client(**{"certificate-authority": str(other_ca)}))
    skip = {"certificate-authority": None, "insecure-skip-tls-verify": True}
    assert whoami(client(**skip)) == "admin"
    # tls-server-name: the name checked is that one, not the server URL's host.
    assert whoami(client(**{"tls-server-name": "kubernetes.default"})) == "admin"
    with pytest.raises(ConnectionError):
        whoami(client(**{"tls-server-name": "not-in-the-certificate.example"}))
