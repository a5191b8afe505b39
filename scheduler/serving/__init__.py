"""The secure port: HTTPS serving of health and metrics, with delegated authentication and
authorization (``server``), its checks (``checks``), certificates (``tls``) and who may ask
(``authentication``, ``authorization``, ``delegation``)."""

from scheduler.serving.checks import (
    Check,
    handler_sync_check,
    leader_election_watchdog,
    ping,
    shutdown_check,
)
from scheduler.serving.server import (
    ALL_ENDPOINTS,
    DEFAULT_SECURE_PORT,
    HEALTHZ,
    LIVEZ,
    READYZ,
    SecureServer,
)
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
    "leader_election_watchdog",
    "load_pem_chain",
    "load_pem_chain_via_tempdir",
    "ping",
    "read_key_pair",
    "self_signed_certificate",
    "shutdown_check",
]
