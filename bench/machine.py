"""What the benchmark ran on: the host, and the versions of what it measured."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from collections.abc import Callable
from typing import Any


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gib() -> float:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return 0.0


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (how busy the machine was)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def wait_for_load(
    below: float,
    timeout: float,
    *,
    progress: Callable[[str], None] | None = None,
    read: Callable[[], list[float]] = load_average,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    every: float = 5.0,
) -> tuple[float, bool]:
    """Wait until the 1-minute load average is at most ``below``, or ``timeout`` seconds have
    passed; poll it every ``every`` seconds. Returns (seconds waited, whether it got there).
    A machine that cannot say its load counts as settled."""
    start = clock()
    while True:
        load = read()
        waited = clock() - start
        if not load or load[0] <= below:
            return waited, True
        if waited >= timeout:
            return waited, False
        if progress is not None:
            progress(
                f"waiting for the machine to settle: load {load[0]:.2f} > {below:g}, {waited:.0f}/{timeout:.0f}s"
            )
        sleep(min(every, timeout - waited))


def version_of(cmd: list[str]) -> str:
    """The first line a ``--version`` command prints ("" when it fails)."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except OSError:
        return ""
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else ""


def describe(kubernetes_version: str, tools: dict[str, list[str]]) -> dict[str, Any]:
    """The host (CPU model, cores, memory, kernel) and versions; ``tools`` maps a name to
    the command that prints its version."""
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _mem_total_gib(),
        "kernel": platform.release(),
        "os": platform.platform(terse=True),
        "python": platform.python_version(),
        "kubernetes": kubernetes_version,
        **{name: version_of(cmd) for name, cmd in tools.items()},
        "load_average_at_start": load_average(),
    }
