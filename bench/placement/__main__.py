"""``python -m bench.placement``: placement quality on simulated usage (``make bench-placement``).

Each contender (``contenders``) places the same pods on its own copy of the same kwok nodes,
at the same moments; kwok reports each pod's real usage (``kwokconfig``), a local Prometheus
scrapes it with the recording rules of ``manifests/`` and ours reads it as in production, and
the figures (``figures``) judge where the pods went against the simulation's truth.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from bench import kwok
from bench import prom as bprom
from bench.contenders import free_port
from bench.placement import contenders as pc
from bench.placement import model, report
from bench.placement import run as prun
from bench.placement.kwokconfig import documents
from scheduler import logs
from scheduler.cluster.client import ClientOptions, new_api_client
from scheduler.deploy.templates import estimator_args, render
from scheduler.deploy.values import load_values, prometheus_seconds

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results" / "placement"
CRANE_POLICY = REPO / "tests" / "data" / "crane-scheduler" / "policy.yaml"
"""crane-scheduler's default policy as it ships it (source and licence beside it): ``ours-crane``'s."""
logger = logging.getLogger("bench.placement")

PROMETHEUS_VALUES = [
    # The shipped windows scaled down five times, so that a scenario of a few minutes sees
    # averages move: 5m -> 1m; scrapes and rule evaluations every 10 s.
    "prometheus.scrapeInterval=10s",
    "prometheus.evaluationInterval=10s",
    "prometheus.rateWindow=30s",
    "prometheus.windows.avg5m=1m",
    "prometheus.windows.max1h=10m",
    "prometheus.windows.max1d=10m",
]
SYNC_PERIODS = {
    # crane's default periods (3m, 15m, 3h) scaled as the windows
    "cpu_usage_active": "10s",  # the manifests' 30s: here the rules' evaluation interval
    "cpu_usage_avg_5m": "30s",
    "mem_usage_avg_5m": "30s",
    "cpu_usage_max_avg_1h": "3m",
    "mem_usage_max_avg_1h": "3m",
    "cpu_usage_max_avg_1d": "10m",
    "mem_usage_max_avg_1d": "10m",
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.placement", description=__doc__)
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--kwok", required=True, help="the kwok binary")
    p.add_argument("--kwok-stages", nargs="+", type=Path, required=True, help="kwok Stage files")
    p.add_argument("--kube-scheduler", required=True, help="the kube-scheduler binary")
    p.add_argument("--prometheus", default=shutil.which("prometheus") or "/usr/bin/prometheus")
    p.add_argument("--nodes", type=int, default=16, help="nodes per contender")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--scale", type=float, default=1.0, help="below 1: fewer pods per scenario (a quick look)")
    p.add_argument("--scenarios", default=",".join(model.SCENARIOS))
    p.add_argument("--contenders", default=",".join(pc.ALL))
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument(
        "--dynamic-policy",
        type=Path,
        default=None,
        help="a crane policy for ours-dynamic instead of the manifests' (to try one; sync periods as written)",
    )
    p.add_argument(
        "--dynamic-weight",
        type=int,
        default=None,
        help="ours-dynamic's Dynamic score weight (default: the manifests' dynamic.scoreWeight)",
    )
    p.add_argument(
        "--workdir", type=Path, default=None, help="logs (default _artifacts/bench-placement/<time>)"
    )
    args = p.parse_args(argv)
    args.scenario_names = [s for s in args.scenarios.split(",") if s]
    args.contender_names = [c for c in args.contenders.split(",") if c]
    for s in args.scenario_names:
        if s not in model.SCENARIOS:
            p.error(f"--scenarios: unknown scenario {s!r}; expected some of: {', '.join(model.SCENARIOS)}")
    for c in args.contender_names:
        if c not in pc.ALL:
            p.error(f"--contenders: unknown contender {c!r}; expected some of: {', '.join(pc.ALL)}")
    if args.nodes < 2:
        p.error("--nodes: expected at least 2")
    if args.dynamic_policy is not None and not args.dynamic_policy.is_file():
        p.error(f"--dynamic-policy: no file {args.dynamic_policy}")
    if args.dynamic_weight is not None and args.dynamic_weight < 1:
        p.error("--dynamic-weight: expected a weight of at least 1")
    return args


def bench_policy(policy: dict[str, Any]) -> dict[str, Any]:
    """A policy with the periods of SYNC_PERIODS."""
    out = json.loads(json.dumps(policy))
    for entry in out["spec"]["syncPolicy"]:
        entry["period"] = SYNC_PERIODS.get(entry["name"], entry.get("period"))
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.setup(warnings_only=True)
    workdir = args.workdir or REPO / "_artifacts" / "bench-placement" / time.strftime("%Y%m%dT%H%M%S")
    workdir.mkdir(parents=True, exist_ok=True)

    def say(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)

    values = load_values(REPO / "manifests" / "values.yaml", sets=PROMETHEUS_VALUES)
    rendered = render("prometheus", values, REPO / "manifests")
    rules = rendered.files["rules.yml"]
    crane_policy_path = workdir / "crane-policy.yaml"
    crane_policy = yaml.safe_load(CRANE_POLICY.read_text(encoding="utf-8"))
    crane_policy_path.write_text(yaml.safe_dump(bench_policy(crane_policy)), encoding="utf-8")
    manifests_policy_path = workdir / "policy.yaml"
    manifests_policy = bench_policy(values.data["dynamic"]["policy"])
    manifests_policy_path.write_text(yaml.safe_dump(manifests_policy), encoding="utf-8")
    estimator = estimator_args(values.data)
    if args.dynamic_weight is None:
        args.dynamic_weight = int(values.data["dynamic"]["scoreWeight"])
    prom_values = values.data["prometheus"]
    window = (prometheus_seconds(prom_values["rateWindow"]) or 0.0) + (
        prometheus_seconds(prom_values["windows"]["avg5m"]) or 0.0
    )

    api = new_api_client(ClientOptions(kubeconfig=args.kubeconfig))
    kwok_port = free_port()
    controller = kwok.KwokController(
        args.kwok, args.kubeconfig, args.kwok_stages, workdir, extra_config=documents(), server_port=kwok_port
    )
    prometheus = bprom.LocalPrometheus(
        args.prometheus,
        workdir,
        free_port(),
        [],
        prom_values["scrapeInterval"],
        evaluation_interval=prom_values["evaluationInterval"],
        rules=rules,
    )
    setup = pc.Setup(
        args.kubeconfig,
        workdir,
        args.kube_scheduler,
        prometheus.url,
        str(crane_policy_path),
        estimator,
        dynamic_policy_path=str(
            args.dynamic_policy.resolve() if args.dynamic_policy else manifests_policy_path
        ),
        dynamic_weight=args.dynamic_weight,
    )
    env = prun.Env(api, setup, prometheus, kwok_port, window, say)
    scenarios = {s: model.build(s, args.seed, args.nodes, args.scale) for s in args.scenario_names}
    say(
        f"placement benchmark: {len(scenarios)} scenarios x {args.runs} runs, {args.nodes} nodes per contender; workdir {workdir}"
    )
    runs: list[dict[str, Any]] = []
    controller.start()
    started = time.monotonic()
    try:
        for r in range(args.runs):
            results: dict[str, Any] = {}
            for name, scenario in scenarios.items():
                prun.cleanup(env, args.contender_names)
                for res in prun.run(env, scenario, args.contender_names, f"{name}-{r}"):
                    results.setdefault(name, {})[res.contender] = {
                        "figures": res.figures,
                        "cpu_seconds": res.cpu_seconds,
                        "decisions": res.decisions,
                        "placements": [[p.pod, p.node, p.at] for p in res.placements],
                    }
                say(
                    f"run {r + 1}/{args.runs} {name}: "
                    + ", ".join(f"{c} CV {v['figures']['cv_mean']}" for c, v in results[name].items())
                )
            runs.append(results)
            (workdir / "runs.json").write_text(json.dumps(runs) + "\n", encoding="utf-8")
    finally:
        prun.cleanup(env, args.contender_names)
        controller.stop()
    took = time.monotonic() - started
    about = (
        f"{args.runs} runs of {len(scenarios)} scenarios, {args.nodes} kwok nodes per contender "
        f"({model.NODE_CPU_MILLI // 1000} CPU each), seed {args.seed}, scale {args.scale:g}; "
        f"{took / 60:.0f} minutes on this machine"
    )
    settings = {
        "nodes": args.nodes,
        "runs": args.runs,
        "seed": args.seed,
        "scale": args.scale,
        "contenders": args.contender_names,
        "prometheus": PROMETHEUS_VALUES,
        "syncPeriods": SYNC_PERIODS,
        "estimator": estimator,
        "oursDynamic": {
            "policy": str(args.dynamic_policy) if args.dynamic_policy else "the manifests'",
            "weight": args.dynamic_weight,
        },
        "minutes": round(took / 60, 1),
    }
    paths = report.write(args.out, about, scenarios, runs, settings)
    say(f"report: {paths['md']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
