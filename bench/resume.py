"""What a benchmark's workdir keeps so that an interrupted ``make bench`` can go on where it
stopped (``--resume DIR``): its settings, the code our contenders ran, and every case finished.

A full run (every workload and mode, three runs of four contenders) takes hours. A case is the
contenders of one run of one workload and mode, run one after another, whose ratios the report
takes; a resumed benchmark keeps the cases that finished and runs the rest, a half-finished
case from its start. It refuses to go on with other settings or other code than the ones the
kept cases ran with, so the report stays one benchmark of one version.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "bench.json"
RUNS_FILE = "runs.json"
SETTINGS = ("nodes", "pods", "runs", "contenders", "workloads", "modes", "resident_per_node")
"""What a resumed benchmark must share with the one it goes on with."""
HOST = ("cpu_model", "cores", "memory_gib", "kernel", "load_average_at_start")
"""What each part records of the machine it ran on."""


class ResumeError(Exception):
    """The workdir cannot be resumed with these settings (the message says why)."""


def code_version(source: Path) -> str:
    """The commit ``source`` is checked out at, with ``-dirty`` when files differ from it
    ("unknown" outside a git checkout)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


Case = tuple[int, str, str]
"""(run, workload, mode)"""


def _case(fig: dict[str, Any]) -> Case:
    return (int(fig["run"]), str(fig["workload"]), str(fig["mode"]))


@dataclass
class Journal:
    """The workdir's record of a benchmark: ``bench.json`` (settings, code, machine, the time each
    part of it took) and ``runs.json`` (each contender's figures of each run), rewritten
    after every contender's run."""

    workdir: Path
    settings: dict[str, Any]
    code: str
    started: str
    machine: dict[str, Any]
    parts: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    _clock: float = field(default_factory=time.monotonic, repr=False)

    @classmethod
    def begin(cls, workdir: Path, settings: dict[str, Any], code: str, machine: dict[str, Any]) -> Journal:
        """A new journal in ``workdir``; ``machine`` describes the host (bench.machine.describe)."""
        j = cls(workdir, dict(settings), code, _now(), machine)
        j._new_part(machine)
        return j

    @classmethod
    def read(cls, workdir: Path, flag: str = "--resume") -> Journal:
        """The journal of ``workdir`` as it is; ResumeError, its message starting with
        ``flag``, when there is none or it cannot be read."""
        path = workdir / STATE_FILE
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            runs = (
                json.loads((workdir / RUNS_FILE).read_text(encoding="utf-8"))
                if (workdir / RUNS_FILE).exists()
                else []
            )
        except FileNotFoundError:
            raise ResumeError(
                f"{flag} {workdir}: no {STATE_FILE} there (not the workdir of a benchmark)"
            ) from None
        except (OSError, ValueError) as e:
            raise ResumeError(f"{flag} {workdir}: cannot read its journal: {e}") from None
        missing = [k for k in ("settings", "code", "started", "machine", "parts") if k not in state]
        if missing:
            raise ResumeError(f"{flag} {workdir}: its {STATE_FILE} has no {', '.join(missing)}")
        return cls(
            workdir,
            state["settings"],
            state["code"],
            state["started"],
            state["machine"],
            list(state["parts"]),
            list(runs),
        )

    @classmethod
    def resume(cls, workdir: Path, settings: dict[str, Any], code: str, machine: dict[str, Any]) -> Journal:
        """The journal of ``workdir``, to go on with on the host ``machine`` describes;
        ResumeError when there is none, or it was taken with other settings or another
        version of our code. Each part names its host: the ratios are taken within a case,
        which one part runs whole."""
        j = cls.read(workdir)
        for key in SETTINGS:
            if j.settings.get(key) != settings.get(key):
                raise ResumeError(
                    f"--resume {workdir}: it ran with {key} {_show(j.settings.get(key))}, "
                    f"this one has {_show(settings.get(key))}; pass the same settings"
                )
        if j.code.endswith("-dirty") or j.code == "unknown":
            raise ResumeError(
                f"--resume {workdir}: its cases ran our scheduler from uncommitted code "
                f"({j.code}), which cannot be checked out again; start a new benchmark"
            )
        if code != j.code:
            raise ResumeError(
                f"--resume {workdir}: its cases ran our scheduler at {j.code}, this checkout "
                f"is at {code}; pass --ours-source with a checkout of {j.code}"
            )
        j._new_part(machine)
        return j

    def _new_part(self, machine: dict[str, Any]) -> None:
        self._clock = time.monotonic()
        self.parts.append(
            {
                "started": _now(),
                "duration_s": 0.0,
                "host": {k: machine.get(k) for k in HOST},
            }
        )
        self.save()

    def complete(self, case: Case, contenders: Iterable[str]) -> bool:
        """Whether every one of ``contenders`` has its figures for ``case``."""
        have = {f["contender"] for f in self.runs if _case(f) == case}
        return set(contenders) <= have

    def discard(self, case: Case) -> int:
        """Drop the figures of a case that did not finish (it runs again from its start)."""
        before = len(self.runs)
        self.runs = [f for f in self.runs if _case(f) != case]
        return before - len(self.runs)

    def record(self, fig: dict[str, Any]) -> None:
        """Keep one contender's figures of one run (taken in the current part)."""
        self.runs.append({**fig, "part": len(self.parts)})
        self.save()

    @property
    def duration_s(self) -> float:
        return round(sum(s["duration_s"] for s in self.parts), 1)

    def save(self) -> None:
        self.parts[-1]["duration_s"] = round(time.monotonic() - self._clock, 1)
        state = {
            "settings": self.settings,
            "code": self.code,
            "started": self.started,
            "machine": self.machine,
            "parts": self.parts,
        }
        _write(self.workdir / STATE_FILE, state)
        _write(self.workdir / RUNS_FILE, self.runs)


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def _show(v: Any) -> str:
    return ",".join(map(str, v)) if isinstance(v, list) else str(v)


def _write(path: Path, data: Any) -> None:
    """Write whole or not at all: an interrupted write leaves the file as it was."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    tmp.replace(path)
