"""ImageLocality's score: kube-scheduler's thresholds, spread scaling and name normalization."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.cache import Cache
from scheduler.core.nodeinfo import NodeInfo
from scheduler.plugins.imagelocality import (
    MAX_CONTAINER_THRESHOLD,
    MIB,
    MIN_THRESHOLD,
    ImageLocality,
    calculate_priority,
    normalized_image_name,
)

from .builders import make_node, pod_info


class CacheHandle:
    def __init__(self, cache: Cache) -> None:
        self.snapshot = cache


def with_images(name: str, *images: tuple[list[str], int]) -> dict[str, Any]:
    node = make_node(name)
    node["status"]["images"] = [{"names": names, "sizeBytes": size} for names, size in images]
    return node


def scores(nodes: list[dict[str, Any]], pod: Any) -> dict[str, int]:
    cache = Cache()
    for n in nodes:
        cache.add_node(n)
    plugin = ImageLocality(None, CacheHandle(cache))
    return {ni.name: plugin.score({}, pod, ni) for ni in cache.list()}


def pod_with(*images: str, init: tuple[str, ...] = (), volumes: tuple[str, ...] = ()) -> Any:
    p = pod_info("p")
    p.pod["spec"]["containers"] = [{"name": f"c{i}", "image": im} for i, im in enumerate(images)]
    p.pod["spec"]["initContainers"] = [{"name": f"i{i}", "image": im} for i, im in enumerate(init)]
    p.pod["spec"]["volumes"] = [{"name": f"v{i}", "image": {"reference": im}} for i, im in enumerate(volumes)]
    return type(p).from_pod(p.pod)


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.27", "nginx:1.27"),
        ("registry:5000/app", "registry:5000/app:latest"),
        ("registry:5000/app:v2", "registry:5000/app:v2"),
        ("app@sha256:abc", "app@sha256:abc"),  # the digest's ':' counts as a tag, as in kube-scheduler
        ("registry:5000/app@sha256:abc", "registry:5000/app@sha256:abc"),
    ],
)
def test_names_without_a_tag_get_latest(name: str, want: str) -> None:
    assert normalized_image_name(name) == want


def test_priority_is_clamped_and_linear() -> None:
    assert calculate_priority(0, 1) == 0
    assert calculate_priority(MIN_THRESHOLD, 1) == 0
    assert calculate_priority(MAX_CONTAINER_THRESHOLD, 1) == 100
    assert calculate_priority(10 * MAX_CONTAINER_THRESHOLD, 1) == 100
    half = (MIN_THRESHOLD + MAX_CONTAINER_THRESHOLD) // 2
    assert calculate_priority(half, 1) == 100 * (half - MIN_THRESHOLD) // (
        MAX_CONTAINER_THRESHOLD - MIN_THRESHOLD
    )
    # two images: the ceiling is twice as high
    assert calculate_priority(MAX_CONTAINER_THRESHOLD, 2) == 100 * (
        MAX_CONTAINER_THRESHOLD - MIN_THRESHOLD
    ) // (2 * MAX_CONTAINER_THRESHOLD - MIN_THRESHOLD)
    assert calculate_priority(0, 0) == 0


def test_an_image_counts_by_the_share_of_nodes_that_have_it() -> None:
    size = 500 * MIB
    nodes = [
        with_images("a", (["app:1"], size)),
        with_images("b", (["app:1"], size)),
        with_images("c"),
        with_images("d"),
    ]
    got = scores(nodes, pod_with("app:1"))
    spread = int(size * 2 / 4)
    assert got == {"a": calculate_priority(spread, 1), "b": calculate_priority(spread, 1), "c": 0, "d": 0}
    assert 0 < got["a"] < calculate_priority(size, 1)


def test_init_containers_and_image_volumes_count_too() -> None:
    big = 800 * MIB
    nodes = [with_images("a", (["init:1"], big), (["data:1"], big)), with_images("b")]
    got = scores(nodes, pod_with("main:1", init=("init:1",), volumes=("data:1",)))
    each = int(big * 1 / 2)
    assert got == {"a": calculate_priority(2 * each, 3), "b": 0}


def test_every_name_of_an_image_matches_and_untagged_means_latest() -> None:
    nodes = [with_images("a", (["app:latest", "app@sha256:" + "1" * 64], 900 * MIB)), with_images("b")]
    assert scores(nodes, pod_with("app"))["a"] == calculate_priority(450 * MIB, 1)
    assert scores(nodes, pod_with("app@sha256:" + "1" * 64))["a"] == calculate_priority(450 * MIB, 1)
    assert scores(nodes, pod_with("docker.io/library/app:latest"))["a"] == 0  # no registry defaulting


def test_the_cache_counts_nodes_per_image_through_updates_and_deletes() -> None:
    cache = Cache()
    cache.add_node(with_images("a", (["x:1", "x@sha256:1"], 10)))
    cache.add_node(with_images("b", (["x:1"], 10)))
    assert (cache.image_num_nodes("x:1"), cache.image_num_nodes("x@sha256:1")) == (2, 1)
    cache.update_node(with_images("a", (["y:1"], 10)))
    assert (
        cache.image_num_nodes("x:1"),
        cache.image_num_nodes("x@sha256:1"),
        cache.image_num_nodes("y:1"),
    ) == (
        1,
        0,
        1,
    )
    cache.remove_node(with_images("b"))
    assert cache.image_num_nodes("x:1") == 0
    assert isinstance(cache.get("a"), NodeInfo) and cache.get("a").images == {"y:1": 10}


IMAGE_POOL = ["a:1", "b:1", "c:1", "d:1"]


@given(
    nodes=st.lists(
        st.lists(st.tuples(st.sampled_from(IMAGE_POOL), st.integers(0, 2000 * MIB)), max_size=3),
        min_size=1,
        max_size=6,
    ),
    wanted=st.lists(st.sampled_from([*IMAGE_POOL, "e:1"]), min_size=0, max_size=3),
)
def test_scoring_many_nodes_at_once_scores_each_as_alone(nodes: list[Any], wanted: list[str]) -> None:
    """score_nodes (which skips the nodes when none has the pod's images) agrees with score."""
    cache = Cache()
    for i, images in enumerate(nodes):
        cache.add_node(with_images(f"n{i}", *(([name], size) for name, size in images)))
    plugin = ImageLocality(None, CacheHandle(cache))
    pod = pod_with(*wanted)
    listed = cache.list()
    assert plugin.score_nodes({}, pod, listed) == [plugin.score({}, pod, ni) for ni in listed]
