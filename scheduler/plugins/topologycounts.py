"""Counting over every node once per workload, not once per pod: per-node memos and running sums.

InterPodAffinity and PodTopologySpread sum, for the incoming pod, what each
node of the cluster contributes (matching pods per topology domain). What a
node contributes depends only on the node (its labels, taints, pods) and on
the pod's *shape* (namespace, selectors, ...), and the next pod of a workload
has the same shape. Two layers avoid recounting:

* :func:`memo_entries` memoizes a node's contribution in ``NodeInfo.memo``,
  which the cache clears on every change of the node or its pods;
* :class:`NodeSums` keeps the sums of one shape across cycles: when the
  snapshot hands out the same node list as last time, only the nodes whose
  ``generation`` moved are recounted and their old contribution replaced.
  A new list (nodes added or removed) means a full recount.

kube-scheduler's newest releases do the same (``framework/plugins/nodememo``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from scheduler.core.nodeinfo import NodeInfo

MEMO_LIMIT = 64
"""Pod shapes remembered per node between two changes of the node."""
SHAPES_LIMIT = 4096
SUMS_LIMIT = 64
"""Shapes whose sums a plugin keeps."""

Part = tuple[tuple[Hashable, Hashable, int], ...]
"""A node's contribution: (group, key, amount) triples."""

_shape_ids: dict[Hashable, int] = {}
_next_shape_id = itertools.count(1)


def shape_id(key: Hashable) -> int:
    """A small int standing for ``key`` in the per-node memos: cheap to hash, never reused.

    Forgetting the table only orphans memo entries (they go with the node's next change).
    """
    sid = _shape_ids.get(key)
    if sid is None:
        if len(_shape_ids) >= SHAPES_LIMIT:
            _shape_ids.clear()
        sid = _shape_ids[key] = next(_next_shape_id)
    return sid


def memo_entries(
    nodes: Sequence[NodeInfo], plugin: str, sid: int, compute: Callable[[NodeInfo], Any]
) -> list[Any]:
    """``compute(ni)`` for every node, memoized on the node under ``(plugin, sid)`` until it changes.

    ``compute`` must not return None.
    """
    out: list[Any] = []
    append = out.append
    for ni in nodes:
        memo = ni.memo.get(plugin)
        if memo is None:
            memo = ni.memo[plugin] = {}
        value = memo.get(sid)
        if value is None:
            if len(memo) >= MEMO_LIMIT:
                memo.clear()
            value = memo[sid] = compute(ni)
        append(value)
    return out


class NodeSums:
    """Sums over all nodes of their :data:`Part`\\ s, by group then key.

    ``sums[group][key]`` is the total amount, ``refs[group][key]`` how many
    node contributions name the key (so a key contributed with amount 0 is
    present: a topology domain with no matching pod still exists).
    """

    __slots__ = ("nodes", "gens", "parts", "sums", "refs")

    def __init__(self) -> None:
        self.nodes: Sequence[NodeInfo] | None = None
        self.gens: list[int] = []
        self.parts: list[Part] = []
        self.sums: dict[Hashable, dict[Hashable, int]] = {}
        self.refs: dict[Hashable, dict[Hashable, int]] = {}

    def refresh(
        self, nodes: Sequence[NodeInfo], parts_of: Callable[[Sequence[NodeInfo]], list[Part]]
    ) -> None:
        """Bring the sums up to date with ``nodes``; ``parts_of(nodes)`` gives their contributions."""
        gens = [ni.generation for ni in nodes]
        if nodes is not self.nodes or len(gens) != len(self.gens):
            self.nodes, self.gens, self.parts = nodes, gens, parts_of(nodes)
            self.sums, self.refs = {}, {}
            for part in self.parts:
                self._add(part, 1)
            return
        if gens == self.gens:
            return
        old = self.gens
        changed = [j for j in range(len(gens)) if gens[j] != old[j]]
        for j, part in zip(changed, parts_of([nodes[j] for j in changed]), strict=True):
            self._add(self.parts[j], -1)
            self._add(part, 1)
            self.parts[j] = part
        self.gens = gens

    def _add(self, part: Part, sign: int) -> None:
        for group, key, amount in part:
            sums = self.sums.get(group)
            if sums is None:
                sums = self.sums[group] = {}
                self.refs[group] = {}
            refs = self.refs[group]
            n = refs.get(key, 0) + sign
            if n:
                refs[key] = n
                sums[key] = sums.get(key, 0) + sign * amount
            else:  # no node names the key any more
                del refs[key]
                del sums[key]

    def group(self, group: Hashable) -> dict[Hashable, int]:
        return self.sums.get(group) or {}


class SumsCache:
    """A plugin's :class:`NodeSums`, one per shape, the least recently used dropped beyond a limit."""

    __slots__ = ("_sums",)

    def __init__(self) -> None:
        self._sums: dict[Hashable, NodeSums] = {}

    def get(self, key: Hashable) -> NodeSums:
        sums = self._sums.pop(key, None)
        if sums is None:
            sums = NodeSums()
            if len(self._sums) >= SUMS_LIMIT:
                del self._sums[next(iter(self._sums))]
        self._sums[key] = sums  # most recently used last
        return sums
