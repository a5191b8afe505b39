"""Scoring by resource allocation: what NodeResourcesFit and NodeResourcesBalancedAllocation share.

* :class:`ResourceAllocationScorer` gives a node's (requested, allocatable)
  pairs for the configured resources (``resourceAllocationScorer``), read
  from the plugin args with :func:`arg_field` and :func:`resource_specs`;
* :func:`strategy_scorer` scores those pairs by Fit's ``scoringStrategy``:
  LeastAllocated, MostAllocated or RequestedToCapacityRatio;
* :func:`cpu_memory_score_fn` and :func:`cpu_memory_score_nodes_fn` do the
  default (Least/MostAllocated over cpu and memory) without the pairs, since
  Score runs for every feasible node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from scheduler.core.framework import MAX_NODE_SCORE, CycleState, memoized_scores
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.core.resources import CPU, EPHEMERAL_STORAGE, MEMORY, Resource

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
MAX_CUSTOM_PRIORITY_SCORE = 10
"""Scores in a RequestedToCapacityRatio shape run 0..10; they are scaled to 0..100."""
MAX_UTILIZATION = 100

DEFAULT_RESOURCES: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))

_CPU, _MEM, _EPH, _SCALAR = range(4)

Values = list[tuple[int, int, int]]
"""(requested, allocatable, weight) per resource."""


# ---------------------------------------------------------------------------
# Argument access (the args dataclasses live in scheduler.config.pluginargs)


def arg_field(obj: Any, name: str, camel: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(camel, obj.get(name, default))
    return getattr(obj, name, default)


def resource_specs(specs: Iterable[Any] | None) -> tuple[tuple[str, int], ...]:
    """``[(name, weight)]`` from tuples, ``{"name", "weight"}`` dicts or objects; weight 0 means 1."""
    out = []
    for s in specs or ():
        if isinstance(s, tuple | list):
            name, weight = s[0], s[1] if len(s) > 1 else 1
        else:
            name, weight = arg_field(s, "name", "name"), arg_field(s, "weight", "weight", 1)
        out.append((str(name), int(weight or 1)))
    return tuple(out) or DEFAULT_RESOURCES


def _shape_points(points: Iterable[Any]) -> list[tuple[int, int]]:
    out = []
    for p in points or ():
        if isinstance(p, tuple | list):
            out.append((int(p[0]), int(p[1])))
        else:
            out.append((int(arg_field(p, "utilization", "utilization")), int(arg_field(p, "score", "score"))))
    return out


def _kind(name: str) -> int:
    return {CPU: _CPU, MEMORY: _MEM, EPHEMERAL_STORAGE: _EPH}.get(name, _SCALAR)


# ---------------------------------------------------------------------------
# Scoring functions over (requested, allocatable) per resource


def _go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def least_requested_score(requested: int, capacity: int) -> int:
    """``leastRequestedScore``: the free fraction, 0 once the node is full or over."""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    """``mostRequestedScore``: the used fraction, at most 100."""
    if capacity == 0:
        return 0
    # Pods without requests count with the non-zero defaults, which may overshoot.
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def broken_linear(shape: Sequence[tuple[int, int]]) -> Callable[[int], int]:
    """``helper.BuildBrokenLinearFunction``: linear between the (utilization, score) points."""
    pts = tuple(shape)

    def f(p: int) -> int:
        for i, (u, s) in enumerate(pts):
            if p <= u:
                if i == 0:
                    return s
                u0, s0 = pts[i - 1]
                return s0 + _go_div((s - s0) * (p - u0), u - u0)
        return pts[-1][1]

    return f


def weighted_scorer(per_resource: Callable[[int, int], int]) -> Callable[[Values], int]:
    """Least/MostAllocated: the weighted mean of per-resource scores, rounded down."""

    def score(values: Values) -> int:
        total = weights = 0
        for requested, allocatable, weight in values:
            total += per_resource(requested, allocatable) * weight
            weights += weight
        return total // weights if weights else 0

    return score


def ratio_scorer(shape: Sequence[tuple[int, int]]) -> Callable[[Values], int]:
    """RequestedToCapacityRatio: resources scoring 0 don't count; the mean is rounded half up."""
    f = broken_linear([(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape])

    def score(values: Values) -> int:
        total = weights = 0
        for requested, capacity, weight in values:
            s = f(min(requested * MAX_UTILIZATION // capacity, MAX_UTILIZATION))
            if s > 0:
                total += s * weight
                weights += weight
        return (2 * total + weights) // (2 * weights) if weights else 0  # math.Round, half up

    return score


def strategy_scorer(kind: str, strategy: Any) -> Callable[[Values], int]:
    """The score of a node's :data:`Values` under a ``scoringStrategy`` of type ``kind``."""
    if kind == LEAST_ALLOCATED:
        return weighted_scorer(least_requested_score)
    if kind == MOST_ALLOCATED:
        return weighted_scorer(most_requested_score)
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        rtcr = arg_field(strategy, "requested_to_capacity_ratio", "requestedToCapacityRatio")
        shape = _shape_points(arg_field(rtcr, "shape", "shape"))
        if not shape:
            raise ValueError("scoringStrategy.requestedToCapacityRatio.shape: at least one point is required")
        return ratio_scorer(shape)
    raise ValueError(f"scoring strategy {kind} is not supported")


ScoreFn = Callable[[CycleState, PodInfo, NodeInfo], int]


def cpu_memory_score_fn(
    kind: str, wc: int, wm: int, key: str, pod_requests: Callable[[PodInfo], tuple[int, int]]
) -> ScoreFn | None:
    """Least/MostAllocated over cpu and memory only (the default), as one Score function.

    ``state[key]`` holds the pod's (non-zero milli-cpu, memory); a weight of 0
    leaves that resource out. None for other strategies.
    """
    if kind == LEAST_ALLOCATED:
        per_resource = least_requested_score
    elif kind == MOST_ALLOCATED:
        per_resource = most_requested_score
    else:
        return None

    def score(state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        reqs = state.get(key)
        if reqs is None:  # PreScore disabled
            reqs = state[key] = pod_requests(pod)
        a = node.allocatable
        r = node.non_zero_requested
        total = weights = 0
        if a.milli_cpu and wc:
            total += per_resource(r.milli_cpu + reqs[0], a.milli_cpu) * wc
            weights += wc
        if a.memory and wm:
            total += per_resource(r.memory + reqs[1], a.memory) * wm
            weights += wm
        return total // weights if weights else 0

    return score


def cpu_memory_score_nodes_fn(
    kind: str, wc: int, wm: int, key: str, pod_requests: Callable[[PodInfo], tuple[int, int]]
) -> Callable[[CycleState, PodInfo, list[NodeInfo]], list[int]] | None:
    """``cpu_memory_score_fn`` over a list of nodes (``score_nodes``)."""
    one = cpu_memory_score_fn(kind, wc, wm, key, pod_requests)
    if one is None:
        return None
    most = kind == MOST_ALLOCATED

    memo_key = object()  # this function's entries in NodeInfo.memo

    def score_nodes(state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        reqs = state.get(key)
        if reqs is None:
            reqs = state[key] = pod_requests(pod)
        return memoized_scores(nodes, memo_key, reqs, lambda todo: compute(state, pod, reqs, todo))

    def compute(state: CycleState, pod: PodInfo, reqs: tuple[int, int], nodes: list[NodeInfo]) -> list[int]:
        pc, pm = reqs
        weights = wc + wm
        out = []
        for ni in nodes:
            a = ni.allocatable
            ac, am = a.milli_cpu, a.memory
            if not (ac and am and wc and wm):  # a resource left out: the general formula
                out.append(one(state, pod, ni))
                continue
            r = ni.non_zero_requested
            rc = r.milli_cpu + pc
            rm = r.memory + pm
            if most:
                sc = (rc if rc < ac else ac) * MAX_NODE_SCORE // ac
                sm = (rm if rm < am else am) * MAX_NODE_SCORE // am
            else:
                sc = (ac - rc) * MAX_NODE_SCORE // ac if rc <= ac else 0
                sm = (am - rm) * MAX_NODE_SCORE // am if rm <= am else 0
            out.append((sc * wc + sm * wm) // weights)
        return out

    return score_nodes


class ResourceAllocationScorer:
    """What Fit and BalancedAllocation share: the (requested, allocatable) pairs of a node.

    ``use_requested`` counts the node's real requests for cpu and memory (and
    the pod's, without defaults) instead of the non-zero ones.
    """

    def __init__(self, resources: Sequence[tuple[str, int]], use_requested: bool) -> None:
        self.resources = tuple((name, _kind(name), weight) for name, weight in resources)
        self.use_requested = use_requested

    def cpu_memory_weights(self) -> tuple[int, int] | None:
        """(cpu weight, memory weight) when only cpu and/or memory are configured (0: absent)."""
        weights = {CPU: 0, MEMORY: 0}
        for name, _, weight in self.resources:
            if name not in weights or weights[name]:
                return None
            weights[name] = weight
        return weights[CPU], weights[MEMORY]

    def pod_requests(self, pod: PodInfo) -> tuple[tuple[str, int, int, int], ...]:
        """(name, kind, weight, pod request) per configured resource."""
        nz = pod.requests if self.use_requested else pod.non_zero_requests
        out = []
        for name, kind, weight in self.resources:
            if kind == _CPU:
                req = nz.milli_cpu
            elif kind == _MEM:
                req = nz.memory
            elif kind == _EPH:
                req = pod.requests.ephemeral_storage
            else:
                req = pod.requests.scalar.get(name, 0)
            out.append((name, kind, weight, req))
        return tuple(out)

    def values(
        self,
        node: NodeInfo,
        pod_requests: tuple[tuple[str, int, int, int], ...],
        include_pod: bool = True,
    ) -> Values:
        """(requested incl. the pod, allocatable, weight) for resources the node has; with
        ``include_pod`` False, the same resources without the pod's requests (``allocated``
        of ``calculateNodeAllocatableRequest``)."""
        alloc = node.allocatable
        used: Resource = node.requested if self.use_requested else node.non_zero_requested
        out = []
        for name, kind, weight, pod_req in pod_requests:
            req = pod_req if include_pod else 0
            if kind == _CPU:
                a, r = alloc.milli_cpu, used.milli_cpu + req
            elif kind == _MEM:
                a, r = alloc.memory, used.memory + req
            elif kind == _EPH:
                a, r = alloc.ephemeral_storage, node.requested.ephemeral_storage + req
            else:
                # An extended resource the pod doesn't ask for, or the node lacks, is left out.
                if pod_req == 0:
                    continue
                a = alloc.scalar.get(name, 0)
                r = node.requested.scalar.get(name, 0) + req
            if a:
                out.append((r, a, weight))
        return out
