"""What pyproject.toml cannot say: the build copies ``manifests/`` into the package and records
the commit it was built from.

``manifests/`` stays at the top of the repository, the one source of the templates; a
wheel carries it as ``scheduler/manifests`` (found by ``scheduler.deploy.templates``), so an
installed package renders and deploys without a checkout. ``scheduler/_build.py`` holds the
commit (``git rev-parse HEAD`` of the tree built, ``-dirty`` if it had changes;
``$DYNAMIC_SCHEDULER_COMMIT`` when set, e.g. from an sdist build), for ``dynamic-scheduler
version``. An editable install copies nothing: it reads the checkout itself.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def build_commit() -> str:
    if os.environ.get("DYNAMIC_SCHEDULER_COMMIT"):
        return os.environ["DYNAMIC_SCHEDULER_COMMIT"]
    sys.path.insert(0, str(ROOT))  # scheduler.version needs the standard library only
    from scheduler.version import git_commit

    return git_commit(ROOT)


class BuildPyWithManifests(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        package = Path(self.build_lib) / "scheduler"
        shutil.copytree(ROOT / "manifests", package / "manifests", dirs_exist_ok=True)
        (package / "_build.py").write_text(
            f'"""Written by the build (setup.py)."""\n\nCOMMIT = {build_commit()!r}\n'
        )


setup(cmdclass={"build_py": BuildPyWithManifests})
