"""``dynamic-scheduler deploy lease|static|prometheus|shadow``: render, apply all-or-nothing, wait, report.

- **lease**: apply the Deployment and its RBAC, wait for the rollout, then for
  the takeover: by default the scheduler's own ``--leader-elect-takeover``
  (values ``takeover: true``) takes ``kube-system/kube-scheduler``; the command
  waits until the Lease names one of our pods, then (unless ``--return-at-lease``,
  here and for static) until that pod schedules: its first renew after the safe wait writes the
  annotation ``dynamic-scheduler.io/leading-since``. From then on kube-scheduler
  has stopped, so a pod created after the command returns is bound by ours. ``--method=seed`` is the field
  note's procedure, for comparison: the scheduler runs without takeover and the
  command deletes kube-scheduler's pod and the Lease, optionally again every
  ``--seed-repeat-every`` seconds, at most ``--seed-max-tries`` times.
- **static**: see scheduler/deploy/static.py; the nodes are a kind cluster's
  control-plane nodes (``--kind-cluster``) or this machine (``--manifest-dir``).
- **prometheus**: see scheduler/deploy/prometheus.py: apply, then wait until
  every node has a ``cpu_usage_avg_5m`` series.
- **shadow**: one replica of ``run --shadow`` with read-only rights; wait for the
  rollout (ready: its caches are synced and it judges every bind from then on).

Progress goes to stderr; the result (who holds the Lease, how long it took)
is printed on stdout. Any failure is one ``error:`` line and exit code 1; a
failure before the apply changes nothing.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable
from typing import Any

import yaml
from kubernetes.client import ApiClient, CoordinationV1Api, CoreV1Api
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.leases import annotated_as_ours, being_restored, leading_since
from scheduler.deploy import cmdline, static
from scheduler.deploy.cmdline import DeployError, api_message, out
from scheduler.deploy.kube import Cluster, Need
from scheduler.deploy.prometheus import deploy_prometheus
from scheduler.deploy.templates import REVISION, render
from scheduler.deploy.values import LoadedValues, override
from scheduler.deploy.waiting import (
    KUBE_SCHEDULER_SELECTOR,
    holder_host,
    mark_restoring,
    read_lease,
    wait_holder,
    wait_rollout,
)
from scheduler.logs import kv

logger = logging.getLogger(__name__)

SCHEDULER_DEPLOYMENT = "dynamic-scheduler"
LEASES = "coordination.k8s.io"


# --- lease -------------------------------------------------------------------------------------


def deploy_lease(api: ApiClient, values: LoadedValues, root: Any, ns: argparse.Namespace) -> int:
    if ns.method == "seed" and values.data["takeover"]:
        values = override(values, "takeover", False, "--method=seed")
        logger.info("The seed method: the scheduler starts without --leader-elect-takeover")
    rendered = render("lease", values, root)
    v = values.data
    vns, le = v["namespace"], v["leaderElection"]
    needs = [
        Need("get", "deployments", "apps", vns, SCHEDULER_DEPLOYMENT),
        Need("list", "pods", "", vns),
        Need("get", "leases", LEASES, le["resourceNamespace"], le["resourceName"]),
        Need("patch", "leases", LEASES, le["resourceNamespace"], le["resourceName"]),
    ]
    if ns.method == "seed":
        needs += [
            Need("list", "pods", "", "kube-system"),
            Need("delete", "pods", "", "kube-system"),
            Need("delete", "leases", LEASES, le["resourceNamespace"], le["resourceName"]),
        ]
    start = time.monotonic()
    Cluster(api).apply(rendered.objects, needs=needs, doing="deploy lease", namespace_wait=ns.timeout)
    lease = read_lease(api, le["resourceNamespace"], le["resourceName"])
    if lease is not None and being_restored(lease):
        # Left by a restore that did not finish: it would keep ours from ever taking over.
        mark_restoring(api, le["resourceNamespace"], le["resourceName"], False)
    pods, _ = wait_rollout(api, vns, SCHEDULER_DEPLOYMENT, ns.timeout)
    ready_at = time.monotonic()
    logger.info(
        "Replicas ready",
        extra=kv(pods=",".join(p.metadata.name for p in pods), elapsed=f"{ready_at - start:.1f}s"),
    )
    names = {p.metadata.name for p in pods}

    def ours(lease: dict[str, Any] | None) -> bool:
        return holder_host(((lease or {}).get("spec") or {}).get("holderIdentity") or "") in names

    what = f"Lease {le['resourceNamespace']}/{le['resourceName']} held by one of ours"
    if ns.method == "seed":
        holder = _seed_takeover(api, le["resourceNamespace"], le["resourceName"], ours, what, ns)
    else:
        holder, _ = wait_holder(api, le["resourceNamespace"], le["resourceName"], ours, what, ns.timeout)
    held_at = time.monotonic()
    out(
        f"{le['resourceNamespace']}/{le['resourceName']} is held by {holder} (pod {holder_host(holder)}): "
        f"{held_at - ready_at:.1f}s after the replicas were ready, {held_at - start:.1f}s after the apply"
    )
    if not ns.return_at_lease:
        wait_scheduling(
            api, (le["resourceNamespace"], le["resourceName"]), ours, holder, held_at, start, ns.timeout
        )
    return 0


def wait_scheduling(
    api: ApiClient,
    lease: tuple[str, str],
    ours: Callable[[dict[str, Any] | None], bool],
    holder: str,
    held_at: float,
    start: float,
    timeout: float,
) -> None:
    """Wait until the Lease's holder, one of ``ours``, schedules: its first renew after the
    safe wait of a takeover writes ``dynamic-scheduler.io/leading-since``. Then print it."""
    since: list[str] = []

    def scheduling(got: dict[str, Any] | None) -> bool:
        # The holder may change meanwhile (a failover): any of ours leading will do.
        when = leading_since(got) if ours(got) else None
        since[:] = [when] if when else []
        return bool(when)

    holder, _ = wait_holder(
        api,
        *lease,
        scheduling,
        f"{holder_host(holder)} scheduling (after the safe wait of a takeover)",
        timeout,
        interval=0.2,
    )
    now = time.monotonic()
    out(
        f"{holder_host(holder)} is scheduling since {since[0]}: {now - held_at:.1f}s after it held the Lease, "
        f"{now - start:.1f}s after the apply"
    )


def _seed_takeover(
    api: ApiClient, lease_ns: str, lease_name: str, ours: Any, what: str, ns: argparse.Namespace
) -> str:
    """Delete kube-scheduler's pod and the Lease until ours holds it (the field note's 1.4 and its script)."""
    core, coord = CoreV1Api(api), CoordinationV1Api(api)
    deadline = time.monotonic() + ns.timeout
    for attempt in range(1, ns.seed_max_tries + 1):
        lease = read_lease(api, lease_ns, lease_name)
        if ours(lease):
            return ((lease or {}).get("spec") or {}).get("holderIdentity") or ""
        pods = core.list_namespaced_pod(
            "kube-system", label_selector=KUBE_SCHEDULER_SELECTOR, _request_timeout=30
        )
        for p in pods.items:
            _delete(
                lambda p=p: core.delete_namespaced_pod(p.metadata.name, "kube-system", _request_timeout=30),
                f"pod kube-system/{p.metadata.name}",
            )
        _delete(
            lambda: coord.delete_namespaced_lease(lease_name, lease_ns, _request_timeout=30),
            f"Lease {lease_ns}/{lease_name}",
        )
        logger.info(
            "Deleted kube-scheduler's pods and the Lease",
            extra=kv(attempt=attempt, of=ns.seed_max_tries, pods=len(pods.items)),
        )
        remaining = deadline - time.monotonic()
        last = attempt == ns.seed_max_tries or ns.seed_repeat_every is None
        window = remaining if last else min(ns.seed_repeat_every, remaining)
        if window <= 0:
            break
        try:
            holder, _ = wait_holder(api, lease_ns, lease_name, ours, what, window)
            return holder
        except DeployError:
            if last or time.monotonic() >= deadline:
                raise
    raise DeployError(
        f"{what}: not after {ns.seed_max_tries} rounds of deleting kube-scheduler's pod and the Lease"
    )


def _delete(call: Any, what: str) -> None:
    try:
        call()
    except ApiException as e:
        if e.status != 404:
            raise DeployError(f"cannot delete {what}: {api_message(e)}") from None


# --- static ------------------------------------------------------------------------------------


def deploy_static(api: ApiClient, values: LoadedValues, root: Any, ns: argparse.Namespace) -> int:
    if ns.manifest_dir:
        values = override(values, "static.manifestDir", ns.manifest_dir, "--manifest-dir")
    targets = static.node_targets(ns, api)
    rendered = render("static", values, root)
    v = values.data
    mode = v["static"]["mode"]
    paths = static.Paths.of(v)
    plans = [static.check_node(fs, paths, mode) for fs in targets]  # all nodes, before any change
    sched_lease = (
        v["leaderElection"]["resourceNamespace"],
        v["static"]["leaseName"] if mode == "beside" else v["leaderElection"]["resourceName"],
    )
    needs = [Need("get", "pods", "", "kube-system"), Need("get", "leases", LEASES, *sched_lease)]
    cluster = Cluster(api)
    start = time.monotonic()
    created = cluster.apply(rendered.objects, needs=needs, doing="deploy static", namespace_wait=ns.timeout)
    landed: dict[str, float] = {}
    installed: list[tuple[Any, static.Plan]] = []
    try:
        for fs, plan in zip(targets, plans, strict=True):
            landed[fs.node] = static.install(fs, plan, paths, rendered.node_files)
            installed.append((fs, plan))
    except BaseException:
        for fs, plan in reversed(installed):
            static.undo(fs, plan)
        cluster.roll_back(created)
        raise
    revision = yaml.safe_load(rendered.files["pod.yaml"])["metadata"]["annotations"][REVISION]
    for fs in targets:
        name = static.mirror_pod(paths.pod_name, fs.node)
        static.wait_mirror_ready(api, name, revision, ns.timeout)
        out(
            f"{fs.node}: kube-system/{name} is Running and Ready, "
            f"{time.monotonic() - landed[fs.node]:.1f}s after its manifest was written"
        )
    holder, took = wait_holder(
        api,
        *sched_lease,
        annotated_as_ours,
        f"Lease {sched_lease[0]}/{sched_lease[1]} held by ours",
        ns.timeout,
    )
    out(f"{sched_lease[0]}/{sched_lease[1]} is held by {holder} ({took:.1f}s later)")
    if not ns.return_at_lease:
        wait_scheduling(api, sched_lease, annotated_as_ours, holder, time.monotonic(), start, ns.timeout)
    return 0


# --- shadow ------------------------------------------------------------------------------------

SHADOW_DEPLOYMENT = "dynamic-scheduler-shadow"


def deploy_shadow(api: ApiClient, values: LoadedValues, root: Any, ns: argparse.Namespace) -> int:
    vns = values.data["namespace"]
    rendered = render("shadow", values, root)
    needs = [Need("get", "deployments", "apps", vns, SHADOW_DEPLOYMENT), Need("list", "pods", "", vns)]
    start = time.monotonic()
    Cluster(api).apply(rendered.objects, needs=needs, doing="deploy shadow", namespace_wait=ns.timeout)
    pods, _ = wait_rollout(api, vns, SHADOW_DEPLOYMENT, ns.timeout)
    name = pods[0].metadata.name if pods else SHADOW_DEPLOYMENT
    out(
        f"shadow {vns}/{name} is judging {values.data['schedulerName']}'s binds "
        f"({time.monotonic() - start:.1f}s after the apply); read it with: "
        f"dynamic-scheduler shadow report -n {vns}"
    )
    return 0


# --- the command -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = cmdline.parser(
        "deploy", "Deploy a method to the cluster: check access, dry-run everything, apply, wait."
    )
    subs = p.add_subparsers(
        dest="what", metavar="lease|static|prometheus|shadow", required=True, parser_class=cmdline.Parser
    )
    for name, text in (
        ("lease", "the Deployment sharing kube-scheduler's Lease, then the takeover"),
        ("static", "the static pod on the control-plane nodes"),
        ("prometheus", "Prometheus and the recording rules of the Dynamic policy"),
        ("shadow", "ours beside the active scheduler, judging its binds, writing nothing"),
    ):
        sp = subs.add_parser(name, help=text, description=text, allow_abbrev=False)
        cmdline.add_values_flags(sp)
        cmdline.add_cluster_flags(sp)
        cmdline.add_timeout_flag(sp)
        cmdline.add_log_flags(sp)
        if name in ("lease", "static"):
            sp.add_argument(
                "--return-at-lease",
                action="store_true",
                help="return once one of ours holds the Lease, not once it schedules (after a "
                "takeover's safe wait, 17 s with the defaults)",
            )
            g = sp.add_argument_group("takeover")
            g.add_argument(
                "--method",
                choices=("takeover", "seed"),
                default="takeover",
                help="takeover: the scheduler's --leader-elect-takeover (default); seed: delete "
                "kube-scheduler's pod and the Lease, as the field note does",
            )
            g.add_argument(
                "--seed-repeat-every",
                type=cmdline.positive_float,
                metavar="SECONDS",
                help="seed: delete again after this long while ours does not hold the Lease",
            )
            g.add_argument(
                "--seed-max-tries",
                type=cmdline.positive_int,
                default=1,
                metavar="N",
                help="seed: at most this many rounds of deleting (default 1)",
            )
        if name == "static":
            static.add_node_flags(sp)
    return p


def main(argv: list[str]) -> int:
    p = build_parser()

    def body() -> int:
        ns = p.parse_args(argv)
        cmdline.setup_logging(ns.v)
        if ns.what == "lease" and ns.method != "seed" and (ns.seed_repeat_every or ns.seed_max_tries != 1):
            raise cmdline.UsageError("--seed-repeat-every/--seed-max-tries: only with --method=seed")
        root, values = cmdline.load(ns)
        if ns.what == "lease" and ns.method == "takeover" and not values.data["takeover"]:
            raise cmdline.UsageError(
                "--method=takeover: the values say takeover: false, so nothing would take "
                "the Lease from kube-scheduler; set takeover=true or use --method=seed"
            )
        if ns.what == "static":
            static.check_node_flags(ns)
        api = cmdline.connect(ns.kubeconfig, ns.context)
        flow = {
            "lease": deploy_lease,
            "static": deploy_static,
            "prometheus": deploy_prometheus,
            "shadow": deploy_shadow,
        }[ns.what]
        return flow(api, values, root, ns)

    return cmdline.run("deploy", body)
