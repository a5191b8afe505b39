"""NodeResourcesBalancedAllocation: how the pod changes the balance (1 - std of the requested
fractions) * 100, as kube-scheduler v1.37 scores it: 50 + (50 + with - without) / 2."""

from __future__ import annotations

import pytest

from scheduler.config.pluginargs import NodeResourcesBalancedAllocationArgs, ResourceSpec
from scheduler.core.framework import SKIP, CycleState
from scheduler.plugins.noderesources.balancedallocation import (
    NodeResourcesBalancedAllocation,
    balance,
    balanced_score,
    improvement,
)

from ..builders import container, node_info, pod_info, run_score


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
    # small: cpu 3/4, memory 5/10 -> std |0.75 - 0.5| / 2 = 0.125 -> 87, empty 100 -> 50 + 37/2 = 68
    # large: 3/6 and 5/10 are equal -> 100, as empty -> 75
    assert run_score(plugin(), POD_3CPU_5GI, nodes) == {"small": 68, "large": 75}


def test_pods_on_the_node_count_with_their_real_requests():
    on_node = [pod_info("a", requests={"cpu": "1", "memory": "1Gi"}), pod_info("bare")]
    node = node_info("n", cpu="8", memory="10Gi", pods=on_node)
    # the request-less pod adds nothing: before cpu 1/8, memory 1/10 -> 98; after cpu (1+3)/8 = 0.5,
    # memory (1+5)/10 = 0.6 -> 95; 50 + (50 + 95 - 98) / 2 = 73
    assert run_score(plugin(), POD_3CPU_5GI, [node]) == {"n": 73}


def test_fractions_are_capped_at_one():
    node = node_info("n", cpu="2", memory="10Gi")
    # cpu 3/2 -> 1, memory 0.5 -> std 0.25 -> 75, empty 100 -> 50 + 25/2 = 62
    assert run_score(plugin(), POD_3CPU_5GI, [node]) == {"n": 62}


def test_best_effort_pods_are_not_scored():
    pl = plugin()
    assert pl.pre_score(CycleState(), pod_info(), [node_info("n")]) is SKIP
    # without PreScore a best-effort pod scores 0
    assert pl.score(CycleState(), pod_info(), node_info("n")) == 0
    # a pod requesting only one of the resources is scored
    assert run_score(pl, pod_info(requests={"memory": "5Gi"}), [node_info("n", cpu="4", memory="10Gi")]) == {
        "n": 62
    }


def test_three_resources_use_the_population_std():
    args = ("cpu", "memory", "nvidia.com/gpu")
    node = node_info("n", cpu="4", memory="10Gi", extended={"nvidia.com/gpu": 4})
    pod = pod_info(requests={"cpu": "1", "memory": "5Gi", "nvidia.com/gpu": "3"})
    # fractions 0.25, 0.5, 0.75: mean 0.5, std sqrt((0.0625 + 0 + 0.0625) / 3) = 0.2041 -> 79.6 -> 79;
    # empty 100 -> 50 + 29/2 = 64
    assert run_score(plugin(*args), pod, [node]) == {"n": 64}


def test_extended_resource_the_pod_does_not_request_is_left_out():
    node = node_info("n", cpu="4", memory="10Gi", extended={"nvidia.com/gpu": 4})
    assert run_score(plugin("cpu", "memory", "nvidia.com/gpu"), POD_3CPU_5GI, [node]) == {"n": 68}


def test_a_node_without_the_resources_scores_full():
    # only one fraction (memory): std 0 with the pod and without -> 75
    assert run_score(plugin(), POD_3CPU_5GI, [node_info("n", cpu=None, memory="10Gi")]) == {"n": 75}


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
def test_balance(values, want):
    assert balance(values) == want


@pytest.mark.parametrize(
    ("with_pod", "without_pod", "want"),
    [(100, 100, 75), (100, 50, 100), (50, 100, 50), (87, 100, 68), (93, 96, 73), (0, 100, 25), (0, 99, 26)],
)
def test_improvement_truncates_as_go(with_pod, without_pod, want):
    # (0, 99): 50 + (50 + 0 - 99) / 2 = 50 + (-49 / 2) = 50 - 24 in Go (toward zero), not 50 - 25
    assert improvement(with_pod, without_pod) == want


# kube-scheduler v1.37's balanced_allocation_test.go (TestNodeResourcesBalancedAllocation), memory in bytes.
@pytest.mark.parametrize(
    ("node", "scheduled", "pod", "want"),
    [
        # resources requested, pods scheduled with resources: 73 and 74
        (("10", "20000"), {"cpu": "3"}, {"cpu": "3", "memory": "5000"}, 73),
        (("10", "20000"), {"cpu": "3", "memory": "5000"}, {"cpu": "3", "memory": "5000"}, 74),
        # ... differently sized nodes: 70
        (("10", "50000"), {"cpu": "3", "memory": "5000"}, {"cpu": "3", "memory": "5000"}, 70),
        # nodes to reach min/max score: 100 and 50
        (("3", "5000"), {"cpu": "3"}, {"memory": "5000"}, 100),
        (("10", "5000"), {}, {"memory": "5000"}, 50),
        # requested resources at node capacity: 62 and 62
        (("6", "10000"), {"cpu": "3"}, {"cpu": "3"}, 62),
        (("6", "10000"), {"cpu": "3", "memory": "5000"}, {"cpu": "3"}, 62),
    ],
)
def test_upstream_cases(node, scheduled, pod, want):
    on_node = [pod_info("s", requests=scheduled)] if scheduled else []
    ni = node_info("n", cpu=node[0], memory=node[1], pods=on_node)
    assert run_score(plugin(), pod_info(requests=pod), [ni]) == {"n": want}


@pytest.mark.parametrize("seed", range(5))
def test_inlined_cpu_memory_scoring_equals_the_general_formula(seed):
    from .test_fit import random_cluster

    pod, nodes = random_cluster(seed)
    pl = plugin()
    reqs = pl.allocation.pod_requests(pod)
    assert run_score(pl, pod, nodes) == {
        n.name: balanced_score(
            pl.allocation.values(n, reqs), pl.allocation.values(n, reqs, include_pod=False)
        )
        for n in nodes
    }


def test_scores_follow_node_changes():
    pl = plugin()
    node = node_info("n", cpu="4", memory="10Gi")
    replica = {"requests": {"cpu": "1", "memory": "5Gi"}}
    # empty 100 -> 0.25 vs 0.5: 87 -> 68; after one replica lands: 87 -> 0.5 vs 1.0: 75 -> 69
    assert run_score(pl, pod_info("r1", **replica), [node]) == {"n": 68}
    node.add_pod(pod_info("r1", node_name="n", **replica))
    assert run_score(pl, pod_info("r2", **replica), [node]) == {"n": 69}
    # another shape on the same node: 87 -> (1+2)/4 vs (5+1)/10: 92 -> 77; then the replica's again
    assert run_score(pl, pod_info("other", requests={"cpu": "2", "memory": "1Gi"}), [node]) == {"n": 77}
    assert run_score(pl, pod_info("r2", **replica), [node]) == {"n": 69}
