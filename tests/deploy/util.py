"""Helpers for the deploy tests: render with overrides, run a command's main and capture its output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler.deploy.templates import Rendered, find_manifests, render
from scheduler.deploy.values import LoadedValues, load_values

MANIFESTS = find_manifests()
DEFAULTS = MANIFESTS / "values.yaml"
METHODS = ("lease", "static", "prometheus", "shadow")


def values(*sets: str, files: tuple[str, ...] = ()) -> LoadedValues:
    return load_values(DEFAULTS, list(files), list(sets))


def rendered(method: str, *sets: str, root: Path = MANIFESTS) -> Rendered:
    return render(method, values(*sets), root)


def all_objects(r: Rendered) -> list[dict[str, Any]]:
    """The API objects, plus the static pod (which goes to a node, but is an object too)."""
    import yaml

    out = list(r.objects)
    if "pod.yaml" in r.files:
        out.append(yaml.safe_load(r.files["pod.yaml"]))
    return out


def run_main(main: Any, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def error_of(err: str) -> str:
    """The error a command printed on stderr (after any progress lines), from "error: " on."""
    assert "Traceback" not in err, err
    i = err.find("error: ")
    assert i == 0 or (i > 0 and err[i - 1] == "\n"), err
    return err[i:]
