"""CPU time and peak memory of a local process, from /proc (Linux)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcSample:
    cpu_seconds: float
    """utime + stime of the process (its threads included, not its children)."""
    rss_bytes: int
    """VmRSS now."""
    hwm_bytes: int
    """VmHWM: the peak resident set size since the process started."""


def sample(pid: int) -> ProcSample | None:
    """The process's counters now; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            stat = f.read()
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            status = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may hold spaces; fields 14/15 count from after its ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    mem = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            mem[key] = int(value.split()[0]) * 1024  # kB
    return ProcSample((utime + stime) / _TICKS, mem.get("VmRSS", 0), mem.get("VmHWM", 0))


def stop_process(proc: subprocess.Popen | None) -> None:
    """SIGTERM a child process we started, SIGKILL after 15 s; nothing if it already ended."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
