"""Two replicas of ours on one Lease, and the Lease deleted or edited to another holder while
pods arrive every few milliseconds (the fault of ``e2e/test_faults.py``, on the private API
server, where a webhook sees every Binding and who sent it).

Replica A leads, B stands by. When the Lease changes under A:

- A stops the moment it learns (its watch): it halts within half a retry period, and sends
  no Binding for a pod created after that (a Binding already on its way may still land);
- B leads only once A may no longer be leading: after the takeover's safe wait when it
  created the deleted Lease, after the edited Lease's expiry otherwise;
- so every pod gets exactly one Binding, and exactly one ``Scheduled`` event (A writes those of
  the Bindings it had sent before it halted, and that succeeded).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import yaml
from kubernetes.client import ApiClient

from scheduler.app import App
from scheduler.cluster.client import api_request
from scheduler.config import load_config
from scheduler.config.options import Options, ServingOptions
from scheduler.polling import poll
from tests.apiserver import ControlPlane
from tests.cluster.util import halt_times, make_node
from tests.cluster.webhook import scripted_webhook

pytestmark = [pytest.mark.apiserver, pytest.mark.timeout(240)]

L, D, R = 6.0, 4.0, 2.0
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"


def replica(cp: ControlPlane, tmp: Path, user: str, namespace: str, lease: str, scheduler_name: str) -> App:
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(cp.kubeconfig_for(user, ("system:masters",)))},
        "leaderElection": {
            "leaderElect": True,
            "resourceName": lease,
            "resourceNamespace": namespace,
            "leaseDuration": f"{L:g}s",
            "renewDeadline": f"{D:g}s",
            "retryPeriod": f"{R:g}s",
        },
        "profiles": [{"schedulerName": scheduler_name}],
    }
    path = tmp / f"{user}.yaml"
    path.write_text(yaml.safe_dump(config))
    app = App(Options(config=load_config(str(path)), serving=ServingOptions(secure_port=0)))
    app.build()
    return app


class Runner:
    """``App.run`` on a thread, its exit code kept."""

    def __init__(self, app: App) -> None:
        self.app, self.codes = app, []
        self.thread = threading.Thread(target=lambda: self.codes.append(app.run()), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.app.stop.set()
        self.thread.join(30)


class PodStream:
    """Creates a pod every few milliseconds until stopped; when each was sent (monotonic)."""

    def __init__(self, admin: ApiClient, namespace: str, scheduler_name: str) -> None:
        self.admin, self.namespace, self.scheduler_name = admin, namespace, scheduler_name
        self.sent: dict[str, float] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.done.is_set():
            name = f"p-{len(self.sent):05d}"
            self.sent[name] = time.monotonic()
            api_request(
                self.admin,
                "POST",
                f"/api/v1/namespaces/{self.namespace}/pods",
                body={
                    "metadata": {"name": name},
                    "spec": {
                        "schedulerName": self.scheduler_name,
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                    },
                },
            )
            self.done.wait(0.003)

    def after(self, moment: float) -> set[str]:
        return {name for name, at in list(self.sent.items()) if at > moment}


def edit_to_another(admin: ApiClient, namespace: str, lease: str) -> None:
    path = LEASES.format(ns=namespace) + f"/{lease}"
    got = api_request(admin, "GET", path)
    got["spec"]["holderIdentity"] = "someone-else"
    got["spec"]["leaseDurationSeconds"] = int(L)
    api_request(admin, "PUT", path, body=got)


@pytest.mark.parametrize("change", ["deleted", "edited to another holder"])
def test_the_old_leader_stops_at_once_and_the_new_one_waits_until_then(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path, change: str
) -> None:
    tag = uuid.uuid4().hex[:6]
    lease, scheduler_name = f"lease-{tag}", f"pair-{tag}"
    user_a, user_b = f"replica-a-{tag}", f"replica-b-{tag}"
    a = replica(apiserver, tmp_path, user_a, namespace, lease, scheduler_name)
    b = replica(apiserver, tmp_path, user_b, namespace, lease, scheduler_name)
    assert a.io is not None
    halted_at = halt_times(a)
    node = make_node(admin, f"n-{tag}", cpu="64", memory="256Gi", pods="5000")["metadata"]["name"]
    stream = PodStream(admin, namespace, scheduler_name)
    runners: list[Runner] = []
    with scripted_webhook(apiserver, admin, namespace, deny=[]) as hook:
        try:
            runners.append(Runner(a))
            assert a.scheduling.wait(30), "A never led"
            runners.append(Runner(b))
            assert b.elector is not None and a.elector is not None
            poll(lambda: b.elector.leader() == a.elector.identity, 30, "B to see A lead")

            stream.thread.start()
            poll(lambda: sum(s.user == user_a for s in hook.seen) >= 20, 30, "A binding the stream")
            if change == "deleted":
                api_request(admin, "DELETE", LEASES.format(ns=namespace) + f"/{lease}")
            else:
                edit_to_another(admin, namespace, lease)
            changed = time.monotonic()
            poll(lambda: halted_at, D + R + 2, "A to halt")
            poll(lambda: len(stream.after(halted_at[0])) >= 50, 30, "pods created after A halted")
            stream.done.set()
            stream.thread.join(10)
            assert b.scheduling.wait(L + D + 2 * R + 10), "B never led"
            led = time.monotonic()
            everyone = set(stream.sent)
            poll(
                lambda: {s.pod for s in hook.seen if s.refused is None} >= everyone,
                60,
                "a Binding for every pod",
            )
        finally:
            stream.done.set()
            for r in reversed(runners):
                r.stop()
            api_request(admin, "DELETE", f"/api/v1/nodes/{node}")

    learned = halted_at[0] - changed
    assert learned < R / 2, f"A halted {learned:.2f}s after the Lease was {change}: not from its watch"
    assert runners[0].codes == [1], "A should exit as kube-scheduler does when it loses the Lease"
    late = sorted(s.pod for s in hook.seen if s.user == user_a and s.pod in stream.after(halted_at[0]))
    assert late == [], f"A bound pods created after it halted: {late[:10]}"
    first_b = min(s.at for s in hook.seen if s.user == user_b)
    # B may not lead before A may have stopped: after the safe wait (deleted) or the expiry (edited).
    wait = b.elector.safe_takeover_wait(L) if change == "deleted" else L
    assert first_b - changed >= wait - 0.1, f"B bound {first_b - changed:.2f}s after the change"
    assert led - changed >= wait - 0.1
    per_pod = Counter(s.pod for s in hook.seen)
    twice = sorted(p for p, n in per_pod.items() if n > 1)
    assert twice == [], f"pods with more than one Binding: {twice[:10]}"
    events = api_request(admin, "GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
    scheduled = Counter(e["regarding"]["name"] for e in events if e.get("reason") == "Scheduled")
    assert [p for p, n in scheduled.items() if n > 1] == [], "pods with two Scheduled events"
    # A halted leader still writes the events of the Bindings it had sent and that succeeded.
    assert sorted(set(stream.sent) - set(scheduled)) == [], "bound pods without a Scheduled event"
