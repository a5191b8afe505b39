"""DefaultPreemption (PostFilter): when no node fits, evict lower-priority pods from one.

Semantics are kube-scheduler's (``framework/plugins/defaultpreemption`` and
``framework/preemption``):

* Eligibility: ``preemptionPolicy: Never`` never preempts; a pod whose
  nominated node still has a lower-priority pod terminating because of a
  preemption (``DisruptionTarget``, reason ``PreemptionByScheduler``) waits
  for it instead of preempting again, unless that node now rejects it as
  unresolvable.
* Candidates: only nodes whose filter failure was ``Unschedulable`` (not
  ``UnschedulableAndUnresolvable``): removing pods may help there. Up to
  ``max(minCandidateNodesPercentage% of them, minCandidateNodesAbsolute)``
  are tried, from a random offset, stopping once that many candidates are
  found, one of them without PDB violations.
* Per node (``SelectVictimsOnNode``), on a copy of the node and of the cycle
  state: remove every pod of lower priority; if the pod still does not fit
  (nominated pods of its priority or higher counted), the node is out.
  Otherwise give victims back, most important first, those whose removal
  would violate a PodDisruptionBudget before the others, keeping each that
  still lets the pod fit.
* The node: fewest PDB violations, then the lowest highest-victim priority,
  the smallest sum of priorities, the fewest victims, the latest start time
  (:func:`scheduler.core.preemption.pick_one_node`).

The plugin only decides. The loop nominates the pod to the node, and the
cluster side marks and deletes the victims and clears the nominations of
lower-priority pods on that node (``scheduler.cluster.preemption``).

Where a Filter plugin keeps state that counts other pods (InterPodAffinity,
PodTopologySpread), their ``add_pod``/``remove_pod`` keep it right while
victims are removed and given back; as in kube-scheduler, a pod's affinity
to a victim is not considered (affinity to lower-priority pods that it may
preempt is not a supported setup).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from scheduler.core.filtering import FitError, SchedulingError
from scheduler.core.framework import (
    Code,
    CycleState,
    Handle,
    NodeStatuses,
    PostFilterResult,
    Status,
    error,
    unresolvable,
    unschedulable,
)
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.core.preemption import (
    Candidate,
    Preemption,
    dry_run,
    num_candidates,
    pick_one_node,
    random_offset,
    sort_by_importance,
)
from scheduler.logs import V, kv
from scheduler.plugins.labelselector import EVERYTHING, NOTHING, compile_label_selector

logger = logging.getLogger(__name__)

NAME = "DefaultPreemption"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."


def terminating_by_preemption(pod: PodInfo) -> bool:
    """``PodTerminatingByPreemption``: being deleted, with a scheduler's DisruptionTarget."""
    if not pod.deleting:
        return False
    for c in (pod.pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "DisruptionTarget":
            return c.get("status") == "True" and c.get("reason") == "PreemptionByScheduler"
    return False


def pdb_violations(
    victims: Sequence[PodInfo], pdbs: Sequence[dict[str, Any]]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """``FilterVictimsWithPDBViolation``: (violating, non-violating), each in the given order.

    Every PDB's ``status.disruptionsAllowed`` is spent by the victims it selects, in order
    (pods already in its ``disruptedPods`` are not counted again); a victim that finds a
    selecting PDB with nothing left to spend violates it. PDBs with an empty or missing
    selector select nothing, as in kube-scheduler."""
    allowed = [int((p.get("status") or {}).get("disruptionsAllowed") or 0) for p in pdbs]
    selectors = []
    for p in pdbs:
        try:
            sel = compile_label_selector((p.get("spec") or {}).get("selector"), strict=True)
        except ValueError:
            sel = NOTHING
        selectors.append(sel)
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for v in victims:
        hit = False
        if v.labels:
            for i, p in enumerate(pdbs):
                if (p.get("metadata") or {}).get("namespace") != v.namespace:
                    continue
                sel = selectors[i]
                if sel is EVERYTHING or sel is NOTHING or not sel.matches(v.labels):
                    continue
                if v.name in ((p.get("status") or {}).get("disruptedPods") or {}):
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    hit = True
                    break
        (violating if hit else non_violating).append(v)
    return violating, non_violating


class DefaultPreemption:
    name: ClassVar[str] = NAME

    def __init__(
        self, args: Any = None, handle: Handle | None = None, rng: random.Random | None = None
    ) -> None:
        self.handle = handle
        self.min_percentage = int(getattr(args, "min_candidate_nodes_percentage", 10))
        self.min_absolute = int(getattr(args, "min_candidate_nodes_absolute", 100))
        self._rng = rng or random.Random()

    # --- PostFilter -----------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatuses
    ) -> tuple[PostFilterResult | None, Status]:
        result, st = self._preempt(state, pod, statuses)
        if st.reasons:
            st = Status(st.code, ("preemption: " + st.message(),), st.plugin)
        return result, st

    def _preempt(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatuses
    ) -> tuple[PostFilterResult | None, Status]:
        assert self.handle is not None
        raw = self.handle.store("pods").get(pod.key)
        if raw is None or raw["metadata"].get("uid") != pod.uid:
            return None, error(f"pod {pod.key} is gone")
        latest = pod if raw is pod.pod else PodInfo.from_pod(raw)

        nominated = self.handle.framework.nominated_node(latest)
        eligible, why = self.eligible(latest, nominated, statuses.get(nominated) if nominated else None)
        if not eligible:
            logger.log(V(5), "Pod is not eligible for preemption", extra=kv(pod=pod.key, reason=why))
            return None, unschedulable(why)

        snapshot = self.handle.snapshot
        all_nodes = snapshot.list()
        potential = statuses.nodes_with(Code.UNSCHEDULABLE)
        failed: dict[str, Status] = {}
        candidates: list[Candidate] = []
        if potential:
            pdbs = self.handle.store("poddisruptionbudgets").list()
            wanted = num_candidates(len(potential), self.min_percentage, self.min_absolute)
            now = time.time()

            def select(ni: NodeInfo) -> tuple[list[PodInfo], int, Status | None]:
                return self.select_victims_on_node(state.clone(), latest, ni, pdbs, now)

            candidates, failed = dry_run(potential, select, wanted, random_offset(len(potential), self._rng))
            errors = [st for st in failed.values() if st.code == Code.ERROR]
            if errors and not candidates:
                return None, Status(Code.ERROR, errors[0].reasons)
        else:
            logger.log(V(3), "Preemption will not help schedule pod on any node", extra=kv(pod=pod.key))
        if not candidates:
            logger.log(
                V(2),
                "No preemption candidate is found; preemption is not helpful for scheduling",
                extra=kv(pod=pod.key),
            )
            fit = FitError(
                len(all_nodes),
                {n: ("", st) for n, st in failed.items()},
                absent=unresolvable(NOT_HELPFUL),
            )
            return PostFilterResult(""), unschedulable(fit.message())

        best = pick_one_node(candidates)
        lower = tuple(
            p
            for p in self.handle.framework.nominated_pods_for_node(best.node)
            if p.priority < latest.priority
        )
        logger.log(
            V(2),
            "the target node for the preemption is determined",
            extra=kv(pod=pod.key, node=best.node, victims=len(best.victims)),
        )
        preemption = Preemption(latest, best.node, best.victims, lower, best.pdb_violations)
        message = (
            f"found a potential placement for pod on node {best.node}, preempting {len(best.victims)} victims"
        )
        return PostFilterResult(best.node, preemption), Status(Code.SUCCESS, (message,))

    # --- the rules ----------------------------------------------------------------------

    def eligible(self, pod: PodInfo, nominated: str, nominated_status: Status | None) -> tuple[bool, str]:
        """``PodEligibleToPreemptOthers``; ``nominated``: the node the pod is nominated to."""
        if pod.spec.get("preemptionPolicy") == "Never":
            return False, NEVER
        if nominated:
            if nominated_status is not None and nominated_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            assert self.handle is not None
            ni = self.handle.snapshot.get(nominated)
            if ni is not None:
                for p in ni.pods.values():
                    if p.priority < pod.priority and terminating_by_preemption(p):
                        return False, TERMINATING
        return True, ""

    def select_victims_on_node(
        self,
        state: CycleState,
        pod: PodInfo,
        ni: NodeInfo,
        pdbs: Sequence[dict[str, Any]],
        now: float | None = None,
    ) -> tuple[list[PodInfo], int, Status | None]:
        """``SelectVictimsOnNode`` on ``ni`` (a copy: it is changed) and ``state`` (a clone)."""
        assert self.handle is not None
        fw = self.handle.framework
        potential = [p for p in ni.pods.values() if p.priority < pod.priority]
        if not potential:
            return [], 0, unresolvable(NO_VICTIMS)

        def remove(v: PodInfo) -> None:
            ni.remove_pod(v.uid)
            st = fw.run_remove_pod(state, pod, v, ni)
            if st is not None:
                raise SchedulingError(st.plugin, st.message())

        def add(v: PodInfo) -> None:
            ni.add_pod(v)
            st = fw.run_add_pod(state, pod, v, ni)
            if st is not None:
                raise SchedulingError(st.plugin, st.message())

        try:
            for v in potential:
                remove(v)
            st = fw.run_filters_with_nominated(state, pod, ni)
            if st is not None:
                return [], 0, st
            potential = sort_by_importance(potential, now)
            violating, non_violating = pdb_violations(potential, pdbs)
            victims: list[PodInfo] = []

            def reprieve(v: PodInfo) -> bool:
                add(v)
                # The node-static filters passed above, on this node: only its pods change here.
                fits = fw.run_filters_with_nominated(state, pod, ni, pods_only=True) is None
                if not fits:
                    remove(v)
                    victims.append(v)
                    logger.log(
                        V(5),
                        "Pod is a potential preemption victim on node",
                        extra=kv(pod=v.key, node=ni.name),
                    )
                return fits

            num_violating = sum(1 for v in violating if not reprieve(v))
            for v in non_violating:
                reprieve(v)
        except SchedulingError as e:
            return [], 0, Status(Code.ERROR, (str(e),), NAME)
        if violating and non_violating:
            victims = sort_by_importance(victims, now)
        return victims, num_violating, None
