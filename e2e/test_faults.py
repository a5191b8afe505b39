"""Faults survived: ours as default-scheduler while pods are created throughout.

With the lease method deployed (ours holds ``kube-system/kube-scheduler``;
kube-scheduler is a standby), a creator makes one small pod every
``EVERY`` seconds for ``DURATION`` seconds, tolerating the API errors a
fault causes (a pod whose create failed is retried). ``FAULT_AT`` seconds in,
one fault per test:

- **kube-apiserver restarted**: its container stopped on the control-plane
  node (``crictl stop``); the kubelet starts it again;
- **the leader's network cut**: every TCP packet from the leader's pod to the
  API server's ports dropped (iptables in the pod's network namespace) until
  another holder has the Lease, then let through again;
- **the Lease deleted** by hand;
- **the Lease edited** by hand: another holder written in, renewed now.

After each, checked as the churn suite does (``e2e.podchecks.check_pods``):
every pod bound, exactly once (one nodeName, one Scheduled event), none where
its requests did not fit, none lost (every pod created is there and bound);
and a scheduler holds the Lease again. What is measured: the gap in binding
(the longest time without a bind from the fault on, pods being created one a
second), the longest wait of a pod that met the fault, who holds the Lease
after, and our restarts. A leader that loses the Lease exits, as
kube-scheduler does (the kubelet restarts it): that is recorded, not a
failure. Figures go to ``_artifacts/e2e-metrics/faults.jsonl``.

``make e2e`` leaves it out (it adds about 6 minutes; hack/e2e.sh): ``make
e2e-faults`` runs it. Marked ``disruptive``, it runs after other suites
when named with them.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e import binding as b
from e2e.kube import docker_exec, poll
from e2e.measure import record
from e2e.podchecks import check_pods, restarts
from e2e.replacing import (
    LEASE,
    LEASE_NS,
    annotated_ours,
    holder,
    kube_scheduler_pods,
    our_pods,
    read_lease,
)

pytestmark = [pytest.mark.cluster, pytest.mark.disruptive, pytest.mark.timeout(900)]

SUITE = "faults"
EVERY = float(os.environ.get("DS_E2E_FAULT_EVERY", "1"))
DURATION = float(os.environ.get("DS_E2E_FAULT_SECONDS", "60"))
FAULT_AT = DURATION / 3
MAX_UNBOUND = 90.0
"""No pod may wait longer than this unbound: a lost Lease costs leaseDuration (15 s), a safe wait
and a restart at worst."""
SELECTOR = "app=fault-load"


class Creator:
    """One pod every EVERY seconds for DURATION seconds, retried on errors (the scenario's timer,
    not a synchronisation)."""

    def __init__(self, core: client.CoreV1Api, ns: str, image: str) -> None:
        self.core, self.ns, self.image = core, ns, image
        self.created: list[str] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="fault-load", daemon=True)

    def _run(self) -> None:
        i = 0
        end = time.monotonic() + DURATION
        while time.monotonic() < end and not self.stop.is_set():
            name = f"load-{i:04d}"
            body = b.pod_body(name, self.image, cpu="5m", memory="8Mi", labels={"app": "fault-load"})
            try:
                self.core.create_namespaced_pod(self.ns, body, _request_timeout=10)
                self.created.append(name)
                i += 1
            except ApiException as e:
                if e.status == 409:  # created, though the answer was lost
                    self.created.append(name)
                    i += 1
                else:
                    self.errors.append(f"{e.status} {e.reason}")
            except Exception as e:  # noqa: BLE001 - the API server is down: try again
                self.errors.append(type(e).__name__)
            self.stop.wait(EVERY)

    def __enter__(self) -> Creator:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(60)


def lease_or_none(api: client.ApiClient) -> dict[str, Any] | None:
    try:
        return read_lease(api)
    except Exception:  # noqa: BLE001 - the API server may be down
        return None


def leader_pod(api: client.ApiClient, core: client.CoreV1Api) -> client.V1Pod:
    name = holder(read_lease(api)).rsplit("_", 1)[0]
    return next(p for p in our_pods(core) if p.metadata.name == name)


def run_fault(
    api: client.ApiClient,
    core: client.CoreV1Api,
    ns: str,
    image: str,
    name: str,
    inject: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """The load, the fault FAULT_AT seconds in, the checks; returns the figures."""
    b.wait_ours_scheduling(core, ns, image)
    restarts_before = restarts(core)
    holder_before = holder(read_lease(api))
    fault: dict[str, Any] = {}
    with b.PodWatch(core, ns, alloc=b.allocatable(core)) as watch:
        t0 = time.time()
        with Creator(core, ns, image) as creator:
            creator.stop.wait(FAULT_AT)  # the scenario's timer
            fault_at = time.time()
            fault = inject()
            creator.thread.join(DURATION + 120)
        created = set(creator.created)

        def settled() -> bool | None:
            # every pod created is bound, as listed and as the watch saw it (after a restart of
            # kube-apiserver the watch may take its read timeout, 40 s, to resume)
            pods = b.list_pods_raw(core, ns, label_selector=SELECTOR)
            listed = {p["metadata"]["name"] for p in pods if b.is_bound(p)}
            seen = {r.name for r in watch.records() if r.bound_seen is not None}
            missing["not bound"] = sorted(created - listed)
            missing["not seen bound by the watch"] = sorted(created - seen)
            missing["watch errors"] = watch.errors[-3:]
            return (created <= listed and created <= seen) or None

        missing: dict[str, list[str]] = {}
        try:
            poll(f"every pod of {ns} bound after the fault", settled, timeout=MAX_UNBOUND, interval=1)
        except AssertionError as e:
            raise AssertionError(f"{e}: {missing}") from None
        lease = poll(
            "a holder of the Lease", lambda: (lambda x: x if holder(x) else None)(lease_or_none(api)), 60
        )
    watch_errors = len(watch.errors)  # a fault breaks the test's own watch too; it resumes from where it was
    watch.errors.clear()
    figures, problems = check_pods(core, ns, watch, t0, [], p99_bound=None, max_unbound=MAX_UNBOUND)
    figures["test_watch_errors"] = watch_errors
    names = {r.name for r in watch.records()}
    lost = sorted(set(creator.created) - names)
    if lost:
        problems.append(f"pods created but never seen: {lost}")
    recs = watch.records()
    # The pods that met the fault: created from a few seconds before it (in the leader's queue
    # then) on. How long the longest of them waited to be bound, and the longest time without
    # any bind while they were being created one a second.
    met = [r for r in recs if r.seen >= fault_at - 5 and r.bound_seen is not None]
    longest_wait = round(max((r.bound_seen or 0) - r.seen for r in met), 1) if met else None
    binds = sorted(r.bound_seen for r in recs if r.bound_seen is not None and r.bound_seen >= fault_at)
    gap = round(max((b2 - b1 for b1, b2 in zip([fault_at, *binds], binds, strict=False)), default=0), 1)
    restarts_after = restarts(core)
    figures |= fault | {
        "created": len(creator.created),
        "create_errors": len(creator.errors),
        "bind_gap_s": gap,
        "longest_wait_s": longest_wait,
        "holder_before": holder_before,
        "holder_after": holder(lease),
        "ours_after": annotated_ours(lease),
        "our_restarts": {k: restarts_after.get(k, 0) - restarts_before.get(k, 0) for k in restarts_after},
    }
    record(SUITE, f"{name}_bind_gap_s", gap, **figures)
    assert not problems, "\n".join(problems)
    assert binds, f"no pod was bound after the fault: {figures}"
    return figures


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
        poll("kube-apiserver back", lambda: lease_or_none(api), 120, interval=1)
        return {"apiserver_down_s": round(time.time() - t, 1)}

    run_fault(api, core, namespace, test_image, "apiserver_restart", inject)


def test_the_leaders_network_cut_while_another_takes_over(
    api, core, namespace, test_image, ours_is_the_scheduler
) -> None:
    def inject() -> dict[str, Any]:
        before = holder(read_lease(api))
        with leader_cut_off(api, core) as cut:
            t = time.time()
            lease = poll(
                "another holder of the Lease",
                lambda: (lambda x: x if holder(x) and holder(x) != before else None)(lease_or_none(api)),
                90,
                interval=0.5,
            )
            cut |= {"new_holder_after_s": round(time.time() - t, 1), "new_holder": holder(lease)}
        return cut

    run_fault(api, core, namespace, test_image, "leader_network_cut", inject)


def test_the_lease_deleted_by_hand(api, core, namespace, test_image, ours_is_the_scheduler) -> None:
    def inject() -> dict[str, Any]:
        client.CoordinationV1Api(api).delete_namespaced_lease(LEASE, LEASE_NS)
        t = time.time()
        lease = poll(
            "the Lease made again", lambda: (lambda x: x if holder(x) else None)(lease_or_none(api)), 60
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
            "a scheduler holding the Lease again",
            lambda: (lambda x: x if holder(x) not in ("", "someone-by-hand") else None)(lease_or_none(api)),
            90,
            interval=0.5,
        )
        return {"held_again_after_s": round(time.time() - t, 1)}

    run_fault(api, core, namespace, test_image, "lease_edited", inject)
