"""The documentation names only what exists: every ``make`` target, ``dynamic-scheduler``
command and ``--flag`` that README.md, docs/ and the folders' READMEs mention (run by
``make lint``; ``make docs`` checks the links)."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.__main__ import parse_args as bench_args
from bench.placement.__main__ import parse_args as placement_args
from scheduler.cli import DELEGATED, main

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted(
    [ROOT / "README.md", ROOT / "scheduler" / "README.md", ROOT / "manifests" / "README.md"]
    + list((ROOT / "docs").glob("**/*.md"))
)

# Flags of other programs that the docs quote, each with the program.
OTHER_PROGRAMS = {
    "--gil": "py-spy",
    "--rm": "docker run",
    "--privileged": "docker run",
    "--list-images": "e2e.test",
    "--durations": "pytest",
    "--fix": "ruff check",
    "--check": "ruff format",
    "--runtime-config": "kube-apiserver",
    "--feature-gates": "kube-scheduler (a flag ours rejects, named as such)",
    "--profiling": "kube-scheduler (a flag ours rejects, named as such)",
}

# (command words) whose --help lists flags: run's, and each delegated command's.
COMMANDS = [
    ("run",),
    ("render",),
    *(("deploy", m) for m in ("lease", "static", "prometheus", "shadow")),
    ("restore",),
    ("explain",),
    ("shadow",),
    ("churn",),
    ("finalize-namespace",),
]

_MAKE = re.compile(r"\bmake ((?:[a-z0-9-]+ ?)+)")
_COMMAND = re.compile(r"\bdynamic-scheduler ([a-z][a-z-]*)")
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*[a-z0-9])")
_VARIABLE = re.compile(r"^[A-Z_]+=")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def make_targets() -> set[str]:
    text = _text(ROOT / "Makefile")
    return set(re.findall(r"^([a-zA-Z0-9_-]+):", text, re.M))


def help_text(argv: list[str], entry: Callable[[list[str]], object] = main) -> str:
    out = io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(io.StringIO()),
        contextlib.suppress(SystemExit),
    ):
        entry([*argv, "--help"])
    return out.getvalue()


def known_flags() -> set[str]:
    flags: set[str] = set()
    for words in COMMANDS:
        text = help_text(list(words))
        assert text.startswith("usage:"), f"no help for dynamic-scheduler {' '.join(words)}"
        flags |= set(_FLAG.findall(text))
    for bench in (bench_args, placement_args):
        flags |= set(_FLAG.findall(help_text([], bench)))
    return flags


def mentions(pattern: re.Pattern[str]) -> list[tuple[str, int, str]]:
    """(file, line, match) of every match in code spans and code blocks of the docs."""
    found = []
    for path in DOCS:
        in_block = False
        for n, line in enumerate(_text(path).splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_block = not in_block
                continue
            parts = [line] if in_block else re.findall(r"`([^`]+)`", line)
            for part in parts:
                for m in pattern.finditer(part):
                    found.append((_rel(path), n, m.group(1)))
    return found


def test_the_docs_exist() -> None:
    assert len(DOCS) > 10, DOCS


def test_every_make_target_named_exists() -> None:
    targets = make_targets()
    missing = []
    for where, line, words in mentions(_MAKE):
        for word in words.split():
            if _VARIABLE.match(word):
                continue
            if word not in targets:
                missing.append(f"{where}:{line}: make {word}")
    assert not missing, "make targets the docs name but the Makefile lacks:\n" + "\n".join(missing)


def test_every_command_named_exists() -> None:
    commands = {"run", "version", *DELEGATED}
    missing = [f"{w}:{n}: dynamic-scheduler {c}" for w, n, c in mentions(_COMMAND) if c not in commands]
    assert not missing, "commands the docs name but the CLI lacks:\n" + "\n".join(missing)


def test_every_flag_named_exists() -> None:
    flags = known_flags() | set(OTHER_PROGRAMS)
    missing = [f"{w}:{n}: {f}" for w, n, f in mentions(_FLAG) if f not in flags and not _kube_api(f)]
    assert not missing, "flags the docs name that no command takes:\n" + "\n".join(missing)


def _kube_api(flag: str) -> bool:
    return flag == "--kube-api"  # `--kube-api-*`, the family


@pytest.mark.parametrize("flag", sorted(OTHER_PROGRAMS))
def test_other_programs_flags_are_not_ours(flag: str) -> None:
    """A flag listed as another program's must not be one of ours (then it needs no entry)."""
    assert flag not in known_flags()
