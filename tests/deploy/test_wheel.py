"""The package as users install it: a wheel in a fresh venv, run outside the checkout.

The wheel is built from a copy of this tree (its .git included; no build/ left from an
earlier build, which setuptools would pack again) by ``pip wheel``, which runs setup.py's
copy of ``manifests/``, and installed with its dependencies (from PyPI, through pip's cache) into a
venv under a temporary folder; the commands run there with that folder as the working
directory and no ``$DYNAMIC_SCHEDULER_MANIFESTS``, so nothing of the checkout can be used.
Each method renders exactly what the checkout renders, and ``version`` names the commit
the wheel was built from.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.deploy.templates import MANIFESTS_ENV, METHODS
from scheduler.version import KUBERNETES_RELEASE, git_commit

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(900)

LEFT_OUT = (
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "_artifacts",
    "__pycache__",
    ".pytest-kind",
    ".ruff_cache",
)


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(the installed dynamic-scheduler, a folder outside the checkout)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(*LEFT_OUT), symlinks=True)
    built = run(
        sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", tmp / "dist", src, cwd=tmp
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("dynamic_scheduler-*.whl")
    made = run(sys.executable, "-m", "venv", tmp / "venv", cwd=tmp)
    assert made.returncode == 0, made.stderr
    pip = run(
        tmp / "venv/bin/python",
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        wheel,
        cwd=tmp,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    yield tmp / "venv/bin/dynamic-scheduler", tmp


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in (MANIFESTS_ENV, "PYTHONPATH", "VIRTUAL_ENV")}


@pytest.mark.parametrize("method", METHODS)
def test_the_installed_package_renders_each_method_outside_the_checkout(
    installed: tuple[Path, Path], method: str
) -> None:
    command, outside = installed
    got = run(command, "render", method, cwd=outside, env=clean_env())
    assert got.returncode == 0, got.stderr
    want = run(sys.executable, "-m", "scheduler", "render", method, cwd=REPO)
    assert want.returncode == 0, want.stderr
    assert got.stdout == want.stdout
    assert got.stdout.strip()


def test_the_installed_package_names_its_commit_and_release(installed: tuple[Path, Path]) -> None:
    command, outside = installed
    got = run(command, "version", cwd=outside, env=clean_env())
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    assert lines[1] == f"commit: {git_commit(REPO)}"
    assert lines[2] == f"kubernetes: {KUBERNETES_RELEASE} (tested against)"
