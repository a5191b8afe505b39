"""Faults survived: ours as default-scheduler while pods are created throughout.

The scenario and its checks are ``e2e.faults.run_fault``'s. One fault per test:

- **kube-apiserver restarted**: its container stopped on the control-plane
  node (``crictl stop``); the kubelet starts it again;
- **the leader's network cut**: every TCP packet from the leader's pod to the
  API server's ports dropped (iptables in the pod's network namespace) until
  another holder has the Lease, then let through again;
- **the Lease deleted** by hand;
- **the Lease edited** by hand: another holder written in, renewed now;
- **bindings refused** by a validating webhook on ``pods/binding`` (403, 500
  and 429 with Retry-After, the first binding of some pods): every refused pod
  is bound later, and the webhook, which sees every Binding the API server
  gets, counts at most one allowed Binding per pod.

A leader that loses the Lease exits, as kube-scheduler does (the kubelet
restarts it): that is recorded, not a failure; where kube-scheduler would not
exit (the API server restarted, bindings refused), ours must not restart.
Prometheus's faults are in ``test_faults_prometheus.py``.

``make e2e`` leaves the fault suites out (they add about 12 minutes;
hack/e2e.sh): ``make e2e-faults`` runs them. Marked ``disruptive``, they run
after other suites when named with them.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client

from e2e.faults import lease_or_none, run_fault
from e2e.lease import LEASE, LEASE_NS, holder, holder_host, read_lease
from e2e.nodes import docker_exec
from e2e.schedulers import kube_scheduler_pods, our_pods
from e2e.webhook import kind_binding_webhook
from scheduler.polling import poll
from tests.webhook import BindingSeen, Refusal

pytestmark = [pytest.mark.cluster, pytest.mark.disruptive, pytest.mark.timeout(900)]


def leader_pod(api: client.ApiClient, core: client.CoreV1Api) -> client.V1Pod:
    name = holder_host(holder(read_lease(api)))
    return next(p for p in our_pods(core) if p.metadata.name == name)


def sandbox_pid(pod: client.V1Pod) -> tuple[str, int]:
    """(node, pid) of the pod's sandbox, whose network namespace its containers share."""
    node = pod.spec.node_name
    (sid,) = docker_exec(
        node,
        "crictl",
        "pods",
        "-q",
        "--name",
        f"^{pod.metadata.name}$",
        "--namespace",
        pod.metadata.namespace,
    ).stdout.split()
    info = json.loads(docker_exec(node, "crictl", "inspectp", sid).stdout)
    return node, int(info["info"]["pid"])


@contextmanager
def leader_cut_off(api: client.ApiClient, core: client.CoreV1Api) -> Iterator[dict[str, Any]]:
    """Drop the leader pod's TCP packets to the API server (its ports 443 and 6443) while inside."""
    pod = leader_pod(api, core)
    node, pid = sandbox_pid(pod)  # the pod's network namespace outlives a restart of its container
    rules = [["OUTPUT", "-p", "tcp", "--dport", port, "-j", "DROP"] for port in ("443", "6443")]
    for r in rules:
        docker_exec(node, "nsenter", "-t", str(pid), "-n", "iptables", "-I", *r)
    try:
        yield {"cut_pod": pod.metadata.name}
    finally:
        for r in rules:
            docker_exec(node, "nsenter", "-t", str(pid), "-n", "iptables", "-D", *r, check=False)


def test_kube_apiserver_restarted(api, core, namespace, test_image, ours_is_the_scheduler) -> None:
    (ks,) = kube_scheduler_pods(core)
    cp = ks.spec.node_name

    def inject() -> dict[str, Any]:
        ids = docker_exec(cp, "crictl", "ps", "-q", "--name", "^kube-apiserver$").stdout.split()
        assert ids, "no kube-apiserver container on the control plane"
        t = time.time()
        docker_exec(cp, "crictl", "stop", *ids)
        poll(lambda: lease_or_none(api), 120, "kube-apiserver back", interval=1)
        return {"apiserver_down_s": round(time.time() - t, 1)}

    run_fault(api, core, namespace, test_image, "apiserver_restart", inject, may_restart=False)


def test_the_leaders_network_cut_while_another_takes_over(
    api, core, namespace, test_image, ours_is_the_scheduler
) -> None:
    def inject() -> dict[str, Any]:
        before = holder(read_lease(api))
        with leader_cut_off(api, core) as cut:
            t = time.time()
            lease = poll(
                lambda: (lambda x: x if holder(x) and holder(x) != before else None)(lease_or_none(api)),
                90,
                "another holder of the Lease",
                interval=0.5,
            )
            cut |= {"new_holder_after_s": round(time.time() - t, 1), "new_holder": holder(lease)}
        return cut

    # A Binding that lands while its answer is cut off is never reported: the leader cannot write
    # the event, and exits on losing the Lease. Such pods are counted, not failed.
    run_fault(api, core, namespace, test_image, "leader_network_cut", inject, unreported_ok=True)


def test_the_lease_deleted_by_hand(api, core, namespace, test_image, ours_is_the_scheduler) -> None:
    def inject() -> dict[str, Any]:
        client.CoordinationV1Api(api).delete_namespaced_lease(LEASE, LEASE_NS)
        t = time.time()
        lease = poll(
            lambda: (lambda x: x if holder(x) else None)(lease_or_none(api)),
            60,
            "the Lease made again",
            interval=0.5,
        )
        return {"lease_again_after_s": round(time.time() - t, 1), "recreated_by": holder(lease)}

    run_fault(api, core, namespace, test_image, "lease_deleted", inject)


def test_the_lease_edited_by_hand(api, core, namespace, test_image, ours_is_the_scheduler) -> None:
    def inject() -> dict[str, Any]:
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        client.CoordinationV1Api(api).patch_namespaced_lease(
            LEASE, LEASE_NS, {"spec": {"holderIdentity": "someone-by-hand", "renewTime": now}}
        )
        t = time.time()
        poll(
            lambda: (lambda x: x if holder(x) not in ("", "someone-by-hand") else None)(lease_or_none(api)),
            90,
            "a scheduler holding the Lease again",
            interval=0.5,
        )
        return {"held_again_after_s": round(time.time() - t, 1)}

    run_fault(api, core, namespace, test_image, "lease_edited", inject)


REFUSALS: list[Refusal] = [(403, None), (500, None), (429, 1)]
REFUSED = 6
"""Pods whose first binding the webhook refuses (every other pod created from the fault on)."""


def test_bindings_refused_by_a_webhook(api, core, namespace, test_image, ours_is_the_scheduler) -> None:
    (ks,) = kube_scheduler_pods(core)
    refused: dict[str, Refusal] = {}
    seen: list[BindingSeen] = []

    def decide(pod: str, node: str) -> Refusal | None:
        if pod in refused or len(refused) >= REFUSED or not pod.startswith("load-") or int(pod[5:]) % 2 == 0:
            return None
        refused[pod] = REFUSALS[len(refused) % len(REFUSALS)]
        return refused[pod]

    def inject() -> dict[str, Any]:
        with kind_binding_webhook(api, namespace, ks.spec.node_name, decide) as hook:
            t = time.time()
            poll(lambda: len(refused) >= REFUSED, 60, f"{REFUSED} bindings refused", interval=0.5)
            # The last refused pod's next attempt, while the webhook still sees it.
            last = list(refused)[-1]
            poll(
                lambda: any(s.pod == last and s.refused is None for s in hook.seen),
                60,
                f"{last} bound after its refusal",
                interval=0.5,
            )
            seen.extend(hook.seen)
        return {
            "webhook_s": round(time.time() - t, 1),
            "refused": {p: c for p, (c, _) in refused.items()},
            "bindings_seen": len(seen),
        }

    figures = run_fault(api, core, namespace, test_image, "bindings_refused", inject, may_restart=False)
    allowed = Counter(s.pod for s in seen if s.refused is None)
    twice = {p: n for p, n in allowed.items() if n > 1}
    assert not twice, f"pods with more than one Binding allowed: {twice}"
    assert len(refused) == REFUSED, figures
    for pod in refused:  # refused first, then allowed (or bound after the webhook was gone)
        mine = [s for s in seen if s.pod == pod]
        assert mine[0].refused is not None, (pod, mine)
