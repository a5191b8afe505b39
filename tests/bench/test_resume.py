"""An interrupted benchmark's journal: what a resumed one keeps, runs again, and refuses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.resume import RUNS_FILE, STATE_FILE, Journal, ResumeError, code_version

SETTINGS = {
    "nodes": 1000,
    "pods": 5000,
    "runs": 3,
    "contenders": ["ours-qps5000", "kube-scheduler-qps5000"],
    "workloads": ["basic", "affinity"],
    "modes": ["stream", "backlog"],
}
CODE = "0123456789abcdef0123456789abcdef01234567"
BOTH = SETTINGS["contenders"]
HOST = {"cpu_model": "AMD EPYC", "cores": 2, "memory_gib": 23.5, "kernel": "6.18", "python": "3.11.7"}


def fig(contender: str, run: int, workload: str = "basic", mode: str = "stream") -> dict[str, Any]:
    return {"contender": contender, "run": run, "workload": workload, "mode": mode, "pods_per_s": 100.0}


def test_a_resumed_journal_keeps_finished_cases_and_reruns_a_half_finished_one(tmp_path: Path) -> None:
    j = Journal.begin(tmp_path, SETTINGS, CODE, {"cores": 2})
    for c in BOTH:
        j.record(fig(c, 1))
    j.record(fig("ours-qps5000", 1, mode="backlog"))  # interrupted before kube-scheduler's turn

    again = Journal.resume(tmp_path, SETTINGS, CODE, HOST)
    assert again.complete((1, "basic", "stream"), BOTH)
    assert not again.complete((1, "basic", "backlog"), BOTH)
    assert not again.complete((2, "basic", "stream"), BOTH)
    assert again.discard((1, "basic", "backlog")) == 1
    assert [(f["contender"], f["mode"]) for f in again.runs] == [(c, "stream") for c in BOTH]
    assert again.machine == {"cores": 2} and again.started == j.started
    assert len(again.parts) == 2 and again.parts[-1]["host"]["cpu_model"] == "AMD EPYC"
    assert "python" not in again.parts[-1]["host"]
    assert [f["part"] for f in again.runs] == [1, 1]
    # What it wrote is what the next resume reads.
    again.record(fig("kube-scheduler-qps5000", 1, mode="backlog"))
    on_disk = json.loads((tmp_path / RUNS_FILE).read_text())
    assert on_disk == again.runs


def test_a_case_of_a_workload_without_the_raw_binder_is_complete_without_it(tmp_path: Path) -> None:
    j = Journal.begin(tmp_path, SETTINGS, CODE, {})
    j.record(fig("ours-qps5000", 1))
    assert j.complete((1, "basic", "stream"), ["ours-qps5000"])
    assert not j.complete((1, "basic", "stream"), [*BOTH, "raw-binder"])


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("nodes", 5000, "nodes 1000, this one has 5000"),
        ("runs", 1, "runs 3, this one has 1"),
        ("workloads", ["basic"], "workloads basic,affinity, this one has basic"),
        ("contenders", list(reversed(BOTH)), "contenders ours-qps5000,kube-scheduler-qps5000"),
    ],
)
def test_resuming_with_other_settings_is_refused_naming_the_setting(
    tmp_path: Path, key: str, value: Any, shown: str
) -> None:
    Journal.begin(tmp_path, SETTINGS, CODE, {})
    with pytest.raises(ResumeError, match=shown):
        Journal.resume(tmp_path, {**SETTINGS, key: value}, CODE, HOST)


def test_resuming_with_other_code_is_refused(tmp_path: Path) -> None:
    Journal.begin(tmp_path, SETTINGS, CODE, {})
    with pytest.raises(ResumeError, match=f"at {CODE}, this checkout is at fff.*--ours-source"):
        Journal.resume(tmp_path, SETTINGS, "f" * 40, HOST)


def test_cases_from_uncommitted_code_cannot_be_resumed(tmp_path: Path) -> None:
    Journal.begin(tmp_path, SETTINGS, CODE + "-dirty", {})
    with pytest.raises(ResumeError, match="uncommitted"):
        Journal.resume(tmp_path, SETTINGS, CODE + "-dirty", HOST)


def test_a_directory_without_a_journal_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ResumeError, match=f"no {STATE_FILE} there"):
        Journal.resume(tmp_path, SETTINGS, CODE, HOST)
    (tmp_path / STATE_FILE).write_text("{not json")
    with pytest.raises(ResumeError, match="cannot read its journal"):
        Journal.resume(tmp_path, SETTINGS, CODE, HOST)
    (tmp_path / STATE_FILE).write_text('{"settings": {}}')
    with pytest.raises(ResumeError, match=f"its {STATE_FILE} has no code, started, machine, parts"):
        Journal.resume(tmp_path, SETTINGS, CODE, HOST)


def test_the_time_of_every_part_adds_up(tmp_path: Path) -> None:
    j = Journal.begin(tmp_path, SETTINGS, CODE, {})
    state = json.loads((tmp_path / STATE_FILE).read_text())
    state["parts"][0]["duration_s"] = 600.0
    (tmp_path / STATE_FILE).write_text(json.dumps(state))
    again = Journal.resume(tmp_path, SETTINGS, CODE, HOST)
    again.parts[-1]["duration_s"] = 60.0
    assert again.duration_s == 660.0
    assert j.started == again.started


def test_code_version_names_the_commit_and_marks_changes(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(tmp_path), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    assert code_version(tmp_path) == "unknown"
    git("init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "a")
    head = git("rev-parse", "HEAD")
    assert code_version(tmp_path) == head
    (tmp_path / "a.py").write_text("x = 2\n")
    assert code_version(tmp_path) == head + "-dirty"
