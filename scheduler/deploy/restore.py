"""``dynamic-scheduler restore [lease] [static] [prometheus] [shadow] [all]``: back to kube-scheduler, ours removed.

Default: ``lease static`` (the scheduler; static only with ``--kind-cluster`` or
``--manifest-dir``, the way to reach the nodes); ``all`` adds prometheus and
shadow. In that order:

- **static**: on each control-plane node our manifest goes, kube-scheduler's
  comes back if we had moved it aside, our files go; then the wait until our
  mirror pod is gone and kube-scheduler's is Ready, and the beside-mode RBAC
  objects are deleted;
- **lease**, **prometheus** and **shadow**: their Deployment is deleted first and the
  command waits for its pods to be gone (a stopping scheduler still needs its
  RBAC to release the Lease), then the other objects in reverse apply order.
  For lease, the Lease is annotated ``dynamic-scheduler.io/restoring`` first,
  so that no replica of ours takes it from kube-scheduler while they stop;
  the annotation goes once kube-scheduler holds the Lease again.
  The Namespace goes only if we created it and no Deployment is left in it.

If the scheduler's Lease was held by one of ours, the command waits until
kube-scheduler holds it again and prints the holder. Restoring twice is fine:
what is already gone is skipped.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from kubernetes.client import ApiClient, CoordinationV1Api
from kubernetes.client.exceptions import ApiException

from scheduler.cluster.leases import annotated_as_ours
from scheduler.deploy import cmdline, static
from scheduler.deploy.cmdline import DeployError, api_message, out
from scheduler.deploy.kube import Cluster, Need
from scheduler.deploy.templates import labels, render
from scheduler.deploy.values import LoadedValues, override
from scheduler.deploy.waiting import (
    KUBE_SCHEDULER_SELECTOR,
    holder,
    holder_host,
    list_pods,
    mark_restoring,
    pod_summary,
    read_lease,
    wait_holder,
    wait_pods_gone,
)
from scheduler.logs import kv

logger = logging.getLogger(__name__)

LEASES = "coordination.k8s.io"
ORDER = ("static", "lease", "prometheus", "shadow")


def _selector(component: str) -> str:
    lb = labels(component)
    return ",".join(f"{k}={lb[k]}" for k in ("app.kubernetes.io/name", "app.kubernetes.io/component"))


def _remove_method(
    api: ApiClient, objects: list[dict[str, Any]], namespace: str, component: str, timeout: float, doing: str
) -> None:
    """Workloads first, wait for their pods to go, then the rest."""
    cluster = Cluster(api)
    cluster.require(
        [*cluster.needs_for(objects, ("get", "delete")), Need("list", "pods", "", namespace)], doing
    )
    workloads = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet")]
    rest = [o for o in objects if o not in workloads]
    cluster.delete(workloads, doing=doing, check_access=False)
    wait_pods_gone(api, namespace, _selector(component), timeout, what=f"{component} pods gone")
    cluster.delete(rest, doing=doing, check_access=False)


def _not_ours(names: set[str]) -> Any:
    def wanted(lease: dict[str, Any] | None) -> bool:
        h = holder(lease)
        return bool(h) and holder_host(h) not in names and not annotated_as_ours(lease or {})

    return wanted


def _kube_scheduler_pods(api: ApiClient, namespace: str) -> str:
    """What kubeadm's kube-scheduler pods are doing: the reason a Lease does not come back is
    most often there (a CrashLoopBackOff after many takeovers: the kubelet waits up to 5 minutes)."""
    pods = list_pods(api, namespace, KUBE_SCHEDULER_SELECTOR)
    if not pods:
        return f"no pod labelled {KUBE_SCHEDULER_SELECTOR} in {namespace}"
    return "; ".join(pod_summary(p) for p in pods)


def _wait_back(api: ApiClient, lease_ns: str, lease_name: str, names: set[str], timeout: float) -> None:
    try:
        h, took = wait_holder(
            api,
            lease_ns,
            lease_name,
            _not_ours(names),
            f"Lease {lease_ns}/{lease_name} back with kube-scheduler",
            timeout,
            detail=lambda: _kube_scheduler_pods(api, lease_ns),
        )
    except DeployError as e:
        raise DeployError(
            f"{e} (is kube-scheduler running? kubectl -n kube-system get pods -l component=kube-scheduler)"
        ) from None
    out(f"{lease_ns}/{lease_name} is held by {h} again ({took:.1f}s after ours were gone)")


def restore_lease(api: ApiClient, values: LoadedValues, root: Any, timeout: float) -> None:
    v = values.data
    le_ns, le_name = v["leaderElection"]["resourceNamespace"], v["leaderElection"]["resourceName"]
    ours = {p.metadata.name for p in list_pods(api, v["namespace"], _selector("scheduler"))}
    Cluster(api).require([Need("patch", "leases", LEASES, le_ns, le_name)], "restore lease")
    lease = read_lease(api, le_ns, le_name)
    held = bool(holder(lease)) and not _not_ours(ours)(lease)
    # Until kube-scheduler has the Lease back, a replica of ours not yet stopped must not take
    # it over (kube-scheduler would exit); the annotation stays if the restore fails, and the
    # next deploy removes it.
    marked = lease is not None and mark_restoring(api, le_ns, le_name, True)
    _remove_method(
        api, render("lease", values, root).objects, v["namespace"], "scheduler", timeout, "restore lease"
    )
    if held:
        _wait_back(api, le_ns, le_name, ours, timeout)
    else:
        out(
            f"{le_ns}/{le_name} is held by {holder(read_lease(api, le_ns, le_name)) or 'nobody'} "
            f"(it was not ours)"
        )
    if marked:
        mark_restoring(api, le_ns, le_name, False)


def restore_prometheus(api: ApiClient, values: LoadedValues, root: Any, timeout: float) -> None:
    v = values.data
    if v["prometheus"]["discovery"] == "static" and not v["prometheus"]["nodes"]:
        values = override(
            values, "prometheus.nodes", {"unused": "127.0.0.1:10250"}, "restore"
        )  # the targets only matter in the config
    _remove_method(
        api,
        render("prometheus", values, root).objects,
        v["namespace"],
        "prometheus",
        timeout,
        "restore prometheus",
    )
    out("prometheus is removed")


def restore_static(api: ApiClient, values: LoadedValues, root: Any, ns: argparse.Namespace) -> None:
    if ns.manifest_dir:
        values = override(values, "static.manifestDir", ns.manifest_dir, "--manifest-dir")
    targets = static.node_targets(ns, api)
    v = values.data
    paths = static.Paths.of(v)
    cluster = Cluster(api)
    le_ns, le_name = v["leaderElection"]["resourceNamespace"], v["leaderElection"]["resourceName"]
    own_lease = v["static"]["leaseName"]
    needs = [Need("get", "pods", "", "kube-system"), Need("get", "leases", LEASES, le_ns, le_name)]
    if own_lease != le_name:
        needs += [Need(verb, "leases", LEASES, le_ns, own_lease) for verb in ("get", "delete")]
    cluster.require(needs, "restore static")
    lease = read_lease(api, le_ns, le_name)
    # Ours, but not a replica of the lease method (that one is restore_lease's to wait for:
    # while its Deployment runs, the Lease would never come back here).
    lease_pods = {p.metadata.name for p in list_pods(api, v["namespace"], _selector("scheduler"))}
    held = annotated_as_ours(lease or {}) and holder_host(holder(lease)) not in lease_pods
    removed = [static.uninstall(fs, paths) for fs in targets]
    for r in removed:
        static.wait_mirror_gone(api, static.mirror_pod(paths.pod_name, r.node), ns.timeout)
        if r.kube_scheduler_restored:
            static.wait_mirror_ready(api, static.mirror_pod(static.KUBE_SCHEDULER, r.node), None, ns.timeout)
        out(
            f"{r.node}: our static pod is gone"
            + (", kube-scheduler's manifest is back and its pod Ready" if r.kube_scheduler_restored else "")
        )
    beside = override(values, "static.mode", "beside", "restore")  # the only mode with API objects
    cluster.delete(render("static", beside, root).objects, doing="restore static")
    if own_lease != le_name:
        _delete_own_lease(api, le_ns, own_lease)
    if held:
        _wait_back(api, le_ns, le_name, set(), ns.timeout)


def _delete_own_lease(api: ApiClient, namespace: str, name: str) -> None:
    """Beside mode's own Lease, now that no pod of ours renews it; one another scheduler holds stays."""
    lease = read_lease(api, namespace, name)
    if lease is None:
        return
    if holder(lease) and not annotated_as_ours(lease):
        logger.warning(
            "Lease is held by a scheduler that is not ours; leaving it",
            extra=kv(lease=f"{namespace}/{name}", holder=holder(lease)),
        )
        return
    try:
        CoordinationV1Api(api).delete_namespaced_lease(name, namespace, _request_timeout=30)
    except ApiException as e:
        if e.status != 404:
            raise DeployError(f"Lease {namespace}/{name}: cannot delete it: {api_message(e)}") from None
    logger.info("Deleted", extra=kv(object=f"Lease {namespace}/{name}"))


def restore_shadow(api: ApiClient, values: LoadedValues, root: Any, timeout: float) -> None:
    v = values.data
    _remove_method(
        api, render("shadow", values, root).objects, v["namespace"], "shadow", timeout, "restore shadow"
    )
    out("the shadow is removed")


def _method(text: str) -> str:
    if text not in (*ORDER, "all"):
        raise argparse.ArgumentTypeError(
            f"invalid choice: {text!r} (choose from {', '.join((*ORDER, 'all'))})"
        )
    return text


def build_parser() -> argparse.ArgumentParser:
    p = cmdline.parser("restore", "Give scheduling back to kube-scheduler and remove what deploy created.")
    # Checked by a type, not choices: with nargs="*", Python 3.11's argparse checks the empty
    # default against the choices too and refuses a bare `restore`.
    p.add_argument(
        "methods",
        nargs="*",
        type=_method,
        metavar="lease|static|prometheus|shadow|all",
        help="what to remove (default: lease static; all: lease static prometheus shadow)",
    )
    cmdline.add_values_flags(p)
    cmdline.add_cluster_flags(p)
    cmdline.add_timeout_flag(p)
    static.add_node_flags(p)
    cmdline.add_log_flags(p)
    return p


def main(argv: list[str]) -> int:
    p = build_parser()

    def body() -> int:
        ns = p.parse_args(argv)
        cmdline.setup_logging(ns.v)
        asked = set(ns.methods)
        methods = set(ORDER) if "all" in asked else (asked or {"lease", "static"})
        if "static" in methods and not static.has_node_flags(ns):
            if "static" in asked or "all" in asked:
                raise cmdline.UsageError(
                    "static needs --kind-cluster NAME or --manifest-dir DIR to reach the nodes"
                )
            methods.discard("static")
            logger.info("Skipping static: no --kind-cluster or --manifest-dir to reach the nodes")
        if "static" in methods:
            static.check_node_flags(ns)
        root, values = cmdline.load(ns)
        api = cmdline.connect(ns.kubeconfig, ns.context)
        for m in ORDER:
            if m == "static" and m in methods:
                restore_static(api, values, root, ns)
            elif m == "lease" and m in methods:
                restore_lease(api, values, root, ns.timeout)
            elif m == "prometheus" and m in methods:
                restore_prometheus(api, values, root, ns.timeout)
            elif m == "shadow" and m in methods:
                restore_shadow(api, values, root, ns.timeout)
        return 0

    return cmdline.run("restore", body)
