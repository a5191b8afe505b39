"""What the placement benchmark simulates: nodes with uneven background load, pods whose real
usage differs from their requests, and the scenarios that arrange them in time.

Everything here is drawn from one seed, so that every contender meets the same nodes and the
same pods in the same order, and a run can be repeated. Usage is real CPU and memory as kwok
reports it (``kwokconfig``): each pod carries its usage in annotations, each node gets a
background pod (bound to it directly, requesting nothing, as a system daemon or a pod of
another scheduler would be) whose usage is the node's background load.

Pods, as reported of real clusters (requests set once and seldom revisited): most use well
under their request, some about what they ask, a few more; so requests predict usage badly,
which is where load-aware placement can win.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

NODE_CPU_MILLI = 8000
NODE_MEMORY = 32 * 2**30
REQUEST_CPU_CHOICES = (250, 500, 500, 1000)
"""Milli-CPU requests, drawn uniformly (500m twice as likely)."""
REQUEST_MEMORY_CHOICES = (256 * 2**20, 512 * 2**20, 1024 * 2**20)
LIMIT = 0.65
"""The Dynamic policy's CPU limit (crane's default maxLimitPecent): the line the goals use."""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    index: int
    background_milli: int
    """Real CPU the node spends on what no contender placed."""
    background_memory: int


@dataclass(frozen=True, slots=True)
class PodSpec:
    index: int
    at: float
    """Seconds from the scenario's start when the pod is created."""
    request_milli: int
    request_memory: int
    usage_milli: int
    """Its real CPU use, from the moment it runs."""
    usage_memory: int
    burst: int = -1
    """Which burst it belongs to (-1: none)."""


@dataclass(frozen=True, slots=True)
class Rise:
    """At ``at`` seconds, node ``node`` starts spending ``milli`` more CPU (a neighbour's job
    wakes up): a node that looked good when pods were placed on it stops being so."""

    at: float
    node: int
    milli: int


@dataclass(frozen=True, slots=True)
class Outage:
    """Prometheus is stopped from ``at`` for ``seconds``: the load data ages, then is missing."""

    at: float
    seconds: float


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    nodes: tuple[NodeSpec, ...]
    pods: tuple[PodSpec, ...]
    duration: float
    """Seconds from the first pod until the figures stop (the last pods have settled)."""
    rises: tuple[Rise, ...] = ()
    outages: tuple[Outage, ...] = ()
    bursts: dict[int, int] = field(default_factory=dict)
    """Burst id -> its number of pods."""


def draw_nodes(rng: random.Random, count: int) -> tuple[NodeSpec, ...]:
    """Uneven background: most nodes 5-35 % busy, a quarter 35-60 %."""
    nodes = []
    for i in range(count):
        share = rng.uniform(0.35, 0.6) if rng.random() < 0.25 else rng.uniform(0.05, 0.35)
        nodes.append(
            NodeSpec(
                i,
                int(share * NODE_CPU_MILLI),
                int(rng.uniform(0.1, 0.4) * NODE_MEMORY),
            )
        )
    return tuple(nodes)


def usage_ratio(rng: random.Random) -> float:
    """Real CPU over request: 60 % of pods 0.1-0.5, 25 % 0.5-1.0, 15 % 1.0-2.0."""
    r = rng.random()
    if r < 0.6:
        return rng.uniform(0.1, 0.5)
    if r < 0.85:
        return rng.uniform(0.5, 1.0)
    return rng.uniform(1.0, 2.0)


def draw_pod(rng: random.Random, index: int, at: float, burst: int = -1) -> PodSpec:
    request = rng.choice(REQUEST_CPU_CHOICES)
    memory = rng.choice(REQUEST_MEMORY_CHOICES)
    return PodSpec(
        index,
        round(at, 3),
        request,
        memory,
        max(1, int(request * usage_ratio(rng))),
        int(memory * rng.uniform(0.4, 1.0)),
        burst,
    )


def steady(seed: int, nodes: int, pods: int, every: float) -> Scenario:
    rng = random.Random(f"steady-{seed}")
    ns = draw_nodes(rng, nodes)
    ps = tuple(draw_pod(rng, i, i * every) for i in range(pods))
    return Scenario(
        "steady",
        f"{pods} pods, one every {every:g} s",
        ns,
        ps,
        duration=pods * every + 60,
    )


def bursts(seed: int, nodes: int, count: int, size: int, gap: float) -> Scenario:
    rng = random.Random(f"bursts-{seed}")
    ns = draw_nodes(rng, nodes)
    ps = []
    for b in range(count):
        for _ in range(size):
            ps.append(draw_pod(rng, len(ps), b * gap, burst=b))
    return Scenario(
        "bursts",
        f"{count} bursts of {size} pods created at once, {gap:g} s apart",
        ns,
        tuple(ps),
        duration=(count - 1) * gap + 90,
        bursts=dict.fromkeys(range(count), size),
    )


def rising(seed: int, nodes: int, pods: int, every: float) -> Scenario:
    """Steady arrivals; a third of the way in, the node that looked idlest (lowest background)
    gets 55 % of its CPU taken by a neighbour: placements there must stop."""
    rng = random.Random(f"rising-{seed}")
    ns = draw_nodes(rng, nodes)
    ps = tuple(draw_pod(rng, i, i * every) for i in range(pods))
    idlest = min(ns, key=lambda n: n.background_milli)
    at = round(pods * every / 3, 3)
    return Scenario(
        "rising",
        f"{pods} pods, one every {every:g} s; at {at:g} s node {idlest.index} (the idlest) "
        f"gets {int(0.55 * NODE_CPU_MILLI)}m more CPU use",
        ns,
        ps,
        duration=pods * every + 60,
        rises=(Rise(at, idlest.index, int(0.55 * NODE_CPU_MILLI)),),
    )


def outage(seed: int, nodes: int, pods: int, every: float, down: float) -> Scenario:
    """Steady arrivals with Prometheus stopped for ``down`` seconds a quarter of the way in."""
    rng = random.Random(f"outage-{seed}")
    ns = draw_nodes(rng, nodes)
    ps = tuple(draw_pod(rng, i, i * every) for i in range(pods))
    at = round(pods * every / 4, 3)
    return Scenario(
        "prometheus-gone",
        f"{pods} pods, one every {every:g} s; Prometheus stopped at {at:g} s for {down:g} s",
        ns,
        ps,
        duration=pods * every + 60,
        outages=(Outage(at, down),),
    )


SCENARIOS = ("steady", "bursts", "rising", "prometheus-gone")


def build(name: str, seed: int, nodes: int, scale: float = 1.0) -> Scenario:
    """Scenario ``name`` on ``nodes`` nodes; ``scale`` < 1 makes it shorter (fewer pods, the same
    pace), for a quick look."""
    pods = max(4, int(nodes * 6 * scale))
    if name == "steady":
        return steady(seed, nodes, pods, every=2.0)
    if name == "bursts":
        return bursts(seed, nodes, count=max(1, int(3 * scale + 0.5)), size=nodes * 2, gap=90.0)
    if name == "rising":
        return rising(seed, nodes, pods, every=2.0)
    if name == "prometheus-gone":
        return outage(seed, nodes, pods, every=2.0, down=max(30.0, 90.0 * scale))
    raise ValueError(f"unknown scenario {name!r}; expected one of: {', '.join(SCENARIOS)}")
