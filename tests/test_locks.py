"""requirements/*.txt (``make lock``) against pyproject.toml: every dependency pinned, in its
range, and the image's versions those the tests run with."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def pins(name: str) -> dict[str, set[Version]]:
    """Package -> the versions pinned (one per environment marker)."""
    out: dict[str, set[Version]] = {}
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        if m := PIN.match(line):
            out.setdefault(canonicalize_name(m.group(1)), set()).add(Version(m.group(2)))
    return out


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def wanted(extras: bool) -> list[Requirement]:
    p = project()
    reqs = [Requirement(r) for r in p["dependencies"]]
    if extras:
        reqs += [Requirement(r) for group in p["optional-dependencies"].values() for r in group]
    return reqs


@pytest.mark.parametrize(("lock", "extras"), [("runtime.txt", False), ("dev.txt", True)])
def test_every_dependency_is_pinned_within_its_range(lock: str, extras: bool) -> None:
    pinned = pins(lock)
    for req in wanted(extras):
        versions = pinned.get(canonicalize_name(req.name))
        assert versions, f"{req.name} is not in requirements/{lock}: run make lock"
        outside = [str(v) for v in versions if not req.specifier.contains(v, prereleases=True)]
        assert not outside, f"requirements/{lock} pins {req.name}=={outside} outside {req}: run make lock"


def test_the_image_gets_the_versions_the_tests_run_with() -> None:
    runtime, dev = pins("runtime.txt"), pins("dev.txt")
    differ = {
        n: (sorted(map(str, v)), sorted(map(str, dev.get(n, ()))))
        for n, v in runtime.items()
        if dev.get(n) != v
    }
    assert not differ, f"runtime.txt and dev.txt disagree (package: (runtime, dev)): {differ}; run make lock"
