"""Fixtures for the tests of scheduler.cluster against the private API server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes.client import ApiClient

from scheduler.cluster.client import api_request
from tests.apiserver import ControlPlane


@pytest.fixture(scope="session")
def admin(apiserver: ControlPlane) -> Iterator[ApiClient]:
    """An admin ``ApiClient`` of the kubernetes library itself (test setup and checks)."""
    client = apiserver.api_client()
    yield client
    client.close()


@pytest.fixture
def namespace(admin: ApiClient) -> str:
    """A fresh namespace per test (never finalized: no controller-manager runs)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    api_request(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    return name
