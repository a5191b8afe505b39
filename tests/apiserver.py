"""A private etcd + kube-apiserver for the tests marked ``apiserver``.

The session fixture :func:`apiserver` starts the pinned binaries (``make
tools`` builds them; ``hack/tools/bin-dir.sh`` says where) on free ports with
everything in a temporary folder:

- a CA made here (``cryptography``) signs the serving certificate and every
  client certificate, so any identity can be minted: ``admin`` in
  ``system:masters``, ``system:kube-scheduler`` (the built-in RBAC role the Go
  kube-scheduler runs with), or a restricted user for RBAC tests
  (:meth:`ControlPlane.kubeconfig_for`);
- service-account signing keys, ``--authorization-mode=RBAC``, and an audit log
  at Metadata level (to check what a client sent, e.g. its User-Agent);
- the ``ServiceAccount`` admission plugin is disabled, as in Kubernetes' own
  integration tests: no controller-manager runs to create the ``default``
  ServiceAccount, and pods would be rejected without one.

Nothing else runs: no controller-manager (namespaces are never finalized,
pods never garbage collected), no kubelet (Nodes you create stay NotReady).
Use a fresh namespace per test.

When the binaries are missing, the tests that need this fixture fail with
"run make tools first": CI always builds them, so a silent skip would hide a
broken setup.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import json
import logging
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import config

from scheduler.polling import PollTimeoutError, poll

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT = 90.0


# --- binaries ---------------------------------------------------------------------------


def find_bin_dir() -> Path | None:
    """The folder of the pinned tool binaries, or None when they are not built."""
    env = os.environ.get("DS_TOOLS_BIN")
    if env:
        return Path(env)
    try:
        out = subprocess.run(
            ["bash", str(REPO / "hack/tools/bin-dir.sh")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    return Path(out.stdout.strip().splitlines()[-1])


def kwok_stage_files() -> list[Path]:
    """kwok's Stage files of the pinned module, as ``make bench`` loads them (hack/lib/kwok.sh)."""
    script = (
        'source hack/lib/common.sh; source hack/lib/kwok.sh; kwok_stages; printf "%s\\n" "${KWOK_STAGES[@]}"'
    )
    out = subprocess.run(
        ["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=True, timeout=120
    )
    return [Path(line) for line in out.stdout.splitlines() if line]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- PKI --------------------------------------------------------------------------------


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


class CA:
    """A throwaway certificate authority."""

    def __init__(self, name: str = "dynamic-scheduler-test-ca") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.pem = _pem_cert(self.cert)

    def issue(self, cn: str, orgs: tuple[str, ...] = (), *, server: bool = False) -> tuple[bytes, bytes]:
        """(cert PEM, key PEM) for a client (CN = user, O = groups) or for the API server."""
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
        now = datetime.datetime.now(datetime.UTC)
        b = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.ExtendedKeyUsage(
                    [
                        x509.oid.ExtendedKeyUsageOID.SERVER_AUTH
                        if server
                        else x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
                    ]
                ),
                critical=False,
            )
        )
        if server:
            b = b.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.DNSName("kubernetes"),
                        x509.DNSName("kubernetes.default"),
                        x509.DNSName("kubernetes.default.svc"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
                    ]
                ),
                critical=False,
            )
        return _pem_cert(b.sign(self.key, hashes.SHA256())), _pem_key(key)


# --- processes --------------------------------------------------------------------------


@dataclass
class Proc:
    """A child process in its own process group, with its output in a log file."""

    name: str
    args: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(
                self.args,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def wait(self, timeout: float) -> int | None:
        """The exit code, or None if still running after ``timeout``."""
        assert self.popen is not None
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after ``grace`` seconds."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)
        return self.popen.returncode

    def tail(self, n: int = 40) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def wait_for_log(self, needle: str, timeout: float) -> bool:
        """Poll the log for ``needle`` until the deadline (or the process exits): whether it is there."""

        def logged() -> bool:
            return needle in self.log.read_text(errors="replace")

        try:
            poll(lambda: logged() or not self.alive(), timeout, f"{needle!r} in {self.log}", 0.1)
        except PollTimeoutError:
            return False
        return logged()


# --- the control plane ------------------------------------------------------------------


@dataclass
class ControlPlane:
    bin_dir: Path
    dir: Path
    ca: CA = field(default_factory=CA)
    etcd: Proc | None = None
    apiserver_proc: Proc | None = None
    etcd_url: str = ""
    port: int = 0
    kubeconfig: str = ""
    extra: list[Proc] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def kubectl(self) -> Path:
        return self.bin_dir / "kubectl"

    @property
    def kube_scheduler(self) -> Path:
        return self.bin_dir / "kube-scheduler"

    @property
    def audit_log(self) -> Path:
        return self.dir / "audit.log"

    # -- start / stop --

    def start(self) -> None:
        for tool in ("etcd", "kube-apiserver"):
            if not (self.bin_dir / tool).exists():
                raise FileNotFoundError(f"{self.bin_dir / tool} is missing: run make tools first")
        pki = self.dir / "pki"
        pki.mkdir(parents=True)
        (pki / "ca.crt").write_bytes(self.ca.pem)
        crt, key = self.ca.issue("kube-apiserver", server=True)
        (pki / "apiserver.crt").write_bytes(crt)
        (pki / "apiserver.key").write_bytes(key)
        sa = ec.generate_private_key(ec.SECP256R1())
        (pki / "sa.key").write_bytes(_pem_key(sa))
        (pki / "sa.pub").write_bytes(
            sa.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        (self.dir / "audit-policy.yaml").write_text(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"
        )
        self._start_etcd()
        self.port = free_port()
        self.apiserver_proc = self.start_apiserver(self.port, name="kube-apiserver", audit=True, main=True)
        self.kubeconfig = str(self.kubeconfig_for("admin", ("system:masters",), name="admin"))

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        self.etcd = Proc(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                "--name=test",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=test={peer_url}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            self.dir / "etcd.log",
        ).start()
        self._wait(lambda: _http_ok(f"{self.etcd_url}/health"), self.etcd, "etcd /health")

    def start_apiserver(
        self,
        port: int,
        *,
        name: str,
        audit: bool = False,
        main: bool = False,
        extra_args: tuple[str, ...] = (),
    ) -> Proc:
        """Start a kube-apiserver on ``port`` against our etcd (with ``extra_args``) and wait for /readyz.

        The session's server is one; tests may start another (e.g. to see what
        a client does when the server it talks to restarts), and stop it themselves.
        """
        pki = self.dir / "pki"
        args = [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.dir / ('certs-' + name)}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount",
            "--profiling=false",
            # no kubernetes Service endpoints for a loopback address (nothing in-cluster calls us)
            "--endpoint-reconciler-type=none",
        ]
        if audit:
            args += [
                f"--audit-policy-file={self.dir / 'audit-policy.yaml'}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
            ]
        proc = Proc(name, [*args, *extra_args], self.dir / f"{name}.log").start()
        if not main:
            self.extra.append(proc)
        self._wait(lambda: self._ready(port), proc, f"{name} /readyz")
        return proc

    def _ready(self, port: int) -> bool:
        ctx = ssl.create_default_context(cadata=self.ca.pem.decode())
        crt, key = self._admin_pair()
        ctx.load_cert_chain(crt, key)
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=ctx, timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def _admin_pair(self) -> tuple[str, str]:
        crt, key = self.dir / "pki" / "admin.crt", self.dir / "pki" / "admin.key"
        if not crt.exists():
            c, k = self.ca.issue("admin", ("system:masters",))
            crt.write_bytes(c)
            key.write_bytes(k)
        return str(crt), str(key)

    def _wait(self, ok: Any, proc: Proc, what: str) -> None:
        def up() -> bool:
            if ok():
                return True
            if not proc.alive():
                raise RuntimeError(
                    f"{proc.name} exited ({proc.popen.returncode if proc.popen else '?'}) "
                    f"before {what}:\n{proc.tail()}"
                )
            return False

        try:
            poll(up, START_TIMEOUT, what, 0.2)
        except PollTimeoutError:
            raise RuntimeError(f"{what} not ready after {START_TIMEOUT}s:\n{proc.tail()}") from None

    def stop(self) -> None:
        for p in reversed(self.extra):
            p.stop()
        if self.apiserver_proc:
            self.apiserver_proc.stop()
        if self.etcd:
            self.etcd.stop()

    def log_tails(self, n: int = 30) -> str:
        out = []
        for p in (self.etcd, self.apiserver_proc, *self.extra):
            if p is not None:
                out.append(f"--- last lines of {p.log} ---\n{p.tail(n)}")
        return "\n".join(out)

    # -- identities --

    def kubeconfig_for(
        self, user: str, groups: tuple[str, ...] = (), *, name: str | None = None, server: str | None = None
    ) -> Path:
        """A kubeconfig authenticating as ``user`` (CN) in ``groups`` (O) by a client certificate
        our CA signs; ``server`` overrides the URL (e.g. a proxy in front of the API server)."""
        crt, key = self.ca.issue(user, groups)
        kc = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "test",
            "preferences": {},
            "clusters": [
                {
                    "name": "test",
                    "cluster": {
                        "server": server or self.url,
                        "certificate-authority": str(self.dir / "pki" / "ca.crt"),
                    },
                }
            ],
            "users": [
                {"name": user, "user": {"client-certificate-data": _b64(crt), "client-key-data": _b64(key)}}
            ],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}],
        }
        safe = name or "".join(c if c.isalnum() else "-" for c in user) + "-" + os.urandom(3).hex()
        path = self.dir / f"kubeconfig-{safe}"
        path.write_text(yaml.safe_dump(kc))
        return path

    def api_client(
        self, user: str | None = None, groups: tuple[str, ...] = (), server: str | None = None
    ) -> Any:
        """A ``kubernetes.client.ApiClient`` (admin unless ``user`` is given)."""
        path = (
            self.kubeconfig
            if user is None and server is None
            else str(
                self.kubeconfig_for(user or "admin", groups if user else ("system:masters",), server=server)
            )
        )
        return config.new_client_from_config(config_file=path, persist_config=False)

    # -- tools --

    def kubectl_run(self, *args: str, timeout: float = 30) -> str:
        out = subprocess.run(
            [str(self.kubectl), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {out.stderr}")
        return out.stdout

    def start_kube_scheduler(
        self, scheduler_config: dict[str, Any], name: str = "kube-scheduler", extra_args: tuple[str, ...] = ()
    ) -> Proc:
        """Run the real Go kube-scheduler with ``config`` (a KubeSchedulerConfiguration whose
        clientConnection is filled in), as the ``system:kube-scheduler`` user."""
        kc = self.kubeconfig_for("system:kube-scheduler", name=f"{name}-{os.urandom(3).hex()}")
        cfg = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            **scheduler_config,
        }
        cfg["clientConnection"] = {"kubeconfig": str(kc)}
        path = self.dir / f"{name}-{os.urandom(3).hex()}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        proc = Proc(
            name,
            [str(self.kube_scheduler), f"--config={path}", "--secure-port=0", "-v=2", *extra_args],
            self.dir / f"{path.stem}.log",
        ).start()
        self.extra.append(proc)
        return proc

    def audit_events(self) -> Iterator[dict[str, Any]]:
        with open(self.audit_log) as f:
            for line in f:
                with contextlib.suppress(json.JSONDecodeError):
                    yield json.loads(line)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def standalone(prefix: str = "ds-measure-") -> Iterator[ControlPlane]:
    """A control plane of its own, outside pytest (the ``measure_*`` scripts); removed after.
    Raises RuntimeError when the pinned binaries are not built."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise RuntimeError("the pinned tools are not built: run make tools first")
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    cp = ControlPlane(bin_dir=bin_dir, dir=tmp)
    try:
        cp.start()
        yield cp
    finally:
        cp.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def measure_on_standalone(measure: Callable[[ControlPlane, Any], int], args: Any) -> int:
    """A ``measure_*`` script's main: ``measure(control_plane, args)`` on a ``standalone()``
    control plane; 1, with the reason logged, when it cannot start."""
    try:
        with standalone() as cp:
            return measure(cp, args)
    except RuntimeError as e:
        logging.getLogger("measure").error(str(e))
        return 1


# --- the fixture ------------------------------------------------------------------------


_current: ControlPlane | None = None


def current() -> ControlPlane | None:
    """The running control plane, if the session started one (for failure reports)."""
    return _current


@pytest.fixture(scope="session")
def apiserver() -> Iterator[ControlPlane]:
    global _current
    bin_dir = find_bin_dir()
    if bin_dir is None or not (bin_dir / "kube-apiserver").exists():
        pytest.fail(
            "the pinned kube-apiserver/etcd binaries are not built: run make tools first", pytrace=False
        )
    tmp = Path(tempfile.mkdtemp(prefix="ds-apiserver-"))
    cp = ControlPlane(bin_dir=bin_dir, dir=tmp)
    try:
        cp.start()
    except Exception as e:
        cp.stop()
        tails = cp.log_tails()
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.fail(f"could not start the test API server: {e}\n{tails}", pytrace=False)
    _current = cp
    try:
        yield cp
    finally:
        _current = None
        cp.stop()
        if not os.environ.get("DS_KEEP_APISERVER_DIR"):
            shutil.rmtree(tmp, ignore_errors=True)
