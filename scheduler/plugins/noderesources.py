"""NodeResourcesFit: the node must have room for the pod's requests; score by allocation.

Filter compares the pod's requests (``PodInfo.requests``) with what the
node's pods already request, resource by resource, and the pod count with the
node's ``pods`` allocatable. Reasons are kube-scheduler's ("Insufficient cpu",
"Too many pods", ...). The rejection cannot be resolved by preemption when
the pod asks for more than the node has at all.

Score follows ``scoringStrategy``: LeastAllocated (default; emptier nodes
win), MostAllocated (fuller nodes win) or RequestedToCapacityRatio (a
piecewise-linear function of utilization). Scoring counts cpu and memory with
the non-zero defaults for containers that request nothing (100m / 200Mi).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

from scheduler.core.framework import (
    MAX_NODE_SCORE,
    CycleState,
    Snapshot,
    Status,
    filter_each,
    memoized_scores,
)
from scheduler.core.framework import Code as _Code
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
_SCORE_KEY = "NodeResourcesFit/score"
_FILTER_KEY = "NodeResourcesFit"


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


def is_extended_resource_name(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``: a ``domain/name`` outside ``kubernetes.io``."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _kind(name: str) -> int:
    return {CPU: _CPU, MEMORY: _MEM, EPHEMERAL_STORAGE: _EPH}.get(name, _SCALAR)


# ---------------------------------------------------------------------------
# Scoring functions over (requested, allocatable) per resource


def _go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
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


def weighted_scorer(per_resource: Callable[[int, int], int]) -> Callable[[list[tuple[int, int, int]]], int]:
    """Least/MostAllocated: the weighted mean of per-resource scores, rounded down."""

    def score(values: list[tuple[int, int, int]]) -> int:
        total = weights = 0
        for requested, allocatable, weight in values:
            total += per_resource(requested, allocatable) * weight
            weights += weight
        return total // weights if weights else 0

    return score


def ratio_scorer(shape: Sequence[tuple[int, int]]) -> Callable[[list[tuple[int, int, int]]], int]:
    """RequestedToCapacityRatio: resources scoring 0 don't count; the mean is rounded half up."""
    f = broken_linear([(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape])

    def score(values: list[tuple[int, int, int]]) -> int:
        total = weights = 0
        for requested, capacity, weight in values:
            s = f(min(requested * MAX_UTILIZATION // capacity, MAX_UTILIZATION))
            if s > 0:
                total += s * weight
                weights += weight
        return (2 * total + weights) // (2 * weights) if weights else 0  # math.Round, half up

    return score


ScoreFn = Callable[[CycleState, PodInfo, NodeInfo], int]


def cpu_memory_score_fn(
    kind: str, wc: int, wm: int, key: str, pod_requests: Callable[[PodInfo], tuple[int, int]]
) -> ScoreFn | None:
    """Least/MostAllocated over cpu and memory only (the default), as one inlined Score function.

    ``state[key]`` holds the pod's (non-zero milli-cpu, memory); a weight of 0
    leaves that resource out. None for other strategies.
    """
    if kind == LEAST_ALLOCATED:

        def least(state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
            reqs = state.get(key)
            if reqs is None:  # PreScore disabled
                reqs = state[key] = pod_requests(pod)
            a = node.allocatable
            r = node.non_zero_requested
            ac, am = a.milli_cpu, a.memory
            total = weights = 0
            if ac and wc:
                rc = r.milli_cpu + reqs[0]
                if rc <= ac:
                    total += (ac - rc) * MAX_NODE_SCORE // ac * wc
                weights += wc
            if am and wm:
                rm = r.memory + reqs[1]
                if rm <= am:
                    total += (am - rm) * MAX_NODE_SCORE // am * wm
                weights += wm
            return total // weights if weights else 0

        return least
    if kind == MOST_ALLOCATED:

        def most(state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
            reqs = state.get(key)
            if reqs is None:
                reqs = state[key] = pod_requests(pod)
            a = node.allocatable
            r = node.non_zero_requested
            ac, am = a.milli_cpu, a.memory
            total = weights = 0
            if ac and wc:
                rc = r.milli_cpu + reqs[0]
                total += (rc if rc < ac else ac) * MAX_NODE_SCORE // ac * wc
                weights += wc
            if am and wm:
                rm = r.memory + reqs[1]
                total += (rm if rm < am else am) * MAX_NODE_SCORE // am * wm
                weights += wm
            return total // weights if weights else 0

        return most
    return None


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
    ) -> list[tuple[int, int, int]]:
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


# ---------------------------------------------------------------------------
# The plugin


def _non_zero_cpu_memory(pod: PodInfo) -> tuple[int, int]:
    nz = pod.non_zero_requests
    return (nz.milli_cpu, nz.memory)


class NodeResourcesFit:
    name: ClassVar[str] = "NodeResourcesFit"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        self.ignored_resources = frozenset(arg_field(args, "ignored_resources", "ignoredResources") or ())
        self.ignored_groups = frozenset(
            arg_field(args, "ignored_resource_groups", "ignoredResourceGroups") or ()
        )
        strategy = arg_field(args, "scoring_strategy", "scoringStrategy")
        kind = arg_field(strategy, "type", "type") or LEAST_ALLOCATED
        resources = resource_specs(arg_field(strategy, "resources", "resources"))
        if kind == LEAST_ALLOCATED:
            self._scorer = weighted_scorer(least_requested_score)
        elif kind == MOST_ALLOCATED:
            self._scorer = weighted_scorer(most_requested_score)
        elif kind == REQUESTED_TO_CAPACITY_RATIO:
            rtcr = arg_field(strategy, "requested_to_capacity_ratio", "requestedToCapacityRatio")
            shape = _shape_points(arg_field(rtcr, "shape", "shape"))
            if not shape:
                raise ValueError(
                    "scoringStrategy.requestedToCapacityRatio.shape: at least one point is required"
                )
            self._scorer = ratio_scorer(shape)
        else:
            raise ValueError(f"scoring strategy {kind} is not supported")
        self.strategy = kind
        self.allocation = ResourceAllocationScorer(resources, use_requested=False)
        weights = self.allocation.cpu_memory_weights()
        self._inlined = (
            None if weights is None else cpu_memory_score_fn(kind, *weights, _SCORE_KEY, _non_zero_cpu_memory)
        )
        if self._inlined is not None and weights is not None:
            # The default configuration: Score is one inlined function (it runs for every node),
            # and so is its loop over many nodes.
            self.score = self._inlined  # type: ignore[method-assign]
            self.score_nodes = cpu_memory_score_nodes_fn(kind, *weights, _SCORE_KEY, _non_zero_cpu_memory)

    # --- filtering ---------------------------------------------------------------

    def _ignored(self, name: str) -> bool:
        if not is_extended_resource_name(name):
            return False
        return name in self.ignored_resources or (
            bool(self.ignored_groups) and name.split("/", 1)[0] in self.ignored_groups
        )

    def _wanted(self, pod: PodInfo) -> tuple[int, int, int, tuple[tuple[str, int], ...]]:
        req = pod.requests
        scalars = tuple((n, q) for n, q in req.scalar.items() if q > 0 and not self._ignored(n))
        return (req.milli_cpu, req.memory, req.ephemeral_storage, scalars)

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        state[_FILTER_KEY] = self._wanted(pod)
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        want = state.get(_FILTER_KEY)
        if want is None:  # PreFilter disabled
            want = state[_FILTER_KEY] = self._wanted(pod)
        cpu, mem, eph, scalars = want
        alloc = node.allocatable
        reasons: list[str] | None = None
        if len(node.pods) + 1 > alloc.allowed_pod_number:
            reasons = ["Too many pods"]
        if not (cpu or mem or eph or scalars):
            return None if reasons is None else Status(_Code.UNSCHEDULABLE, tuple(reasons))
        used = node.requested
        unresolvable = False
        if cpu and cpu > alloc.milli_cpu - used.milli_cpu:
            reasons = (reasons or []) + ["Insufficient cpu"]
            unresolvable |= cpu > alloc.milli_cpu
        if mem and mem > alloc.memory - used.memory:
            reasons = (reasons or []) + ["Insufficient memory"]
            unresolvable |= mem > alloc.memory
        if eph and eph > alloc.ephemeral_storage - used.ephemeral_storage:
            reasons = (reasons or []) + ["Insufficient ephemeral-storage"]
            unresolvable |= eph > alloc.ephemeral_storage
        for name, q in scalars:
            have = alloc.scalar.get(name, 0)
            if q > have - used.scalar.get(name, 0):
                reasons = (reasons or []) + [f"Insufficient {name}"]
                unresolvable |= q > have
        if reasons is None:
            return None
        code = _Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else _Code.UNSCHEDULABLE
        return Status(code, tuple(reasons))

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> list[Status | None] | None:
        """``filter`` over many nodes: a quick check of pods, cpu and memory first; only nodes
        that fail it, or pods asking for other resources, take the full path."""
        want = state.get(_FILTER_KEY)
        if want is None:
            want = state[_FILTER_KEY] = self._wanted(pod)
        cpu, mem, eph, scalars = want
        if eph or scalars:
            return filter_each(self.filter, state, pod, nodes)
        failed = [
            i
            for i, ni in enumerate(nodes)
            if len(ni.pods) >= ni.allocatable.allowed_pod_number
            or cpu > ni.allocatable.milli_cpu - ni.requested.milli_cpu
            or mem > ni.allocatable.memory - ni.requested.memory
        ]
        if not failed:
            return None
        results: list[Status | None] = [None] * len(nodes)
        for i in failed:
            results[i] = self.filter(state, pod, nodes[i])
        return results

    # --- scoring -----------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        state[_SCORE_KEY] = (
            _non_zero_cpu_memory(pod) if self._inlined is not None else self.allocation.pod_requests(pod)
        )
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        """The general path; the default configuration replaces it with an inlined function."""
        reqs = state.get(_SCORE_KEY)
        if reqs is None:  # PreScore disabled
            reqs = state[_SCORE_KEY] = self.allocation.pod_requests(pod)
        return self._scorer(self.allocation.values(node, reqs))
