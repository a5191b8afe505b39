"""What ``dynamic-scheduler run`` hands to the application: configuration, serving, logging.

The command line builds one :class:`Options` (``scheduler.cli``) after every
check passed; ``scheduler.app.run(options)`` starts from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from scheduler.config.effective import SchedulerConfig
from scheduler.config.types import ClientConnection, LeaderElection

DEFAULT_SECURE_PORT = 10259


@dataclass(frozen=True)
class AuthenticationOptions:
    """kube-scheduler's ``--authentication-*``, ``--client-ca-file`` and ``--requestheader-*``
    (k8s.io/apiserver's DelegatingAuthenticationOptions with kube-scheduler's settings)."""

    kubeconfig: str | None = None
    """For TokenReviews and the ConfigMap lookup; None: the in-cluster service account, if any."""
    cache_ttl: float = 10.0
    """Seconds a token's review is cached (``--authentication-token-webhook-cache-ttl``)."""
    skip_lookup: bool = False
    """Do not read missing CAs from ``kube-system/extension-apiserver-authentication``."""
    tolerate_lookup_failure: bool = True
    """A failed lookup is a warning, not an error (kube-scheduler's default)."""
    client_ca_file: str | None = None
    requestheader_client_ca_file: str | None = None
    requestheader_allowed_names: tuple[str, ...] = ()
    requestheader_username_headers: tuple[str, ...] = ("x-remote-user",)
    requestheader_uid_headers: tuple[str, ...] = ()
    requestheader_group_headers: tuple[str, ...] = ("x-remote-group",)
    requestheader_extra_headers_prefix: tuple[str, ...] = ("x-remote-extra-",)


@dataclass(frozen=True)
class AuthorizationOptions:
    """kube-scheduler's ``--authorization-*`` (DelegatingAuthorizationOptions)."""

    kubeconfig: str | None = None
    """For SubjectAccessReviews; None: the in-cluster service account, if any."""
    always_allow_paths: tuple[str, ...] = ("/healthz", "/readyz", "/livez")
    """Served to anyone without a review; a trailing ``*`` makes a prefix."""
    allow_cache_ttl: float = 10.0
    deny_cache_ttl: float = 10.0


@dataclass(frozen=True)
class ServingOptions:
    """The HTTPS endpoint for /healthz, /livez, /readyz and /metrics."""

    secure_port: int = DEFAULT_SECURE_PORT
    """0: serve nothing."""
    bind_address: str = "0.0.0.0"
    tls_cert_file: str | None = None
    """None (with no key either): a self-signed certificate made at start."""
    tls_private_key_file: str | None = None
    authentication: AuthenticationOptions = field(default_factory=AuthenticationOptions)
    authorization: AuthorizationOptions = field(default_factory=AuthorizationOptions)


@dataclass(frozen=True)
class LoggingOptions:
    verbosity: int = 0
    """klog's -v: V(n) messages show for n <= verbosity."""
    format: Literal["text", "json"] = "text"


@dataclass(frozen=True)
class Options:
    """Everything the scheduler process needs to start, checked."""

    config: SchedulerConfig
    """The effective configuration, with explicitly set flags applied over the file."""
    serving: ServingOptions = field(default_factory=ServingOptions)
    logging: LoggingOptions = field(default_factory=LoggingOptions)
    leader_elect_takeover: bool = False
    """At start, take the Lease from a holder that is not one of ours (``--leader-elect-takeover``)."""
    config_file: str | None = None
    shadow: bool = False
    """Judge the active scheduler's binds instead of scheduling; write nothing (``--shadow``)."""

    @property
    def leader_election(self) -> LeaderElection:
        return self.config.leader_election

    @property
    def client_connection(self) -> ClientConnection:
        return self.config.client_connection
