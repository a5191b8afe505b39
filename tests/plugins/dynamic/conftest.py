"""Fixtures for the Dynamic plugin's tests: a fake Prometheus API and fresh metric registries."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from .promapi import FakePrometheus


@pytest.fixture
def fake_prom() -> Iterator[FakePrometheus]:
    server = FakePrometheus()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()
