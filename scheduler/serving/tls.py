"""The serving certificate and the TLS context of the secure port.

The certificate is a given key pair, checked (``--tls-cert-file``,
``--tls-private-key-file``), or a self-signed one made in memory. The server's
TLS context serves it over TLS 1.2 or later and, once client CAs are known,
asks for a client certificate that one of them signed (which one is the
authenticators' question, :mod:`scheduler.serving.authentication`). The key
is handed to OpenSSL from memory (:func:`load_pem_chain`).
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
import time
from collections.abc import Iterable

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from scheduler.logs import V, kv

logger = logging.getLogger(__name__)


class ServingError(Exception):
    """The server cannot start: unreadable or mismatched certificate files, or the port is taken.

    ``str()`` is one line, fit for the command line."""


def serving_key_pair(
    cert_file: str | None, key_file: str | None, bind_address: str, pod_ip: str | None
) -> tuple[bytes, bytes]:
    """PEM (certificate, key): the files' when given, else a self-signed pair for localhost,
    127.0.0.1, the hostname, ``pod_ip`` and a specific ``bind_address``."""
    if bool(cert_file) != bool(key_file):
        raise ServingError("--tls-cert-file and --tls-private-key-file must be given together")
    if cert_file and key_file:
        return read_key_pair(cert_file, key_file)
    specific = bind_address not in ("", "0.0.0.0", "::")
    candidates = [
        "localhost",
        "127.0.0.1",
        socket.gethostname(),
        pod_ip or "",
        bind_address if specific else "",
    ]
    hosts = [h for h in dict.fromkeys(candidates) if h]
    pair = self_signed_certificate(hosts)
    logger.log(V(2), "Generated self-signed cert (in-memory)", extra=kv(hosts=",".join(hosts)))
    return pair


def server_context(cert_pem: bytes, key_pem: bytes, client_cas: bytes, what: str) -> ssl.SSLContext:
    """The server side of TLS 1.2+ with the key pair (``what`` names it in errors) and, with
    ``client_cas`` (a PEM bundle), an optional client certificate that one of them signed."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        load_pem_chain(ctx, cert_pem.rstrip(b"\n") + b"\n" + key_pem)
    except ssl.SSLError as e:
        raise ServingError(f"unable to load serving certificate {what}: {e.reason or e}") from None
    if client_cas:
        try:
            ctx.load_verify_locations(cadata=client_cas.decode())
        except (ssl.SSLError, ValueError) as e:
            raise ServingError(f"unable to load the client CAs: {e}") from None
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def self_signed_certificate(hosts: Iterable[str]) -> tuple[bytes, bytes]:
    """A self-signed ECDSA P-256 serving certificate for ``hosts`` (names or IPs), valid
    from an hour ago (clock skew) for a year, as kube's. Returns PEM (certificate, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for host in dict.fromkeys(h for h in hosts if h):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{socket.gethostname()}@{int(time.time())}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def read_key_pair(cert_file: str, key_file: str) -> tuple[bytes, bytes]:
    """Read and check a PEM certificate (chain) and its private key; ServingError says what is wrong."""
    pems = []
    for what, path in (("certificate", cert_file), ("private key", key_file)):
        try:
            with open(path, "rb") as f:
                pems.append(f.read())
        except OSError as e:
            raise ServingError(f"unable to read serving {what} {path}: {e.strerror or e}") from None
    cert_pem, key_pem = pems
    try:
        cert = x509.load_pem_x509_certificates(cert_pem)[0]
    except ValueError:
        raise ServingError(f"serving certificate {cert_file}: no PEM certificate found") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:
        raise ServingError(f"serving private key {key_file}: encrypted keys are not supported") from None
    except (ValueError, UnsupportedAlgorithm):
        raise ServingError(f"serving private key {key_file}: no PEM private key found") from None
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if cert.public_key().public_bytes(*spki) != key.public_key().public_bytes(*spki):
        raise ServingError(f"serving certificate {cert_file} does not match private key {key_file}")
    return cert_pem, key_pem


def load_pem_chain(ctx: ssl.SSLContext, pem: bytes) -> None:
    """``ctx.load_cert_chain`` from PEM in memory (certificates, then the key).

    OpenSSL reads only files: on Linux the PEM goes to an anonymous memory file
    (memfd), never to disk; elsewhere to a private temporary directory that is
    removed as soon as it is loaded."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("serving-cert", os.MFD_CLOEXEC)
        try:
            with open(fd, "wb", closefd=False) as f:
                f.write(pem)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
    else:
        load_pem_chain_via_tempdir(ctx, pem)


def load_pem_chain_via_tempdir(ctx: ssl.SSLContext, pem: bytes, parent: str | None = None) -> None:
    """:func:`load_pem_chain` through a file of a private temporary directory under ``parent``."""
    with tempfile.TemporaryDirectory(prefix="serving-", dir=parent) as d:  # mode 0700
        path = os.path.join(d, "tls.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path)
