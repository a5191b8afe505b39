"""Allocating devices to a pod's ResourceClaims on one node: pure logic, no API.

As the stable allocator of ``k8s.io/dynamic-resource-allocation/structured``
(``Allocator.Allocate``, ``allocateOne``): depth first over the claims, their
requests and the devices each request needs, undoing a choice when a later
request cannot be met, and the first complete solution wins.

* The devices are those of the ResourceSlices available on the node
  (``nodeName`` the node, a ``nodeSelector`` it matches, ``allNodes``, or
  ``perDeviceNodeSelection`` with the device's own field), pool by pool in
  the order of driver and pool name; of a pool only the slices of its newest
  generation count, and a pool whose slices are not all published yet
  (fewer than ``resourceSliceCount``) is not used (``GatherPools``).
* A device is free unless an allocated claim, or an allocation made in this
  scheduler and not yet written (``in_use``), holds it; a request with
  ``adminAccess`` may use devices in use and does not take them.
* A request is ``exactly`` one sub-request or a ``firstAvailable`` list of
  them, tried in order. ``allocationMode: ExactCount`` takes ``count``
  devices (1 when unset); ``All`` takes every matching device, and fails
  when there is none or when a pool they may be in is incomplete.
* A device matches when its DeviceClass's selectors and the request's all
  evaluate to true; a selector that fails is the allocation's error, never a
  skipped device (``SelectorError``).
* A device with a taint of effect NoSchedule or NoExecute, its own or one a
  DeviceTaintRule gives it, is only for requests that tolerate it.
* ``matchAttribute`` constraints: every device of the named requests (all of
  the claim's when none are named) has the attribute, with one value;
  ``distinctAttribute``: every such device has it, with values all different.

* Partitionable devices: a pool's slices may define shared counters
  (``sharedCounters``) that its devices consume (``consumesCounters``); a device
  is only allocated while its pool's counters, less what allocated devices and
  those chosen so far consume, cover what it consumes.

* Consumable capacity (:mod:`.capacity`): a device with
  ``allowMultipleAllocations`` stays available to further allocations while
  their shares of its capacity fit; a request's ``capacity.requests`` must fit
  the device it gets, shared or not.

* Binding conditions: a device's ``bindingConditions`` and
  ``bindingFailureConditions`` go into its result (PreBind waits for them), and
  ``bindsToNode`` keeps the allocation to the node.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from scheduler.core.resources import parse_quantity
from scheduler.plugins.dynamicresources import capacity
from scheduler.plugins.dynamicresources.capacity import Capacity
from scheduler.plugins.dynamicresources.cel import Compiler, SelectorError, attribute_value, device_view
from scheduler.plugins.nodeselector import compile_node_selector_terms
from scheduler.plugins.taints import tolerations_tolerate_taint

Obj = Mapping[str, Any]
DeviceID = tuple[str, str, str]
"""(driver, pool, device): what an allocation result names."""

MAX_FIRST_AVAILABLE_SCORE = 8
"""A request satisfied by its i-th alternative scores MAX - i (``dynamicresources`` Score)."""


class AllocationError(Exception):
    """The claims cannot be allocated for a reason other than missing devices (a bad selector,
    a missing DeviceClass): the pod's status says it, on every node."""


class AllocationTimeoutError(Exception):
    """The search of one node's devices went on past its deadline (``filterTimeout``)."""


@dataclass(slots=True)
class Device:
    id: DeviceID
    spec: Obj
    view: dict[str, Any]
    """What the selectors see (:func:`~scheduler.plugins.dynamicresources.cel.device_view`)."""
    node_local: bool
    """From a slice of one node (``nodeName``), so the allocation is for that node only."""
    node_selector: Obj | None
    """The slice's (or device's) node selector, None when it is for all nodes or node-local."""
    taints: list[Obj] = field(default_factory=list)
    """The device's own taints and those DeviceTaintRules give it."""
    shared: bool = False
    """``allowMultipleAllocations``: allocations share it, each taking part of its capacity."""


Counters = dict[str, dict[str, Decimal]]
"""Counter set name -> counter name -> value."""


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    devices: list[Device]
    incomplete: bool
    counters: Counters = field(default_factory=dict)
    """The pool's shared counters (partitionable devices), before any device consumes them."""
    consumes: dict[str, Counters] = field(default_factory=dict)
    """What each device of the pool consumes (all its slices', the node's or not), by name."""


@dataclass(slots=True)
class Result:
    """One allocated device of a claim."""

    request: str
    """The request's name, ``request/subrequest`` for a firstAvailable alternative."""
    device: Device
    admin_access: bool
    tolerations: list[Obj]
    share_id: str | None = None
    consumed: capacity.Share | None = None
    """Of a shared device: what this allocation takes of its capacity."""


@dataclass(slots=True)
class Held:
    """What allocations hold: whole devices, and the capacity they take of shared ones."""

    devices: set[DeviceID] = field(default_factory=set)
    shared: dict[DeviceID, Capacity] = field(default_factory=dict)

    def add(self, other: Held) -> None:
        self.devices |= other.devices
        for device, amount in other.shared.items():
            capacity.add(self.shared, device, amount)


@dataclass(slots=True)
class Allocation:
    """A claim's allocation on the node."""

    results: list[Result] = field(default_factory=list)
    score: int = 0
    """The firstAvailable score: for each request met by alternative i, MAX - i."""

    def status(self, claim: Obj, classes: Mapping[str, Obj], node_name: str) -> dict[str, Any]:
        """``status.allocation`` to write (``AllocationResult``)."""
        results = []
        for r in self.results:
            entry: dict[str, Any] = {
                "request": r.request,
                "driver": r.device.id[0],
                "pool": r.device.id[1],
                "device": r.device.id[2],
            }
            if r.admin_access:
                entry["adminAccess"] = True
            if r.tolerations:
                entry["tolerations"] = [dict(t) for t in r.tolerations]
            if r.device.spec.get("bindingConditions"):
                # The driver reports readiness in the claim's device status; PreBind waits.
                entry["bindingConditions"] = list(r.device.spec["bindingConditions"])
                entry["bindingFailureConditions"] = list(r.device.spec.get("bindingFailureConditions") or ())
            if r.share_id is not None:
                entry["shareID"] = r.share_id
                entry["consumedCapacity"] = dict(r.consumed.written) if r.consumed else {}
            results.append(entry)
        config = _configs(claim, classes, {r.request for r in self.results})
        out: dict[str, Any] = {"devices": {"results": results}}
        if config:
            out["devices"]["config"] = config
        selector = self.node_selector(node_name)
        if selector is not None:
            out["nodeSelector"] = selector
        return out

    def held(self) -> Held:
        """What the allocation holds (admin access holds nothing)."""
        out = Held()
        for r in self.results:
            if r.admin_access:
                continue
            if r.share_id is not None:
                capacity.add(out.shared, r.device.id, r.consumed.amounts if r.consumed else {})
            else:
                out.devices.add(r.device.id)
        return out

    def node_selector(self, node_name: str) -> dict[str, Any] | None:
        """Where the allocation can be used (``createNodeSelector``): the node itself when a
        device is node-local, the slices' selectors when they have some, else everywhere."""
        if any(r.device.node_local or r.device.spec.get("bindsToNode") for r in self.results):
            term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
            return {"nodeSelectorTerms": [term]}
        selectors = [r.device.node_selector for r in self.results if r.device.node_selector]
        if not selectors:
            return None
        # Every selector must hold: the requirements of their one term each, in one term.
        merged: dict[str, list[Any]] = {}
        for sel in selectors:
            terms = sel.get("nodeSelectorTerms") or []
            if len(terms) != 1:
                raise AllocationError(f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
            for k in ("matchExpressions", "matchFields"):
                for req in terms[0].get(k) or ():
                    if req not in merged.setdefault(k, []):
                        merged[k].append(req)
        return {"nodeSelectorTerms": [merged]}


def _configs(claim: Obj, classes: Mapping[str, Obj], used: set[str]) -> list[dict[str, Any]]:
    """The class's configuration, then the claim's, for the requests allocated (``allocateOne``)."""
    by_class: dict[str, list[str]] = {}
    for req in claim_requests(claim):
        for alt_name, alt in alternatives(req):
            if alt_name in used:
                by_class.setdefault(alt.get("deviceClassName") or "", []).append(alt_name)
    out: list[dict[str, Any]] = []
    for class_name, names in by_class.items():
        for cfg in ((classes.get(class_name) or {}).get("spec") or {}).get("config") or ():
            out.append({"source": "FromClass", "requests": names, **_opaque(cfg)})
    top = {r.partition("/")[0] for r in used}
    for cfg in ((claim.get("spec") or {}).get("devices") or {}).get("config") or ():
        names = cfg.get("requests") or []
        if not names or any(n in used or n in top for n in names):
            out.append({"source": "FromClaim", "requests": list(names), **_opaque(cfg)})
    everything = {r.get("name", "") for r in claim_requests(claim)}
    for entry in out:
        if everything <= {n.partition("/")[0] for n in entry["requests"]}:
            del entry["requests"]  # a config for every request names none
    return out


def _opaque(cfg: Obj) -> dict[str, Any]:
    return {"opaque": cfg["opaque"]} if "opaque" in cfg else {}


def claim_requests(claim: Obj) -> list[Obj]:
    return list(((claim.get("spec") or {}).get("devices") or {}).get("requests") or ())


def alternatives(request: Obj) -> list[tuple[str, Obj]]:
    """(name in results, sub-request) to try in order: the one of ``exactly``, or the
    ``firstAvailable`` list."""
    name = request.get("name", "")
    if request.get("firstAvailable"):
        return [(f"{name}/{sub.get('name', '')}", sub) for sub in request["firstAvailable"]]
    return [(name, request.get("exactly") or {})]


# ---------------------------------------------------------------------------
# Pools on a node


class SliceIndex:
    """The ResourceSlices of one scheduling cycle, grouped once: each pool's slices of its newest
    generation (``GatherPools``), and which pools can serve which node, so that each node's
    Filter reads its own pools and those not bound to one node, not every slice."""

    def __init__(self, slices: Iterable[Obj]) -> None:
        latest: dict[tuple[str, str], tuple[int, int, list[Obj]]] = {}
        for s in slices:
            spec = s.get("spec") or {}
            pool = spec.get("pool") or {}
            key = (spec.get("driver", ""), pool.get("name", ""))
            gen = int(pool.get("generation") or 0)
            have = latest.get(key)
            if have is None or gen > have[0]:
                latest[key] = (gen, int(pool.get("resourceSliceCount") or 1), [s])
            elif gen == have[0]:
                have[2].append(s)
        self._pools = {
            k: (count, sorted(ss, key=lambda o: o["metadata"].get("name", "")))
            for k, (_, count, ss) in latest.items()
        }
        self._by_node: dict[str, set[tuple[str, str]]] = {}
        self._anywhere: set[tuple[str, str]] = set()
        """Pools with a slice for more than one node (allNodes, nodeSelector, per device)."""
        for key, (_, ss) in self._pools.items():
            for s in ss:
                spec = s.get("spec") or {}
                if spec.get("nodeName"):
                    self._by_node.setdefault(spec["nodeName"], set()).add(key)
                else:
                    self._anywhere.add(key)

    def pools_for_node(
        self, node_name: str, node_labels: Mapping[str, str], taint_rules: Sequence[Obj] = ()
    ) -> list[Pool]:
        """The pools whose devices the node can use, sorted by driver and name; a pool whose
        slices are not all published yet is there, incomplete and empty. The devices carry the
        taints of the DeviceTaintRules that select them."""
        pools = []
        for driver, name in sorted(self._by_node.get(node_name, set()) | self._anywhere):
            count, pool_slices = self._pools[(driver, name)]
            devices: list[Device] = []
            for s in pool_slices:
                devices.extend(_slice_devices(s, driver, name, node_name, node_labels))
            if devices or len(pool_slices) < count:
                pool = Pool(driver, name, devices, incomplete=len(pool_slices) < count)
                _read_counters(pool, pool_slices)
                pools.append(pool)
        if taint_rules:
            for pool in pools:
                for d in pool.devices:
                    d.taints.extend(rule_taints(taint_rules, d.id))
        return pools


def pools_for_node(
    slices: Iterable[Obj],
    node_name: str,
    node_labels: Mapping[str, str],
    taint_rules: Sequence[Obj] = (),
) -> list[Pool]:
    """:meth:`SliceIndex.pools_for_node` of these slices (one node, once)."""
    return SliceIndex(slices).pools_for_node(node_name, node_labels, taint_rules)


def rule_taints(rules: Iterable[Obj], device: DeviceID) -> list[Obj]:
    """The taints of the DeviceTaintRules whose selector picks the device: each of its driver,
    pool and device fields that is set must match; an empty selector picks every device and
    none picks nothing (``DeviceTaintSelector``)."""
    out = []
    for rule in rules:
        spec = rule.get("spec") or {}
        sel = spec.get("deviceSelector")
        if sel is None or not spec.get("taint"):
            continue
        if all(sel.get(k) in (None, v) for k, v in zip(("driver", "pool", "device"), device, strict=True)):
            out.append(spec["taint"])
    return out


def _read_counters(pool: Pool, slices: Iterable[Obj]) -> None:
    """The pool's shared counters and what its devices consume (``getAndValidateCounterSets``)."""
    for s in slices:
        spec = s.get("spec") or {}
        for cs in spec.get("sharedCounters") or ():
            pool.counters[cs.get("name", "")] = _counter_values(cs.get("counters"))
        for d in spec.get("devices") or ():
            if d.get("consumesCounters"):
                pool.consumes[d.get("name", "")] = {
                    c.get("counterSet", ""): _counter_values(c.get("counters")) for c in d["consumesCounters"]
                }


def _counter_values(counters: Mapping[str, Any] | None) -> dict[str, Decimal]:
    return {k: parse_quantity(str((v or {}).get("value", "0"))) for k, v in (counters or {}).items()}


def _slice_devices(s: Obj, driver: str, pool: str, node_name: str, labels: Mapping[str, str]) -> list[Device]:
    spec = s.get("spec") or {}
    where = _availability(spec, node_name, labels)
    if where is None and not spec.get("perDeviceNodeSelection"):
        return []
    out = []
    for d in spec.get("devices") or ():
        if any(c.get("compatibilityGroups") for c in d.get("consumesCounters") or ()):
            continue  # an alpha feature (DRACounterCompatibilityGroups), off by default
        here = where if not spec.get("perDeviceNodeSelection") else _availability(d, node_name, labels)
        if here is None:
            continue
        node_local, selector = here
        device = Device((driver, pool, d.get("name", "")), d, device_view(driver, d), node_local, selector)
        device.taints.extend(d.get("taints") or ())
        device.shared = bool(d.get("allowMultipleAllocations"))
        out.append(device)
    return out


def _availability(obj: Obj, node_name: str, labels: Mapping[str, str]) -> tuple[bool, Obj | None] | None:
    """(node-local, node selector) when the slice (or device) is available on the node, else None."""
    if obj.get("nodeName"):
        return (True, None) if obj["nodeName"] == node_name else None
    if obj.get("allNodes"):
        return (False, None)
    selector = obj.get("nodeSelector")
    if selector and compile_node_selector_terms(selector.get("nodeSelectorTerms")).matches(labels, node_name):
        return (False, selector)
    return None


# ---------------------------------------------------------------------------
# Allocating


class Allocator:
    """Allocates the claims on one node; ``allocate`` returns None when they cannot all be met."""

    def __init__(
        self,
        compiler: Compiler,
        classes: Mapping[str, Obj],
        pools: Sequence[Pool],
        in_use: set[DeviceID],
        shared: Mapping[DeviceID, Capacity] | None = None,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``deadline``: a time of ``clock`` after which ``allocate`` gives up (AllocationTimeoutError)."""
        self._deadline = deadline
        self._clock = clock
        self._compiler = compiler
        self._classes = classes
        self._pools = pools
        self._in_use = in_use
        self._shared = shared or {}
        """Shared devices -> the capacity allocated claims take of them."""
        self._allocating: dict[DeviceID, Capacity] = {}
        """Shared devices -> the capacity this allocation takes of them."""
        self._match_memo: dict[tuple[int, DeviceID], bool] = {}
        self._by_pool = {(p.driver, p.name): p for p in pools}
        self._available: dict[tuple[str, str], Counters] = {}
        """Per pool, its counters less what allocated devices consume (computed when needed)."""
        self._consumed: dict[tuple[str, str], Counters] = {}
        """Per pool, what the devices chosen in this allocation consume."""

    def allocate(self, claims: Sequence[Obj]) -> list[Allocation] | None:
        """One Allocation per claim, in order, or None. Raises AllocationError for a claim that
        can never be met as written (unknown DeviceClass, a selector that fails)."""
        plan = []
        for ci, claim in enumerate(claims):
            for req in claim_requests(claim):
                plan.append((ci, req))
        allocations = [Allocation() for _ in claims]
        taken: set[DeviceID] = set()
        if self._request(plan, 0, claims, allocations, taken):
            return allocations
        return None

    def survey(self, claim: Obj) -> list[tuple[str, str, int, int]]:
        """For each request of the claim (each alternative of a firstAvailable list): its name,
        how many devices it wants ("all" or a count), how many of the node's devices it may
        have, and how many of those are free. Raises AllocationError as ``allocate``."""
        out = []
        for req in claim_requests(claim):
            for name, sub in alternatives(req):
                every = self._candidates(claim, name, sub, include_in_use=True)
                free = sum(1 for d in every if d.id not in self._in_use)
                mode = sub.get("allocationMode") or "ExactCount"
                wanted = "all" if mode == "All" else str(int(sub.get("count") or 1))
                out.append((name, wanted, len(every), free))
        return out

    def _request(
        self,
        plan: list[tuple[int, Obj]],
        i: int,
        claims: Sequence[Obj],
        allocs: list[Allocation],
        taken: set[DeviceID],
    ) -> bool:
        if i == len(plan):
            return True
        ci, req = plan[i]
        alloc = allocs[ci]
        options = alternatives(req)
        for index, (name, sub) in enumerate(options):
            mode = sub.get("allocationMode") or "ExactCount"
            admin = bool(sub.get("adminAccess"))
            tolerations = list(sub.get("tolerations") or ())
            choices: Iterable[list[Device]]
            if mode == "All":
                for p in self._pools:
                    if p.incomplete:
                        raise AllocationError(
                            f"claim {_key(claims[ci])}, request {name}: asks for all devices, but resource"
                            f" pool {p.driver}/{p.name} is currently being updated"
                        )
                # Every matching device, in use or not: All cannot be met while one is taken.
                every = self._candidates(claims[ci], name, sub, include_in_use=True)
                if not every or any(not admin and (d.id in taken or d.id in self._in_use) for d in every):
                    continue
                choices = [every]
            else:
                candidates = self._candidates(claims[ci], name, sub)
                choices = self._combinations(candidates, int(sub.get("count") or 1), taken, admin)
            mark = len(alloc.results)
            requested = (sub.get("capacity") or {}).get("requests")
            for chosen in choices:
                if self._deadline is not None and self._clock() > self._deadline:
                    raise AllocationTimeoutError()
                if not self._consume(chosen, +1):
                    continue
                results = self._take_capacity(chosen, requested, name, admin, tolerations)
                if results is None:
                    self._consume(chosen, -1)
                    continue
                alloc.results.extend(results)
                if not self._constraints_hold(claims[ci], alloc):
                    del alloc.results[mark:]
                    self._release_capacity(results)
                    self._consume(chosen, -1)
                    continue
                new = {d.id for d in chosen if not d.shared} if not admin else set()
                taken |= new
                bonus = MAX_FIRST_AVAILABLE_SCORE - index if req.get("firstAvailable") else 0
                alloc.score += bonus
                if self._request(plan, i + 1, claims, allocs, taken):
                    return True
                alloc.score -= bonus
                taken -= new
                del alloc.results[mark:]
                self._release_capacity(results)
                self._consume(chosen, -1)
        return False

    # --- consumable capacity (shared devices) ---

    def _take_capacity(
        self, chosen: Sequence[Device], requested: Obj | None, name: str, admin: bool, tolerations: list[Obj]
    ) -> list[Result] | None:
        """The results for the chosen devices, with what each takes of a shared device's
        capacity; None when a device's capacity cannot meet the request."""
        out: list[Result] = []
        for d in chosen:
            cap = d.spec.get("capacity")
            share = capacity.consumed(requested, cap)
            if share is None:
                self._release_capacity(out)
                return None
            take = share.amounts
            if not d.shared:
                if not capacity.fits(take, cap):
                    self._release_capacity(out)
                    return None
                out.append(Result(name, d, admin, tolerations))
                continue
            if not capacity.fits(take, cap, self._shared.get(d.id, {}), self._allocating.get(d.id, {})):
                self._release_capacity(out)
                return None
            capacity.add(self._allocating, d.id, take)
            out.append(Result(name, d, admin, tolerations, str(uuid.uuid4()), share))
        return out

    def _release_capacity(self, results: Sequence[Result]) -> None:
        for r in results:
            if r.consumed is not None:
                capacity.add(self._allocating, r.device.id, r.consumed.amounts, -1)

    def _capacity_in_use(self, device: DeviceID) -> bool:
        return device in self._shared or device in self._allocating

    # --- shared counters (partitionable devices) ---

    def _consume(self, devices: Sequence[Device], sign: int) -> bool:
        """Count what the devices consume of their pools' counters (sign -1: give it back).
        Taking fails, and counts nothing, when a counter would go below zero
        (``checkAvailableCounters``)."""
        spent: list[tuple[Counters, str, str, Decimal]] = []
        for d in devices:
            key = (d.id[0], d.id[1])
            pool = self._by_pool.get(key)
            uses = pool.consumes.get(d.id[2]) if pool is not None else None
            if not uses or pool is None:
                continue
            if d.shared and self._capacity_in_use(d.id):
                continue  # a shared device consumes its counters once, with its first allocation
            available = self._pool_available(pool)
            consumed = self._consumed.setdefault(key, {})
            for cs, counters in uses.items():
                for name, value in counters.items():
                    have = consumed.setdefault(cs, {}).get(name, Decimal(0))
                    consumed[cs][name] = have + sign * value
                    spent.append((consumed, cs, name, sign * value))
                    if sign > 0 and consumed[cs][name] > available.get(cs, {}).get(name, Decimal(0)):
                        for c, s, n, v in spent:
                            c[s][n] -= v
                        return False
        return True

    def _pool_available(self, pool: Pool) -> Counters:
        key = (pool.driver, pool.name)
        have = self._available.get(key)
        if have is None:
            have = {cs: dict(counters) for cs, counters in pool.counters.items()}
            for device, uses in pool.consumes.items():
                device_id = (pool.driver, pool.name, device)
                if device_id not in self._in_use and device_id not in self._shared:
                    continue
                for cs, counters in uses.items():
                    for name, value in counters.items():
                        if name in have.get(cs, {}):
                            have[cs][name] -= value
            self._available[key] = have
        return have

    def _combinations(
        self, candidates: list[Device], count: int, taken: set[DeviceID], admin: bool
    ) -> Iterable[list[Device]]:
        """Sets of ``count`` free devices, in the order the devices come (depth first)."""
        free = [d for d in candidates if admin or d.id not in taken]

        def pick(start: int, chosen: list[Device]) -> Iterable[list[Device]]:
            if len(chosen) == count:
                yield list(chosen)
                return
            for j in range(start, len(free) - (count - len(chosen)) + 1):
                chosen.append(free[j])
                yield from pick(j + 1, chosen)
                chosen.pop()

        return pick(0, [])

    def _candidates(self, claim: Obj, request: str, sub: Obj, include_in_use: bool = False) -> list[Device]:
        """The devices the sub-request may have: free (or any, with adminAccess), untainted
        or tolerated, and selected by its class and its own selectors."""
        class_name = sub.get("deviceClassName") or ""
        cls = self._classes.get(class_name)
        if cls is None:
            raise AllocationError(f"request {request}: device class {class_name} does not exist")
        selectors = [
            *self._selectors(f"class {class_name}", (cls.get("spec") or {}).get("selectors")),
            *self._selectors(f"claim {_key(claim)}", sub.get("selectors")),
        ]
        admin = bool(sub.get("adminAccess"))
        tolerations = sub.get("tolerations") or ()
        out = []
        for pool in self._pools:
            if pool.incomplete:
                continue  # ExactCount skips a pool still being published (GatherPools)
            for d in pool.devices:
                if not admin and not include_in_use and d.id in self._in_use:
                    continue
                if not self._tolerated(d, tolerations):
                    continue
                if all(self._matches(sel, d) for sel in selectors):
                    out.append(d)
        return out

    def _selectors(self, owner: str, selectors: Iterable[Obj] | None) -> list[tuple[str, Any]]:
        """(what to call it in errors, compiled selector) of each CEL selector
        (``claim <ns>/<name>: selector #<i>``, as the allocator's errors)."""
        out = []
        for i, sel in enumerate(selectors or ()):
            expression = (sel.get("cel") or {}).get("expression") or ""
            where = f"{owner}: selector #{i}"
            if not expression:
                raise AllocationError(f"{where}: CEL expression empty (unsupported selector type?)")
            try:
                out.append((where, self._compiler.compile(expression)))
            except SelectorError as e:
                raise AllocationError(f"{where}: CEL compile error: {e.message}") from None
        return out

    def _matches(self, selector: tuple[str, Any], device: Device) -> bool:
        where, compiled = selector
        key = (id(compiled), device.id)
        hit = self._match_memo.get(key)
        if hit is None:
            try:
                hit = self._match_memo[key] = compiled.matches(device.view)
            except SelectorError as e:
                raise AllocationError(f"{where} on device {'/'.join(device.id)}: {e.message}") from None
        return hit

    @staticmethod
    def _tolerated(device: Device, tolerations: Iterable[Obj]) -> bool:
        for taint in device.taints:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerations_tolerate_taint(
                tolerations, taint
            ):
                return False
        return True

    @staticmethod
    def _constraints_hold(claim: Obj, alloc: Allocation) -> bool:
        for c in ((claim.get("spec") or {}).get("devices") or {}).get("constraints") or ():
            names = set(c.get("requests") or ())
            # A constraint names a request, or one sub-request of a firstAvailable list
            # ("req/sub"): the latter applies only while that alternative is the one
            # tried (matchAttributeConstraint.matches).
            devices = [
                r.device
                for r in alloc.results
                if not names or r.request in names or r.request.partition("/")[0] in names
            ]
            attr = c.get("matchAttribute") or c.get("distinctAttribute")
            if not attr or not devices:
                continue
            values = [_attribute(d, attr) for d in devices]
            if any(v is _MISSING for v in values):
                return False
            keys = [repr(v) for v in values]
            if c.get("matchAttribute") and len(set(keys)) > 1:
                return False
            if c.get("distinctAttribute") and len(set(keys)) != len(keys):
                return False
        return True


_MISSING = object()


def _attribute(device: Device, qualified: str) -> Any:
    """The device's attribute by its fully qualified name (``domain/id``), or _MISSING."""
    domain, _, ident = qualified.rpartition("/")
    for name, attr in (device.spec.get("attributes") or {}).items():
        d, _, i = name.rpartition("/")
        if (d or device.id[0]) == domain and i == ident:
            return attribute_value(attr)
    return _MISSING


def _key(claim: Obj) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def allocated(claims: Iterable[Obj]) -> Held:
    """What allocated claims hold (admin access holds nothing; ``GatherAllocatedState``)."""
    out = Held()
    for claim in claims:
        alloc = (claim.get("status") or {}).get("allocation")
        if not alloc:
            continue
        for r in (alloc.get("devices") or {}).get("results") or ():
            if r.get("adminAccess"):
                continue
            device = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
            if r.get("shareID"):
                capacity.add(out.shared, device, capacity.result_capacity(r))
            else:
                out.devices.add(device)
    return out
