"""bench.population against the API server: every resident pod is valid and created bound, and
a second population finds them there instead of failing."""

from __future__ import annotations

import uuid

import pytest
from kubernetes.client import ApiClient

from bench.population import RESIDENT_LABEL, Population, populate
from scheduler.cluster.client import api_request

pytestmark = pytest.mark.apiserver


def test_the_population_is_created_bound_and_resumes(admin: ApiClient) -> None:
    pop = Population(nodes=6, per_node=5, namespaces=2, namespace_prefix=f"r{uuid.uuid4().hex[:6]}")
    for ns in pop.namespace_names():
        api_request(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    said: list[str] = []
    first = populate(admin, pop, workers=4, progress=said.append)
    assert (first.created, first.existed, first.failed) == (30, 0, 0), first.errors
    selector = [("labelSelector", "=".join(RESIDENT_LABEL))]
    pods = [
        p
        for ns in pop.namespace_names()
        for p in api_request(admin, "GET", f"/api/v1/namespaces/{ns}/pods", query=selector)["items"]
    ]
    assert len(pods) == 30 and all(p["spec"]["nodeName"] for p in pods)
    again = populate(admin, pop, workers=4)
    assert (again.created, again.existed, again.failed) == (0, 30, 0)
