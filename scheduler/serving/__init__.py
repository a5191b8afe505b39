"""The secure port: HTTPS serving of health and metrics, with delegated authentication and
authorization. ``server`` puts it together from the health checks (``checks``), the
certificate and TLS context (``tls``), the connections (``transport``), the WSGI application
that answers (``handler``) and who may ask (``authentication``, ``authorization``,
``delegation``, their ``reviewcache``)."""

from scheduler.serving.checks import (
    ALL_ENDPOINTS,
    HEALTHZ,
    LIVEZ,
    READYZ,
    Check,
    handler_sync_check,
    ping,
    shutdown_check,
)
from scheduler.serving.server import DEFAULT_SECURE_PORT, SecureServer
from scheduler.serving.tls import (
    ServingError,
    load_pem_chain,
    load_pem_chain_via_tempdir,
    read_key_pair,
    self_signed_certificate,
)

__all__ = [
    "ALL_ENDPOINTS",
    "DEFAULT_SECURE_PORT",
    "HEALTHZ",
    "LIVEZ",
    "READYZ",
    "Check",
    "SecureServer",
    "ServingError",
    "handler_sync_check",
    "load_pem_chain",
    "load_pem_chain_via_tempdir",
    "ping",
    "read_key_pair",
    "self_signed_certificate",
    "shutdown_check",
]
