"""ImageLocality against the private API server: pods go where their image already is.

Two nodes of this test (the API server has other tests' nodes too, so a
NodeAffinity pluginConfig keeps the default profile to these two); the image
is on one of them, as the kubelet reports it in ``status.images``. The image
is large (100 GiB), so that even spread over every node of the shared API
server (``size * nodes with it / all nodes``) it scores the full 100.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient

from scheduler.cluster.client import api_request
from scheduler.polling import poll
from tests.apiserver import ControlPlane
from tests.cluster.util import bound_node, create_pod, kept_to_nodes_config, make_node, scheduler_running

pytestmark = pytest.mark.apiserver

IMAGE = "registry.example/big-model:1.0"
SIZE = 100 << 30


def set_images(admin: ApiClient, node: str, names: list[str]) -> None:
    images = [{"names": names, "sizeBytes": SIZE}] if names else []
    api_request(
        admin,
        "PATCH",
        f"/api/v1/nodes/{node}/status",
        body={"status": {"images": images}},
        content_type="application/merge-patch+json",
    )


@pytest.fixture
def two_nodes(
    apiserver: ControlPlane, admin: ApiClient, tmp_path: Path
) -> Iterator[tuple[Any, str, str, str]]:
    label = f"i{uuid.uuid4().hex[:6]}"
    nodes = [make_node(admin, f"{label}-{x}", {"image-test": label})["metadata"]["name"] for x in "ab"]
    config = kept_to_nodes_config(apiserver, f"image-{label}", "image-test", label)
    try:
        with scheduler_running(config, tmp_path) as app:
            yield app, nodes[0], nodes[1], f"image-{label}"
    finally:
        for n in nodes:
            api_request(admin, "DELETE", f"/api/v1/nodes/{n}")


def placed(admin: ApiClient, namespace: str, scheduler: str, name: str) -> str:
    create_pod(admin, namespace, name, scheduler, image=IMAGE)
    return bound_node(admin, namespace, name)


def test_pods_go_where_their_image_is_and_follow_it(admin: ApiClient, namespace: str, two_nodes) -> None:
    app, a, b, scheduler = two_nodes
    set_images(admin, a, [IMAGE, "registry.example/big-model@sha256:" + "0" * 64])
    poll(lambda: IMAGE in (app.cache.get(a).images if app.cache.get(a) else {}), 20, "a's images seen")
    assert placed(admin, namespace, scheduler, "first") == a
    # b is now the emptier node (NodeResourcesFit prefers it by 1 to 2 points); the image wins.
    assert placed(admin, namespace, scheduler, "second") == a

    set_images(admin, a, [])
    set_images(admin, b, [IMAGE])
    poll(
        lambda: app.cache.image_num_nodes(IMAGE) == 1 and IMAGE in app.cache.get(b).images,
        20,
        "the image seen on b only",
    )
    assert placed(admin, namespace, scheduler, "third") == b
