"""How the application wires its API clients (against the private API server)."""

from __future__ import annotations

import time

import pytest

import scheduler.app as app_module
from scheduler.cli import main
from scheduler.cluster.client import api_request
from scheduler.config.options import Options
from tests.apiserver import ControlPlane


def built_app(monkeypatch: pytest.MonkeyPatch, *argv: str) -> app_module.App:
    seen: list[Options] = []
    monkeypatch.setattr(app_module, "run", lambda options: seen.append(options) or 0)
    assert main(list(argv)) == 0
    app = app_module.App(seen[0])
    app.build()
    return app


@pytest.mark.apiserver
def test_events_do_not_spend_the_binders_rate_limit(
    apiserver: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As kube-scheduler's eventClient: one token a second each, and an event write
    # leaves the token of the next Binding untouched.
    app = built_app(
        monkeypatch,
        f"--kubeconfig={apiserver.kubeconfig}",
        "--kube-api-qps=1",
        "--kube-api-burst=1",
        "--leader-elect=false",
        "--secure-port=0",
    )
    assert app.recorder is not None
    start = time.monotonic()
    api_request(app.recorder.api, "GET", "/api/v1/namespaces/default")
    api_request(app.api, "GET", "/api/v1/namespaces/default")
    assert time.monotonic() - start < 0.9
    # and each limiter still holds its own pace
    api_request(app.api, "GET", "/api/v1/namespaces/default")
    assert time.monotonic() - start >= 0.9
