"""The plugin contract and one profile's plugin chain.

A plugin is a class with a ``name`` and any of the extension-point methods
below; the profile calls the ones it has, in the order the configuration
enables them. Conventions, chosen for speed on the hot path:

- "success" is ``None``; a failure is a :class:`Status`.
- ``pre_filter`` may return ``SKIP`` (the plugin has nothing to check for
  this pod, so its ``filter`` is not called this cycle), or a
  :class:`PreFilterResult` that narrows the candidate nodes.
- ``pre_score`` may return ``SKIP`` likewise for ``score``.
- ``score`` returns an int; ``normalize_scores`` (optional) rescales the
  scores of all nodes in place to 0..100. The profile then applies weights.
- A plugin may also have ``filter_nodes`` (results for a list of nodes: one
  per node in order, or ``None`` when all pass) and ``score_nodes`` (one
  score per node in order); the profile calls those instead of ``filter`` and
  ``score`` node by node, and ``normalize_score_list`` (the scores as a list
  in node order, rescaled in place) instead of ``normalize_scores``. They
  must agree with the per-node and per-name methods, which stay the
  reference (tests compare the two).
- ``reserve``/``unreserve`` run in the scheduling cycle, ``pre_bind`` and
  ``post_bind`` in the binding cycle (another thread), so they must not touch
  the cycle's snapshot.
- A PreFilter plugin whose state counts other pods (pod affinity, topology
  spread) also has ``add_pod``/``remove_pod`` (kube-scheduler's
  PreFilterExtensions): they update that state as if a pod were added to or
  removed from a node, on a *clone* of the cycle state
  (:meth:`CycleState.clone`), for nominated pods and for preemption's
  what-if runs. A plugin's state object that those methods change has a
  ``clone()``; other state is shared between clones and must not change.
- ``post_filter`` runs when no node fits (DefaultPreemption): it may return a
  :class:`PostFilterResult` that nominates a node.

Plugins are built once per profile by ``Factory(args, handle)``, where
``args`` is the plugin's typed arguments (or ``None``) and ``handle`` gives
read access to the cluster state (:class:`Handle`).
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    SKIP = 5


@dataclass(frozen=True, slots=True)
class Status:
    code: Code
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin else Status(self.code, self.reasons, plugin)


SKIP = Status(Code.SKIP)


def unschedulable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons)


def unresolvable(*reasons: str) -> Status:
    """Unschedulable, and no other pod's removal would help (no preemption)."""
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)


def error(reason: str) -> Status:
    return Status(Code.ERROR, (reason,))


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Only these nodes can fit (e.g. a DaemonSet pod's node affinity on metadata.name)."""

    node_names: frozenset[str]


class CycleState(dict[str, Any]):
    """Data a plugin keeps from one extension point to the next, for one pod's cycle.

    Keys are plugin names (or ``"<plugin>/<what>"``). ``skip_filter`` names the
    plugins whose PreFilter returned SKIP: their Filter (and their
    ``add_pod``/``remove_pod``) does not run this cycle. ``relaxed`` is set for the
    second Filter pass of a cycle in which no node fitted and a plugin that can relax its
    filter (``relaxable``) had rejected nodes: such plugins then reject only what they must
    (``profile.Profile.schedule``)."""

    skip_filter: frozenset[str] = frozenset()
    relaxed: bool = False

    def clone(self) -> CycleState:
        """A copy whose values with a ``clone()`` are cloned (``CycleState.Clone``)."""
        out = CycleState()
        for k, v in self.items():
            clone = getattr(v, "clone", None)
            out[k] = clone() if callable(clone) else v
        out.skip_filter = self.skip_filter
        out.relaxed = self.relaxed
        return out


class NodeStatuses(Protocol):
    """Why each node was rejected in the cycle that failed (``NodeToStatusReader``)."""

    def get(self, node: str) -> Status:
        """The node's status; nodes not evaluated get the status of absent nodes."""
        ...

    def nodes_with(self, code: Code) -> list[NodeInfo]:
        """The snapshot's nodes whose status has ``code``."""
        ...


class Snapshot(Protocol):
    """The cluster as the scheduling cycle sees it (read-only for plugins)."""

    def list(self) -> list[NodeInfo]: ...
    def get(self, name: str) -> NodeInfo | None: ...
    def have_pods_with_affinity(self) -> builtins.list[NodeInfo]: ...
    def have_pods_with_required_anti_affinity(self) -> builtins.list[NodeInfo]: ...
    def image_num_nodes(self, image: str) -> int: ...
    def is_pvc_used_by_pods(self, key: str) -> bool: ...


class Store(Protocol):
    """An informer's store of raw objects, keyed ``namespace/name`` (or ``name``)."""

    def get(self, key: str) -> dict[str, Any] | None: ...
    def list(self) -> list[dict[str, Any]]: ...
    def __len__(self) -> int: ...


class Framework(Protocol):
    """What a PostFilter plugin may run of its profile (kube-scheduler's ``framework.Handle``)."""

    def run_filters_with_nominated(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, *, pods_only: bool = False
    ) -> Status | None:
        """Every filter on ``node``, with and without the higher-priority pods nominated to it;
        ``pods_only``: not those whose verdict comes from the Node alone (the caller saw them
        pass on this node, and only its pods changed since)."""
        ...

    def run_add_pod(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo
    ) -> Status | None: ...
    def run_remove_pod(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo
    ) -> Status | None: ...

    def nominated_pods_for_node(self, node: str) -> list[PodInfo]: ...
    def nominated_node(self, pod: PodInfo) -> str: ...


class Handle(Protocol):
    """What a plugin may use besides its arguments."""

    @property
    def snapshot(self) -> Snapshot: ...

    def store(self, resource: str) -> Store:
        """The store of ``pods``, ``persistentvolumeclaims``, ``persistentvolumes``,
        ``storageclasses``, ``csinodes``, ``csidrivers``, ``csistoragecapacities``,
        ``volumeattachments``, ``namespaces`` or ``poddisruptionbudgets``."""
        ...

    @property
    def framework(self) -> Framework:
        """The profile the plugin runs in (for PostFilter's what-if runs)."""
        ...

    @property
    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` (for PreBind writes); None in unit tests."""
        ...

    @property
    def scheduler_name(self) -> str: ...

    def move_pods(self, event: str, plugins: frozenset[str]) -> None:
        """Give the unschedulable pods these plugins rejected another try: what the plugins
        read outside the informers (Dynamic's load) changed as ``event`` says."""
        ...

    def event(self, regarding: dict[str, Any], type_: str, reason: str, action: str, note: str) -> None:
        """Record an event about ``regarding`` as this profile's scheduler (kube-scheduler's
        ``EventRecorder``); nothing where no events are written (shadow mode, ``explain``)."""
        ...


class Plugin(Protocol):
    name: ClassVar[str]


@runtime_checkable
class PreEnqueuePlugin(Protocol):
    """Whether the pod may have a cycle at all: a Status holds it back, with no attempt made
    and nothing written, until an event its plugin registered for moves it."""

    def pre_enqueue(self, pod: PodInfo) -> Status | None: ...


@runtime_checkable
class PreFilterPlugin(Protocol):
    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> Status | PreFilterResult | None: ...


@runtime_checkable
class FilterPlugin(Protocol):
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None: ...


@runtime_checkable
class PreFilterExtensions(Protocol):
    """``add_pod``/``remove_pod`` on a cloned state: as if ``other`` were added to / removed
    from ``node`` (``PreFilterExtensions``). ``node`` already reflects the change."""

    def add_pod(self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo) -> Status | None: ...
    def remove_pod(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo
    ) -> Status | None: ...


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """What PostFilter decided: the node to nominate ("" clears a nomination) and the
    preemption to carry out (``Any``: the plugin's own record, which the loop hands to
    ``ClusterIO.preempt``)."""

    nominated_node: str
    preemption: Any = None


@runtime_checkable
class PostFilterPlugin(Protocol):
    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatuses
    ) -> tuple[PostFilterResult | None, Status]: ...


@runtime_checkable
class PreScorePlugin(Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None: ...


@runtime_checkable
class ScorePlugin(Protocol):
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int: ...


@runtime_checkable
class ScoreNormalizer(Protocol):
    name: ClassVar[str]

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: dict[str, int]) -> None: ...


@runtime_checkable
class ReservePlugin(Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...
    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class PreBindPlugin(Protocol):
    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...


@runtime_checkable
class PostBindPlugin(Protocol):
    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


BatchFilter = Callable[[CycleState, PodInfo, list[NodeInfo]], "list[Status | None] | None"]
"""``filter_nodes(state, pod, nodes)``: one result per node in order, or None when all pass."""

BatchScore = Callable[[CycleState, PodInfo, list[NodeInfo]], list[int]]
"""``score_nodes(state, pod, nodes)``: one raw score per node in order."""


def filter_each(
    one: Callable[[CycleState, PodInfo, NodeInfo], Status | None],
    state: CycleState,
    pod: PodInfo,
    nodes: list[NodeInfo],
) -> list[Status | None] | None:
    """A per-node ``filter`` run over ``nodes`` as a :data:`BatchFilter` answers."""
    out = [one(state, pod, ni) for ni in nodes]
    return out if any(out) else None


MEMO_ENTRIES = 64
"""At most this many entries in one ``NodeInfo.memo``: a node that stays the same while pods of
many different requests pass keeps only the latest."""


def memoized_scores(
    nodes: list[NodeInfo], memo_key: object, pod_key: Hashable, compute: Callable[[list[NodeInfo]], list[int]]
) -> list[int]:
    """Scores that depend only on the node and ``pod_key`` (e.g. the pod's requests), kept in
    ``NodeInfo.memo`` under ``(memo_key, pod_key)``: ``compute`` runs only on the nodes that
    changed (a change clears the node's memo) since they were last scored for an equal ``pod_key``.

    Between two cycles only the node that took the last pod changes, and pods of one
    workload ask for the same: most of a cycle's scores repeat the previous cycle's. The
    lookups are one ``dict.get`` per node, with no Python-level branch for a hit."""
    key = (memo_key, pod_key)
    out: list[Any] = [ni.memo.get(key) for ni in nodes]
    if None not in out:
        return out
    missing = [i for i, v in enumerate(out) if v is None]
    todo = [nodes[i] for i in missing]
    for i, ni, score in zip(missing, todo, compute(todo), strict=True):
        out[i] = score
        memo = ni.memo
        if len(memo) >= MEMO_ENTRIES:
            memo.clear()
        memo[key] = score
    return out


Factory = Callable[[Any, Handle], Any]
"""Builds a plugin from its typed args (None when it takes none) and the handle."""


def default_normalize(scores: dict[str, int], reverse: bool = False) -> None:
    """Scale scores so the highest becomes 100 (``helper.DefaultNormalizeScore``).

    With ``reverse`` the lowest raw score becomes the best (100).
    """
    if not scores:
        return
    top = max(scores.values())
    if top == 0:
        if reverse:
            for k in scores:
                scores[k] = MAX_NODE_SCORE
        return
    for k, v in scores.items():
        s = MAX_NODE_SCORE * v // top
        scores[k] = MAX_NODE_SCORE - s if reverse else s


def default_normalize_list(scores: list[int], reverse: bool = False) -> None:
    """``default_normalize`` of scores in a list (in place)."""
    if not scores:
        return
    top = max(scores)
    if top == 0:
        if reverse:
            scores[:] = [MAX_NODE_SCORE] * len(scores)
        return
    if reverse:
        scores[:] = [MAX_NODE_SCORE - MAX_NODE_SCORE * v // top for v in scores]
    else:
        scores[:] = [MAX_NODE_SCORE * v // top for v in scores]


def iter_plugins(plugins: Iterable[Any], kind: type) -> list[Any]:
    return [p for p in plugins if isinstance(p, kind)]


def weights_of(weights: Mapping[str, int], plugins: Iterable[Any]) -> list[int]:
    return [weights.get(p.name, 1) for p in plugins]
