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
class ServingOptions:
    """The HTTPS endpoint for /healthz, /livez, /readyz and /metrics."""

    secure_port: int = DEFAULT_SECURE_PORT
    """0: serve nothing."""
    bind_address: str = "0.0.0.0"
    tls_cert_file: str | None = None
    """None (with no key either): a self-signed certificate made at start."""
    tls_private_key_file: str | None = None


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

    @property
    def leader_election(self) -> LeaderElection:
        return self.config.leader_election

    @property
    def client_connection(self) -> ClientConnection:
        return self.config.client_connection
