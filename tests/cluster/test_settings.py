"""scheduler.settings: the App hands each component the part of its Settings meant for it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scheduler.app import App
from scheduler.config import load_config
from scheduler.config.options import Options, ServingOptions
from scheduler.settings import (
    BindingSettings,
    EventSettings,
    ServingSettings,
    Settings,
    ShadowSettings,
    WatchSettings,
)
from tests.apiserver import ControlPlane, free_port

pytestmark = pytest.mark.apiserver

# Values no default has, so a component left with its defaults is told apart.
SETTINGS = Settings(
    watch=WatchSettings(page_size=7, watch_timeout=77),
    binding=BindingSettings(workers=3, attempts=2),
    events=EventSettings(writers=2, series_interval=3.0),
    serving=ServingSettings(max_connections=5, request_timeout=4.0),
    shadow=ShadowSettings(sweep_every=0.5, kept=9),
    preemption_workers=2,
    preemption_victim_workers=5,
)


def built(apiserver: ControlPlane, tmp_path: Path, *, shadow: bool) -> App:
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(apiserver.kubeconfig)},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    serving = ServingOptions(secure_port=free_port(), bind_address="127.0.0.1")
    app = App(Options(config=load_config(str(path)), serving=serving, shadow=shadow), SETTINGS)
    app.build()
    return app


def test_the_scheduler_gets_its_settings(apiserver: ControlPlane, tmp_path: Path) -> None:
    app = built(apiserver, tmp_path, shadow=False)
    try:
        assert app.informers and all(i.settings is SETTINGS.watch for i in app.informers)
        assert app.io is not None and app.io.binder.settings is SETTINGS.binding
        assert app.scheduler is not None and app.scheduler._binds._max_workers == 3
        assert app.io.preemption._pool._max_workers == 2 and app.io.preemption._victims._max_workers == 5
        assert app.recorder is not None and app.recorder.settings is SETTINGS.events
        assert app.server is not None and app.server.settings is SETTINGS.serving
        assert app.server.delegation is not None and app.server.delegation.settings is SETTINGS.serving
    finally:
        app.shutdown(0, release=False, grace=0.0)


def test_shadow_mode_gets_its_settings(apiserver: ControlPlane, tmp_path: Path) -> None:
    app = built(apiserver, tmp_path, shadow=True)
    try:
        assert app.judge is not None and app.judge.settings is SETTINGS.shadow
        assert all(i.settings is SETTINGS.watch for i in app.informers)
    finally:
        app.shutdown(0, release=False, grace=0.0)
