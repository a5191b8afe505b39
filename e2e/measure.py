"""Measured figures of the e2e runs, kept for the README.

``record("takeover", "lease_held_s", 1.2)`` logs the figure and appends it to
``_artifacts/e2e-metrics/<suite>.jsonl`` (one JSON object per line, with the
time and the test), so several runs can be compared; :func:`summary` gives a
list of latencies as its count, median, 99th percentile and maximum.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("ARTIFACTS", REPO / "_artifacts")) / "e2e-metrics"

logger = logging.getLogger("e2e.measure")


def record(suite: str, name: str, value: Any, **context: Any) -> Any:
    OUT.mkdir(parents=True, exist_ok=True)
    entry = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "suite": suite,
        "name": name,
        "value": round(value, 3) if isinstance(value, float) else value,
        "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0],
        **context,
    }
    with open(OUT / f"{suite}.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\n")
    logger.warning("measured %s %s = %s %s", suite, name, entry["value"], context or "")
    return value


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))  # ceil(n * p / 100), at least 1
    return ordered[int(rank) - 1]


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 3),
        "p99": round(percentile(values, 99), 3),
        "max": round(max(values), 3),
    }
