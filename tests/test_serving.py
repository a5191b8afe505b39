"""The secure server, over real HTTPS connections that verify its certificate."""

from __future__ import annotations

import contextlib
import gzip
import http.client
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from prometheus_client import CollectorRegistry, Gauge

from scheduler.metrics import Metrics
from scheduler.serving import (
    READYZ,
    SecureServer,
    ServingError,
    handler_sync_check,
    load_pem_chain_via_tempdir,
    self_signed_certificate,
    shutdown_check,
)
from scheduler.serving.checks import HealthChecks
from scheduler.settings import ServingSettings


class Response:
    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    @property
    def text(self) -> str:
        return self.body.decode()


def request(
    server: SecureServer,
    path: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    server_hostname: str = "127.0.0.1",
    body: bytes = b"",
) -> Response:
    """One HTTPS request to 127.0.0.1, trusting only the server's certificate, checked for ``server_hostname``."""
    ctx = ssl.create_default_context(cadata=server.certificate_pem.decode())
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname=server_hostname) as sock,
    ):
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        resp = http.client.HTTPResponse(sock, method=method)
        resp.begin()
        return Response(resp.status, resp.headers, resp.read())


@pytest.fixture
def serve() -> Iterator[Callable[..., SecureServer]]:
    started: list[SecureServer] = []

    def start(metrics: Metrics | None = None, **kwargs: object) -> SecureServer:
        kwargs.setdefault("bind_address", "127.0.0.1")
        kwargs.setdefault("port", 0)
        server = SecureServer((metrics or Metrics()).registry, **kwargs)  # type: ignore[arg-type]
        server.start()
        started.append(server)
        return server

    yield start
    for s in started:
        s.stop()


def test_health_endpoints_answer_ok(serve):
    server = serve()
    for endpoint in ("/healthz", "/livez", "/readyz"):
        r = request(server, endpoint)
        assert (r.status, r.text) == (200, "ok"), endpoint
        assert r.headers["Content-Type"] == "text/plain; charset=utf-8"


def test_verbose_lists_every_check(serve):
    server = serve()
    synced = threading.Event()
    synced.set()
    server.add_check("sched-handler-sync", handler_sync_check(synced.is_set), [READYZ])

    assert request(server, "/healthz?verbose").text == "[+]ping ok\nhealthz check passed\n"
    assert request(server, "/readyz?verbose=1").text == (
        "[+]ping ok\n[+]sched-handler-sync ok\nreadyz check passed\n"
    )


def test_a_failing_check_fails_its_endpoints_with_the_reason(serve):
    server = serve()
    synced = threading.Event()
    server.add_check("sched-handler-sync", handler_sync_check(synced.is_set), [READYZ])

    r = request(server, "/readyz")
    assert r.status == 500
    assert r.text == (
        "[+]ping ok\n[-]sched-handler-sync failed: handlers are not fully synchronized\nreadyz check failed\n"
    )
    assert request(server, "/healthz").status == 200

    synced.set()
    assert request(server, "/readyz").text == "ok"


def test_readyz_fails_once_shutting_down_while_livez_stays_ok(serve):
    server = serve()
    stopping = threading.Event()
    server.add_check("shutdown", shutdown_check(stopping.is_set), [READYZ])
    assert request(server, "/readyz/shutdown").text == "ok"

    stopping.set()
    r = request(server, "/readyz")
    assert r.status == 500
    assert "[-]shutdown failed: process is shutting down\n" in r.text
    r = request(server, "/readyz/shutdown")
    assert (r.status, r.text) == (500, "internal server error: process is shutting down\n")
    assert request(server, "/livez").status == 200


def test_single_checks_and_exclusions(serve):
    server = serve()
    server.add_check("broken", lambda: 1 / 0, [READYZ])

    assert request(server, "/livez/ping").text == "ok"
    r = request(server, "/readyz/broken")
    assert (r.status, r.text) == (500, "internal server error: ZeroDivisionError: division by zero\n")
    assert request(server, "/healthz/broken").status == 404
    r = request(server, "/readyz?exclude=broken&exclude=nope&verbose")
    assert r.status == 200
    assert r.text == (
        "[+]ping ok\n[+]broken excluded: ok\n"
        'warn: some health checks cannot be excluded: no matches for "nope"\nreadyz check passed\n'
    )


def test_a_check_is_added_to_all_its_endpoints_or_to_none():
    checks = HealthChecks()
    checks.add("synced", lambda: None, [READYZ])
    with pytest.raises(ValueError, match="check 'synced' is already registered for /readyz"):
        checks.add("synced", lambda: None)
    assert checks.answer("/healthz/synced", "") == ("404 Not Found", b"404 page not found\n")
    with pytest.raises(ValueError, match="unknown endpoint 'startupz'"):
        checks.add("other", lambda: None, ["healthz", "startupz"])
    with pytest.raises(ValueError, match="invalid check name"):
        checks.add("a/b", lambda: None)
    assert checks.answer("/healthz", "verbose") == ("200 OK", b"[+]ping ok\nhealthz check passed\n")
    assert checks.answer("/readyz/synced", "") == ("200 OK", b"ok")


def test_unknown_paths_and_methods(serve):
    server = serve()
    assert request(server, "/").status == 404
    assert request(server, "/healthz/").status == 404
    assert request(server, "/configz").status == 404
    r = request(server, "/metrics", method="POST")
    assert (r.status, r.headers["Allow"]) == (405, "GET, HEAD")


def test_head_answers_headers_without_a_body(serve):
    server = serve()
    r = request(server, "/metrics", method="HEAD")
    assert r.status == 200
    assert r.body == b""
    assert int(r.headers["Content-Length"]) > 0
    assert request(server, "/healthz", method="HEAD").headers["Content-Length"] == "2"


def test_metrics_exposes_the_kube_scheduler_names(serve):
    metrics = Metrics()
    server = serve(metrics)
    metrics.schedule_attempt("scheduled", "default-scheduler", 0.02)
    metrics.schedule_attempt("unschedulable", "default-scheduler", 0.01)
    metrics.set_pending_pods({"active": 2, "backoff": 0, "unschedulable": 1, "gated": 0})
    metrics.leader_election_master_status.labels("dynamic-scheduler").set(1)

    r = request(server, "/metrics")
    assert r.status == 200
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1.0' in r.text
    assert (
        'scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 1.0' in r.text
    )
    assert 'scheduler_scheduling_attempt_duration_seconds_bucket{le="0.032",' in r.text
    assert 'scheduler_pending_pods{queue="unschedulable"} 1.0' in r.text
    assert 'leader_election_master_status{name="dynamic-scheduler"} 1.0' in r.text
    assert "process_resident_memory_bytes" in r.text


def test_metrics_honours_accept_and_accept_encoding(serve):
    server = serve()
    r = request(server, "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert r.headers["Content-Type"].startswith("application/openmetrics-text")
    assert r.text.endswith("# EOF\n")

    r = request(server, "/metrics?name[]=scheduler_pending_pods", headers={"Accept-Encoding": "gzip"})
    assert r.headers["Content-Encoding"] == "gzip"
    text = gzip.decompress(r.body).decode()
    assert "scheduler_pending_pods" in text
    assert "process_cpu_seconds_total" not in text


def test_a_registry_of_its_own_is_served_while_its_condition_holds(serve):
    server = serve()
    registry = CollectorRegistry()
    Gauge("only_here", "A gauge of this registry alone.", registry=registry).set(3)
    leading = [False]
    server.add_metrics("/metrics/extra", registry, lambda: leading[0])
    r = request(server, "/metrics/extra")
    assert (r.status, r.body) == (200, b"")
    leading[0] = True
    r = request(server, "/metrics/extra")
    assert r.status == 200 and "only_here 3.0" in r.text
    assert "scheduler_pending_pods" not in r.text
    assert "only_here" not in request(server, "/metrics").text
    with pytest.raises(ValueError, match="expected /metrics/<name>"):
        server.add_metrics("/extra", registry, lambda: True)


def test_a_setter_takes_puts_only(serve):
    server = serve()
    got: list[str] = []

    def setter(text: str) -> str:
        if text == "bad":
            raise ValueError("no good")
        got.append(text)
        return f"set to {text}"

    server.add_setter("/debug/flags/x", setter)
    r = request(server, "/debug/flags/x", method="PUT", headers={"Content-Length": "1"}, body=b"7")
    assert (r.status, r.text, got) == (200, "set to 7\n", ["7"])
    assert r.headers["Content-Type"] == "text/plain"
    r = request(server, "/debug/flags/x", method="PUT", headers={"Content-Length": "3"}, body=b"bad")
    assert (r.status, r.text) == (400, "no good\n")
    r = request(server, "/debug/flags/x")
    assert (r.status, r.text) == (406, "unsupported http method\n")
    r = request(server, "/debug/flags/x", method="PUT", headers={"Content-Length": "5000"}, body=b"")
    assert r.status == 400 and got == ["7"]
    assert request(server, "/healthz", method="PUT").status == 405


def test_self_signed_certificate_names_localhost_the_host_and_the_pod_ip(serve):
    server = serve(pod_ip="10.244.1.7")
    cert = x509.load_pem_x509_certificate(server.certificate_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.DNSName)) == {"localhost", socket.gethostname()}
    assert {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "10.244.1.7"}

    for name in ("localhost", "127.0.0.1", socket.gethostname(), "10.244.1.7"):
        assert request(server, "/healthz", server_hostname=name).status == 200, name
    with pytest.raises(ssl.SSLCertVerificationError):
        request(server, "/healthz", server_hostname="example.com")


def test_user_certificate_files_are_served(serve, tmp_path: Path):
    cert_pem, key_pem = self_signed_certificate(["scheduler.example", "127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(cert_pem)
    (tmp_path / "tls.key").write_bytes(key_pem)

    server = serve(cert_file=str(tmp_path / "tls.crt"), key_file=str(tmp_path / "tls.key"))
    assert server.certificate_pem == cert_pem
    assert request(server, "/healthz", server_hostname="scheduler.example").text == "ok"


def _pair(tmp_path: Path, name: str) -> tuple[str, str]:
    cert_pem, key_pem = self_signed_certificate(["localhost"])
    (tmp_path / f"{name}.crt").write_bytes(cert_pem)
    (tmp_path / f"{name}.key").write_bytes(key_pem)
    return str(tmp_path / f"{name}.crt"), str(tmp_path / f"{name}.key")


def test_bad_certificate_files_are_one_line_errors(tmp_path: Path):
    registry = Metrics().registry
    crt, key = _pair(tmp_path, "a")
    _, other_key = _pair(tmp_path, "b")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    missing = str(tmp_path / "missing.crt")
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(
        serialization.load_pem_private_key(Path(key).read_bytes(), None).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    cases = {
        (missing, key): f"unable to read serving certificate {missing}: No such file or directory",
        (crt, str(tmp_path)): f"unable to read serving private key {tmp_path}: Is a directory",
        (str(garbage), key): f"serving certificate {garbage}: no PEM certificate found",
        (crt, str(garbage)): f"serving private key {garbage}: no PEM private key found",
        (crt, str(encrypted)): f"serving private key {encrypted}: encrypted keys are not supported",
        (crt, other_key): f"serving certificate {crt} does not match private key {other_key}",
        (crt, None): "--tls-cert-file and --tls-private-key-file must be given together",
    }
    for (cert_file, key_file), message in cases.items():
        with pytest.raises(ServingError) as err:
            SecureServer(registry, port=0, cert_file=cert_file, key_file=key_file)
        assert str(err.value) == message
        assert "\n" not in str(err.value)


def test_secure_port_zero_means_no_server():
    flags = SimpleNamespace(
        secure_port=0, bind_address="127.0.0.1", tls_cert_file=None, tls_private_key_file=None
    )
    assert SecureServer.from_options(flags, Metrics().registry) is None


def test_a_taken_port_is_a_one_line_error(serve):
    server = serve()
    second = SecureServer(Metrics().registry, bind_address="127.0.0.1", port=server.port)
    with pytest.raises(ServingError) as err:
        second.start()
    assert str(err.value) == f"failed to listen on 127.0.0.1:{server.port}: Address already in use"


def test_stop_closes_the_socket_promptly(serve):
    server = serve()
    port = server.port
    assert request(server, "/healthz").status == 200

    t0 = time.monotonic()
    server.stop()
    assert time.monotonic() - t0 < 1.0
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    server.stop()  # again: nothing to do


class _Seen(logging.Handler):
    def __init__(self, message: str) -> None:
        super().__init__(level=1)
        self.message, self.seen = message, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == self.message:
            self.seen.set()


def test_handshake_errors_are_logged_quietly_and_serving_goes_on(serve):
    server = serve()
    log = logging.getLogger("scheduler.serving")
    seen = _Seen("TLS handshake or connection error")
    old_level = log.level
    log.addHandler(seen)
    log.setLevel(1)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as plain:
            plain.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # plain HTTP to the TLS port
            with contextlib.suppress(ConnectionResetError):
                assert not plain.recv(1024).startswith(b"HTTP/")
        assert seen.seen.wait(5)
    finally:
        log.removeHandler(seen)
        log.setLevel(old_level)
    assert request(server, "/healthz").status == 200


def test_the_tempdir_fallback_leaves_no_key_behind(tmp_path: Path):
    cert_pem, key_pem = self_signed_certificate(["localhost"])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    load_pem_chain_via_tempdir(ctx, cert_pem + key_pem, parent=str(tmp_path))
    assert list(tmp_path.iterdir()) == []

    _, other_key = self_signed_certificate(["localhost"])
    with pytest.raises(ssl.SSLError):
        load_pem_chain_via_tempdir(ctx, cert_pem + other_key, parent=str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_connections_beyond_the_limit_wait_for_a_free_thread(serve):
    server = serve(settings=ServingSettings(max_connections=1))
    idle = socket.create_connection(("127.0.0.1", server.port), timeout=5)  # holds the only thread
    try:
        done: list[Response] = []
        t = threading.Thread(target=lambda: done.append(request(server, "/healthz")), daemon=True)
        t.start()
        assert server.waiting_for_slot is not None
        assert server.waiting_for_slot.wait(5), "the accept loop should be waiting for the busy thread"
        assert not done
    finally:
        idle.close()  # its handshake fails, the thread ends, the waiting connection is served
    t.join(10)
    assert [r.status for r in done] == [200]
    assert not server.waiting_for_slot.is_set()
