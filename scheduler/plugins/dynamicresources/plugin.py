"""DynamicResources: pods with ResourceClaims get their devices allocated, and only then a node.

kube-scheduler's plugin (``pkg/scheduler/framework/plugins/dynamicresources``):

* PreFilter finds the pod's claims (:mod:`.claims`). A claim that does not
  exist yet, is not the pod's, or is being deleted keeps the pod waiting; a
  claim already allocated only allows the nodes of its allocation's node
  selector, and one reserved for as many consumers as allowed is in use.
* Filter allocates the claims not allocated yet on the node
  (:mod:`.allocator`): "cannot allocate all claims" when the node's devices
  do not suffice; a selector that fails, or a DeviceClass that does not exist,
  is the pod's condition on every node.
* PostFilter, when no node fits, takes back an allocated claim that kept the
  pod off a node and that no other pod uses.
* Score prefers the nodes where prioritized lists (``firstAvailable``) are met
  by earlier alternatives.
* Reserve records the allocation as assumed, so the next pods' cycles see its
  devices as taken; Unreserve forgets it.
* PreBind writes it (:mod:`.writes`): the delete-protection finalizer, then
  ``status.allocation`` and the pod in ``status.reservedFor``.

Extended resources that a DeviceClass provides (:mod:`.extended`) are allocated
the same way, through a claim for the pod planned per node in Filter and
created in PreBind; Unreserve deletes it again, and PostFilter deletes one an
earlier, failed binding left behind.

Pods with neither claims nor such resources skip the plugin.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from scheduler.core.framework import (
    MAX_NODE_SCORE,
    SKIP,
    CycleState,
    Handle,
    NodeStatuses,
    PostFilterResult,
    Snapshot,
    Status,
    error,
    unresolvable,
    unschedulable,
)
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.logs import V, kv
from scheduler.plugins.dynamicresources import binding, diagnose, extended, writes
from scheduler.plugins.dynamicresources.allocator import (
    Allocation,
    AllocationError,
    AllocationTimeoutError,
    Allocator,
    Held,
    SliceIndex,
    alternatives,
    claim_requests,
)
from scheduler.plugins.dynamicresources.cel import Compiler
from scheduler.plugins.dynamicresources.claims import (
    Assumed,
    ClaimMissingError,
    allocation,
    owned_by,
    pod_claims,
)
from scheduler.plugins.nodeselector import NodeSelector, compile_node_selector_terms

logger = logging.getLogger(__name__)

NAME = "DynamicResources"
ERR_CANNOT_ALLOCATE = "cannot allocate all claims"
ERR_NOT_ON_NODE = "resourceclaim not available on the node"
_KEY = NAME

Obj = Mapping[str, Any]


@dataclass(slots=True)
class _Extended:
    """The pod's extended resources that DeviceClasses provide."""

    resolver: extended.ClassResolver
    resources: dict[str, int]
    claim: dict[str, Any]
    """The claim to write (not yet named), or one an earlier attempt wrote (``stale``)."""
    stale: bool
    plans: dict[frozenset[str], tuple[dict[str, Any], list[dict[str, str]]]] = field(default_factory=dict)
    """The resources a node leaves to DRA -> the claim for them and the request mappings."""

    def plan(self, pod: PodInfo, wanted: dict[str, int]) -> tuple[dict[str, Any], list[dict[str, str]]]:
        key = frozenset(wanted)
        if key not in self.plans:
            requests, mappings = extended.requests_and_mappings(pod, wanted, self.resolver)
            claim = copy.copy(self.claim)
            claim["spec"] = {"devices": {"requests": requests}}
            self.plans[key] = (claim, mappings)
        return self.plans[key]


class _State:
    __slots__ = (
        "claims",
        "pending",
        "selectors",
        "classes",
        "slices",
        "taint_rules",
        "in_use",
        "by_node",
        "unavailable",
        "extended",
        "extended_by_node",
        "expired",
    )

    def __init__(self) -> None:
        self.claims: list[Obj] = []
        """Every claim of the pod, in the pod's order."""
        self.pending: list[Obj] = []
        """Those to allocate."""
        self.selectors: list[tuple[Obj, NodeSelector]] = []
        """The allocated ones with a node selector, and that selector."""
        self.classes: dict[str, Obj] = {}
        self.slices = SliceIndex(())
        self.taint_rules: Sequence[Obj] = []
        self.in_use = Held()
        self.by_node: dict[str, list[Allocation]] = {}
        self.unavailable: dict[str, Obj] = {}
        """Allocated claims a node was refused for (by UID): PostFilter may take them back."""
        self.expired: list[Obj] = []
        """Allocated claims whose binding conditions failed or timed out."""
        self.extended: _Extended | None = None
        self.extended_by_node: dict[str, tuple[dict[str, Any], list[dict[str, str]]]] = {}
        """Node -> the claim for the extended resources it leaves to DRA, and the mappings;
        its allocation is the last of ``by_node``'s."""


class DynamicResources:
    name: ClassVar[str] = NAME

    def __init__(self, args: Any, handle: Handle) -> None:
        self.handle = handle
        self.claims = handle.store("resourceclaims")
        self.slices = handle.store("resourceslices")
        self.classes = handle.store("deviceclasses")
        self.taint_rules = handle.store("devicetaintrules")
        self.compiler = Compiler()
        self.assumed = Assumed()
        self.binding_timeout = float(getattr(args, "binding_timeout", 600.0))
        self.filter_timeout = float(getattr(args, "filter_timeout", 10.0))
        self._stopping = threading.Event()

    # --- PreEnqueue / PreFilter ---------------------------------------------------

    def _pod_claims(self, pod: PodInfo) -> list[Obj] | Status:
        """The pod's claims from the informer, or why the pod must wait for them
        (``foreachPodResourceClaim``)."""
        try:
            refs = pod_claims(pod)
        except ClaimMissingError as e:
            return unresolvable(str(e))
        out: list[Obj] = []
        for ref in refs:
            claim = self.claims.get(f"{pod.namespace}/{ref.claim}")
            if claim is None:
                return unresolvable(f'could not find ResourceClaim "{pod.namespace}/{ref.claim}"')
            if claim["metadata"].get("deletionTimestamp"):
                return unresolvable(f'resourceclaim "{ref.claim}" is being deleted')
            if ref.from_template and not owned_by(claim, pod):
                return unresolvable(
                    f"ResourceClaim {pod.namespace}/{ref.claim} was not created for Pod {pod.key} (Pod is not owner)"
                )
            out.append(claim)
        return out

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        """The pod waits, with no attempt, until every claim it names exists and is its own."""
        if not pod.spec.get("resourceClaims"):
            return None
        claims = self._pod_claims(pod)
        return claims if isinstance(claims, Status) else None

    def _extended(self, state: CycleState, pod: PodInfo) -> _Extended | None:
        """The pod's extended resources that DeviceClasses provide (``preFilterExtendedResources``)."""
        if not pod.requests.scalar or not len(self.classes):
            return None
        resolver = extended.cycle_resolver(state, self.classes)
        resources = extended.backed_requests(pod, resolver)
        if not resources:
            return None
        found = extended.find_claim(pod, self.claims.list())
        if found is not None:
            return _Extended(resolver, resources, dict(found), stale=True)
        return _Extended(resolver, resources, extended.in_memory_claim(pod), stale=False)

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        ext = self._extended(state, pod)
        if not pod.spec.get("resourceClaims") and ext is None:
            return SKIP
        claims = self._pod_claims(pod)
        if isinstance(claims, Status):
            return claims
        if not claims and ext is None:
            return SKIP
        s = _State()
        s.extended = ext
        for claim in claims:
            alloc = allocation(claim)
            if alloc:
                # Sharing is not limited here: the API server refuses a 257th consumer
                # (ResourceClaimReservedForMaxSize), and PreBind reports it.
                terms = (alloc.get("nodeSelector") or {}).get("nodeSelectorTerms")
                if terms:
                    s.selectors.append((claim, compile_node_selector_terms(terms)))
                if binding.over(claim, self.binding_timeout):
                    s.expired.append(claim)
            elif self.assumed.holds(claim["metadata"].get("uid", "")):
                meta = claim["metadata"]
                return unresolvable(
                    f"resource claim {meta['namespace']}/{meta['name']} is in the process of being allocated"
                )
            else:
                s.pending.append(claim)
            s.claims.append(claim)
        if s.pending or (ext is not None and not ext.stale):
            s.classes = {c["metadata"]["name"]: c for c in self.classes.list()}
            missing = _missing_class(s.pending, s.classes)
            if missing:
                return unresolvable(missing)
            s.slices = SliceIndex(self.slices.list())
            s.taint_rules = self.taint_rules.list()
            s.in_use = self.assumed.in_use(self.claims.list())
        state[_KEY] = s
        return None

    # --- Filter -----------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        s: _State | None = state.get(_KEY)
        if s is None:
            return None
        pending = s.pending
        if s.extended is not None:
            planned = self._filter_extended(s.extended, pod, node)
            if isinstance(planned, Status):
                return planned
            if planned is not None:
                s.extended_by_node[node.name] = planned
                pending = [*pending, planned[0]]
        for claim in s.expired:
            s.unavailable.setdefault(claim["metadata"].get("uid", ""), claim)
        if s.expired:
            return unresolvable(ERR_NOT_ON_NODE)
        for claim, sel in s.selectors:
            if not sel.matches(node.labels, node.name):
                s.unavailable.setdefault(claim["metadata"].get("uid", ""), claim)
                return unresolvable(ERR_NOT_ON_NODE)
        if not pending:
            return None
        try:
            result = self._allocator(s, node, self.filter_timeout).allocate(pending)
        except AllocationTimeoutError:
            # As kube-scheduler: an error, so the pod is retried after its backoff rather than
            # waiting for a cluster event; the node's slices may be what takes so long.
            return error(f"node {node.name}: timed out trying to allocate devices")
        except AllocationError as e:
            # As kube-scheduler: a claim that can never be allocated as written (a selector
            # that fails, a pool being updated under allocationMode All) aborts the attempt
            # with an error, and the pod is retried after its backoff.
            return error(str(e))
        if result is None:
            return unresolvable(ERR_CANNOT_ALLOCATE)
        s.by_node[node.name] = result
        return None

    def _allocator(self, s: _State, node: NodeInfo, timeout: float = 0.0) -> Allocator:
        """An allocator over the node's devices; a search longer than ``timeout`` (> 0) stops."""
        return Allocator(
            self.compiler,
            s.classes,
            s.slices.pools_for_node(node.name, node.labels, s.taint_rules),
            s.in_use.devices,
            s.in_use.shared,
            deadline=time.monotonic() + timeout if timeout > 0 else None,
        )

    def explain_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> dict[str, Any] | None:
        """For ``explain``: each of the pod's claims on ``node`` (:mod:`.diagnose`)."""
        s: _State | None = state.get(_KEY)
        if s is None:
            return None
        claims, pending = list(s.claims), list(s.pending)
        planned = s.extended_by_node.get(node.name)
        if planned is not None:
            claims.append(planned[0])
            pending.append(planned[0])
        return {
            "claims": diagnose.describe(
                claims,
                pending,
                s.selectors,
                s.by_node.get(node.name),
                lambda: self._allocator(s, node),
                node.name,
                node.labels,
            )
        }

    @staticmethod
    def _filter_extended(
        ext: _Extended, pod: PodInfo, node: NodeInfo
    ) -> tuple[dict[str, Any], list[dict[str, str]]] | Status | None:
        """The claim for what this node leaves to DRA, None when its device plugins provide
        everything (``filterExtendedResources``)."""
        if ext.stale:
            # Written by an attempt whose binding failed: PostFilter deletes it, and the
            # next attempt starts anew.
            return unschedulable("cannot schedule extended resource claim")
        allocatable = node.allocatable.scalar
        wanted = {}
        for name, q in ext.resources.items():
            if ext.resolver.get(name) is not None and allocatable.get(name, 0) == 0:
                wanted[name] = q
            elif name not in allocatable:
                return unschedulable("cannot fit resource")
        return ext.plan(pod, wanted) if wanted else None

    # --- PostFilter -------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatuses
    ) -> tuple[PostFilterResult | None, Status]:
        """No node fits: an allocated claim that kept the pod off a node and that no other pod
        uses is taken back, so the next attempt may allocate it anywhere. At most one per
        attempt, as kube-scheduler (``deallocateOrDeletePodClaims``)."""
        s: _State | None = state.get(_KEY)
        for claim in s.unavailable.values() if s is not None else ():
            reserved = (claim.get("status") or {}).get("reservedFor") or ()
            if any(r.get("uid") != pod.uid for r in reserved):
                continue
            meta = claim["metadata"]
            try:
                writes.deallocate(self.handle.api_client, claim)
            except writes.ClaimWriteError as e:
                return None, error(str(e))
            logger.log(
                V(2), "Deallocated claim", extra=kv(pod=pod.key, claim=f"{meta['namespace']}/{meta['name']}")
            )
            return None, unschedulable("deallocation of ResourceClaim completed")
        if s is not None and s.extended is not None and s.extended.stale:
            claim = s.extended.claim
            try:
                writes.delete_claim(self.handle.api_client, claim)
            except writes.ClaimWriteError as e:
                return None, error(str(e))
            logger.log(V(2), "Deleted stale claim", extra=kv(pod=pod.key, claim=claim["metadata"]["name"]))
            return None, unschedulable("deletion of ResourceClaim completed")
        return None, unschedulable()

    # --- Score ------------------------------------------------------------------------

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        s: _State | None = state.get(_KEY)
        if s is None or not s.pending:
            return 0
        return sum(a.score for a in s.by_node.get(node.name) or ())

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None:
        # DefaultNormalizeScore: the highest becomes MAX_NODE_SCORE, the others in proportion.
        top = max(scores.values(), default=0)
        if top <= 0:
            return
        for name, v in scores.items():
            scores[name] = v * MAX_NODE_SCORE // top

    # --- Reserve / Unreserve -----------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        s: _State | None = state.get(_KEY)
        if s is None:
            return None
        ext = s.extended_by_node.get(node_name)
        pending = s.pending if ext is None else [*s.pending, ext[0]]
        if not pending:
            return None
        allocs = s.by_node.get(node_name)
        if allocs is None:
            return error(f"no allocation computed for node {node_name}")
        chosen: list[tuple[Obj, dict[str, Any]]] = []
        state[_KEY + "/chosen"] = chosen
        for claim, alloc in zip(pending, allocs, strict=True):
            try:
                status = alloc.status(claim, s.classes, node_name)
            except AllocationError as e:
                self.unreserve(state, pod, node_name)
                return error(f"create NodeSelector for claim {claim['metadata']['name']}: {e}")
            self.assumed.add(
                claim["metadata"].get("uid", ""), alloc.held(), unwritten=ext is not None and claim is ext[0]
            )
            chosen.append((claim, status))
        if ext is not None:
            state[_KEY + "/extended"] = (ext[0], chosen[-1][1], ext[1])
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Forget the allocations; take back what PreBind wrote: the pod's reservations, and
        the claim created for its extended resources."""
        for claim, _ in state.get(_KEY + "/chosen") or ():
            self.assumed.drop(claim["metadata"].get("uid", ""))
        api = self.handle.api_client
        for claim in state.get(_KEY + "/reserved") or ():
            try:
                writes.remove_reservation(api, claim, pod)
            except writes.ClaimWriteError as e:
                logger.warning("Reservation not taken back", extra=kv(pod=pod.key, err=str(e)))
        created = state.get(_KEY + "/created")
        if created is not None:
            self.assumed.drop(created["metadata"].get("uid", ""))
            try:
                writes.delete_claim(api, created)
            except writes.ClaimWriteError as e:
                logger.warning("Claim not deleted", extra=kv(pod=pod.key, err=str(e)))

    # --- PreBind ------------------------------------------------------------------------

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        s: _State | None = state.get(_KEY)
        if s is None:
            return None
        api = self.handle.api_client
        chosen = {claim["metadata"].get("uid"): status for claim, status in state.get(_KEY + "/chosen") or ()}
        reserved: list[Obj] = []
        state[_KEY + "/reserved"] = reserved
        for claim in s.claims:
            uid = claim["metadata"].get("uid")
            try:
                reserved.append(writes.bind_claim(api, claim, pod, chosen.get(uid), self._stopping))
            except writes.ClaimWriteError as e:
                return self._not_written(pod, claim["metadata"]["name"], e)
        ext = state.get(_KEY + "/extended")
        if ext is None:
            return self._wait_for_binding(pod, node_name, reserved)
        planned, allocation, mappings = ext
        try:
            created = writes.create_claim(api, planned)
        except writes.ClaimWriteError as e:
            return self._not_written(pod, planned["metadata"]["generateName"], e)
        state[_KEY + "/created"] = created
        name = created["metadata"]["name"]
        self.assumed.rename(planned["metadata"]["uid"], created["metadata"].get("uid", ""))
        logger.log(V(5), "Created claim for extended resources", extra=kv(pod=pod.key, claim=name))
        try:
            written = writes.bind_claim(api, created, pod, allocation, self._stopping)
            writes.set_pod_extended_status(api, pod, name, mappings)
        except writes.ClaimWriteError as e:
            return self._not_written(pod, name, e)
        return self._wait_for_binding(pod, node_name, [*reserved, written])

    def _wait_for_binding(self, pod: PodInfo, node_name: str, claims: list[Obj]) -> Status | None:
        """Wait until the drivers report every binding condition of the claims' devices met
        (the informer's copies, read every second), for at most ``bindingTimeout``."""
        waiting = [c for c in claims if binding.waits(c)]
        if not waiting:
            return None
        logger.log(
            V(2), "Waiting for binding conditions", extra=kv(pod=pod.key, node=node_name, claims=len(waiting))
        )
        self.handle.event(
            pod.pod,
            "Normal",
            "BindingConditionsPending",
            "Scheduling",
            f"waiting for binding conditions for device on node {node_name}",
        )
        deadline = time.monotonic() + self.binding_timeout
        while True:
            pending = []
            for claim in waiting:
                meta = claim["metadata"]
                seen = self.claims.get(f"{meta['namespace']}/{meta['name']}")
                current = seen if seen is not None and binding.waits(seen) else claim
                try:
                    if not binding.ready(current):
                        pending.append(current)
                except binding.BindingFailedError as e:
                    return error(f"device binding failed: {e}")
            if not pending:
                logger.log(V(2), "Binding conditions met", extra=kv(pod=pod.key, node=node_name))
                return None
            if time.monotonic() > deadline or any(
                binding.timed_out(c, self.binding_timeout) for c in pending
            ):
                names = ", ".join(c["metadata"]["name"] for c in pending)
                return error(f"device binding timeout: claim={names}")
            if self._stopping.wait(1.0):
                return error("the scheduler is stopping")
            waiting = pending

    @staticmethod
    def _not_written(pod: PodInfo, claim: str, e: Exception) -> Status:
        logger.log(V(2), "Claim not written", extra=kv(pod=pod.key, claim=claim, err=str(e)))
        return error(f"binding claim {claim}: {e}")

    def stop(self) -> None:
        self._stopping.set()


def _missing_class(claims: list[Obj], classes: Mapping[str, Obj]) -> str:
    """``request <req>: device class <class> does not exist`` for the first such request."""
    for claim in claims:
        for req in claim_requests(claim):
            for name, sub in alternatives(req):
                cls = sub.get("deviceClassName")
                if cls and cls not in classes:
                    return f"request {name}: device class {cls} does not exist"
    return ""
