"""What this build is: the package version, the commit it was built from, and the Kubernetes
release it is tested against (kube-scheduler's behaviour, the API server of the tests)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from scheduler import __version__

KUBERNETES_RELEASE = "v1.37.0"
"""The k8s.io/kubernetes release of hack/tools/go.mod (a test holds the two together)."""


def git_commit(tree: Path) -> str:
    """``git rev-parse HEAD`` of ``tree``, with ``-dirty`` if tracked files changed; "unknown"
    without git or outside a repository."""
    try:
        head = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("-dirty" if changes else "")


def commit() -> str:
    """The commit of a built package (setup.py wrote it), else of the checkout this runs from."""
    try:
        from scheduler._build import COMMIT
    except ImportError:
        checkout = Path(__file__).resolve().parents[1]
        return git_commit(checkout) if (checkout / ".git").exists() else "unknown"
    return str(COMMIT)


def describe() -> str:
    """``dynamic-scheduler version``'s lines."""
    return f"dynamic-scheduler v{__version__}\ncommit: {commit()}\nkubernetes: {KUBERNETES_RELEASE} (tested against)\n"
