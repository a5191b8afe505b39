"""Losing the Lease stops the scheduler at once, as kube-scheduler's OnStoppedLeading exits.

The scheduler leads a Lease of its own; a webhook refuses every binding with 500 and
``Retry-After: 2``, so the bind of a pending pod is waiting to retry when the test hands
the Lease to someone else.
From the moment the scheduler sees it lost, it must send no Binding (the retries end,
no new cycle starts) and ``App.run`` must return 1 within the renew deadline.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiClient

from scheduler.app import App
from scheduler.cluster.client import api_request
from scheduler.config import load_config
from scheduler.config.options import Options, ServingOptions
from scheduler.polling import poll
from tests.apiserver import ControlPlane
from tests.cluster.util import halt_times
from tests.cluster.webhook import scripted_webhook

pytestmark = pytest.mark.apiserver

RENEW_DEADLINE = 3.0


def steal(admin: ApiClient, namespace: str, name: str) -> None:
    """Another holder writes the Lease (as a second scheduler would after it expired)."""
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
    lease = api_request(admin, "GET", path)
    lease["spec"]["holderIdentity"] = "someone-else"
    lease["spec"]["renewTime"] = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    lease["spec"]["leaseDurationSeconds"] = 60
    api_request(admin, "PUT", path, body=lease)


def test_no_binding_is_sent_after_the_lease_is_lost(
    apiserver: ControlPlane, admin: ApiClient, namespace: str, tmp_path: Path
) -> None:
    name = f"lease-{uuid.uuid4().hex[:6]}"
    scheduler_name = f"loser-{uuid.uuid4().hex[:6]}"
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(apiserver.kubeconfig)},
        "leaderElection": {
            "leaderElect": True,
            "resourceName": name,
            "resourceNamespace": namespace,
            "leaseDuration": "4s",
            "renewDeadline": f"{RENEW_DEADLINE:g}s",
            "retryPeriod": "500ms",
        },
        "profiles": [{"schedulerName": scheduler_name}],
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    app = App(
        Options(config=load_config(str(tmp_path / "config.yaml")), serving=ServingOptions(secure_port=0))
    )
    app.build()
    assert app.io is not None
    halted_at = halt_times(app)
    result: list[int] = []
    runner = threading.Thread(target=lambda: result.append(app.run()), daemon=True)

    def pod(pod_name: str) -> dict[str, Any]:
        return {
            "metadata": {"name": pod_name},
            "spec": {
                "schedulerName": scheduler_name,
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        }

    with scripted_webhook(apiserver, admin, namespace, deny=[(500, 2)] * 1000) as hook:
        node = f"n-{uuid.uuid4().hex[:6]}"
        api_request(
            admin,
            "POST",
            "/api/v1/nodes",
            body={
                "metadata": {"name": node},
                "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
            },
        )
        try:
            runner.start()
            assert app.scheduling.wait(30), "our scheduler is not leading"
            api_request(admin, "POST", f"/api/v1/namespaces/{namespace}/pods", body=pod("first"))
            poll(lambda: hook.calls >= 1, 20, "the first bind refused")

            steal(admin, namespace, name)
            poll(lambda: halted_at, RENEW_DEADLINE + 2, "the loss noticed")
            api_request(admin, "POST", f"/api/v1/namespaces/{namespace}/pods", body=pod("second"))
            runner.join(RENEW_DEADLINE)
            assert not runner.is_alive(), "the scheduler did not stop within the renew deadline"
            assert result == [1]
            # The bind was waiting out its Retry-After when the loss came: nothing was on its way.
            late = [round(t - halted_at[0], 3) for t in hook.times if t > halted_at[0]]
            assert late == [], f"Bindings sent after the Lease was lost (seconds after): {late}"
            second = api_request(admin, "GET", f"/api/v1/namespaces/{namespace}/pods/second")
            assert not second["spec"].get("nodeName")
        finally:
            app.stop.set()
            runner.join(10)
            api_request(admin, "DELETE", f"/api/v1/nodes/{node}")
