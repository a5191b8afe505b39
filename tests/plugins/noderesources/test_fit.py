"""NodeResourcesFit: filtering on requests and pod count, and the three scoring strategies."""

from __future__ import annotations

import pytest

from scheduler.config.pluginargs import (
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)
from scheduler.core.framework import Code
from scheduler.core.resources import is_extended_resource_name
from scheduler.plugins.noderesources.fit import NodeResourcesFit
from scheduler.plugins.noderesources.scoring import broken_linear

from ..builders import container, node_info, pod_info, run_filter, run_score

EXT_A, EXT_B = "example.com/aaa", "example.com/bbb"
HUGEPAGES = "hugepages-2Mi"


def small_node(*pods, **kwargs):
    """kube's fit_test node: 10m cpu, 20 bytes memory, 32 pods, 5 of example.com/aaa,
    20 bytes of ephemeral storage, 5 hugepages-2Mi."""
    return node_info(
        "n1",
        allocatable={
            "cpu": "10m",
            "memory": "20",
            "pods": 32,
            "ephemeral-storage": "20",
            EXT_A: 5,
            HUGEPAGES: 5,
        },
        pods=list(pods),
        **kwargs,
    )


def used(cpu="0", memory="0", **extra):
    """A pod already on the node with these requests."""
    reqs = {"cpu": cpu, "memory": memory, **extra}
    return pod_info("existing", requests=reqs)


def verdict(pod, node, args=None):
    st = run_filter(NodeResourcesFit(args, None), pod, [node])[node.name]
    return None if st is None else (st.code, st.reasons)


U, UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


@pytest.mark.parametrize(
    ("pod_kwargs", "existing", "want"),
    [
        # a pod requesting nothing always fits (but for the pod count)
        ({}, used("10m", "20"), None),
        (
            {"requests": {"cpu": "1m", "memory": "1"}},
            used("10m", "20"),
            (U, ("Insufficient cpu", "Insufficient memory")),
        ),
        ({"requests": {"cpu": "1m", "memory": "1"}}, used("5m", "5"), None),
        ({"requests": {"cpu": "2m", "memory": "1"}}, used("9m", "5"), (U, ("Insufficient cpu",))),
        ({"requests": {"cpu": "1m", "memory": "2"}}, used("5m", "19"), (U, ("Insufficient memory",))),
        ({"requests": {"cpu": "5m", "memory": "19"}}, used("5m", "1"), None),  # exactly full
        # more than the node has at all: preemption could not help
        ({"requests": {"cpu": "11m", "memory": "1"}}, used(), (UU, ("Insufficient cpu",))),
        (
            {"requests": {"cpu": "11m", "memory": "2"}},
            used("1m", "19"),
            (UU, ("Insufficient cpu", "Insufficient memory")),
        ),
        # ephemeral storage
        (
            {"requests": {"ephemeral-storage": "10"}},
            used(**{"ephemeral-storage": "15"}),
            (U, ("Insufficient ephemeral-storage",)),
        ),
        ({"requests": {"ephemeral-storage": "25"}}, used(), (UU, ("Insufficient ephemeral-storage",))),
        ({"requests": {"ephemeral-storage": "5"}}, used(**{"ephemeral-storage": "15"}), None),
        # extended resources and hugepages
        ({"requests": {EXT_A: "1"}}, used(), None),
        ({"requests": {EXT_A: "10"}}, used(), (UU, (f"Insufficient {EXT_A}",))),  # over capacity
        ({"requests": {EXT_A: "1"}}, used(**{EXT_A: "5"}), (U, (f"Insufficient {EXT_A}",))),  # all in use
        ({"requests": {EXT_B: "1"}}, used(), (UU, (f"Insufficient {EXT_B}",))),  # node lacks it
        ({"requests": {EXT_B: "0"}}, used(), None),  # zero is skipped
        ({"requests": {HUGEPAGES: "3"}}, used(**{HUGEPAGES: "3"}), (U, (f"Insufficient {HUGEPAGES}",))),
        ({"requests": {HUGEPAGES: "6"}}, used(), (UU, (f"Insufficient {HUGEPAGES}",))),
    ],
)
def test_filter(pod_kwargs, existing, want):
    assert verdict(pod_info(**pod_kwargs), small_node(existing)) == want


def test_init_containers_count_at_their_peak():
    # init 3m runs alone (3m), then the app containers (1m): the pod needs 3m.
    pod = pod_info(
        containers=[container(cpu="1m", memory="1")],
        init_containers=[container("init", cpu="3m", memory="1")],
    )
    assert verdict(pod, small_node(used("8m", "19"))) == (U, ("Insufficient cpu",))
    assert verdict(pod, small_node(used("7m", "19"))) is None


def test_sidecars_add_to_the_app_containers():
    pod = pod_info(
        containers=[container(cpu="2m")],
        init_containers=[container("sidecar", cpu="2m", restart_policy="Always")],
    )
    assert verdict(pod, small_node(used("7m"))) == (U, ("Insufficient cpu",))
    assert verdict(pod, small_node(used("6m"))) is None


def test_overhead_counts():
    pod = pod_info(requests={"cpu": "1m", "memory": "1"}, overhead={"cpu": "3m", "memory": "13"})
    assert verdict(pod, small_node(used("5m", "5"))) is None  # 4m / 14 of 5m / 15 free
    assert verdict(pod, small_node(used("5m", "7"))) == (U, ("Insufficient memory",))


def test_too_many_pods_applies_to_pods_requesting_nothing():
    node = node_info("n1", allocatable={"cpu": "1", "memory": "1Gi", "pods": 1}, pods=[used()])
    assert verdict(pod_info(), node) == (U, ("Too many pods",))
    assert verdict(pod_info(requests={"cpu": "2"}), node) == (UU, ("Too many pods", "Insufficient cpu"))
    # a node without a pods allocatable takes no pod at all
    assert verdict(pod_info(), node_info("n2", allocatable={"cpu": "1"})) == (U, ("Too many pods",))


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (None, (UU, (f"Insufficient {EXT_B}",))),
        (NodeResourcesFitArgs(ignored_resources=(EXT_B,)), None),
        (NodeResourcesFitArgs(ignored_resource_groups=("example.com",)), None),
        (NodeResourcesFitArgs(ignored_resource_groups=("example",)), (UU, (f"Insufficient {EXT_B}",))),
    ],
)
def test_ignored_extended_resources(args, want):
    assert verdict(pod_info(requests={EXT_B: "1"}), small_node(), args) == want


def test_native_resources_cannot_be_ignored():
    args = NodeResourcesFitArgs(
        ignored_resources=(HUGEPAGES, "kubernetes.io/foo"), ignored_resource_groups=("kubernetes.io",)
    )
    assert verdict(pod_info(requests={HUGEPAGES: "6"}), small_node(), args) == (
        UU,
        (f"Insufficient {HUGEPAGES}",),
    )
    assert verdict(pod_info(requests={"kubernetes.io/foo": "1"}), small_node(), args) == (
        UU,
        ("Insufficient kubernetes.io/foo",),
    )


@pytest.mark.parametrize(
    ("name", "extended"),
    [
        ("example.com/aaa", True),
        ("nvidia.com/gpu", True),
        ("cpu", False),
        ("hugepages-2Mi", False),
        ("kubernetes.io/foo", False),
        ("requests.example.com/x", False),
    ],
)
def test_is_extended_resource_name(name, extended):
    assert is_extended_resource_name(name) is extended


# ---------------------------------------------------------------------------
# Scoring


def strategy(kind, resources=(("cpu", 1), ("memory", 1)), shape=None):
    rtcr = None
    if shape is not None:
        rtcr = RequestedToCapacityRatioParam(tuple(UtilizationShapePoint(u, s) for u, s in shape))
    return NodeResourcesFitArgs(
        scoring_strategy=ScoringStrategy(
            type=kind,
            resources=tuple(ResourceSpec(n, w) for n, w in resources),
            requested_to_capacity_ratio=rtcr,
        )
    )


def scores(args, pod, nodes):
    return run_score(NodeResourcesFit(args, None), pod, nodes)


TWO_NODES = [node_info("small", cpu="4", memory="10Gi"), node_info("large", cpu="6", memory="10Gi")]
POD_3CPU_5GI = pod_info(
    containers=[container("a", cpu="1", memory="2Gi"), container("b", cpu="2", memory="3Gi")]
)


def test_least_allocated_is_the_default():
    # small: cpu (4000-3000)*100/4000 = 25, memory 50 -> 37; large: cpu 50, memory 50 -> 50
    assert scores(None, POD_3CPU_5GI, TWO_NODES) == {"small": 37, "large": 50}
    assert scores(strategy("LeastAllocated"), POD_3CPU_5GI, TWO_NODES) == {"small": 37, "large": 50}


def test_least_allocated_counts_the_node_pods_and_defaults_for_pods_without_requests():
    node = node_info("n", cpu="1", memory="1000Mi", pods=[pod_info("bare")])
    # node: 100m + 200Mi for the request-less pod; the new pod likewise.
    # cpu (1000-200)*100/1000 = 80, memory (1000-400)*100/1000 = 60 -> 70
    assert scores(None, pod_info("new"), [node]) == {"n": 70}


def test_least_allocated_weights_and_overcommit():
    args = strategy("LeastAllocated", (("cpu", 1), ("memory", 3)))
    # small: cpu 25*1 + memory 50*3 = 175 / 4 = 43
    assert scores(args, POD_3CPU_5GI, TWO_NODES)["small"] == 43
    big = pod_info(requests={"cpu": "5", "memory": "1Gi"})
    # requested over capacity scores 0 for that resource: (0 + 90*3) / 4 = 67
    assert scores(args, big, [TWO_NODES[0]]) == {"small": 67}


def test_most_allocated():
    # small: cpu 3000*100/4000 = 75, memory 50 -> 62; large: 50, 50 -> 50
    assert scores(strategy("MostAllocated"), POD_3CPU_5GI, TWO_NODES) == {"small": 62, "large": 50}
    big = pod_info(requests={"cpu": "8", "memory": "5Gi"})
    # over capacity is capped at 100: (100 + 50) / 2
    assert scores(strategy("MostAllocated"), big, [TWO_NODES[0]]) == {"small": 75}


def test_extended_resources_score_only_when_the_pod_asks_and_the_node_has_them():
    args = strategy("MostAllocated", (("cpu", 1), ("memory", 1), ("nvidia.com/gpu", 2)))
    gpu_node = node_info("gpu", cpu="4", memory="10Gi", extended={"nvidia.com/gpu": 4})
    plain = node_info("plain", cpu="4", memory="10Gi")
    # without a gpu request the gpu is left out: (75 + 50) / 2 on both nodes
    assert scores(args, POD_3CPU_5GI, [gpu_node, plain]) == {"gpu": 62, "plain": 62}
    gpu_pod = pod_info(requests={"cpu": "3", "memory": "5Gi", "nvidia.com/gpu": "1"})
    # gpu node: (75 + 50 + 25*2) / 4 = 43; plain node lacks the gpu: (75 + 50) / 2
    assert scores(args, gpu_pod, [gpu_node, plain]) == {"gpu": 43, "plain": 62}


def test_requested_to_capacity_ratio_bin_packing_example():
    # The bin-packing example of the Kubernetes docs ("Resource Bin Packing"),
    # on the 0..100 scale kube-scheduler uses now (shape scores times 10).
    args = strategy(
        "RequestedToCapacityRatio",
        (("intel.com/foo", 5), ("memory", 1), ("cpu", 3)),
        shape=((0, 0), (100, 10)),
    )
    on_node = pod_info("on-node", requests={"intel.com/foo": "1", "memory": "256Mi", "cpu": "1"})
    node1 = node_info("node1", cpu="8", memory="1Gi", extended={"intel.com/foo": 4}, pods=[on_node])
    pod = pod_info("new", requests={"intel.com/foo": "2", "memory": "256Mi", "cpu": "2"})
    # foo 3/4 -> 75, memory 512Mi/1Gi -> 50, cpu 3/8 -> 37 (integer percent)
    # (75*5 + 50*1 + 37*3) / 9 = 536 / 9 = 59.6 -> rounds to 60
    assert scores(args, pod, [node1]) == {"node1": 60}


def test_requested_to_capacity_ratio_ignores_resources_scoring_zero():
    args = strategy("RequestedToCapacityRatio", (("cpu", 1), ("memory", 3)), shape=((0, 0), (100, 10)))
    node = node_info("n", cpu="4", memory="10Gi")
    # memory is requested only via the 200Mi default: 200Mi*100//10Gi = 1 -> score 1 (kept);
    # a cpu-only pod at 2/4 -> 50.  (50 + 1*3) / 4 = 13.25 -> 13
    pod = pod_info(containers=[container(cpu="2")])
    assert scores(args, pod, [node]) == {"n": 13}
    # with memory really requested as 0 a resource scoring 0 drops out of the weights
    args_cpu_eph = strategy(
        "RequestedToCapacityRatio", (("cpu", 1), ("ephemeral-storage", 3)), shape=((0, 0), (100, 10))
    )
    node_eph = node_info("e", cpu="4", memory="10Gi", ephemeral_storage="100Gi")
    assert scores(args_cpu_eph, pod, [node_eph]) == {"e": 50}


def test_broken_linear_truncates_toward_zero_like_go():
    f = broken_linear([(0, 100), (30, 0)])
    # 100 + (-100 * 10) / 30: Go truncates -33.3 to -33
    assert f(10) == 67
    assert f(0) == 100 and f(30) == 0 and f(80) == 0
    g = broken_linear([(20, 40), (60, 80)])
    assert (g(0), g(20), g(40), g(60), g(100)) == (40, 40, 60, 80, 80)


def test_requested_to_capacity_ratio_decreasing_shape():
    args = strategy("RequestedToCapacityRatio", (("cpu", 1),), shape=((0, 10), (30, 0)))
    pod = pod_info(requests={"cpu": "400m"})
    # 400m of 4 cores = 10% utilization -> 67 (see above)
    assert scores(args, pod, [node_info("n", cpu="4", memory="10Gi")]) == {"n": 67}


def test_unknown_strategy_or_missing_shape_is_rejected():
    with pytest.raises(ValueError, match="not supported"):
        NodeResourcesFit(strategy("Balanced"), None)
    with pytest.raises(ValueError, match="shape"):
        NodeResourcesFit(strategy("RequestedToCapacityRatio", shape=()), None)


def random_cluster(seed: int, n: int = 60):
    import random

    rng = random.Random(seed)
    nodes = []
    for i in range(n):
        pods = [
            pod_info(
                f"p{i}-{j}",
                requests={
                    k: v
                    for k, v in (("cpu", f"{rng.randint(0, 3000)}m"), ("memory", f"{rng.randint(0, 6000)}Mi"))
                    if rng.random() < 0.8
                },
            )
            for j in range(rng.randint(0, 6))
        ]
        nodes.append(
            node_info(
                f"n{i}", cpu=str(rng.choice([0, 2, 4, 8])), memory=f"{rng.choice([0, 4, 8, 16])}Gi", pods=pods
            )
        )
    pod = pod_info("new", requests={"cpu": f"{rng.randint(1, 4000)}m", "memory": f"{rng.randint(1, 9000)}Mi"})
    return pod, nodes


@pytest.mark.parametrize("kind", ["LeastAllocated", "MostAllocated"])
@pytest.mark.parametrize("weights", [(("cpu", 1), ("memory", 1)), (("memory", 5), ("cpu", 2)), (("cpu", 3),)])
@pytest.mark.parametrize("seed", range(5))
def test_inlined_cpu_memory_scoring_equals_the_general_path(kind, weights, seed):
    pod, nodes = random_cluster(seed)
    pl = NodeResourcesFit(strategy(kind, weights), None)
    assert pl._inlined is not None
    general = pl._scorer
    reqs = pl.allocation.pod_requests(pod)
    got = run_score(pl, pod, nodes)
    assert got == {n.name: general(pl.allocation.values(n, reqs)) for n in nodes}


# ---------------------------------------------------------------------------
# Replicas of one shape, one after the other


def test_verdicts_follow_node_changes():
    pl = NodeResourcesFit(None, None)
    node = node_info("n", cpu="2", memory="4Gi")
    replica = {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert run_filter(pl, pod_info("r1", **replica), [node])["n"] is None
    before = run_score(pl, pod_info("r1", **replica), [node])["n"]
    node.add_pod(pod_info("r1", node_name="n", **replica))
    # the same shape again, on the changed node
    assert run_filter(pl, pod_info("r2", **replica), [node])["n"] is None
    after = run_score(pl, pod_info("r2", **replica), [node])["n"]
    assert after < before
    node.add_pod(pod_info("r2", node_name="n", **replica))
    assert run_filter(pl, pod_info("r3", **replica), [node])["n"].reasons == ("Insufficient cpu",)


def test_plugins_configured_differently_keep_their_own_verdicts():
    node = node_info("n", cpu="2", memory="4Gi")
    pod = pod_info(requests={"example.com/x": "1"})
    strict = NodeResourcesFit(None, None)
    lenient = NodeResourcesFit(NodeResourcesFitArgs(ignored_resource_groups=("example.com",)), None)
    assert run_filter(strict, pod, [node])["n"] is not None
    assert run_filter(lenient, pod, [node])["n"] is None
    assert run_filter(strict, pod, [node])["n"] is not None
    least = run_score(NodeResourcesFit(strategy("LeastAllocated"), None), POD_3CPU_5GI, [TWO_NODES[0]])
    most = run_score(NodeResourcesFit(strategy("MostAllocated"), None), POD_3CPU_5GI, [TWO_NODES[0]])
    assert (least, most) == ({"small": 37}, {"small": 62})
