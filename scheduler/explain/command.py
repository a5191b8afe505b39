"""``dynamic-scheduler explain NAMESPACE/POD``: why ours would put a pod where it would.

Lists the cluster once (:mod:`scheduler.explain.view`), runs the pod's profile over every
node (:func:`scheduler.core.explain.explain`) and prints each filter's verdict per node,
each score plugin's raw, normalized and weighted score, the totals, Dynamic's load values,
and where ours would put the pod. A bound pod is explained as if it were pending (its own
resources no longer counted on its node), and the verdict says whether ours would have
chosen that node. Only reads; ``-o json`` for tools.

Run it where the configuration's Prometheus is reachable (in the scheduler's pod:
``kubectl exec``), or Dynamic's metrics show as missing.
"""

from __future__ import annotations

import copy
import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.cluster.client import api_request
from scheduler.config.loading import default_config, load_config, with_dynamic_policies
from scheduler.core.explain import explain
from scheduler.core.podinfo import PodInfo
from scheduler.deploy import cmdline
from scheduler.deploy.cmdline import DeployError, UsageError
from scheduler.explain.deployed import deployed_config
from scheduler.explain.text import judge, render
from scheduler.explain.view import load_view
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

NO_DEPLOYED = "kube-scheduler's default profile (no deployed configuration found; --config names one)"


def parse_target(text: str, namespace: str | None) -> tuple[str, str]:
    ns, sep, name = text.rpartition("/")
    if not sep:
        ns = namespace or "default"
    elif namespace and namespace != ns:
        raise UsageError(f"POD: {text!r} names namespace {ns!r}, but --namespace is {namespace!r}")
    if not ns or not name or "/" in ns:
        raise UsageError(f"POD: expected NAMESPACE/NAME or NAME, got {text!r}")
    return ns, name


def main(argv: list[str]) -> int:
    p = cmdline.parser(
        "explain",
        "Why ours would put a pod where it would: every filter's verdict and every score, per node.",
    )
    p.add_argument("pod", metavar="NAMESPACE/POD", help="the pod (NAME alone: in --namespace, else default)")
    p.add_argument("-n", "--namespace", help="the pod's namespace")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="a KubeSchedulerConfiguration (default: the deployed scheduler's, from its ConfigMap; "
        "else kube-scheduler's default profile)",
    )
    p.add_argument("--profile", help="the profile to run (default: the pod's schedulerName)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="text (default) or json")
    cmdline.add_cluster_flags(p)
    cmdline.add_log_flags(p)

    def body() -> int:
        ns = p.parse_args(argv)
        cmdline.setup_logging(ns.v)
        namespace, name = parse_target(ns.pod, ns.namespace)
        with tempfile.TemporaryDirectory(prefix="explain-") as workdir:
            return _explain(ns, namespace, name, Path(workdir))

    return cmdline.run("explain", body)


def _explain(ns: Any, namespace: str, name: str, workdir: Path) -> int:
    """The command once its flags are read; ``workdir`` holds the deployed policy while it runs."""
    api = cmdline.connect(ns.kubeconfig, ns.context)
    if ns.config:
        cfg, used = with_dynamic_policies(load_config(ns.config, policies=False)), f"{ns.config} (--config)"
    else:
        deployed = deployed_config(api, workdir)
        if deployed is not None:
            cfg, used = deployed.config, deployed.source
        else:
            cfg, used = default_config(), NO_DEPLOYED
    logger.log(V(2), "Configuration", extra=kv(source=used))
    pod = _get_pod(api, namespace, name)
    scheduler_name = ns.profile or (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
    names = cfg.scheduler_names()
    if scheduler_name not in names:
        flag = "--profile" if ns.profile else f"pod {namespace}/{name}: spec.schedulerName"
        raise UsageError(
            f"{flag}: {scheduler_name!r} is not a profile of the configuration "
            f"(profiles: {', '.join(sorted(names))}); pick one with --profile"
        )
    view = load_view(api, cfg)
    try:
        result, bound_to = explain_pod(view, scheduler_name, pod)
    finally:
        view.close()
    failing = view.failing_metrics.get(scheduler_name, [])
    if ns.output == "json":
        verdict = judge(result, bound_to)
        doc: dict[str, Any] = {
            **result.to_dict(),
            "configuration": used,
            "boundNode": bound_to or None,
            "agrees": verdict.agrees,
            "verdict": verdict.text,
        }
        if failing:
            doc["prometheusFailing"] = failing
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(render(result, bound_to, failing, configuration=used))
    return 0


def explain_pod(view: Any, scheduler_name: str, pod: dict[str, Any]) -> tuple[Any, str]:
    """Run the profile for ``pod``, as if pending when it is bound; (explanation, its node or "")."""
    profile = view.profiles[scheduler_name]
    bound_to = (pod.get("spec") or {}).get("nodeName") or ""
    pending = copy.deepcopy(pod)
    pending["spec"].pop("nodeName", None)
    pi = PodInfo.from_pod(pending)
    with view.cache.lock:
        if bound_to:
            view.cache.remove_pod(pi.uid)
            for plugin in profile.plugins.values():
                if hasattr(plugin, "note_bound"):  # its own placement must not count against the node
                    plugin.unreserve(None, pi, bound_to)
        return explain(profile, pi, view.cache), bound_to


def _get_pod(api: Any, namespace: str, name: str) -> dict[str, Any]:
    try:
        pod: dict[str, Any] = api_request(
            api, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}", timeout=30
        )
    except ApiException as e:
        if e.status == 404:
            raise DeployError(f"pod {namespace}/{name} not found") from None
        raise
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        raise DeployError(
            f"pod {namespace}/{name} has finished ({pod['status']['phase']}); nothing to explain"
        )
    return pod
