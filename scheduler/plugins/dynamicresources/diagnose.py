"""Why each of a pod's claims can or cannot be allocated on one node, for ``explain``.

Filter answers a node with one verdict for all the pod's claims ("cannot
allocate all claims", as kube-scheduler words it). ``explain`` says more, per
claim: allocated already, and where; the devices this node would give it; or,
when it cannot be met, how many devices each request wants, how many of the
node's devices it may have (class and request selectors, taints), and how
many of those are free. A claim whose requests each find enough free devices
but still cannot be met fails on its constraints or on capacity, or on the
devices the pod's other claims take.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scheduler.plugins.dynamicresources.allocator import Allocation, AllocationError, Allocator
from scheduler.plugins.nodeselector import NodeSelector

Obj = Mapping[str, Any]


def claim_key(claim: Obj) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def describe(
    claims: Sequence[Obj],
    pending: Sequence[Obj],
    selectors: Sequence[tuple[Obj, NodeSelector]],
    allocated_here: Sequence[Allocation] | None,
    allocator: Callable[[], Allocator],
    node: str,
    labels: Mapping[str, str],
) -> list[dict[str, str]]:
    """One ``{"claim", "verdict"}`` per claim of the pod, in the pod's order.

    ``allocated_here``: what Filter allocated on the node for the pending claims (None when it
    found no allocation); ``allocator``: a fresh allocator over the node's devices."""
    out = []
    pending_ids = [id(c) for c in pending]
    selector_of = {id(c): sel for c, sel in selectors}
    for claim in claims:
        if id(claim) not in pending_ids:
            out.append(
                {
                    "claim": claim_key(claim),
                    "verdict": _allocated(claim, selector_of.get(id(claim)), node, labels),
                }
            )
            continue
        index = pending_ids.index(id(claim))
        if allocated_here is not None:
            devices = ", ".join("/".join(r.device.id) for r in allocated_here[index].results)
            verdict = f"would get {devices}" if devices else "would get no device"
        else:
            verdict = _why_not(claim, allocator)
        out.append({"claim": claim_key(claim), "verdict": verdict})
    return out


def _allocated(claim: Obj, selector: NodeSelector | None, node: str, labels: Mapping[str, str]) -> str:
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
        "results"
    ) or ()
    devices = ", ".join(f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in results)
    if selector is not None and not selector.matches(labels, node):
        return f"allocated already ({devices or 'no device'}), for other nodes: its node selector excludes this one"
    return f"allocated already ({devices or 'no device'})"


def _why_not(claim: Obj, allocator: Callable[[], Allocator]) -> str:
    try:
        alone = allocator().allocate([claim])
        survey = allocator().survey(claim)
    except AllocationError as e:
        return f"cannot be allocated: {e}"
    if alone is not None:
        return "can be allocated alone, not beside the pod's other claims"
    # By request: a request is short of devices when each of its alternatives is.
    by_request: dict[str, list[tuple[str, str, int, int]]] = {}
    for entry in survey:
        by_request.setdefault(entry[0].split("/")[0], []).append(entry)
    short = [alts for alts in by_request.values() if all(_short(*e) for e in alts)]
    described = "; ".join(
        f"request {name}: wants {wanted}, {matching} match, {free} free"
        for alts in (short or by_request.values())
        for name, wanted, matching, free in alts
    )
    if short:
        return f"cannot be allocated: {described}"
    return f"cannot be allocated: enough free devices for each request, not for all at once (constraints, counters or capacity): {described}"


def _short(name: str, wanted: str, matching: int, free: int) -> bool:
    if wanted == "all":
        return matching == 0 or free < matching
    return free < int(wanted)
