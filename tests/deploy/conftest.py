"""Fixtures for the deploy tests that need the private API server (marker ``apiserver``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes.client import ApiClient, CoreV1Api

from tests.apiserver import ControlPlane


@pytest.fixture(scope="session")
def admin(apiserver: ControlPlane) -> Iterator[ApiClient]:
    client = apiserver.api_client()
    yield client
    client.close()


@pytest.fixture
def unique() -> str:
    """A name no other test uses (namespaces are never finalized here: no controller-manager)."""
    return f"d-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def namespace(admin: ApiClient, unique: str) -> str:
    """A fresh namespace, created by the test setup (so not ours)."""
    CoreV1Api(admin).create_namespace({"metadata": {"name": unique}})
    return unique
