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

Pods without claims skip the plugin.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
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
from scheduler.plugins.dynamicresources import writes
from scheduler.plugins.dynamicresources.allocator import (
    Allocation,
    AllocationError,
    Allocator,
    DeviceID,
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
        self.taint_rules: list[Obj] = []
        self.in_use: set[DeviceID] = set()
        self.by_node: dict[str, list[Allocation]] = {}
        self.unavailable: dict[str, Obj] = {}
        """Allocated claims a node was refused for (by UID): PostFilter may take them back."""


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
        self._stopping = threading.Event()

    # --- PreEnqueue / PreFilter ---------------------------------------------------

    def _pod_claims(self, pod: PodInfo) -> list[Obj] | Status:
        """The pod's claims from the informer, or why the pod must wait for them
        (``foreachPodResourceClaim``)."""
        try:
            refs = pod_claims(pod)
        except ClaimMissingError as e:
            return unresolvable(str(e))
        out = []
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

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        if not pod.spec.get("resourceClaims"):
            return SKIP
        claims = self._pod_claims(pod)
        if isinstance(claims, Status):
            return claims
        if not claims:
            return SKIP
        s = _State()
        for claim in claims:
            alloc = allocation(claim)
            if alloc:
                # Sharing is not limited here: the API server refuses a 257th consumer
                # (ResourceClaimReservedForMaxSize), and PreBind reports it.
                terms = (alloc.get("nodeSelector") or {}).get("nodeSelectorTerms")
                if terms:
                    s.selectors.append((claim, compile_node_selector_terms(terms)))
            elif self.assumed.holds(claim["metadata"].get("uid", "")):
                meta = claim["metadata"]
                return unresolvable(
                    f"resource claim {meta['namespace']}/{meta['name']} is in the process of being allocated"
                )
            else:
                s.pending.append(claim)
            s.claims.append(claim)
        if s.pending:
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
        for claim, sel in s.selectors:
            if not sel.matches(node.labels, node.name):
                s.unavailable.setdefault(claim["metadata"].get("uid", ""), claim)
                return unresolvable(ERR_NOT_ON_NODE)
        if not s.pending:
            return None
        allocator = Allocator(
            self.compiler,
            s.classes,
            s.slices.pools_for_node(node.name, node.labels, s.taint_rules),
            s.in_use,
        )
        try:
            result = allocator.allocate(s.pending)
        except AllocationError as e:
            # As kube-scheduler: a claim that can never be allocated as written (a selector
            # that fails, a pool being updated under allocationMode All) aborts the attempt
            # with an error, and the pod is retried after its backoff.
            return error(str(e))
        if result is None:
            return unresolvable(ERR_CANNOT_ALLOCATE)
        s.by_node[node.name] = result
        return None

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
        if s is None or not s.pending:
            return None
        allocs = s.by_node.get(node_name)
        if allocs is None:
            return error(f"no allocation computed for node {node_name}")
        chosen: list[tuple[Obj, dict[str, Any]]] = []
        state[_KEY + "/chosen"] = chosen
        for claim, alloc in zip(s.pending, allocs, strict=True):
            try:
                status = alloc.status(claim, s.classes, node_name)
            except AllocationError as e:
                self.unreserve(state, pod, node_name)
                return error(f"create NodeSelector for claim {claim['metadata']['name']}: {e}")
            devices = {r.device.id for r in alloc.results if not r.admin_access}
            self.assumed.add(claim["metadata"].get("uid", ""), devices)
            chosen.append((claim, status))
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for claim, _ in state.get(_KEY + "/chosen") or ():
            self.assumed.drop(claim["metadata"].get("uid", ""))

    # --- PreBind ------------------------------------------------------------------------

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        s: _State | None = state.get(_KEY)
        if s is None:
            return None
        chosen = {claim["metadata"].get("uid"): status for claim, status in state.get(_KEY + "/chosen") or ()}
        for claim in s.claims:
            uid = claim["metadata"].get("uid")
            try:
                writes.bind_claim(self.handle.api_client, claim, pod, chosen.get(uid), self._stopping)
            except writes.ClaimWriteError as e:
                logger.log(
                    V(2),
                    "Claim not written",
                    extra=kv(pod=pod.key, claim=claim["metadata"]["name"], err=str(e)),
                )
                return error(f"binding claim {claim['metadata']['name']}: {e}")
        return None

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
