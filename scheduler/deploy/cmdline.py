"""What the ``scheduler.deploy`` commands share: one-line argument errors, the values and
cluster flags, :func:`out` for their results, and :func:`run`, which turns every expected failure into ``error: ...`` and exit 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.config import ConfigException, load_incluster_config, new_client_from_config
from kubernetes.config.kube_config import KUBE_CONFIG_DEFAULT_LOCATION

from scheduler import logs
from scheduler.config import ConfigError
from scheduler.config.flags import positive_number
from scheduler.deploy.templates import METHODS, RenderError, find_manifests
from scheduler.deploy.values import LoadedValues, load_values

logger = logging.getLogger(__name__)

PROG = "dynamic-scheduler"


class UsageError(Exception):
    """Bad flags: one line, exit 1."""


class DeployError(Exception):
    """The cluster said no, or did not get there in time: one line (or a few), exit 1."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, ``--flag: what was expected``."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument "):
            message = message[len("argument ") :]
        raise UsageError(message)


def out(line: str) -> None:
    """One line of a command's result, on stdout (progress goes to the log on stderr)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def parser(command: str, description: str) -> Parser:
    return Parser(prog=f"{PROG} {command}", description=description, allow_abbrev=False)


positive_float = positive_number("a number of seconds")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def add_method(p: argparse.ArgumentParser, choices: Sequence[str] = METHODS) -> None:
    p.add_argument(
        "method",
        choices=choices,
        metavar="|".join(choices),
        help="lease: a Deployment sharing kube-scheduler's Lease; static: a static pod on the "
        "control-plane node; prometheus: the source of node usage; shadow: ours beside the "
        "active scheduler, judging its binds",
    )


def add_values_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("values (defaults in manifests/values.yaml)")
    g.add_argument(
        "-f",
        "--values",
        dest="values_files",
        action="append",
        default=[],
        metavar="FILE",
        help="a YAML file of values merged over the defaults (repeatable, later wins)",
    )
    g.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="one value, read as YAML: --set replicas=2 --set image.name=reg/ds:1 (repeatable)",
    )
    g.add_argument(
        "--set-string",
        dest="set_strings",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="one value, always a string (repeatable)",
    )
    g.add_argument(
        "--manifests",
        metavar="DIR",
        help="the manifests folder (default: $DYNAMIC_SCHEDULER_MANIFESTS, else the installed package's, else the source tree's)",
    )


def add_cluster_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="default: $KUBECONFIG, else ~/.kube/config, else the pod's service account",
    )
    g.add_argument("--context", metavar="NAME", help="the kubeconfig context (default: its current-context)")


DEFAULT_TIMEOUT = 300.0
"""Seconds each wait of ``deploy`` and ``restore`` may take, unless ``--timeout`` says."""


def add_timeout_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"the deadline of each wait (default {DEFAULT_TIMEOUT:g})",
    )


def add_log_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-v",
        "--v",
        dest="v",
        type=int,
        default=0,
        metavar="N",
        help="log verbosity (progress is always shown; 4 shows requests' details)",
    )


def load(ns: argparse.Namespace) -> tuple[Path, LoadedValues]:
    root = find_manifests(ns.manifests)
    return root, load_values(root / "values.yaml", ns.values_files, ns.sets, ns.set_strings)


def connect(kubeconfig: str | None, context: str | None) -> ApiClient:
    """An API client as kubectl finds one: --kubeconfig, $KUBECONFIG, ~/.kube/config, else in-cluster."""
    path = kubeconfig or os.path.expanduser(KUBE_CONFIG_DEFAULT_LOCATION)
    try:
        if kubeconfig or os.path.exists(path.split(os.pathsep)[0]):
            return new_client_from_config(config_file=path, context=context, persist_config=False)
        load_incluster_config()
        return ApiClient()
    except (ConfigException, OSError) as e:
        where = path if (kubeconfig or os.path.exists(path)) else "the pod's service account"
        raise UsageError(f"--kubeconfig: cannot load {where}: {e}") from None


def api_message(e: ApiException) -> str:
    """The server's own words for an API error (its Status message), else the HTTP reason."""
    try:
        body = json.loads(e.body) if e.body else {}
    except (TypeError, ValueError):
        body = {}
    msg = body.get("message") if isinstance(body, dict) else None
    return f"{e.status} {msg or e.reason}"


def run(command: str, body: Callable[[], int]) -> int:
    """Run a command's body; expected failures become one ``error:`` line on stderr and exit 1."""
    try:
        return body()
    except (UsageError, ConfigError, RenderError, DeployError) as e:
        sys.stderr.write(f"error: {command}: {e}\n")
        return 1
    except ApiException as e:
        sys.stderr.write(f"error: {command}: the API server answered {api_message(e)}\n")
        return 1
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0


def setup_logging(verbosity: int) -> None:
    logs.setup(verbosity)
