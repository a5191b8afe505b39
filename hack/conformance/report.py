"""The comparison table of ``make conformance``, from the runs' JUnit reports.

    report.py --out DIR --focus RE [--focus RE ...] --skip RE \\
              --run ours=RUN_DIR --run kube-scheduler=RUN_DIR [--environment FILE]

Each RUN_DIR holds what ``hack/conformance/run-e2e.sh`` leaves: ``junit_01.xml``
(e2e.test's ``--report-dir``), ``holder`` and ``holder-after`` (the Lease holder
before and after the run), ``started``, ``seconds`` and ``exit-code``. Writes
``DIR/latest.json`` and ``DIR/latest.md``.

The specs of the table are those the focus and skip expressions select, matched
as ginkgo matches them (against the spec's full text), so that a selected spec
missing from a report shows as such instead of disappearing. ``--environment``
names a file of ``<spec text><TAB><reason>`` lines: the reviewed reasons why a
spec fails with both schedulers on this cluster whatever the scheduler does.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

SCHEDULERS = ("kube-scheduler", "ours")
# ginkgo's spec states that are a failure of the spec.
FAILED = {"failed", "timedout", "panicked", "interrupted", "aborted"}


def read_junit(path: Path) -> dict[str, dict]:
    """Spec full text -> {status, seconds, message} for the ``[It]`` test cases of a report."""
    specs = {}
    for case in ET.parse(path).iter("testcase"):
        name = case.get("name", "")
        if not name.startswith("[It] "):
            # Suite-level nodes; a failed set-up means no spec ran as it should.
            failed = case.find("failure") is not None or case.find("error") is not None
            if failed and "BeforeSuite]" in name:
                raise SystemExit(f"error: {path}: {name} failed, so the run's specs are no results")
            continue
        message = None
        for tag in ("failure", "error"):
            node = case.find(tag)
            if node is not None:
                message = failure_message(node.text or node.get("message") or "")
        skipped = case.find("skipped")
        if skipped is not None and skipped.get("message", "skipped") != "skipped":
            message = skipped.get("message")  # "skipped - <reason>": the spec skipped itself
        specs[name.removeprefix("[It] ")] = {
            "status": case.get("status", "unknown"),
            "seconds": round(float(case.get("time", "0")), 1),
            "message": message,
        }
    return specs


def failure_message(text: str) -> str:
    """ginkgo's failure text in short: ``[FAILED] <message>`` and ``In [It] at: <where>``, with
    the pod a wait gave up on (gomega prints it whole) cut down to its phase and conditions."""
    text = text.strip()
    head, sep, rest = text.partition("\nIn [")
    where = rest.split("\n", 1)[0].split(" @ ", 1)[0] if sep else ""  # no timestamp
    message = head.removeprefix("[FAILED] ").removeprefix("[TIMEDOUT] ").strip()
    parts = re.split("(got instead:)", message, maxsplit=1, flags=re.IGNORECASE)
    if len(parts) == 3:
        expected, got, dump = parts
        message = f"{' '.join(expected.split())} {got} {pod_summary(dump)}"
    return f"{message} (in [{where})" if where else message


def pod_summary(dump: str) -> str:
    """``<ns>/<name>: <phase>; <condition> <status> <reason>: <message>`` of gomega's
    ``<*v1.Pod | 0x...>:`` YAML dump, or the dump's first line if it is no pod."""
    _, _, body = dump.partition(">:")
    try:
        pod = yaml.safe_load(textwrap.dedent(body.strip("\n")))
        meta, status = pod["metadata"], pod.get("status") or {}
    except (yaml.YAMLError, TypeError, KeyError):
        return dump.strip().split("\n", 1)[0]
    parts = [f"pod {meta.get('namespace')}/{meta.get('name')}: {status.get('phase')}"]
    for c in status.get("conditions") or []:
        text = " ".join(str(c.get(k)) for k in ("type", "status", "reason") if c.get(k))
        parts.append(f"{text}: {c['message']}" if c.get("message") else text)
    return "; ".join(parts)


def read_run(run_dir: Path) -> dict:
    def field(name: str) -> str | None:
        f = run_dir / name
        return f.read_text().strip() if f.exists() else None

    junit = run_dir / "junit_01.xml"
    return {
        "lease_holder": field("holder"),
        "lease_holder_after": field("holder-after"),
        "started": field("started"),
        "seconds": int(field("seconds") or 0),
        "e2e_exit_code": int(field("exit-code") or -1),
        "specs": read_junit(junit) if junit.exists() else {},
    }


def build(runs: dict[str, dict], focus: list[str], skip: str, environment: dict[str, str]) -> dict:
    names = sorted(
        {
            n
            for r in runs.values()
            for n in r["specs"]
            if any(re.search(f, n) for f in focus) and not (skip and re.search(skip, n))
        }
    )
    missing = {"status": "missing", "seconds": None, "message": "not in this run's JUnit report"}
    tests = []
    for name in names:
        results = {s: runs[s]["specs"].get(name, missing) for s in SCHEDULERS if s in runs}
        both_failed = len(results) == 2 and all(r["status"] in FAILED for r in results.values())
        tests.append(
            {
                "name": name,
                "results": results,
                "both_failed": both_failed,
                "environment": environment.get(name) if both_failed else None,
            }
        )
    summary = {
        s: {
            status: sum(1 for t in tests if t["results"][s]["status"] == status)
            for status in sorted({t["results"][s]["status"] for t in tests})
        }
        for s in SCHEDULERS
        if s in runs
    }
    return {
        "runs": {s: {k: v for k, v in r.items() if k != "specs"} for s, r in runs.items()},
        "summary": summary,
        "tests": tests,
    }


def cell(result: dict) -> str:
    status = result["status"]
    return status if status == "passed" else f"**{status}**"


def short(name: str) -> str:
    return name.removeprefix("[sig-scheduling] ").removeprefix("[sig-node] [DRA] ")


def markdown(report: dict) -> str:
    ctx = report["context"]
    runs = report["runs"]
    offline = " with OFFLINE=1" if ctx.get("offline") == "1" else ""
    commit = f", ours built from {ctx['commit']}" if ctx.get("commit") else ""
    lines = [
        f"# Upstream `{ctx.get('title', '[sig-scheduling]')}` e2e specs: kube-scheduler and ours",
        "",
        f"`e2e.test` {ctx.get('kubernetes')} on the kind cluster `{ctx.get('cluster')}` "
        f"(node image `{ctx.get('node_image')}`), {ctx.get('date')}, by `make {ctx.get('target', 'conformance')}`"
        f"{offline}{commit}. Ours first, then kube-scheduler on the same cluster.",
        "",
    ]
    for s in ("ours", "kube-scheduler"):
        if s in runs:
            r = runs[s]
            counts = ", ".join(f"{n} {status}" for status, n in report["summary"][s].items())
            lines.append(
                f"- {s}: Lease `kube-system/kube-scheduler` held by `{r['lease_holder']}` "
                f"(after the run: `{r['lease_holder_after']}`); {counts}; run {r['seconds'] // 60} min "
                f"{r['seconds'] % 60} s."
            )
    if report["timings"]:
        steps = ", ".join(f"{step} {secs} s" for step, secs in report["timings"].items())
        lines.append(f"- wall times: {steps}; artifacts in `{ctx.get('artifacts')}`.")
    lines += [
        "",
        "| test | kube-scheduler | ours | time (s), kube-scheduler / ours |",
        "| --- | --- | --- | ---: |",
    ]
    for t in report["tests"]:
        res = t["results"]
        ks, ours = res.get("kube-scheduler"), res.get("ours")
        name = short(t["name"])
        if t["both_failed"]:
            name += f" (environment: {t['environment']})" if t["environment"] else " (fails with both)"
        times = " / ".join(
            "-" if r is None or r["seconds"] is None else f"{r['seconds']:g}" for r in (ks, ours)
        )
        lines.append(f"| {name} | {cell(ks) if ks else '-'} | {cell(ours) if ours else '-'} | {times} |")
    failures = [(t, s, r) for t in report["tests"] for s, r in t["results"].items() if r["message"]]
    if failures:
        lines += ["", "## Failures and skips", ""]
        for t, s, r in failures:
            lines.append(f"- {s}, {short(t['name'])}: {r['status']}: `{one_line(r['message'])}`")
    return "\n".join(lines) + "\n"


def one_line(text: str, limit: int = 600) -> str:
    text = " ".join(text.split()).replace("`", "'")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--run", action="append", default=[], metavar="SCHEDULER=DIR", required=True)
    p.add_argument("--focus", action="append", required=True)
    p.add_argument("--skip", default="")
    p.add_argument("--environment", type=Path)
    p.add_argument("--title", default="[sig-scheduling]", help="the selection, in the report's heading")
    p.add_argument("--target", default="conformance", help="the make target that ran it")
    p.add_argument(
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="what the run was: kubernetes, cluster, node_image, date, offline (0|1), artifacts, ...",
    )
    p.add_argument("--timing", action="append", default=[], metavar="STEP=SECONDS", help="a step's wall time")
    args = p.parse_args(argv)
    runs = {}
    for spec in args.run:
        scheduler, _, run_dir = spec.partition("=")
        if scheduler not in SCHEDULERS or not run_dir:
            p.error(f"--run {spec}: expected ours=DIR or kube-scheduler=DIR")
        runs[scheduler] = read_run(Path(run_dir))
    environment = {}
    if args.environment and args.environment.exists():
        for line in args.environment.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                name, _, reason = line.partition("\t")
                environment[name.strip()] = reason.strip()
    context = {
        "title": args.title,
        "target": args.target,
        **dict(kv.partition("=")[::2] for kv in args.context),
    }
    timings = {step: int(secs) for step, _, secs in (t.partition("=") for t in args.timing)}
    report = {"context": context, "timings": timings, **build(runs, args.focus, args.skip, environment)}
    if not report["tests"]:
        sys.stderr.write("error: no selected spec in any JUnit report\n")
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "latest.md").write_text(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
