"""``python -m bench.soak``: see the package doc. Expects the lease method deployed on the cluster
(``hack/soak.sh`` deploys it, with Prometheus, and removes both after)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from bench import kwok
from bench.machine import describe
from bench.soak import churn, plan, report
from bench.soak.binds import ScheduledEvents
from bench.soak.sample import Sampler
from e2e.fit import allocatable
from e2e.watching import PodWatch
from scheduler import logs
from scheduler.cluster.client import ClientOptions, api_request, new_api_client
from scheduler.polling import PollTimeoutError, poll

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results" / "soak"
PROMETHEUS_SELECTOR = "app.kubernetes.io/name=prometheus"
END_WAIT_S = 180.0
"""After the churn stops, how long the pods still Pending get to be bound."""
FAILOVER_WINDOW_S = 120.0
"""After a leader's deletion, the window in which the longest time without a bind is taken."""
logger = logging.getLogger("bench.soak")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    d = plan.Settings()
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--kwok", required=True, help="the kwok binary")
    p.add_argument("--kwok-stages", nargs="+", type=Path, required=True, help="kwok Stage files")
    p.add_argument("--image", default="", help="our image, for the report")
    p.add_argument("--minutes", type=float, default=d.minutes)
    p.add_argument("--pods-per-second", type=float, default=d.pods_per_second)
    p.add_argument("--nodes", type=int, default=d.nodes)
    p.add_argument("--node-every", type=float, default=d.node_every_s, help="seconds between node turns")
    p.add_argument(
        "--leader-every", type=float, default=d.leader_every_s, help="seconds between leader deletions"
    )
    p.add_argument("--warmup", type=float, default=d.warmup_s, help="seconds before the leader's RSS is held")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--workdir", type=Path, default=None)
    return p.parse_args(argv)


def say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


class Soak:
    def __init__(self, args: argparse.Namespace, settings: plan.Settings, workdir: Path) -> None:
        self.args, self.settings, self.workdir = args, settings, workdir
        self.api = new_api_client(ClientOptions(kubeconfig=args.kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.nodes = churn.NodeTurns(self.api, settings.nodes)
        alloc = churn.NODE_ALLOCATABLE
        self.watch = PodWatch(self.core, churn.NAMESPACE)
        hosts = {
            n.metadata.name
            for n in self.core.list_node(label_selector="node-role.kubernetes.io/control-plane").items
        }
        self.events = ScheduledEvents(self.api, churn.NAMESPACE, hosts)
        self.pods = churn.PodChurn(self.api, settings.pods_per_second, settings.pod_life_s, settings.seed)
        self.sampler = Sampler(self.api, alloc, settings.pending_grace_s)
        self.samples: list[dict[str, Any]] = []
        self.disruptions: list[dict[str, Any]] = []
        self.drained = 0
        self.failed_steps: list[dict[str, Any]] = []
        self.pending_at_end: list[str] | None = None
        self.health: Callable[[], None] = lambda: None
        """Raises when what the soak stands on is gone (kwok's process)."""
        self.t0 = 0.0
        self.wall0 = 0.0

    def now(self) -> float:
        return time.monotonic() - self.t0

    def disrupt(self, what: str) -> None:
        at = time.time()
        if what == plan.LEADER:
            leader = self.sampler.leader()
            ours = {r.name for r in self.sampler.replicas()}
            if leader in ours:
                self.core.delete_namespaced_pod(leader, "crane-system")
                detail = f"deleted {leader}"
            else:
                detail = f"skipped: the Lease is held by {leader or 'no one'}, not one of ours"
        elif what == plan.NODES:
            added, removed, drained = self.nodes.turn(
                before_add=lambda name: self.watch.alloc.__setitem__(name, churn.NODE_ALLOCATABLE[:2])
            )
            self.drained += drained
            detail = f"added {added}, removed {removed} with {drained} pods"
        else:
            pods = self.core.list_namespaced_pod("crane-system", label_selector=PROMETHEUS_SELECTOR).items
            for p in pods:
                self.core.delete_namespaced_pod(p.metadata.name, "crane-system")
            detail = f"deleted {', '.join(p.metadata.name for p in pods) or 'nothing (no Prometheus pod)'}"
        self.disruptions.append({"t": round(at - self.wall0, 1), "what": what, "detail": detail})
        say(f"{self.now() / 60:5.1f} min: {what}: {detail}")

    def sample(self) -> None:
        s = self.sampler.take(self.now(), self.watch.ours(), self.nodes.names())
        self.samples.append(s)
        with open(self.workdir / "samples.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(s) + "\n")
        lead = s["replicas"].get(s["leader"], {})
        rss = lead.get("rss_mib")
        say(
            f"{s['t'] / 60:5.1f} min: leader {s['leader']}"
            + (f" RSS {rss:.0f} MiB" if rss is not None else "")
            + f", queues {s['queues']}, {s['pending']} Pending, {len(s['pending_with_room'])} of them with room"
        )

    def guarded(self, what: str, step: Callable[[], None]) -> None:
        """A step that fails (the API server or a node not answering) is logged and counted; the
        soak goes on."""
        try:
            step()
        except Exception as e:  # noqa: BLE001 - any failure of one step
            self.failed_steps.append(
                {"t": round(time.time() - self.wall0, 1), "what": what, "error": str(e)[:300]}
            )
            logger.warning("soak step failed what=%s err=%s", what, str(e)[:300])

    def run(self) -> None:
        s = self.settings
        kwok.ensure_nodes(self.api, s.nodes, progress=say)
        ensure_namespace(self.api)
        self.watch.alloc = allocatable(self.core)  # every node's, kind's too (our replicas run there)
        todo = plan.disruptions(s)
        with self.watch:
            self.events.start()
            self.t0, self.wall0 = time.monotonic(), time.time()
            self.pods.start()
            next_sample = 0.0
            while self.now() < s.seconds:
                self.health()
                if todo and todo[0][0] <= self.now():
                    what = todo.pop(0)[1]
                    self.guarded(what, functools.partial(self.disrupt, what))
                    continue
                if next_sample <= self.now():
                    self.guarded("sample", self.sample)
                    next_sample += s.sample_every_s
                    continue
                wake = min(next_sample, todo[0][0] if todo else s.seconds, s.seconds)
                time.sleep(max(0.0, min(wake - self.now(), 5.0)))
                if self.watch.errors and len(self.watch.errors) % 10 == 0:
                    logger.warning(
                        "pod watch errors=%d last=%s", len(self.watch.errors), self.watch.errors[-1]
                    )
            self.pods.stop()
            say(f"churn stopped after {self.now() / 60:.1f} min; waiting for the pods still Pending")
            with contextlib.suppress(PollTimeoutError):
                poll(lambda: not self.watch.unbound_live(), END_WAIT_S, "every soak pod bound", interval=2)
            self.guarded("sample", self.sample)
            self.pending_at_end = self.watch.unbound_live()
            bound = {r.uid for r in self.watch.records() if r.nodes}
            with contextlib.suppress(PollTimeoutError):
                poll(lambda: bound <= self.events.per_pod().keys(), 60, "a Scheduled event per bound pod", 2)
            self.events.stop()

    def document(self, machine: dict[str, Any]) -> dict[str, Any]:
        recs = self.watch.records()
        per_pod = self.events.per_pod()
        bound = [r for r in recs if r.nodes]
        ks = self.events.by_kube_scheduler()
        binds = sorted(r.bound_seen for r in bound if r.bound_seen)
        failovers = [
            {"t": d["t"], "gap_s": report.longest_gap(binds, self.wall0 + d["t"], FAILOVER_WINDOW_S)}
            for d in self.disruptions
            if d["what"] == plan.LEADER and d["detail"].startswith("deleted")
        ]
        restarts: dict[str, int] = {}
        for s in self.samples:
            for name, r in s["replicas"].items():
                restarts[name] = max(restarts.get(name, 0), r["restarts"])
        doc: dict[str, Any] = {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.wall0)),
            "minutes": round(self.samples[-1]["t"] / 60 if self.samples else 0.0, 1),
            "image": self.args.image,
            "machine": machine,
            "settings": asdict(self.settings),
            "pods": {
                "created": self.pods.stats.created,
                "create_failed": self.pods.stats.create_failed,
                "deleted": self.pods.stats.deleted,
                "drained": self.drained,
                "bound": len(bound),
                "by_kube_scheduler": len(ks),
                "bound_twice": sorted(r.name for r in recs if len(r.nodes) > 1),
                "reported_twice": sorted(r.name for r in bound if per_pod.get(r.uid, 0) > 1),
                "unreported": sum(1 for r in bound if r.uid not in per_pod),
                "overcommits": self.watch.overcommits[:50],
                "pending_at_end": self.watch.unbound_live()
                if self.pending_at_end is None
                else self.pending_at_end,
                "watch_errors": len(self.watch.errors),
                "event_watch_errors": self.events.errors,
            },
            "interrupted": self.pending_at_end is None,
            "failed_steps": self.failed_steps,
            "restarts": sum(restarts.values()),
            "rss": report.rss_growth(self.samples, self.settings.warmup_s),
            "failovers": failovers,
            "disruptions": self.disruptions,
            "samples": self.samples,
        }
        doc["goals"] = report.goals(doc)
        return doc


def ensure_namespace(api: client.ApiClient) -> None:
    try:
        api_request(api, "POST", "/api/v1/namespaces", body={"metadata": {"name": churn.NAMESPACE}})
    except ApiException as e:
        if e.status != 409:
            raise


def clean_up(api: client.ApiClient) -> None:
    """The soak's namespace and kwok nodes."""
    try:
        api_request(api, "DELETE", f"/api/v1/namespaces/{churn.NAMESPACE}")
    except ApiException as e:
        if e.status != 404:
            raise
    kwok.delete_nodes(api)
    kwok.release_leases(api)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.setup(warnings_only=True)
    try:
        settings = plan.Settings(
            minutes=args.minutes,
            pods_per_second=args.pods_per_second,
            nodes=args.nodes,
            node_every_s=args.node_every,
            leader_every_s=args.leader_every,
            warmup_s=args.warmup,
            seed=args.seed,
        )
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    workdir = args.workdir or REPO / "_artifacts" / "soak" / time.strftime("%Y%m%dT%H%M%S")
    workdir.mkdir(parents=True, exist_ok=True)
    machine = describe("", {})
    controller = kwok.KwokController(args.kwok, args.kubeconfig, args.kwok_stages, workdir)
    controller.start()
    soak = Soak(args, settings, workdir)
    soak.health = controller.check
    say(f"soak: {settings.minutes:g} minutes, {settings.nodes} kwok nodes, workdir {workdir}")
    try:
        soak.run()
    except KeyboardInterrupt:
        say("interrupted: the report covers what ran")
        soak.events.stop()
    finally:
        soak.pods.stop()
        clean_up(soak.api)
        controller.stop()
    doc = soak.document(machine)
    paths = report.write(doc, args.out)
    for g in doc["goals"]:
        say(f"{'met   ' if g['met'] else 'MISSED'} {g['goal']}: {g['figure']} {g.get('unit', '')}")
    say(f"report: {paths['md']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
