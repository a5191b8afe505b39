"""Filter: which nodes can take a pod, with the pods nominated to them counted.

``Filtering.find_feasible`` is kube-scheduler's ``findNodesThatPassFilters``:
the nodes are filtered from where the previous cycle stopped, in chunks of
as many as are still wanted, one plugin over a chunk at a time
(``filter_nodes``, or ``filter`` in a loop), until enough fit
(``percentageOfNodesToScore``). It evaluates exactly the nodes a
node-by-node search would.

Nominated pods (pods that preempted others and wait for the room they
made): a node to which pods of equal or higher priority are nominated must
fit the pod both with those pods counted and without them (kube-scheduler's
``RunFilterPluginsWithNominatedPods``), node by node, on copies of the node
and of the cycle state that the PreFilter extensions (``add_pod``) update.
With no nominations, the usual case, only the batch path runs.

Node-static filters: the leading Filter plugins that declare ``node_static``
(NodeName, NodeUnschedulable, TaintToleration, NodeAffinity) decide from the
Node object and a few fields of the pod alone. Their combined verdict on a
node (the first that rejects it, in order) is kept in ``NodeInfo.node_memo``,
which a change of the Node clears, under the pod's values of those fields:
the next pod that asks the same (every pod of a Deployment) costs one
lookup per node for them, not a pass of each plugin.

The same per-node runs serve PostFilter (``framework.Framework``):
preemption removes victims from a node copy and asks whether the pod fits.
A failure is a :class:`FitError`, whose message is what FailedScheduling
says; :class:`FitStatuses` is its per-node view for PostFilter.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import orjson

from scheduler.core.framework import (
    MEMO_ENTRIES,
    BatchFilter,
    Code,
    CycleState,
    Snapshot,
    Status,
    filter_each,
)
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.nominator import Nominator
from scheduler.core.podinfo import PodInfo
from scheduler.logs import kv

logger = logging.getLogger(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
MIN_FILTER_CHUNK = 32
"""Nodes filtered per batch at least: near the end of a search fewer are wanted; filtering a
few more and dropping them beats many calls over one node each."""
NO_NODES_MSG = "no nodes available to schedule pods"
NODE_STATIC_FIELDS = ("nodeName", "nodeSelector", "affinity", "tolerations")
"""What of a pod's spec a ``node_static`` filter may read (``affinity``: its ``nodeAffinity``)."""
_STATIC_SIGNATURE = "filtering.node-static"
_UNKNOWN = object()


def node_static_signature(pod: PodInfo) -> bytes:
    """The pod's ``NODE_STATIC_FIELDS`` as canonical JSON (memoized on the pod)."""
    sig = pod.memo.get(_STATIC_SIGNATURE)
    if sig is None:
        spec = pod.spec
        affinity = (spec.get("affinity") or {}).get("nodeAffinity")
        fields = [spec.get("nodeName"), spec.get("nodeSelector"), affinity, spec.get("tolerations")]
        sig = pod.memo[_STATIC_SIGNATURE] = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)
    return sig


class SchedulingError(Exception):
    """A plugin failed (not "the pod does not fit"): the pod backs off and is retried."""

    def __init__(self, plugin: str, message: str) -> None:
        super().__init__(f"running {plugin}: {message}")
        self.plugin = plugin


@dataclass
class FitError(Exception):
    """No node fits; ``message()`` is the FailedScheduling text users see."""

    num_all_nodes: int
    statuses: dict[str, tuple[str, Status]] = field(default_factory=dict)
    """node name -> (plugin, status) of the filter that rejected it."""
    pre_filter: tuple[str, Status] | None = None
    post_filter_message: str = ""
    """What PostFilter said (``preemption: ...``), appended to the message."""
    absent: Status | None = None
    """The status of nodes not in ``statuses`` (None: unresolvable, and not in the message)."""

    def message(self) -> str:
        if self.num_all_nodes == 0:
            return NO_NODES_MSG
        head = f"0/{self.num_all_nodes} nodes are available:"
        if self.pre_filter is not None:
            out = f"{head} {self.pre_filter[1].message()}."
        else:
            histogram: Counter[str] = Counter()
            for _, st in self.statuses.values():
                for reason in st.reasons:
                    histogram[reason] += 1
            if self.absent is not None and len(self.statuses) < self.num_all_nodes:
                for reason in self.absent.reasons:
                    histogram[reason] += self.num_all_nodes - len(self.statuses)
            parts = sorted(f"{n} {reason}" for reason, n in histogram.items())
            out = f"{head} {', '.join(parts)}." if parts else head
        if self.post_filter_message:
            out += f" {self.post_filter_message}"
        return out

    def unschedulable_plugins(self) -> frozenset[str]:
        plugins = {p for p, _ in self.statuses.values()}
        if self.pre_filter is not None:
            plugins.add(self.pre_filter[0])
        return frozenset(plugins)

    def __str__(self) -> str:
        return self.message()


ABSENT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
"""The status of a node the failed cycle did not evaluate (``NewDefaultNodeToStatus``)."""


class FitStatuses:
    """framework.NodeStatuses over a FitError and the snapshot of its cycle.

    After a PreFilter rejection every node has that status (kube-scheduler sets it as the
    status of absent nodes, so that preemption may still look at them)."""

    def __init__(self, fit: FitError, snapshot: Snapshot) -> None:
        self.fit = fit
        self.snapshot = snapshot

    def get(self, node: str) -> Status:
        if self.fit.pre_filter is not None:
            return self.fit.pre_filter[1]
        entry = self.fit.statuses.get(node)
        return entry[1] if entry is not None else ABSENT

    def nodes_with(self, code: Code) -> list[NodeInfo]:
        return [ni for ni in self.snapshot.list() if self.get(ni.name).code == code]


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """kube-scheduler's sampling: all nodes below 100, else a percentage (adaptive when 0)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    adaptive = percentage
    if adaptive <= 0:
        adaptive = 50 - num_all_nodes // 125
        if adaptive < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            adaptive = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    if adaptive >= 100:
        return num_all_nodes
    n = num_all_nodes * adaptive // 100
    return max(n, MIN_FEASIBLE_NODES_TO_FIND)


def filter_nodes_of(plugin: Any) -> BatchFilter:
    """The plugin's ``filter_nodes``, or its ``filter`` run over the nodes."""
    batch = getattr(plugin, "filter_nodes", None)
    if callable(batch):
        return batch
    return partial(filter_each, plugin.filter)


class Filtering:
    """A profile's Filter plugins (and the PreFilter extensions), and where the last search stopped."""

    def __init__(
        self,
        filters: Sequence[Any],
        extensions: Sequence[Any],
        nominator: Nominator,
        percentage_of_nodes_to_score: int = 0,
    ) -> None:
        self._filter_nodes = [(p.name, filter_nodes_of(p)) for p in filters]
        self._filter_one = [(p.name, p.filter) for p in filters]
        self._node_static = frozenset(p.name for p in filters if getattr(p, "node_static", False))
        self._memo_token = object()
        """This profile's entries in ``NodeInfo.node_memo`` (profiles configure plugins apart)."""
        self.extensions = list(extensions)
        self._active_extensions: dict[frozenset[str], tuple[Any, ...]] = {}
        """Per set of skipped plugins (a cycle's ``skip_filter``), the extensions that run."""
        self.nominator = nominator
        self.percentage = percentage_of_nodes_to_score
        self._next_start = 0

    def filters_for(self, skip: set[str] | frozenset[str]) -> list[tuple[str, Any]]:
        return [(name, f) for name, f in self._filter_one if name not in skip]

    def find_feasible(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: list[NodeInfo],
        num_all: int,
        statuses: dict[str, tuple[str, Status]],
        skip: set[str],
        nominated: dict[str, tuple[PodInfo, ...]],
    ) -> list[NodeInfo]:
        n = len(nodes)
        if n == 0:
            return []
        want = num_feasible_nodes_to_find(self.percentage, num_all)
        filters = [(name, f) for name, f in self._filter_nodes if name not in skip]
        static = next(
            (i for i, (name, _) in enumerate(filters) if name not in self._node_static), len(filters)
        )
        memo_key = (
            (self._memo_token, node_static_signature(pod), frozenset(skip & self._node_static))
            if static
            else None
        )
        # Node by node for the nodes with nominated pods, after the node-static filters.
        one_by_one = self.filters_for(skip)[static:] if nominated else []
        feasible: list[NodeInfo] = []
        start = self._next_start % n
        order = nodes[start:] + nodes[:start] if start else nodes
        pos = 0
        while pos < n and len(feasible) < want:
            need = want - len(feasible)
            chunk = order[pos : pos + max(need, MIN_FILTER_CHUNK)]
            if nominated and any(ni.name in nominated for ni in chunk):
                plain = [ni for ni in chunk if ni.name not in nominated]
                fit = {
                    id(ni)
                    for ni in self._filter_chunk(state, pod, plain, filters, statuses, static, memo_key)
                }
                with_pods = [ni for ni in chunk if ni.name in nominated]
                if memo_key is not None:
                    # The node-static filters lead, and decide alike with the nominated pods counted.
                    with_pods = self._static_pass(state, pod, with_pods, filters, statuses, static, memo_key)
                for ni in with_pods:
                    failed = self.filter_node(state, pod, ni, one_by_one, nominated[ni.name])
                    if failed is None:
                        statuses.pop(ni.name, None)  # a nominated-node try may have failed it
                        fit.add(id(ni))
                    else:
                        statuses[ni.name] = failed
                passed = [ni for ni in chunk if id(ni) in fit]
            else:
                passed = self._filter_chunk(state, pod, chunk, filters, statuses, static, memo_key)
            used = len(chunk)
            if len(passed) > need:
                # The search ends at the node that completes it: later ones don't count.
                passed = passed[:need]
                last = passed[-1]
                used = next(i for i, ni in enumerate(chunk) if ni is last) + 1
                for ni in chunk[used:]:
                    statuses.pop(ni.name, None)
            feasible.extend(passed)
            pos += used
        self._next_start = (start + pos) % n
        return feasible

    def _filter_chunk(
        self,
        state: CycleState,
        pod: PodInfo,
        chunk: list[NodeInfo],
        filters: list[tuple[str, BatchFilter]],
        statuses: dict[str, tuple[str, Status]],
        static: int = 0,
        memo_key: Any = None,
    ) -> list[NodeInfo]:
        """The nodes of ``chunk`` that pass every filter, one plugin over the list at a time; the
        first ``static`` filters' verdicts come from (and go to) the node memo, under ``memo_key``."""
        if memo_key is None:
            return self._run_chunk(state, pod, chunk, filters, statuses)
        passed = self._static_pass(state, pod, chunk, filters, statuses, static, memo_key)
        return self._run_chunk(state, pod, passed, filters[static:], statuses)

    def _static_pass(
        self,
        state: CycleState,
        pod: PodInfo,
        chunk: list[NodeInfo],
        filters: list[tuple[str, BatchFilter]],
        statuses: dict[str, tuple[str, Status]],
        static: int,
        memo_key: Any,
    ) -> list[NodeInfo]:
        """The nodes of ``chunk`` that pass the first ``static`` (node-static) filters, by the
        node memo under ``memo_key`` (filled where it has no verdict yet); the others' statuses
        go to ``statuses``. The Node's pods play no part in these verdicts, nominated or not."""
        verdicts = [ni.node_memo.get(memo_key, _UNKNOWN) for ni in chunk]
        if _UNKNOWN in verdicts:
            todo = [i for i, v in enumerate(verdicts) if v is _UNKNOWN]
            new: dict[str, tuple[str, Status]] = {}
            self._run_chunk(state, pod, [chunk[i] for i in todo], filters[:static], new)
            for i in todo:
                ni = chunk[i]
                verdicts[i] = v = new.get(ni.name)
                memo = ni.node_memo
                if len(memo) >= MEMO_ENTRIES:
                    memo.clear()
                memo[memo_key] = v
        passed = []
        for ni, v in zip(chunk, verdicts, strict=True):
            if v is None:
                passed.append(ni)
            else:
                statuses[ni.name] = v
        return passed

    def _run_chunk(
        self,
        state: CycleState,
        pod: PodInfo,
        chunk: list[NodeInfo],
        filters: list[tuple[str, BatchFilter]],
        statuses: dict[str, tuple[str, Status]],
    ) -> list[NodeInfo]:
        passed = chunk
        for name, f in filters:
            if not passed:
                break
            try:
                results = f(state, pod, passed)
            except Exception as e:  # a plugin bug must not kill the loop
                logger.exception("Filter plugin failed", extra=kv(plugin=name, pod=pod.key))
                raise SchedulingError(name, str(e)) from e
            if results is None:
                continue
            kept = []
            for ni, st in zip(passed, results, strict=True):
                if st is None:
                    kept.append(ni)
                elif st.code == Code.ERROR:
                    raise SchedulingError(name, st.message())
                else:
                    statuses[ni.name] = (name, st)
            passed = kept
        return passed

    # --- one node, nominated pods counted ---------------------------------------------

    def nominated_for(self, pod: PodInfo) -> dict[str, tuple[PodInfo, ...]]:
        """Per node, the pods nominated there that ``pod`` must yield to: equal or higher
        priority, not itself (``addGENominatedPods``). Usually empty."""
        snap = self.nominator.snapshot()
        if not snap:
            return snap
        out = {}
        for node, pods in snap.items():
            mine = tuple(p for p in pods if p.priority >= pod.priority and p.uid != pod.uid)
            if mine:
                out[node] = mine
        return out

    def _run_filters(
        self, state: CycleState, pod: PodInfo, ni: NodeInfo, filters: list[tuple[str, Any]]
    ) -> tuple[str, Status] | None:
        """The first filter that rejects ``ni`` (``RunFilterPlugins``), or None."""
        for name, f in filters:
            try:
                st = f(state, pod, ni)
            except Exception as e:  # a plugin bug must not kill the loop
                logger.exception("Filter plugin failed", extra=kv(plugin=name, pod=pod.key))
                raise SchedulingError(name, str(e)) from e
            if st is not None:
                if st.code == Code.ERROR:
                    raise SchedulingError(name, st.message())
                return name, st
        return None

    def filter_node(
        self,
        state: CycleState,
        pod: PodInfo,
        ni: NodeInfo,
        filters: list[tuple[str, Any]],
        nominated: Sequence[PodInfo] | None,
    ) -> tuple[str, Status] | None:
        """``RunFilterPluginsWithNominatedPods``: the pod must fit ``ni`` with the nominated
        pods counted (resources and anti-affinity are then stricter) and without them (pod
        affinity may have relied on them); without nominated pods, one pass."""
        if nominated:
            # Only the extensions change the state: without one running, it is shared.
            with_them = state.clone() if self.extensions_for(state) else state
            ni_with = ni.clone()
            for other in nominated:
                ni_with.add_pod(other)
                st = self.run_extension("add_pod", with_them, pod, other, ni_with)
                if st is not None:
                    raise SchedulingError(st.plugin, st.message())
            failed = self._run_filters(with_them, pod, ni_with, filters)
            if failed is not None:
                return failed
        return self._run_filters(state, pod, ni, filters)

    # --- for PostFilter (through Profile) -------------------------------------------

    def run_filters_with_nominated(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, *, pods_only: bool = False
    ) -> Status | None:
        """``pods_only``: not the node-static filters (the caller saw them pass on this node,
        and only its pods changed since)."""
        nominated = tuple(
            p
            for p in self.nominator.pods_for_node(node.name)
            if p.priority >= pod.priority and p.uid != pod.uid
        )
        skip = state.skip_filter | self._node_static if pods_only else state.skip_filter
        failed = self.filter_node(state, pod, node, self.filters_for(skip), nominated)
        return None if failed is None else failed[1].with_plugin(failed[0])

    def extensions_for(self, state: CycleState) -> tuple[Any, ...]:
        """The PreFilter extensions (``add_pod``/``remove_pod``) that run in this cycle."""
        skip = state.skip_filter
        found = self._active_extensions.get(skip)
        if found is None:
            if len(self._active_extensions) >= MEMO_ENTRIES:
                self._active_extensions.clear()
            found = self._active_extensions[skip] = tuple(p for p in self.extensions if p.name not in skip)
        return found

    def run_extension(
        self, method: str, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo
    ) -> Status | None:
        for p in self.extensions_for(state):
            try:
                st = getattr(p, method)(state, pod, other, node)
            except Exception as e:
                logger.exception("PreFilter extension failed", extra=kv(plugin=p.name, pod=pod.key))
                st = Status(Code.ERROR, (str(e),))
            if st is not None:
                return Status(Code.ERROR, st.reasons, p.name)
        return None
