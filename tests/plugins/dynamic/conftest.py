"""Fixtures for the Dynamic plugin's tests: fresh metric registries (``fake_prom`` is in tests/conftest.py)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()
