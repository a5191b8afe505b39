"""framework helpers shared by the plugins."""

from __future__ import annotations

from scheduler.core.framework import memoized_scores
from tests.plugins.builders import node_info, pod_info


def test_memoized_scores_recompute_only_changed_nodes_or_another_pod_key():
    nodes = [node_info(f"n{i}", cpu="4", memory="8Gi") for i in range(4)]
    key = object()
    computed: list[list[str]] = []

    def compute(todo):
        computed.append([ni.name for ni in todo])
        return [len(ni.pods) * 10 + int(ni.name[1:]) for ni in todo]

    assert memoized_scores(nodes, key, (1, 2), compute) == [0, 1, 2, 3]
    assert memoized_scores(nodes, key, (1, 2), compute) == [0, 1, 2, 3]
    nodes[2].add_pod(pod_info("p", node_name="n2"))
    assert memoized_scores(nodes, key, (1, 2), compute) == [0, 1, 12, 3]
    assert memoized_scores(nodes, key, (5, 2), compute) == [0, 1, 12, 3]
    assert memoized_scores(nodes[1:3], object(), (5, 2), compute) == [1, 12]
    assert computed == [["n0", "n1", "n2", "n3"], ["n2"], ["n0", "n1", "n2", "n3"], ["n1", "n2"]]
