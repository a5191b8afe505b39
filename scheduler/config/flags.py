"""The ``run`` command's flags: kube-scheduler's flag set, and how the flags become options.

:func:`add_run_flags` declares them (names, types and defaults as
kube-scheduler's ``--help`` shows them); :func:`apply_flags` lays the ones set
explicitly over the ``--config`` file, which they win over (for
``--kubeconfig`` and ``--kube-api-*`` too, which kube-scheduler ignores when a
file is given); :func:`serving_options` checks and gathers the serving,
authentication and authorization flags. A bad value is a one-line error
naming the flag and what was expected.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from scheduler.config.decode import camel, describe
from scheduler.config.durations import DurationError, parse_duration
from scheduler.config.errors import ConfigError
from scheduler.config.options import (
    DEFAULT_SECURE_PORT,
    AuthenticationOptions,
    AuthorizationOptions,
    ServingOptions,
)
from scheduler.serving.authorization import AlwaysAllowPaths

DEFAULT_ALWAYS_ALLOW_PATHS = AuthorizationOptions().always_allow_paths
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an RFC 9110 token

_LEADER_FLAGS = {
    "leader_elect": "leader_elect",
    "leader_elect_lease_duration": "lease_duration",
    "leader_elect_renew_deadline": "renew_deadline",
    "leader_elect_retry_period": "retry_period",
    "leader_elect_resource_lock": "resource_lock",
    "leader_elect_resource_name": "resource_name",
    "leader_elect_resource_namespace": "resource_namespace",
}
"""Flag dest -> the leaderElection field it overrides."""


# --- flag value types ---------------------------------------------------------------------------


def _flag_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "t", "1"):
        return True
    if value in ("false", "f", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {describe(text)}")


def _int_type(lo: int, hi: int | None = None) -> Callable[[str], int]:
    expected = f"an integer {lo}..{hi}" if hi is not None else f"an integer >= {lo}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {describe(text)}") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
        return value

    return parse


def positive_number(what: str = "a number") -> Callable[[str], float]:
    """An argparse type: a finite number > 0; the error says ``expected <what> > 0``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"expected {what} > 0, got {describe(text)}")
        return value

    return parse


def _duration(text: str) -> float:
    try:
        ns = parse_duration(text)
    except DurationError as e:
        raise argparse.ArgumentTypeError(
            f'expected a Go duration like "15s", got {describe(text)} ({e})'
        ) from None
    if ns <= 0:
        raise argparse.ArgumentTypeError(
            f'expected a Go duration greater than 0, like "15s", got {describe(text)}'
        )
    return ns / 1e9


def _ip_address(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an IP address like 0.0.0.0, got {describe(text)}"
        ) from None


def _logging_format(text: str) -> str:
    if text not in ("text", "json"):
        raise argparse.ArgumentTypeError(f'expected "text" or "json", got {describe(text)}')
    return text


class _CommaList(argparse.Action):
    """pflag's string slice: comma-separated; the first use replaces the default, later ones add."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        items = [v.strip() for v in str(values).split(",")] if values else []
        seen: set[str] = getattr(namespace, "_comma_lists_set", set())
        current = list(getattr(namespace, self.dest)) if self.dest in seen else []
        seen.add(self.dest)
        namespace._comma_lists_set = seen
        setattr(namespace, self.dest, tuple(current + [v for v in items if v]))


# --- the parser -----------------------------------------------------------------------------------


def add_run_flags(p: argparse.ArgumentParser) -> None:
    misc = p.add_argument_group("misc")
    misc.add_argument("--config", metavar="FILE", help="the KubeSchedulerConfiguration file")
    misc.add_argument(
        "--write-config-to",
        metavar="PATH",
        help="write the effective configuration (defaults applied, v1) to PATH ('-': stdout) and exit",
    )
    misc.add_argument(
        "--validate",
        action="store_true",
        help="check the configuration and the Dynamic policy files as a start would, then exit "
        "(ours, not kube-scheduler's)",
    )
    misc.add_argument(
        "--version",
        action="store_true",
        help="print the version, its commit and Kubernetes release, and exit",
    )

    client = p.add_argument_group("client (override clientConnection)")
    client.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig file with the API server and credentials (default: in-cluster)",
    )
    client.add_argument(
        "--kube-api-qps", type=positive_number(), metavar="QPS", help="requests per second (default 50)"
    )
    client.add_argument(
        "--kube-api-burst", type=_int_type(1), metavar="N", help="request burst (default 100)"
    )

    le = p.add_argument_group("leader election (override leaderElection)")
    le.add_argument(
        "--leader-elect",
        type=_flag_bool,
        nargs="?",
        const=True,
        metavar="BOOL",
        help="compete for the Lease before scheduling (default true)",
    )
    le.add_argument("--leader-elect-lease-duration", type=_duration, metavar="DURATION", help="default 15s")
    le.add_argument("--leader-elect-renew-deadline", type=_duration, metavar="DURATION", help="default 10s")
    le.add_argument("--leader-elect-retry-period", type=_duration, metavar="DURATION", help="default 2s")
    le.add_argument("--leader-elect-resource-lock", metavar="KIND", help='only "leases" (the default)')
    le.add_argument("--leader-elect-resource-name", metavar="NAME", help="default kube-scheduler")
    le.add_argument("--leader-elect-resource-namespace", metavar="NAMESPACE", help="default kube-system")
    le.add_argument(
        "--leader-elect-takeover",
        type=_flag_bool,
        nargs="?",
        const=True,
        default=False,
        metavar="BOOL",
        help="at start, take the Lease from a holder that is not one of ours",
    )

    p.add_argument(
        "--shadow",
        action="store_true",
        help="shadow mode: bind nothing, write nothing, take no Lease; judge every bind of the "
        "cluster's active scheduler against ours (/shadow/decisions, dynamic-scheduler shadow report)",
    )

    serving = p.add_argument_group("secure serving (/healthz, /livez, /readyz, /metrics)")
    serving.add_argument(
        "--secure-port",
        type=_int_type(0, 65535),
        default=DEFAULT_SECURE_PORT,
        metavar="PORT",
        help=f"HTTPS port; 0 serves nothing (default {DEFAULT_SECURE_PORT})",
    )
    serving.add_argument(
        "--bind-address", type=_ip_address, default="0.0.0.0", metavar="IP", help="default 0.0.0.0"
    )
    serving.add_argument("--tls-cert-file", metavar="FILE", help="default: a self-signed certificate")
    serving.add_argument("--tls-private-key-file", metavar="FILE")

    authn = p.add_argument_group("authentication (of requests to the secure port)")
    authn.add_argument(
        "--authentication-kubeconfig",
        metavar="FILE",
        help="kubeconfig with the right to create tokenreviews (default: in-cluster; without one, "
        "bearer tokens are refused and no client CA is looked up)",
    )
    authn.add_argument(
        "--authentication-token-webhook-cache-ttl",
        type=_duration,
        default=10.0,
        metavar="DURATION",
        help="how long a token's review is cached (default 10s)",
    )
    authn.add_argument(
        "--authentication-skip-lookup",
        type=_flag_bool,
        nargs="?",
        const=True,
        default=False,
        metavar="BOOL",
        help="do not look up missing CAs in configmap kube-system/extension-apiserver-authentication",
    )
    authn.add_argument(
        "--authentication-tolerate-lookup-failure",
        type=_flag_bool,
        nargs="?",
        const=True,
        default=True,
        metavar="BOOL",
        help="a failed lookup is a warning, not an error (default true)",
    )
    authn.add_argument(
        "--client-ca-file",
        metavar="FILE",
        help="a client certificate signed by one of these CAs is the user of its common name",
    )
    authn.add_argument(
        "--requestheader-client-ca-file",
        metavar="FILE",
        help="CAs of the front proxies whose request headers name the user",
    )
    for flag, default, what in (
        ("--requestheader-allowed-names", (), "common names of front proxies allowed (default: any)"),
        ("--requestheader-username-headers", ("x-remote-user",), "headers with the user name"),
        ("--requestheader-uid-headers", (), "headers with the user's UID"),
        ("--requestheader-group-headers", ("x-remote-group",), "headers with the groups"),
        ("--requestheader-extra-headers-prefix", ("x-remote-extra-",), "prefixes of the extra headers"),
    ):
        authn.add_argument(
            flag, action=_CommaList, default=default, metavar="LIST", help=f"{what}; comma-separated"
        )

    authz = p.add_argument_group("authorization (of requests to the secure port)")
    authz.add_argument(
        "--authorization-kubeconfig",
        metavar="FILE",
        help="kubeconfig with the right to create subjectaccessreviews (default: in-cluster; "
        "without one, only the always-allowed paths are served)",
    )
    authz.add_argument(
        "--authorization-always-allow-paths",
        action=_CommaList,
        default=DEFAULT_ALWAYS_ALLOW_PATHS,
        metavar="LIST",
        help="paths served without authorization; comma-separated, a trailing * makes a prefix "
        "(default /healthz,/readyz,/livez)",
    )
    authz.add_argument(
        "--authorization-webhook-cache-authorized-ttl",
        type=_duration,
        default=10.0,
        metavar="DURATION",
        help="how long an allowed review is cached (default 10s)",
    )
    authz.add_argument(
        "--authorization-webhook-cache-unauthorized-ttl",
        type=_duration,
        default=10.0,
        metavar="DURATION",
        help="how long a refused review is cached (default 10s)",
    )

    logging_ = p.add_argument_group("logging")
    logging_.add_argument(
        "-v",
        "--v",
        dest="v",
        type=_int_type(0),
        default=0,
        metavar="N",
        help="log verbosity (klog levels; 2 operator, 4 debug)",
    )
    logging_.add_argument(
        "--logging-format",
        type=_logging_format,
        default="text",
        metavar="FORMAT",
        help="text or json (default text)",
    )


def apply_flags(config: Any, ns: argparse.Namespace) -> Any:
    """The configuration with the explicitly set flags applied, checked again."""
    client: dict[str, Any] = {}
    if ns.kubeconfig is not None:
        client["kubeconfig"] = ns.kubeconfig
    if ns.kube_api_qps is not None:
        client["qps"] = ns.kube_api_qps
    if ns.kube_api_burst is not None:
        client["burst"] = ns.kube_api_burst
    leader = {
        attr: getattr(ns, dest) for dest, attr in _LEADER_FLAGS.items() if getattr(ns, dest) is not None
    }
    if not client and not leader:
        return config
    election = replace(config.leader_election, **leader)
    try:
        election.validate("leaderElection")
    except ConfigError as e:
        key = e.path.rsplit(".", 1)[-1]
        flag = next(
            (d for d, a in _LEADER_FLAGS.items() if camel(a) == key and getattr(ns, d) is not None), None
        )
        if flag is not None:
            raise ConfigError(None, "--" + flag.replace("_", "-"), e.message) from None
        raise ConfigError(config.source, e.path, e.message) from None
    return replace(
        config, leader_election=election, client_connection=replace(config.client_connection, **client)
    )


def serving_options(ns: argparse.Namespace) -> ServingOptions:
    """The serving flags, checked (files readable, header names, paths), as ServingOptions."""
    cert, key = ns.tls_cert_file, ns.tls_private_key_file
    if (cert is None) != (key is None):
        missing = "--tls-private-key-file" if key is None else "--tls-cert-file"
        given = "--tls-cert-file" if key is None else "--tls-private-key-file"
        raise ConfigError(None, missing, f"required with {given}; expected both or neither")
    for flag, path in (("--tls-cert-file", cert), ("--tls-private-key-file", key)):
        if path is not None and not os.access(path, os.R_OK):
            raise ConfigError(None, flag, f"expected a readable file, got {describe(path)}")
    for flag, path in (
        ("--authentication-kubeconfig", ns.authentication_kubeconfig),
        ("--authorization-kubeconfig", ns.authorization_kubeconfig),
        ("--client-ca-file", ns.client_ca_file),
        ("--requestheader-client-ca-file", ns.requestheader_client_ca_file),
    ):
        if path is not None and not os.access(path, os.R_OK):
            raise ConfigError(None, flag, f"expected a readable file, got {describe(path)}")
    for flag, dest in (
        ("--requestheader-username-headers", "requestheader_username_headers"),
        ("--requestheader-uid-headers", "requestheader_uid_headers"),
        ("--requestheader-group-headers", "requestheader_group_headers"),
        ("--requestheader-extra-headers-prefix", "requestheader_extra_headers_prefix"),
    ):
        for header in getattr(ns, dest):
            if not _HEADER_NAME.fullmatch(header):
                raise ConfigError(None, flag, f"expected HTTP header names, got {describe(header)}")
    try:
        AlwaysAllowPaths(ns.authorization_always_allow_paths)
    except ValueError as e:
        raise ConfigError(None, "--authorization-always-allow-paths", str(e)) from None
    authn = AuthenticationOptions(
        kubeconfig=ns.authentication_kubeconfig,
        cache_ttl=ns.authentication_token_webhook_cache_ttl,
        skip_lookup=ns.authentication_skip_lookup,
        tolerate_lookup_failure=ns.authentication_tolerate_lookup_failure,
        client_ca_file=ns.client_ca_file,
        requestheader_client_ca_file=ns.requestheader_client_ca_file,
        requestheader_allowed_names=tuple(ns.requestheader_allowed_names),
        requestheader_username_headers=tuple(ns.requestheader_username_headers),
        requestheader_uid_headers=tuple(ns.requestheader_uid_headers),
        requestheader_group_headers=tuple(ns.requestheader_group_headers),
        requestheader_extra_headers_prefix=tuple(ns.requestheader_extra_headers_prefix),
    )
    authz = AuthorizationOptions(
        kubeconfig=ns.authorization_kubeconfig,
        always_allow_paths=tuple(ns.authorization_always_allow_paths),
        allow_cache_ttl=ns.authorization_webhook_cache_authorized_ttl,
        deny_cache_ttl=ns.authorization_webhook_cache_unauthorized_ttl,
    )
    return ServingOptions(
        secure_port=ns.secure_port,
        bind_address=ns.bind_address,
        tls_cert_file=cert,
        tls_private_key_file=key,
        authentication=authn,
        authorization=authz,
    )
