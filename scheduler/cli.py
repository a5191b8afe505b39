"""The ``dynamic-scheduler`` command: flags -> checked :class:`Options` -> ``scheduler.app.run``.

Subcommands: ``run`` (the default: ``dynamic-scheduler --config=...`` runs),
and the ones in ``DELEGATED`` (``render``, ``deploy``, ``explain``, ...), whose
modules own their flags (``main(argv) -> int``).

``run`` takes kube-scheduler's flags (``scheduler.config.flags``). Flags set
explicitly win over the ``--config`` file (for ``--kubeconfig`` and
``--kube-api-*`` too, which kube-scheduler ignores when a file is given). Bad input of any kind is one
line on stderr, ``error: <file>: <path>: <what was expected>``, and exit
code 1; nothing is contacted before every check passed.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from scheduler import __version__, logs
from scheduler.config.durations import format_seconds
from scheduler.config.errors import ConfigError
from scheduler.config.flags import add_run_flags, apply_flags, serving_options
from scheduler.config.loading import default_config, load_config, with_dynamic_policies
from scheduler.config.options import LoggingOptions, Options
from scheduler.config.writing import dump_config
from scheduler.logs import kv
from scheduler.version import describe as describe_version

logger = logging.getLogger(__name__)

PROG = "dynamic-scheduler"
DELEGATED = {
    "render": ("scheduler.deploy.render", "render the manifests (Deployment, RBAC, ConfigMap) to stdout"),
    "churn": ("scheduler.deploy.churn", "delete pods on a timer so they are scheduled again"),
    "finalize-namespace": (
        "scheduler.deploy.finalize_namespace",
        "remove the finalizers of a namespace stuck in Terminating",
    ),
    "deploy": ("scheduler.deploy.deploy", "deploy lease|static|prometheus to the cluster and wait for it"),
    "restore": (
        "scheduler.deploy.restore",
        "give scheduling back to kube-scheduler and remove what deploy made",
    ),
    "explain": ("scheduler.explain.command", "why ours would put a pod where: every filter and score"),
    "shadow": (
        "scheduler.shadow.report",
        "shadow report: the running shadow's verdicts on the active scheduler",
    ),
}


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, ``--flag: what was expected``."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument "):
            message = message[len("argument ") :]
        raise _UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        allow_abbrev=False,
        description="A kube-scheduler-compatible scheduler with crane's load-aware Dynamic plugin.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    run = commands.add_parser(
        "run",
        allow_abbrev=False,
        help="run the scheduler (the default command)",
        description="Run the scheduler. Flags set explicitly win over --config.",
    )
    add_run_flags(run)
    run.set_defaults(handler=_run)
    version = commands.add_parser(
        "version",
        help="the version, the commit it was built from, the Kubernetes release it is tested against",
    )
    version.set_defaults(handler=_version)
    for name, (_, help_text) in DELEGATED.items():
        commands.add_parser(name, help=help_text, add_help=False)
    return parser


# --- the run command ----------------------------------------------------------------------------


def _write_config(config: Any, path: str) -> None:
    text = dump_config(config)
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise ConfigError(path, "", f"cannot write the configuration: {e.strerror or e}") from None
    logger.info("Wrote configuration", extra=kv(file=path))


def _version(ns: argparse.Namespace) -> int:
    sys.stdout.write(describe_version())
    return 0


def _run(ns: argparse.Namespace) -> int:
    if ns.version:
        return _version(ns)
    logs.setup(ns.v, ns.logging_format)
    config = load_config(ns.config, policies=False) if ns.config else default_config()
    config = apply_flags(config, ns)
    serving = serving_options(ns)
    if ns.write_config_to:
        _write_config(config, ns.write_config_to)
        try:
            with_dynamic_policies(config)
        except ConfigError as e:
            logger.warning("A start with this configuration would fail", extra=kv(err=str(e)))
        return 0
    config = with_dynamic_policies(config)
    if ns.validate:
        print(f"{ns.config or 'the default configuration'}: valid")
        return 0
    options = Options(
        config=config,
        serving=serving,
        logging=LoggingOptions(verbosity=ns.v, format=ns.logging_format),
        leader_elect_takeover=ns.leader_elect_takeover,
        config_file=ns.config,
        shadow=ns.shadow,
    )
    logger.log(
        logs.V(2),
        "Starting",
        extra=kv(
            version=__version__,
            profiles=",".join(config.scheduler_names()),
            leaderElect=options.leader_election.leader_elect,
            leaseDuration=format_seconds(options.leader_election.lease_duration),
            securePort=serving.secure_port,
        ),
    )
    try:
        app = importlib.import_module("scheduler.app")
    except ImportError as e:
        if e.name != "scheduler.app":
            raise
        raise ConfigError(
            None, "run", "the scheduler application (scheduler.app) is not available in this build"
        ) from None
    return int(app.run(options))


def _delegate(command: str, argv: list[str]) -> int:
    module_name = DELEGATED[command][0]
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        if e.name not in (module_name, module_name.rpartition(".")[0]):
            raise
        print(f"error: {command}: not available in this build", file=sys.stderr)
        return 1
    return int(module.main(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """The console script; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in DELEGATED:
        return _delegate(args[0], args[1:])
    if not args or (args[0].startswith("-") and args[0] not in ("-h", "--help")):
        args = ["run", *args]
    try:
        ns = build_parser().parse_args(args)
        if getattr(ns, "handler", None) is None:
            build_parser().print_help(sys.stderr)
            return 1
        return int(ns.handler(ns))
    except _UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0
