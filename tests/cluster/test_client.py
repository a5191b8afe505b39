"""scheduler.cluster.client: configuration, rate limiting, user agent, timeouts."""

from __future__ import annotations

import threading
import time

import pytest
import urllib3

from scheduler.cluster.client import (
    ClientConfigError,
    ClientOptions,
    TokenBucket,
    api_request,
    new_api_client,
)
from tests.apiserver import ControlPlane
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
        with pytest.raises(urllib3.exceptions.HTTPError):
            api_request(api, "GET", "/api/v1/namespaces/default")
        assert time.monotonic() - start < 5
    finally:
        proxy.close()
