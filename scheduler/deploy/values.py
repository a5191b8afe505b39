"""The values the manifests are rendered from: ``manifests/values.yaml``, ``-f`` files, ``--set``.

Every default lives in ``manifests/values.yaml``; the schema below has none
(a key missing there is an error). :func:`load_values` merges the overlays in
order, Helm-style (mappings key by key, anything else replaced whole), and
checks the result against the schema after *each* overlay, so an error names
the overlay that introduced it::

    --set replicas=x: replicas: expected an integer >= 1, got "x"
    my-values.yaml: image.nmae: unknown field (did you mean "name"?); expected one of: name, pullPolicy

The templates get the checked mapping itself (keys as in values.yaml), not the
dataclasses: the dataclasses are the type check.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from scheduler.config import ConfigError
from scheduler.config.decode import Check, at_least, between, decode, describe, fail, yaml_field
from scheduler.config.documents import load_yaml
from scheduler.config.durations import DurationError, parse_duration

# --- checks ------------------------------------------------------------------------------------

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUANTITY = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?")
_PROM_DURATION = re.compile(r"((\d+)y)?((\d+)w)?((\d+)d)?((\d+)h)?((\d+)m)?((\d+)s)?((\d+)ms)?")
_PROM_UNITS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}

DNS_LABEL = Check(
    "a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters)",
    lambda v: len(v) <= 63 and bool(_DNS_LABEL.fullmatch(v)),
)
DNS_SUBDOMAIN = Check(
    "a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', at most 253 characters)",
    lambda v: len(v) <= 253 and bool(_DNS_SUBDOMAIN.fullmatch(v)),
)
NODE_NAME = Check('"" or a node name (a DNS-1123 subdomain)', lambda v: v == "" or DNS_SUBDOMAIN.ok(v))
IMAGE = Check(
    "a non-empty image reference without spaces, like dynamic-scheduler:dev",
    lambda v: bool(v) and not any(c.isspace() for c in v),
)
ABSOLUTE_PATH = Check("an absolute path", lambda v: v.startswith("/") and "\0" not in v)
PORT = between(1, 65535)
HTTP_URL = Check(
    'an http(s) URL like "http://prometheus:9090"', lambda v: bool(re.fullmatch(r"https?://[^\s/]+\S*", v))
)


def _go_nanoseconds(text: str) -> int | None:
    try:
        return parse_duration(text)
    except DurationError:
        return None


GO_DURATION = Check('a Go duration > 0, like "15s" or "1m30s"', lambda v: (_go_nanoseconds(v) or 0) > 0)
GO_DURATION_OR_ZERO = Check(
    'a Go duration >= 0, like "5m" or "0s"', lambda v: (n := _go_nanoseconds(v)) is not None and n >= 0
)


def prometheus_seconds(text: str) -> float | None:
    """Seconds of a Prometheus duration ("1d", "1h30m", "500ms"), None if it is not one."""
    m = _PROM_DURATION.fullmatch(text)
    if not text or m is None:
        return None
    total = 0.0
    for unit, amount in zip(("y", "w", "d", "h", "m", "s", "ms"), m.groups()[1::2], strict=True):
        if amount:
            total += int(amount) * _PROM_UNITS[unit]
    return total


PROM_DURATION = Check(
    'a Prometheus duration > 0, like "30s", "5m" or "1d"', lambda v: (prometheus_seconds(v) or 0) > 0
)


def host_port_ok(text: str) -> bool:
    """``host:port``: an IPv4 address, a bracketed IPv6 address or a DNS name, and a port 1..65535."""
    host, sep, port = text.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or not PORT.ok(int(port)):
        return False
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        return True
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return ":" not in host and DNS_SUBDOMAIN.ok(host.lower())
    return True


KUBELET_ADDRESS = Check(
    'a kubelet address "host:port", like "172.18.0.3:10250" or "[fd00::3]:10250"',
    lambda v: isinstance(v, str) and host_port_ok(v),
)
NODES = Check(
    'a mapping of node name to kubelet address, like {kind-worker: "172.18.0.3:10250"}',
    lambda v: isinstance(v, dict),
)


# --- the schema --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Image:
    name: str = yaml_field(check=IMAGE)
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = yaml_field()


@dataclass(frozen=True)
class Resources:
    """A container's ``resources``: quantities by resource name."""

    requests: dict[str, Any] = yaml_field()
    limits: dict[str, Any] = yaml_field()

    def validate(self, path: str) -> None:
        for part in ("requests", "limits"):
            for name, quantity in getattr(self, part).items():
                where = f"{path}.{part}.{name}"
                if not isinstance(name, str) or not DNS_SUBDOMAIN.ok(name.split("/")[-1]):
                    raise ConfigError(None, where, "expected a resource name like cpu or memory")
                text = (
                    str(quantity)
                    if isinstance(quantity, int | float) and not isinstance(quantity, bool)
                    else quantity
                )
                if not isinstance(text, str) or not _QUANTITY.fullmatch(text):
                    raise ConfigError(
                        None, where, f'expected a quantity like "500m" or "128Mi", got {describe(quantity)}'
                    )


@dataclass(frozen=True)
class LeaderElection:
    lease_duration: str = yaml_field(check=GO_DURATION)
    renew_deadline: str = yaml_field(check=GO_DURATION)
    retry_period: str = yaml_field(check=GO_DURATION)
    resource_name: str = yaml_field(check=DNS_SUBDOMAIN)
    resource_namespace: str = yaml_field(check=DNS_LABEL)


@dataclass(frozen=True)
class Dynamic:
    score_weight: int = yaml_field(check=between(1, 100))
    prometheus_address: str = yaml_field(check=HTTP_URL)
    metrics_update_period: str = yaml_field(check=GO_DURATION)
    cluster_name: str = yaml_field()
    stale_grace: str = yaml_field(check=GO_DURATION_OR_ZERO)
    policy_config_path: str = yaml_field(check=ABSOLUTE_PATH)
    policy: dict[str, Any] = yaml_field()
    relax_when_nothing_fits: bool = yaml_field()
    estimator: dict[str, Any] = yaml_field()
    """The plugin's ``estimator`` args, over what the Prometheus values imply (``estimator_args``)."""

    def validate(self, path: str) -> None:
        from scheduler.config.decode import decode
        from scheduler.config.pluginargs import DynamicEstimatorArgs
        from scheduler.plugins.dynamic.policy import parse_policy

        decode(DynamicEstimatorArgs, self.estimator, f"{path}.estimator")

        if self.policy_config_path.rsplit("/", 1)[-1] in ("", "scheduler-config.yaml"):
            raise ConfigError(
                None,
                f"{path}.policyConfigPath",
                f"expected a file name other than scheduler-config.yaml (the configuration "
                f"sits next to it), got {describe(self.policy_config_path)}",
            )
        try:
            parse_policy(self.policy, "")
        except ConfigError as e:
            raise ConfigError(None, f"{path}.policy" + (f".{e.path}" if e.path else ""), e.message) from None


@dataclass(frozen=True)
class Static:
    mode: Literal["beside", "replace"] = yaml_field()
    name: str = yaml_field(check=DNS_SUBDOMAIN)
    scheduler_name: str = yaml_field(check=DNS_SUBDOMAIN)
    lease_name: str = yaml_field(check=DNS_SUBDOMAIN)
    secure_port: int = yaml_field(check=PORT)
    kubeconfig: str = yaml_field(check=ABSOLUTE_PATH)
    config_dir: str = yaml_field(check=ABSOLUTE_PATH)
    manifest_dir: str = yaml_field(check=ABSOLUTE_PATH)
    priority_class_name: str = yaml_field(check=DNS_SUBDOMAIN)
    resources: Resources = yaml_field()

    def validate(self, path: str) -> None:
        if self.config_dir.rstrip("/") == self.manifest_dir.rstrip("/") or self.config_dir.startswith(
            self.manifest_dir.rstrip("/") + "/"
        ):
            raise ConfigError(
                None,
                f"{path}.configDir",
                f"expected a folder outside manifestDir ({self.manifest_dir}): the kubelet "
                f"would run the files there as pods, got {describe(self.config_dir)}",
            )


@dataclass(frozen=True)
class Windows:
    avg5m: str = yaml_field(check=PROM_DURATION)
    max1h: str = yaml_field(check=PROM_DURATION)
    max1d: str = yaml_field(check=PROM_DURATION)


@dataclass(frozen=True)
class KubeletTLS:
    """How Prometheus checks the kubelets' serving certificates."""

    insecure_skip_verify: bool = yaml_field()
    ca_file: str = yaml_field(check=Check('"" or an absolute path', lambda v: v == "" or ABSOLUTE_PATH.ok(v)))

    def validate(self, path: str) -> None:
        if self.insecure_skip_verify and self.ca_file:
            raise ConfigError(
                None,
                f"{path}.caFile",
                f'expected "" while insecureSkipVerify is true (nothing is verified against it; '
                f"set insecureSkipVerify: false to verify), got {describe(self.ca_file)}",
            )


@dataclass(frozen=True)
class Prometheus:
    image: Image = yaml_field()
    discovery: Literal["kubernetes", "static"] = yaml_field()
    nodes: Any = yaml_field(check=NODES)
    """Node name -> kubelet address (static discovery)."""
    kubelet_tls: KubeletTLS = yaml_field(key="kubeletTLS")
    scrape_interval: str = yaml_field(check=PROM_DURATION)
    evaluation_interval: str = yaml_field(check=PROM_DURATION)
    retention: str = yaml_field(check=PROM_DURATION)
    rate_window: str = yaml_field(check=PROM_DURATION)
    windows: Windows = yaml_field()
    resources: Resources = yaml_field()

    def validate(self, path: str) -> None:
        for node, address in self.nodes.items():
            if not isinstance(node, str) or not DNS_SUBDOMAIN.ok(node):
                raise ConfigError(None, f"{path}.nodes", f"expected node names as keys, got {describe(node)}")
            if not KUBELET_ADDRESS.ok(address):
                raise fail(f"{path}.nodes.{node}", KUBELET_ADDRESS.expected, address)
        scrape = prometheus_seconds(self.scrape_interval) or 0
        if (prometheus_seconds(self.rate_window) or 0) < 2 * scrape:
            raise ConfigError(
                None,
                f"{path}.rateWindow",
                f"expected at least two scrape intervals (2 x {self.scrape_interval}) so that "
                f"rate() has two samples, got {describe(self.rate_window)}",
            )


@dataclass(frozen=True)
class Values:
    namespace: str = yaml_field(check=DNS_LABEL)
    image: Image = yaml_field()
    replicas: int = yaml_field(check=at_least(1))
    scheduler_name: str = yaml_field(check=DNS_SUBDOMAIN)
    takeover: bool = yaml_field()
    verbosity: int = yaml_field(check=between(0, 10))
    secure_port: int = yaml_field(check=PORT)
    node_name: str = yaml_field(check=NODE_NAME)
    priority_class_name: str = yaml_field(check=DNS_SUBDOMAIN)
    resources: Resources = yaml_field()
    leader_election: LeaderElection = yaml_field()
    dynamic: Dynamic = yaml_field()
    static: Static = yaml_field()
    prometheus: Prometheus = yaml_field()


# --- loading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedValues:
    data: dict[str, Any]
    """The merged mapping, keys as in values.yaml: what the templates see."""
    typed: Values
    """The same, checked."""


def check(data: dict[str, Any], source: str) -> Values:
    """``data`` against the schema; a ConfigError names ``source`` and the field path."""
    try:
        return decode(Values, data)
    except ConfigError as e:
        raise ConfigError(source, e.path, e.message) from None


def read_values_file(path: str | Path) -> dict[str, Any]:
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(name, "", f"cannot read the values file: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ConfigError(name, "", "expected UTF-8 text") from None
    try:
        docs = load_yaml(text, name)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(name, "", f"expected YAML{where}: {getattr(e, 'problem', None) or e}") from None
    docs = [d for d in docs if d is not None]
    if len(docs) > 1:
        raise ConfigError(name, "", f"expected one YAML document, got {len(docs)}")
    data = docs[0] if docs else None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(name, "", f"expected a mapping of values, got {describe(data)}")
    return data


def merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """``overlay`` over ``base``: mappings merged key by key, everything else replaced (a new dict)."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def flag_source(flag: str, assignment: str) -> str:
    """``--set a=b`` as errors name it: quoted, escapes and all, when it is not one printable
    line (a newline in it would split the one-line error)."""
    return f"{flag} {assignment}" if assignment.isprintable() else f"{flag} {json.dumps(assignment)}"


def parse_set(assignment: str, flag: str = "--set") -> tuple[list[str], Any]:
    """``"a.b=5"`` -> (["a", "b"], 5): the value read as YAML, except that ``a=`` is ``""``."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key:
        raise ConfigError(flag_source(flag, assignment), "", "expected key.path=value")
    path = key.split(".")
    if any(not part for part in path):
        raise ConfigError(
            flag_source(flag, assignment), "", f"expected a dotted key path like image.name, got {key!r}"
        )
    if raw == "":
        return path, ""
    try:
        docs = load_yaml(raw, f"--set {key}")
    except yaml.YAMLError:
        return path, raw
    return path, docs[0] if len(docs) == 1 else raw


def assign(data: dict[str, Any], path: list[str], value: Any, source: str) -> dict[str, Any]:
    """A copy of ``data`` with ``value`` at ``path`` (missing mappings on the way are created)."""
    out = copy.deepcopy(data)
    node = out
    for i, part in enumerate(path[:-1]):
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(
                source,
                ".".join(path[: i + 1]),
                f"expected a mapping to set {path[i + 1]!r} in, got {describe(nxt)}",
            )
        node = nxt
    node[path[-1]] = value
    return out


def load_values(
    defaults: str | Path, files: Sequence[str] = (), sets: Sequence[str] = (), set_strings: Sequence[str] = ()
) -> LoadedValues:
    """Defaults, then each ``-f`` file, then each ``--set``, then each ``--set-string``, checked at every step."""
    data = read_values_file(defaults)
    typed = check(data, str(defaults))
    for f in files:
        data = merge(data, read_values_file(f))
        typed = check(data, f)
    for flag, items in (("--set", sets), ("--set-string", set_strings)):
        for assignment in items:
            source = flag_source(flag, assignment)
            path, value = parse_set(assignment, flag)
            if flag == "--set-string":
                value = assignment.partition("=")[2]
            data = assign(data, path, value, source)
            typed = check(data, source)
    return LoadedValues(data, typed)


def override(values: LoadedValues, path: str, value: Any, source: str) -> LoadedValues:
    """``values`` with one more value set by the program (``source`` names why, in errors)."""
    data = assign(values.data, path.split("."), value, source)
    return LoadedValues(data, check(data, source))
