"""``python -m bench``: run the benchmark (``make bench`` passes the tools and the cluster)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from bench import churn, dra, kwok, load, machine, population, prom, report, resume
from bench import contenders as ct
from bench import workloads as wl
from bench.procstat import sample
from scheduler import logs
from scheduler.cluster.client import ClientOptions, api_request, new_api_client
from scheduler.deploy.values import load_values

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"  # where a finished benchmark's report goes
logger = logging.getLogger("bench")

STREAM, BACKLOG = report.STREAM, report.BACKLOG
MODES = (STREAM, BACKLOG)


class Progress:
    """One status line, rewritten in place on a terminal, else printed every few seconds."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self._last = 0.0
        self._open = False

    def status(self, text: str, force: bool = False) -> None:
        now = time.monotonic()
        if self.tty:
            sys.stderr.write("\r\033[K" + text)
            sys.stderr.flush()
            self._open = True
        elif force or now - self._last >= 5:
            print(text, file=sys.stderr, flush=True)
            self._last = now

    def say(self, text: str) -> None:
        if self._open:
            sys.stderr.write("\n")
            self._open = False
        print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--kubeconfig", default="")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods", type=int, default=5000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument(
        "--contenders",
        default="",
        help=f"comma-separated, from: {', '.join(c.name for c in ct.ALL)} (default: {', '.join(ct.DEFAULT)})",
    )
    p.add_argument(
        "--workloads",
        default=",".join(w.name for w in wl.ALL),
        help=f"comma-separated, from: {', '.join(w.name for w in wl.ALL)} (default: all)",
    )
    p.add_argument(
        "--modes",
        default=",".join(MODES),
        help="comma-separated: stream (pods created while the contender runs), backlog (all pods "
        "Pending before it starts; how fast it drains them) (default: both)",
    )
    p.add_argument("--kwok", default="", help="the kwok binary")
    p.add_argument("--kwok-stages", nargs="+", type=Path, default=[], help="kwok Stage files")
    p.add_argument("--kube-scheduler", default="", help="the kube-scheduler binary")
    p.add_argument("--rawbinder", default="", help="the rawbinder binary")
    p.add_argument("--prometheus", default=shutil.which("prometheus") or "/usr/bin/prometheus")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"where latest.{{json,md,png}} go (default {RESULTS.relative_to(REPO)})",
    )
    p.add_argument(
        "--workdir", type=Path, default=None, help="logs and per-pod data (default _artifacts/bench/<time>)"
    )
    p.add_argument(
        "--resume",
        type=Path,
        default=None,
        metavar="WORKDIR",
        help="go on with the interrupted benchmark of this workdir: the cases it finished are kept, "
        "the rest run (same settings and the same commit of our scheduler required)",
    )
    p.add_argument(
        "--report-from",
        type=Path,
        default=None,
        metavar="WORKDIR",
        help="run nothing: write the report of this workdir's benchmark, finished or not (an "
        "unfinished one goes to the workdir unless --out is given)",
    )
    p.add_argument(
        "--resident-per-node",
        type=int,
        default=0,
        help="pods created bound and running on each kwok node before the runs, shaped like a "
        "cluster's workloads (bench.population; make bench-scale: 30)",
    )
    p.add_argument("--create-workers", type=int, default=32, help="threads creating pods")
    p.add_argument(
        "--stall-timeout",
        type=float,
        default=120,
        help="end a run when no pod was bound for this many seconds since the last bind",
    )
    p.add_argument(
        "--first-bind-timeout",
        type=float,
        default=600,
        help="end a run when no pod was bound this many seconds after the start (a scheduler may "
        "preempt for a whole backlog before its first bind)",
    )
    p.add_argument("--settle", type=float, default=5, help="seconds of rest between runs")
    p.add_argument(
        "--settle-load",
        type=float,
        default=None,
        help="before each contender starts (its backlog created), wait until the machine's "
        "1-minute load average is at most this, for up to --settle-max seconds",
    )
    p.add_argument("--settle-max", type=float, default=600, help="the longest wait of --settle-load")
    p.add_argument(
        "--events-timeout",
        type=float,
        default=60,
        help="after the last bind, how long to wait for the contender's Scheduled events",
    )
    p.add_argument(
        "--keep-nodes", action="store_true", help="leave the kwok nodes (and kwok's leases) in place"
    )
    p.add_argument(
        "--py-spy", default="", help="profile our contenders with this py-spy (raw stacks in the workdir)"
    )
    p.add_argument(
        "--ours-source",
        type=Path,
        default=REPO,
        help="the checkout whose scheduler package the ours-* contenders run (default: this one)",
    )
    p.add_argument(
        "--ours-args",
        default="",
        help="more flags for our scheduler's processes, e.g. '-v=4' (split at spaces)",
    )
    p.add_argument("--note", default="", help="a sentence for the report (e.g. what else ran on the machine)")
    ns = p.parse_args(argv)
    if ns.report_from is not None:
        if not ns.report_from.is_dir():
            p.error(f"--report-from {ns.report_from}: no such directory")
        return ns
    for flag, value in (
        ("--kubeconfig", ns.kubeconfig),
        ("--kwok", ns.kwok),
        ("--kwok-stages", ns.kwok_stages),
    ):
        if not value:
            p.error(f"{flag} is required (make bench passes it)")
    names = [n.strip() for n in ns.contenders.split(",") if n.strip()] or list(ct.DEFAULT)
    unknown = [n for n in names if n not in ct.BY_NAME]
    if unknown:
        p.error(f"unknown contender(s) {', '.join(unknown)}; expected some of {', '.join(ct.BY_NAME)}")
    ns.contender_names = names
    ns.workload_names = [w.strip() for w in ns.workloads.split(",") if w.strip()]
    if not ns.workload_names or [w for w in ns.workload_names if w not in wl.BY_NAME]:
        p.error(f"--workloads: expected some of {', '.join(wl.BY_NAME)}, got {ns.workloads!r}")
    ns.mode_names = [m.strip() for m in ns.modes.split(",") if m.strip()]
    if not ns.mode_names or [m for m in ns.mode_names if m not in MODES]:
        p.error(f"--modes: expected some of {', '.join(MODES)}, got {ns.modes!r}")
    if ns.resume is not None:
        if ns.workdir is not None and ns.workdir.resolve() != ns.resume.resolve():
            p.error("--resume names the workdir; leave out --workdir or give the same one")
        if not ns.resume.is_dir():
            p.error(f"--resume {ns.resume}: no such directory")
        ns.workdir = ns.resume
    if ns.runs < 1 or ns.nodes < 1 or ns.pods < 1:
        p.error("--runs, --nodes and --pods must be positive")
    if ns.settle_load is not None and ns.settle_load <= 0:
        p.error(f"--settle-load: expected a load average above 0, got {ns.settle_load:g}")
    if ns.settle_max < 0:
        p.error(f"--settle-max: expected seconds, 0 or more, got {ns.settle_max:g}")
    if not 0 <= ns.resident_per_node <= int(kwok.NODE_PODS) // 2:
        p.error(f"--resident-per-node: expected 0 to {int(kwok.NODE_PODS) // 2}, got {ns.resident_per_node}")
    if ns.resident_per_node and "preemption" in ns.workload_names:
        # Its preemptors would evict resident pods, whose deletion kwok leaves to whoever
        # writes their status (bench.kwok.UNMANAGED_LABEL): they would stay Terminating.
        p.error("--resident-per-node: not with the preemption workload (it would evict resident pods)")
    kinds = {ct.BY_NAME[n].kind for n in names}
    if "kube-scheduler" in kinds and not ns.kube_scheduler:
        p.error("--kube-scheduler is required for the kube-scheduler contenders")
    if "raw" in kinds and not ns.rawbinder:
        p.error("--rawbinder is required for the raw-binder contender")
    return ns


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.progress = Progress()
        stamp = time.strftime("%Y%m%dT%H%M%S")
        self.workdir: Path = args.workdir or REPO / "_artifacts" / "bench" / stamp
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.api = new_api_client(
            ClientOptions(kubeconfig=args.kubeconfig, qps=5000, burst=5000, pool_maxsize=40)
        )
        self.contenders = [ct.BY_NAME[n] for n in args.contender_names]
        self.kwok = kwok.KwokController(args.kwok, args.kubeconfig, args.kwok_stages, self.workdir)
        self.exporter: prom.LoadExporter | None = None
        self.prometheus: prom.LocalPrometheus | None = None

    # --- setup -----------------------------------------------------------------------------

    def setup(self) -> ct.Setup:
        say = self.progress.say
        say(f"workdir {self.workdir}")
        if gone := load.wait_namespaces_deleted(self.api, progress=self.progress.status):
            say(f"{gone} namespaces of an earlier run deleted")
        if released := kwok.release_leases(self.api):
            say(f"released the Leases of {released} kwok nodes left by an earlier run")
        self.kwok.start()
        say(f"kwok controller running (log {self.kwok.log_path})")
        took = kwok.ensure_nodes(self.api, self.args.nodes, progress=self.progress.status)
        say(f"{self.args.nodes} kwok nodes Ready ({took:.0f}s)")
        kwok.wait_daemonsets(self.api, progress=self.progress.status)
        if on_kwok := kwok.daemonset_pods(self.api):
            logger.warning(
                "%d DaemonSet pods run on the kwok nodes (DaemonSets that select every node): "
                "their writes load the API server during the runs",
                on_kwok,
            )
        else:
            say("no DaemonSet pods on the kwok nodes")
        if self.args.resident_per_node:
            self._populate()
        setup = ct.Setup(
            kubeconfig=self.args.kubeconfig,
            workdir=self.workdir,
            kube_scheduler=self.args.kube_scheduler,
            rawbinder=self.args.rawbinder,
            ours_source=self.args.ours_source,
            ours_args=tuple(self.args.ours_args.split()),
        )
        if any(wl.BY_NAME[w].dynamic for w in self.args.workload_names) and any(
            c.kind == "ours" for c in self.contenders
        ):
            setup = self._setup_prometheus(setup)
        load.ensure_priority_classes(self.api, wl.PRIORITY_CLASSES)
        if self._devices:
            dra.ensure_devices(self.api, self.args.nodes)
            say(f"{self.args.nodes} kwok nodes publish {dra.DEVICES_PER_NODE} devices each")
        if left := churn.clean_up(self.api):
            say(f"deleted {left} churn nodes of an earlier run")
        for c in self.contenders:
            load.ensure_namespace(self.api, c.namespace)
            load.delete_pods(self.api, c.namespace)
            if self._devices:
                dra.clear_claims(self.api, c.namespace, progress=self.progress.status)
                dra.ensure_template(self.api, c.namespace)
        return setup

    @property
    def _devices(self) -> bool:
        return any(wl.BY_NAME[w].devices for w in self.args.workload_names)

    @property
    def _population(self) -> population.Population:
        return population.Population(self.args.nodes, self.args.resident_per_node)

    def _populate(self) -> None:
        """The resident pods (``bench.population``), created bound and Running before the runs."""
        say, pop = self.progress.say, self._population
        for ns in pop.namespace_names():
            load.ensure_namespace(self.api, ns)
        done = population.populate(
            self.api, pop, workers=self.args.create_workers, progress=self.progress.status
        )
        if done.failed:
            raise RuntimeError(
                f"{done.failed} of {pop.pods} resident pods could not be created or started; first: {'; '.join(done.errors)}"
            )
        say(
            f"{pop.pods} resident pods Running ({done.created} created in {done.seconds:.0f}s, {done.existed} there "
            f"already) in {len(pop.namespace_names())} namespaces"
        )

    def _setup_prometheus(self, setup: ct.Setup) -> ct.Setup:
        values = load_values(REPO / "manifests" / "values.yaml").data["dynamic"]
        policy = values["policy"]
        policy_path = self.workdir / "policy.yaml"
        policy_path.write_text(yaml.safe_dump(policy), encoding="utf-8")
        metrics = sorted({e["name"] for e in policy["spec"]["syncPolicy"]})
        nodes = [kwok.node_name(i) for i in range(self.args.nodes)]
        self.exporter = prom.LoadExporter(metrics, nodes, ct.free_port())
        self.exporter.start()
        self.prometheus = prom.LocalPrometheus(
            self.args.prometheus, self.workdir, ct.free_port(), prom.exporter_scrape(self.exporter.port)
        )
        self.prometheus.start()
        self.prometheus.wait_series(metrics, len(nodes), progress=self.progress.status)
        self.progress.say(
            f"Prometheus at {self.prometheus.url} has {len(metrics)} load metrics of {len(nodes)} nodes"
        )
        return dataclasses.replace(
            setup,
            prometheus_url=self.prometheus.url,
            policy_path=str(policy_path),
            dynamic_weight=int(values["scoreWeight"]),
        )

    def teardown(self) -> None:
        say = self.progress.say
        for c in self.contenders:
            try:
                load.delete_pods(self.api, c.namespace)
                load.delete_namespace(self.api, c.namespace)
            except Exception as e:  # noqa: BLE001 - best effort, say what is left
                say(f"warning: cleaning up namespace {c.namespace} failed: {e}")
        if self._devices:
            try:
                say(f"deleted {dra.delete_devices(self.api)} ResourceSlices of the bench")
            except Exception as e:  # noqa: BLE001
                say(f"warning: deleting the bench's ResourceSlices failed: {e}")
        if self.prometheus is not None:
            self.prometheus.stop()
        if self.exporter is not None:
            self.exporter.stop()
        if not self.args.keep_nodes:
            try:
                n = kwok.delete_nodes(self.api)
                say(f"deleted {n} kwok nodes")
            except Exception as e:  # noqa: BLE001
                say(f"warning: deleting the kwok nodes failed: {e}")
            if self.args.resident_per_node:
                # Deleted here, grace 0: left to the pod garbage collector (once their nodes are
                # gone) and the namespace controller, they went at about 5 pods/s.
                say(f"deleting the {self._population.pods} resident pods")
                names = self._population.namespace_names()
                for i, ns in enumerate(names):
                    # About 20 s a namespace of 1000 pods at 5000 nodes: 50 minutes in all.
                    self.progress.status(f"deleting the resident pods: {i}/{len(names)} namespaces gone")
                    try:
                        load.delete_pods(self.api, ns)
                        load.delete_namespace(self.api, ns)
                    except Exception as e:  # noqa: BLE001 - best effort, say what is left
                        say(f"warning: deleting namespace {ns} failed: {e}")
                say(f"deleted the resident pods and their {len(names)} namespaces")
        self.kwok.stop()

    # --- one run ------------------------------------------------------------------------------

    def _settle(self, tag: str) -> dict[str, Any] | None:
        """With --settle-load: wait for the machine to calm down before a contender starts, so
        that none starts while the API server is still busy with what came before (the
        resident population, the backlog's creation, the last contender's deletions)."""
        a = self.args
        if a.settle_load is None:
            return None
        waited, reached = machine.wait_for_load(a.settle_load, a.settle_max, progress=self.progress.status)
        load = machine.load_average()
        now = load[0] if load else None
        if reached:
            self.progress.say(f"run {tag}: the machine settled in {waited:.0f}s (load {now})")
        else:
            self.progress.say(
                f"run {tag}: the load is still {now} after {waited:.0f}s (--settle-load {a.settle_load:g}); starting"
            )
        return {"below": a.settle_load, "waited_s": round(waited, 1), "reached": reached}

    def run_one(
        self, c: ct.Contender, run: int, setup: ct.Setup, workload: wl.Workload, mode: str
    ) -> dict[str, Any]:
        """One run of ``c`` on ``workload``'s pods. stream: the measured pods are created while
        it runs, from ``t0``; backlog: all are created (Pending) first, and ``t0`` is when it is
        started. Pods the workload binds before the run are created (and Running) first."""
        a = self.args
        tag = f"{run}/{a.runs} {c.name} ({workload.name}, {mode})"
        case = f"{workload.name}-{mode}"
        load.delete_pods(self.api, c.namespace)
        if self._devices:
            dra.clear_claims(self.api, c.namespace, progress=self.progress.status)
            waited = dra.wait_for_controller(self.api, c.namespace, progress=self.progress.status)
            self.progress.say(f"the resourceclaim controller caught up ({waited:.0f}s)")
        kwok.wait_ready(self.api, a.nodes, timeout=300, progress=self.progress.status)
        shape = wl.Shape(a.nodes, a.pods, prefix=f"r{run}-{case}")
        count = workload.measured(shape)
        if workload.prefill(shape):
            self._prefill(c, workload, shape, tag)
        observer = load.Observer(a.kubeconfig, c.namespace, wl.MEASURED, f"{shape.prefix}-")
        creator = load.Creator(
            a.kubeconfig,
            c.namespace,
            lambda i: workload.pod(i, c.scheduler_name, shape),
            count,
            a.create_workers,
        )
        churner = (
            churn.Churner(a.kubeconfig, c.namespace, c.scheduler_name, shape.prefix)
            if workload.churn
            else None
        )
        if mode == BACKLOG:
            observer.start()
            self._create_backlog(creator, tag)
        settled = self._settle(tag)
        load_at_start = machine.load_average()
        t0 = time.time()
        running = ct.start(c, setup, f"run{run}-{case}", dynamic=workload.dynamic)
        profiler: subprocess.Popen[bytes] | None = None
        wall_limit_hit = False
        churned: churn.ChurnStats | None = None
        try:
            running.wait_ready()
            if mode == STREAM:
                observer.start()
            if a.py_spy and c.kind == "ours":
                profiler = subprocess.Popen(
                    [
                        a.py_spy,
                        "record",
                        "--pid",
                        str(running.pid),
                        "--rate",
                        "100",
                        "--format",
                        "raw",
                        "--output",
                        str(self.workdir / f"{c.name}-run{run}-{case}.pyspy.txt"),
                        "--nonblocking",
                        # Only threads holding the GIL: CPU in Python, not a wait in libcurl.
                        "--gil",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            before = sample(running.pid)
            if mode == STREAM:
                t0 = time.time()
                creator.start()
            if churner is not None:
                churner.start()
            last_bound, last_change = 0, time.monotonic()
            last_rate_t, last_rate_b = time.monotonic(), 0
            rate = 0.0
            while True:
                bound = observer.bound
                now = time.monotonic()
                if bound != last_bound:
                    last_bound, last_change = bound, now
                if bound >= count:
                    break
                limit = a.stall_timeout if bound else a.first_bind_timeout
                if now - last_change > limit and creator.done():
                    wall_limit_hit = True
                    self.progress.say(
                        f"run {tag}: no bind for {limit:.0f}s; ending the run with {bound}/{count} bound"
                    )
                    break
                running.check()
                self.kwok.check()
                if now - last_rate_t >= 1:
                    rate = (bound - last_rate_b) / (now - last_rate_t)
                    last_rate_t, last_rate_b = now, bound
                st = creator.stats
                crate = st.created / max(1e-3, (st.finished_at or time.time()) - st.started_at)
                self.progress.status(
                    f"run {tag}: created {st.created}/{count} ({crate:.0f}/s), "
                    f"bound {bound} ({rate:.0f}/s), {time.time() - t0:.0f}s"
                )
                # The tick of the status line and the checks (the loop ends on the last bind, or a stall).
                time.sleep(0.2)
            events_lag = self._wait_events(c, observer, tag) if c.kind != "raw" or c.events else None
            after = sample(running.pid)
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
            if churner is not None:
                churned = churner.stop()
            watch = observer.stop()
            creator.join(120)
        finally:
            if churner is not None:
                churner.stop()
            code = running.stop()
            if profiler is not None:
                try:
                    profiler.wait(30)
                except subprocess.TimeoutExpired:
                    profiler.kill()
        server = load.server_times(self.api, c.namespace, wl.MEASURED)
        events = load.scheduled_events(self.api, c.namespace, t0, prefix=f"{shape.prefix}-")
        self._save_raw(c, run, case, t0, watch, server)
        st = creator.stats
        rss_ready = before.rss_bytes if before is not None else None
        if mode == BACKLOG and after is not None:
            before = None  # the whole process is the run: its start lists the backlog
        fig = report.run_figures(
            contender=c.name,
            run=run,
            workload=workload.name,
            mode=mode,
            pods=count,
            create={"created": st.created, "failed": st.failed, "rate": st.rate},
            watch=watch,
            server=server,
            cpu_window=(after.cpu_seconds - before.cpu_seconds) if after and before else None,
            cpu_total=after.cpu_seconds if after else None,
            peak_rss=after.hwm_bytes if after else None,
            rss_ready=rss_ready,
            t0=t0,
            wall_limit_hit=wall_limit_hit,
        )
        fig["exit_code"] = code
        fig["load_1m_at_start"] = load_at_start[0] if load_at_start else None
        if settled is not None:
            fig["settle"] = settled
        fig["scheduled_events"] = events
        fig["events_lag_s"] = events_lag
        if churned is not None:
            fig["churn"] = dataclasses.asdict(churned)
        if st.errors:
            fig["create_errors"] = st.errors
        lw = fig["latency_watch_s"]
        timing = (
            f"drained {fig['last_bind_after_s']}s after the start (first bind {fig['first_bind_after_s']}s)"
            if mode == BACKLOG
            else f"latency p50/p99 {lw['p50']}/{lw['p99']}s (watch)"
        )
        self.progress.say(
            f"run {tag}: {fig['bound_watch']}/{count} bound, {fig['pods_per_s']} pods/s, "
            f"{timing}, CPU {fig['cpu_s']}s, peak RSS {fig['peak_rss_mib']} MiB; "
            f"created at {fig['create_rate']}/s; {events} Scheduled events"
            + (f"; churn: {churned.created} created, {churned.failed} failed" if churned else "")
        )
        return fig

    def _wait_events(self, c: ct.Contender, observer: load.Observer, tag: str) -> float | None:
        """Until the contender has written a ``Scheduled`` event for every pod it bound (or
        ``--events-timeout`` passed): its CPU then includes them, and stopping it drops none.
        The seconds from the last bind to the last event (None when some never came)."""
        start = time.monotonic()
        bound = observer.bound
        while observer.events < bound:
            waited = time.monotonic() - start
            if waited > self.args.events_timeout:
                self.progress.say(
                    f"run {tag}: {observer.events} of {bound} Scheduled events after "
                    f"{self.args.events_timeout:.0f}s; stopping it"
                )
                return None
            self.progress.status(f"run {tag}: all bound; Scheduled events {observer.events}/{bound}")
            time.sleep(0.2)  # the tick of the status line
        return round(time.monotonic() - start, 2)

    def _prefill(self, c: ct.Contender, workload: wl.Workload, shape: wl.Shape, tag: str) -> None:
        """Create the pods the workload binds before the run, and wait until kwok runs them."""
        n = workload.prefill(shape)
        creator = load.Creator(
            self.args.kubeconfig,
            c.namespace,
            lambda j: workload.prefill_pod(j, shape),
            n,
            self.args.create_workers,
        )
        creator.start()
        while not creator.done():
            self.progress.status(f"run {tag}: binding {creator.stats.created}/{n} pods before the run")
            creator.join(0.5)  # the tick of the status line
        if creator.stats.failed:
            raise RuntimeError(
                f"run {tag}: {creator.stats.failed} of {n} pods to bind before the run failed: "
                f"{'; '.join(creator.stats.errors)}"
            )
        load.wait_running(self.api, c.namespace, wl.PREFILLED, n, progress=self.progress.status)
        self.progress.say(f"run {tag}: {n} pods bound and Running before the run")

    def _create_backlog(self, creator: load.Creator, tag: str) -> None:
        """Create every pod with no contender running; return once all are created."""
        creator.start()
        while not creator.done():
            st = creator.stats
            self.progress.status(f"run {tag}: creating the backlog, {st.created}/{creator.count} Pending")
            creator.join(0.5)  # the tick of the status line
        st = creator.stats
        self.progress.say(
            f"run {tag}: {st.created} pods Pending ({st.failed} failed) at {st.rate:.0f}/s; starting it"
        )

    def _save_raw(
        self,
        c: ct.Contender,
        run: int,
        case: str,
        t0: float,
        watch: load.WatchTimes,
        server: load.ServerTimes,
    ) -> None:
        raw = {
            "case": case,
            "t0": t0,
            "seen": watch.seen,
            "bound": watch.bound,
            "created": server.created,
            "scheduled": server.scheduled,
            "nodes": server.nodes,
        }
        (self.workdir / f"{c.name}-run{run}-{case}.pods.json").write_text(json.dumps(raw), encoding="utf-8")

    # --- all --------------------------------------------------------------------------------

    def _journal(self, desc: dict[str, Any]) -> resume.Journal:
        a = self.args
        settings = {
            "nodes": a.nodes,
            "pods": a.pods,
            "runs": a.runs,
            "contenders": a.contender_names,
            "workloads": a.workload_names,
            "modes": a.mode_names,
        }
        if a.resident_per_node:
            settings["resident_per_node"] = a.resident_per_node
        code = resume.code_version(a.ours_source)
        if a.resume is None:
            return resume.Journal.begin(self.workdir, settings, code, desc)
        j = resume.Journal.resume(self.workdir, settings, code, desc)
        self.progress.say(
            f"resuming the benchmark started {j.started}: {len(j.runs)} contender runs kept, "
            f"{j.duration_s / 60:.0f} min run so far"
        )
        return j

    def run(self) -> int:
        a = self.args
        version = api_request(self.api, "GET", "/version")
        tools = {"kwok": [a.kwok, "--version"]}
        if a.kube_scheduler:
            tools["kube_scheduler"] = [a.kube_scheduler, "--version"]
        tools["prometheus"] = [a.prometheus, "--version"]
        desc = machine.describe(version.get("gitVersion", ""), tools)
        try:
            journal = self._journal(desc)
        except resume.ResumeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        self.progress.say(
            f"{a.nodes} nodes, {a.pods} pods, {a.runs} run(s) of {', '.join(c.name for c in self.contenders)}; "
            f"workloads {', '.join(a.workload_names)}; modes {', '.join(a.mode_names)}"
        )
        try:
            setup = self.setup()
            # A workload's runs one after another: its table is taken over one stretch of time
            # (and one part, mostly, of a benchmark interrupted and resumed).
            for w in a.workload_names:
                workload = wl.BY_NAME[w]
                for run in range(1, a.runs + 1):
                    these = case_contenders(workload, run, self.contenders)
                    for mode in a.mode_names:
                        case = (run, w, mode)
                        if journal.complete(case, [c.name for c in these]):
                            self.progress.say(f"run {run}/{a.runs} ({w}, {mode}): kept from before")
                            continue
                        journal.discard(case)
                        for c in these:
                            journal.record(self.run_one(c, run, setup, workload, mode))
                            # Its pods go once its figures are kept: a stop meanwhile loses none.
                            took = load.delete_pods(self.api, c.namespace)
                            logger.debug("deleted pods in %.1fs", took)
                            # Rest on purpose (--settle): the API server and etcd finish with the last
                            # run (its deleted pods, the controllers' and kwok's follow-up writes)
                            # before the next starts.
                            time.sleep(a.settle)
        except BaseException:
            self.progress.say(
                f"the benchmark stopped; to go on where it stopped, run it again with the same "
                f"settings and BENCH_ARGS='--resume {self.workdir}'"
            )
            raise
        finally:
            self.teardown()
            journal.save()
        doc = document(journal, a, load_average_at_end=machine.load_average())
        paths = report.write(doc, a.out or RESULTS)
        print(report.markdown(doc))
        self.progress.say(
            f"wrote {', '.join(str(p) for p in paths.values())} (logs and per-pod data: {self.workdir})"
        )
        return 0


def case_contenders(workload: wl.Workload, run: int, contenders: list[ct.Contender]) -> list[ct.Contender]:
    """The contenders of one run of ``workload``, in the order they run: alternated from run to
    run, so no contender always runs right after the same one; the raw binders only where the
    workload has them."""
    order = contenders if run % 2 else list(reversed(contenders))
    return [c for c in order if workload.raw or c.kind != "raw"]


def missing_cases(journal: resume.Journal) -> list[str]:
    """The cases of the journal's settings that have not run whole, as "run N workload mode"."""
    st = journal.settings
    contenders = [ct.BY_NAME[n] for n in st["contenders"]]
    out = []
    for w in st["workloads"]:
        for run in range(1, st["runs"] + 1):
            names = [c.name for c in case_contenders(wl.BY_NAME[w], run, contenders)]
            out += [f"run {run} {w} {m}" for m in st["modes"] if not journal.complete((run, w, m), names)]
    return out


def document(
    journal: resume.Journal, a: argparse.Namespace, load_average_at_end: Any = None
) -> dict[str, Any]:
    """The report of the journal's benchmark (``bench.report``'s input): its settings, figures,
    parts, and the cases it is missing, if any."""
    st = journal.settings
    names = list(st["contenders"])
    case_list = report.cases(
        journal.runs,
        names,
        st["workloads"],
        st["modes"],
        st["nodes"],
        st["pods"],
        st["nodes"] * st.get("resident_per_node", 0),
    )
    return {
        "started": journal.started,
        "duration_s": journal.duration_s,
        "parts": journal.parts,
        "ours_code": journal.code,
        "config": {
            "nodes": st["nodes"],
            "pods": st["pods"],
            "resident_pods": st["nodes"] * st.get("resident_per_node", 0),
            "runs": st["runs"],
            "workloads": {w: wl.BY_NAME[w].describe for w in st["workloads"]},
            "modes": st["modes"],
            "contenders": names,
            "pod_requests": {"cpu": wl.POD_CPU, "memory": wl.POD_MEMORY},
            "zones": kwok.ZONES,
            "node_allocatable": {
                "cpu": kwok.NODE_CPU,
                "memory": kwok.NODE_MEMORY,
                "pods": kwok.NODE_PODS,
            },
            "create_workers": a.create_workers,
            "contenders_described": {n: ct.BY_NAME[n].describe() for n in names},
        },
        "machine": journal.machine,
        "load_average_at_end": load_average_at_end,
        "note": a.note,
        "missing_cases": missing_cases(journal),
        "goals": report.all_goals(case_list),
        "cases": case_list,
        "runs": journal.runs,
    }


def report_from(a: argparse.Namespace) -> int:
    """``--report-from``: the report of a workdir's journal, with no cluster."""
    try:
        journal = resume.Journal.read(a.report_from, "--report-from")
    except resume.ResumeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    doc = document(journal, a)
    missing = doc["missing_cases"]
    out = a.out or (a.report_from if missing else RESULTS)
    paths = report.write(doc, out)
    print(report.markdown(doc))
    print(
        f"wrote {', '.join(str(p) for p in paths.values())}"
        + (f" ({len(missing)} cases not run yet: an unfinished benchmark)" if missing else ""),
        file=sys.stderr,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report_from is not None:
        return report_from(args)
    # SIGTERM (make interrupted, a CI timeout) cleans up as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    logs.setup(warnings_only=True)
    try:
        return Bench(args).run()
    except KeyboardInterrupt:
        return 130  # what it left is cleaned up, and the way to go on said, by Bench.run


if __name__ == "__main__":
    sys.exit(main())
