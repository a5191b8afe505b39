"""NodeDeclaredFeatures: a pod that uses a node feature goes only to nodes that declare it.

As kube-scheduler's (``nodedeclaredfeatures.NodeDeclaredFeatures``), over the
feature registry of ``k8s.io/component-helpers/nodedeclaredfeatures``
(``features.AllFeatures``). PreFilter infers the features the pod's spec needs
(``Framework.InferForPodScheduling``); a pod that needs none skips the plugin.
A feature stops being required once the scheduler's version is strictly
greater than the feature's max version (the bound is inclusive); a feature
without one is always checked.

Filter: every required feature must be listed in the node's
``status.declaredFeatures``, or the node is rejected with "node(s) didn't match
Pod's required features". Declared names outside the registry are ignored
(``FeatureMapper.TryMap``), so a node cannot satisfy a feature the scheduler
does not know.

Most registered features only matter to in-place pod updates (kubelet and
API-server checks) and never to scheduling; they stay in :data:`FEATURES`
with a predicate that is always false, so the table is the whole registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from scheduler.core.framework import SKIP, CycleState, Snapshot, Status, unresolvable
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo

Version = tuple[int, int, int]
PodSpec = dict[str, Any]

SCHEDULER_VERSION: Version = (1, 37, 0)
ERR_REASON_UNSATISFIED = "node(s) didn't match Pod's required features"
RESTART_ALL_CONTAINERS = "RestartAllContainers"
_STATE_KEY = "PreFilterNodeDeclaredFeatures"
_REJECTED = unresolvable(ERR_REASON_UNSATISFIED)


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    required_by: Callable[[PodSpec], bool]
    """Whether scheduling a pod with this spec needs the feature on the node."""
    max_version: Version | None = None
    """The last scheduler version (inclusive) that still checks the feature; None: no bound."""


def _containers(spec: PodSpec, *kinds: str) -> Iterator[dict[str, Any]]:
    for kind in kinds:
        yield from spec.get(kind) or ()


def _never(spec: PodSpec) -> bool:
    return False


def _restarts_all_containers(spec: PodSpec) -> bool:
    """A container or init container (not an ephemeral one) has a ``RestartAllContainers`` rule."""
    return any(
        rule.get("action") == RESTART_ALL_CONTAINERS
        for c in _containers(spec, "containers", "initContainers")
        for rule in c.get("restartPolicyRules") or ()
    )


def _host_network_in_user_namespace(spec: PodSpec) -> bool:
    """``hostNetwork: true`` with ``hostUsers`` explicitly false (unset means host users)."""
    return bool(spec.get("hostNetwork")) and spec.get("hostUsers") is False


def _uses_bind_mount_options(spec: PodSpec) -> bool:
    """Some volume mount, in any kind of container, sets ``bindMountOptions``."""
    return any(
        m.get("bindMountOptions")
        for c in _containers(spec, "containers", "initContainers", "ephemeralContainers")
        for m in c.get("volumeMounts") or ()
    )


FEATURES: tuple[Feature, ...] = (
    Feature("DRANodeAllocatableResources", _never),
    Feature("DRAOptionalNodeOperations", _never),  # claims are allocated after PreFilter
    Feature("ExtendWebSocketsToKubelet", _never),
    Feature("InPlacePodLevelResourcesVerticalScaling", _never),
    Feature("InPlacePodVerticalScalingInitContainers", _never),
    Feature("InPlacePodVerticalScalingMemoryBackedVolumes", _never),
    Feature("RestartAllContainersOnContainerExits", _restarts_all_containers),
    Feature("UserNamespacesHostNetworkSupport", _host_network_in_user_namespace),
    Feature("VolumeBindMountOptions", _uses_bind_mount_options),
)
KNOWN_FEATURES = frozenset(f.name for f in FEATURES)


def required_features(
    spec: PodSpec, version: Version = SCHEDULER_VERSION, features: Iterable[Feature] = FEATURES
) -> frozenset[str]:
    """``InferForPodScheduling``: the features a pod with ``spec`` needs at scheduler ``version``."""
    return frozenset(
        f.name
        for f in features
        if (f.max_version is None or version <= f.max_version) and f.required_by(spec)
    )


def declared_features(node: dict[str, Any] | None, known: frozenset[str] = KNOWN_FEATURES) -> frozenset[str]:
    """The registered features a node declares; other names are dropped."""
    status = (node or {}).get("status") or {}
    return known.intersection(status.get("declaredFeatures") or ())


class NodeDeclaredFeatures:
    name: ClassVar[str] = "NodeDeclaredFeatures"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        required = required_features(pod.spec)
        if not required:
            return SKIP
        state[_STATE_KEY] = required
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        required = state.get(_STATE_KEY)
        if required is None:  # PreFilter disabled
            required = required_features(pod.spec)
        if required <= declared_features(node.node):
            return None
        return _REJECTED
