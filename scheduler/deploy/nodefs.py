"""Files on a control-plane node: the static method's only way in.

Two ways to reach a node's filesystem, one interface (:class:`NodeFS`):

- :class:`DockerExecFS`: a kind node is a container; every operation is one
  ``docker exec -i <node> sh -c '<script>' sh <paths>`` (paths are arguments,
  never spliced into the script);
- :class:`LocalFS`: running on the node itself (``--manifest-dir``); ``root``
  re-roots every path, which the tests use to work in a temporary folder.

Writes are atomic (a dot-file next to the target, then ``mv``): the kubelet
ignores dot-files in its staticPodPath and never reads a half-written manifest.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path
from typing import Protocol

from scheduler.deploy.cmdline import DeployError, UsageError
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

EXEC_TIMEOUT = 60.0


class NodeFS(Protocol):
    node: str
    """The Kubernetes node's name (its mirror pods are ``<pod>-<node>``)."""

    def exists(self, path: str) -> bool: ...
    def is_file(self, path: str) -> bool: ...
    def is_dir(self, path: str) -> bool: ...
    def read(self, path: str) -> str: ...
    def write(self, path: str, text: str, mode: int = 0o644) -> None: ...
    def move(self, src: str, dst: str) -> None: ...
    def remove(self, path: str) -> None: ...
    def remove_dir_if_empty(self, path: str) -> None: ...


class LocalFS:
    """This machine's filesystem, every absolute path taken under ``root``."""

    def __init__(self, node: str, root: str | Path = "/") -> None:
        self.node = node
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"LocalFS({self.node!r}, root={str(self.root)!r})"

    def _p(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def _fail(self, what: str, path: str, e: OSError) -> DeployError:
        return DeployError(f"{self.node}: cannot {what} {path}: {e.strerror or e}")

    def exists(self, path: str) -> bool:
        return self._p(path).exists()

    def is_file(self, path: str) -> bool:
        return self._p(path).is_file()

    def is_dir(self, path: str) -> bool:
        return self._p(path).is_dir()

    def read(self, path: str) -> str:
        try:
            return self._p(path).read_text(encoding="utf-8")
        except OSError as e:
            raise self._fail("read", path, e) from None

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        target = self._p(path)
        tmp = target.with_name(f".{target.name}.tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with open(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except OSError as e:
            raise self._fail("write", path, e) from None

    def move(self, src: str, dst: str) -> None:
        try:
            self._p(dst).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(self._p(src), self._p(dst))
        except OSError as e:
            raise self._fail(f"move to {dst}", src, e) from None

    def remove(self, path: str) -> None:
        try:
            self._p(path).unlink(missing_ok=True)
        except OSError as e:
            raise self._fail("remove", path, e) from None

    def remove_dir_if_empty(self, path: str) -> None:
        p = self._p(path)
        if p.is_dir() and not any(p.iterdir()):
            try:
                p.rmdir()
            except OSError as e:
                raise self._fail("remove", path, e) from None


class DockerExecFS:
    """A kind node (a container named like the node), through ``docker exec``."""

    def __init__(self, node: str, container: str | None = None, docker: str = "docker") -> None:
        self.node = node
        self.container = container or node
        self.docker = docker

    def __repr__(self) -> str:
        return f"DockerExecFS({self.node!r})"

    def _sh(
        self, script: str, *args: str, stdin: str | None = None, what: str
    ) -> subprocess.CompletedProcess[str]:
        cmd = [self.docker, "exec", "-i", self.container, "sh", "-c", script, "sh", *args]
        logger.log(V(4), "docker exec", extra=kv(node=self.node, script=script, args=" ".join(args)))
        try:
            return subprocess.run(
                cmd, input=stdin, capture_output=True, text=True, timeout=EXEC_TIMEOUT, check=False
            )
        except FileNotFoundError:
            raise UsageError(
                f"{self.docker}: not found; the kind nodes are reached with docker exec"
            ) from None
        except subprocess.TimeoutExpired:
            raise DeployError(
                f"{self.node}: {what}: docker exec did not return within {EXEC_TIMEOUT:g}s"
            ) from None

    def _ok(self, script: str, *args: str, what: str, stdin: str | None = None) -> str:
        out = self._sh(script, *args, stdin=stdin, what=what)
        if out.returncode != 0:
            err = (out.stderr or out.stdout).strip().splitlines()
            raise DeployError(f"{self.node}: cannot {what}: {err[-1] if err else f'exit {out.returncode}'}")
        return out.stdout

    def _test(self, flag: str, path: str) -> bool:
        out = self._sh(f'test {flag} "$1"', path, what=f"test {path}")
        if out.returncode not in (0, 1):
            raise DeployError(f"{self.node}: cannot look at {path}: {out.stderr.strip() or out.returncode}")
        return out.returncode == 0

    def exists(self, path: str) -> bool:
        return self._test("-e", path)

    def is_file(self, path: str) -> bool:
        return self._test("-f", path)

    def is_dir(self, path: str) -> bool:
        return self._test("-d", path)

    def read(self, path: str) -> str:
        return self._ok('cat -- "$1"', path, what=f"read {path}")

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        script = (
            'set -e; d=$(dirname -- "$1"); t="$d/.$(basename -- "$1").tmp"; mkdir -p -- "$d"; '
            'umask 077; cat > "$t"; chmod "$2" "$t"; mv -f -- "$t" "$1"'
        )
        self._ok(script, path, f"{mode:o}", stdin=text, what=f"write {path}")

    def move(self, src: str, dst: str) -> None:
        self._ok(
            'set -e; mkdir -p -- "$(dirname -- "$2")"; mv -f -- "$1" "$2"',
            src,
            dst,
            what=f"move {src} to {dst}",
        )

    def remove(self, path: str) -> None:
        self._ok('rm -f -- "$1"', path, what=f"remove {path}")

    def remove_dir_if_empty(self, path: str) -> None:
        self._ok(
            'if [ -d "$1" ] && [ -z "$(ls -A -- "$1")" ]; then rmdir -- "$1"; fi', path, what=f"remove {path}"
        )


def kind_nodes(cluster: str, kind: str = "kind") -> list[str]:
    """The node containers of kind cluster ``cluster`` (``kind get nodes --name``)."""
    try:
        out = subprocess.run(
            [kind, "get", "nodes", "--name", cluster],
            capture_output=True,
            text=True,
            timeout=EXEC_TIMEOUT,
            check=False,
        )
    except FileNotFoundError:
        raise UsageError(f"--kind-cluster: {kind} not found on PATH") from None
    except subprocess.TimeoutExpired:
        raise DeployError(
            f"kind get nodes --name {cluster} did not return within {EXEC_TIMEOUT:g}s"
        ) from None
    names = sorted(line.strip() for line in out.stdout.splitlines() if line.strip())
    if out.returncode != 0 or not names:
        detail = (out.stderr.strip().splitlines() or [""])[-1]
        raise UsageError(
            f"--kind-cluster: no nodes found for kind cluster {cluster!r}"
            + (f" ({detail})" if detail else "")
        )
    return names
