"""NodeResourcesBalancedAllocation: (1 - std of the requested fractions) * 100."""

from __future__ import annotations

import pytest

from scheduler.config.pluginargs import NodeResourcesBalancedAllocationArgs, ResourceSpec
from scheduler.core.framework import SKIP, CycleState
from scheduler.plugins.balancedallocation import NodeResourcesBalancedAllocation, balanced_score

from .builders import container, node_info, pod_info, run_score


def plugin(*resources):
    args = (
        NodeResourcesBalancedAllocationArgs(tuple(ResourceSpec(r, 1) for r in resources))
        if resources
        else None
    )
    return NodeResourcesBalancedAllocation(args, None)


POD_3CPU_5GI = pod_info(
    containers=[container("a", cpu="1", memory="2Gi"), container("b", cpu="2", memory="3Gi")]
)


def test_differently_sized_nodes():
    nodes = [node_info("small", cpu="4", memory="10Gi"), node_info("large", cpu="6", memory="10Gi")]
    # small: cpu 3/4, memory 5/10 -> std |0.75 - 0.5| / 2 = 0.125 -> 87.5 -> 87
    # large: 3/6 and 5/10 are equal -> 100
    assert run_score(plugin(), POD_3CPU_5GI, nodes) == {"small": 87, "large": 100}


def test_pods_on_the_node_count_with_their_real_requests():
    on_node = [pod_info("a", requests={"cpu": "1", "memory": "1Gi"}), pod_info("bare")]
    node = node_info("n", cpu="8", memory="10Gi", pods=on_node)
    # the request-less pod adds nothing: cpu (1+3)/8 = 0.5, memory (1+5)/10 = 0.6 -> 100 - 5 = 95
    assert run_score(plugin(), POD_3CPU_5GI, [node]) == {"n": 95}


def test_fractions_are_capped_at_one():
    node = node_info("n", cpu="2", memory="10Gi")
    # cpu 3/2 -> 1, memory 0.5 -> std 0.25 -> 75
    assert run_score(plugin(), POD_3CPU_5GI, [node]) == {"n": 75}


def test_best_effort_pods_are_not_scored():
    pl = plugin()
    assert pl.pre_score(CycleState(), pod_info(), [node_info("n")]) is SKIP
    # without PreScore a best-effort pod scores 0
    assert pl.score(CycleState(), pod_info(), node_info("n")) == 0
    # a pod requesting only one of the resources is scored
    assert run_score(pl, pod_info(requests={"memory": "5Gi"}), [node_info("n", cpu="4", memory="10Gi")]) == {
        "n": 75
    }


def test_three_resources_use_the_population_std():
    args = ("cpu", "memory", "nvidia.com/gpu")
    node = node_info("n", cpu="4", memory="10Gi", extended={"nvidia.com/gpu": 4})
    pod = pod_info(requests={"cpu": "1", "memory": "5Gi", "nvidia.com/gpu": "3"})
    # fractions 0.25, 0.5, 0.75: mean 0.5, std sqrt((0.0625 + 0 + 0.0625) / 3) = 0.2041 -> 79.6 -> 79
    assert run_score(plugin(*args), pod, [node]) == {"n": 79}


def test_extended_resource_the_pod_does_not_request_is_left_out():
    node = node_info("n", cpu="4", memory="10Gi", extended={"nvidia.com/gpu": 4})
    assert run_score(plugin("cpu", "memory", "nvidia.com/gpu"), POD_3CPU_5GI, [node]) == {"n": 87}


def test_a_node_without_the_resources_scores_full():
    # only one fraction (memory): std 0
    assert run_score(plugin(), POD_3CPU_5GI, [node_info("n", cpu=None, memory="10Gi")]) == {"n": 100}


@pytest.mark.parametrize(
    ("values", "want"),
    [
        ([], 100),
        ([(1, 2, 1)], 100),
        ([(1, 4, 1), (3, 4, 1)], 75),
        ([(0, 4, 1), (4, 4, 1)], 50),
        ([(8, 4, 1), (0, 4, 1)], 50),
    ],
)
def test_balanced_score(values, want):
    assert balanced_score(values) == want


@pytest.mark.parametrize("seed", range(5))
def test_inlined_cpu_memory_scoring_equals_the_general_formula(seed):
    from .test_noderesources import random_cluster

    pod, nodes = random_cluster(seed)
    pl = plugin()
    reqs = pl.allocation.pod_requests(pod)
    assert run_score(pl, pod, nodes) == {n.name: balanced_score(pl.allocation.values(n, reqs)) for n in nodes}


def test_scores_follow_node_changes():
    pl = plugin()
    node = node_info("n", cpu="4", memory="10Gi")
    replica = {"requests": {"cpu": "1", "memory": "5Gi"}}
    # 0.25 vs 0.5 -> 87; after one replica lands: 0.5 vs 1.0 -> 75
    assert run_score(pl, pod_info("r1", **replica), [node]) == {"n": 87}
    node.add_pod(pod_info("r1", node_name="n", **replica))
    assert run_score(pl, pod_info("r2", **replica), [node]) == {"n": 75}
    # another shape on the same node: (1+2)/4 vs (5+1)/10 -> 92; then the replica's again
    assert run_score(pl, pod_info("other", requests={"cpu": "2", "memory": "1Gi"}), [node]) == {"n": 92}
    assert run_score(pl, pod_info("r2", **replica), [node]) == {"n": 75}
