"""ImageLocality: prefer nodes that already have the pod's images.

As kube-scheduler's (``imagelocality.sumImageScores``, ``calculatePriority``):
for each image of the pod (containers, init containers and image volumes), a
node that lists it in ``status.images`` adds the image's size scaled by the
share of nodes that have it (``scaledImageScore``: size * nodes with it / all
nodes), so an image on every node counts in full and one on a single node
of many barely counts; this keeps pods of one image from piling onto the
first nodes that pulled it. The sum is clamped to 23 MiB .. 1000 MiB per image
of the pod and mapped linearly onto 0..100. No normalization.

Names are compared as the kubelet reports them, after kube-scheduler's one
normalization: a name without a tag gets ``:latest`` (``normalizedImageName``).
``nginx`` in a pod does not match ``docker.io/library/nginx:latest`` in a
node's status, in kube-scheduler either.
"""

from __future__ import annotations

from typing import Any, ClassVar

from scheduler.core.framework import MAX_NODE_SCORE, CycleState
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo

MIB = 1024 * 1024
MIN_THRESHOLD = 23 * MIB
MAX_CONTAINER_THRESHOLD = 1000 * MIB


def normalized_image_name(name: str) -> str:
    """``name:latest`` when the name has no tag (a ``:`` after the last ``/``)."""
    return name if name.rfind(":") > name.rfind("/") else name + ":latest"


def pod_images(pod: PodInfo) -> tuple[list[str], int]:
    """The pod's normalized image names (init containers, containers, image volumes; repeats
    kept, as kube-scheduler counts them) and how many image sources it has."""
    spec = pod.spec
    names = [
        normalized_image_name(c.get("image") or "")
        for key in ("initContainers", "containers")
        for c in spec.get(key) or ()
    ]
    for v in spec.get("volumes") or ():
        image = v.get("image")
        if isinstance(image, dict):
            names.append(normalized_image_name(image.get("reference") or ""))
    return names, len(names)


def calculate_priority(sum_scores: int, image_count: int) -> int:
    """The score of a node whose images add up to ``sum_scores``, for a pod of ``image_count``
    images (kube-scheduler's ``calculatePriority``, integer division included)."""
    max_threshold = MAX_CONTAINER_THRESHOLD * image_count
    if max_threshold <= MIN_THRESHOLD:  # a pod without images: 0, as in kube-scheduler
        return 0
    clamped = min(max(sum_scores, MIN_THRESHOLD), max_threshold)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


class ImageLocality:
    name: ClassVar[str] = "ImageLocality"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        self.handle = handle

    def _images(self, pod: PodInfo) -> tuple[list[str], int]:
        images = pod.memo.get(self.name)
        if images is None:
            images = pod.memo[self.name] = pod_images(pod)
        return images

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        """``score`` over many nodes. When no node has any of the pod's images (the cache
        counts the nodes of each image), every node scores what a node without images
        does, and none is looked at: the common case of a pod whose image is not pulled yet."""
        names, count = self._images(pod)
        snapshot = self.handle.snapshot
        base = calculate_priority(0, count)
        if not any(snapshot.image_num_nodes(name) for name in names):
            return [base] * len(nodes)
        # Some nodes have some of them (the pause image on the real nodes, say): only nodes
        # with images at all are looked at.
        return [self.score(state, pod, ni) if ni.images else base for ni in nodes]

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        names, count = self._images(pod)
        total_score = 0
        if node.images:
            snapshot = self.handle.snapshot
            total = len(snapshot.list())
            for name in names:
                size = node.images.get(name)
                if size is not None:  # scaledImageScore: int64(float64(size) * spread)
                    total_score += int(size * (snapshot.image_num_nodes(name) / total))
        return calculate_priority(total_score, count)
