"""``python -m bench --report-from WORKDIR``: the report of a journal, finished or not, with no cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.__main__ import main, missing_cases
from bench.report import BACKLOG, STREAM
from bench.resume import Journal
from tests.bench.test_report import run

SETTINGS = {
    "nodes": 1000,
    "pods": 5000,
    "runs": 2,
    "contenders": ["ours-qps5000", "kube-scheduler-qps5000", "raw-binder-events"],
    "workloads": ["basic", "preemption"],
    "modes": [STREAM, BACKLOG],
}
HOST = {"cpu_model": "AMD EPYC", "cores": 2, "memory_gib": 23.5, "kernel": "6.18", "python": "3.11.7"}
MACHINE = HOST | {"kubernetes": "v1.37.0", "load_average_at_start": [1.0, 1.0, 1.0]}


def journal(workdir: Path, cases: list[tuple[int, str, str, list[str]]]) -> Journal:
    j = Journal.begin(workdir, SETTINGS, "0" * 40, MACHINE)
    for n, workload, mode, names in cases:
        for name in names:
            j.record(
                run(name, n, 100.0)
                | {
                    "workload": workload,
                    "mode": mode,
                    "first_bind_after_s": 1.0,
                    "last_bind_after_s": 50.0,
                    "latency_watch_cdf_s": [0.1, 0.2],
                    "timeline_binds_per_s": [90, 110],
                }
            )
    return j


ALL = SETTINGS["contenders"]
SCHEDULERS = ALL[:2]


def test_missing_cases_counts_a_case_whole_only_with_every_contender_it_runs(tmp_path: Path) -> None:
    j = journal(
        tmp_path,
        [
            (1, "basic", STREAM, ALL),
            (1, "basic", BACKLOG, SCHEDULERS),  # the raw binder's turn never came
            (1, "preemption", STREAM, SCHEDULERS),  # no raw binder there: whole
        ],
    )
    assert missing_cases(j) == [
        "run 1 basic backlog",
        "run 2 basic stream",
        "run 2 basic backlog",
        "run 1 preemption backlog",
        "run 2 preemption stream",
        "run 2 preemption backlog",
    ]


def test_an_unfinished_benchmark_is_reported_into_its_workdir_naming_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal(tmp_path, [(1, "basic", STREAM, ALL), (2, "basic", STREAM, ALL)])
    assert main(["--report-from", str(tmp_path)]) == 0
    text = (tmp_path / "latest.md").read_text()
    assert "**Unfinished**: 6 cases have not run yet (run 1 basic backlog, run 2 basic backlog," in text
    basic_stream = text[text.index("#### basic, stream") : text.index("#### basic, backlog")]
    assert "| ours-qps5000 | 5000/5000 | 100.0 |" in basic_stream
    assert "| ours-qps5000 | kube-scheduler-qps5000 | pods/s | 1.00 | 1.00, 1.00 |" in basic_stream
    assert text[text.index("#### preemption, backlog") :].strip().endswith("Not run yet.")
    assert "at end" not in text  # no load average was taken: nothing ran
    assert (tmp_path / "latest.png").stat().st_size > 0
    assert "6 cases not run yet" in capsys.readouterr().err


def test_a_finished_benchmark_goes_where_out_says(tmp_path: Path) -> None:
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    cases = [
        (n, w, m, ALL if w == "basic" else SCHEDULERS)
        for n in (1, 2)
        for w in ("basic", "preemption")
        for m in (STREAM, BACKLOG)
    ]
    journal(work, cases)
    assert main(["--report-from", str(work), "--out", str(out)]) == 0
    text = (out / "latest.md").read_text()
    assert "Unfinished" not in text and "Not run yet" not in text
    assert "| ours-qps5000 peak RSS <= 300 MiB" in text
    assert not (work / "latest.md").exists()
    doc = json.loads((out / "latest.json").read_text())
    every_case = [{"case": f"{c['workload']}/{c['mode']}", **g} for c in doc["cases"] for g in c["goals"]]
    assert doc["goals"] == every_case
    assert {g["case"] for g in doc["goals"]} == {"basic/stream", "preemption/stream"}
    assert all(set(g) >= {"goal", "figure", "met"} for g in doc["goals"])


def test_a_directory_without_a_journal_is_refused_with_the_flag_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--report-from", str(tmp_path)]) == 2
    assert f"error: --report-from {tmp_path}: no bench.json there" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_benchmark_run_needs_the_cluster_and_kwok(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--kwok", "kwok", "--kwok-stages", "stage.yaml"])
    assert e.value.code == 2
    assert "--kubeconfig is required" in capsys.readouterr().err
