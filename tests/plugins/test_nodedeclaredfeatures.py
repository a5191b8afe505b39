"""NodeDeclaredFeatures: pods using a node feature go only to nodes declaring it."""

from __future__ import annotations

import pytest

from scheduler.core.framework import SKIP, Code, CycleState
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.nodedeclaredfeatures import (
    FEATURES,
    Feature,
    NodeDeclaredFeatures,
    declared_features,
    required_features,
)

from .builders import FakeSnapshot, container, make_node, node_info, pod_info, run_filter

RESTART_ALL = "RestartAllContainersOnContainerExits"
USERNS_HOST_NETWORK = "UserNamespacesHostNetworkSupport"
BIND_MOUNT_OPTIONS = "VolumeBindMountOptions"


def node_declaring(name: str, *features: str) -> NodeInfo:
    node = make_node(name)
    if features:
        node["status"]["declaredFeatures"] = sorted(features)
    return NodeInfo(name, node)


def pod_with(**spec) -> PodInfo:
    p = pod_info("p")
    p.pod["spec"].update(spec)
    return PodInfo.from_pod(p.pod)


def with_restart_rule(c: dict, action: str = "RestartAllContainers") -> dict:
    c["restartPolicy"] = "Never"
    c["restartPolicyRules"] = [{"action": action, "exitCodes": {"operator": "In", "values": [42]}}]
    return c


def with_bind_mount_options(c: dict, options: list[str]) -> dict:
    c["volumeMounts"] = [{"name": "data", "mountPath": "/data", "bindMountOptions": options}]
    return c


# A pod needing each scheduling-relevant feature, per the upstream InferForScheduling rules.
NEEDS = {
    "restart rule on a container": (RESTART_ALL, {"containers": [with_restart_rule(container("app"))]}),
    "restart rule on an init container": (
        RESTART_ALL,
        {"containers": [container("app")], "initContainers": [with_restart_rule(container("init"))]},
    ),
    "host network in a user namespace": (USERNS_HOST_NETWORK, {"hostNetwork": True, "hostUsers": False}),
    "bind mount options on a container": (
        BIND_MOUNT_OPTIONS,
        {"containers": [with_bind_mount_options(container("app"), ["noexec"])]},
    ),
    "bind mount options on an init container": (
        BIND_MOUNT_OPTIONS,
        {
            "containers": [container("app")],
            "initContainers": [with_bind_mount_options(container("init"), ["nodev", "nosuid"])],
        },
    ),
    "bind mount options on an ephemeral container": (
        BIND_MOUNT_OPTIONS,
        {
            "containers": [container("app")],
            "ephemeralContainers": [with_bind_mount_options(container("debug"), ["noexec"])],
        },
    ),
}

# Pods that come close but need nothing.
NEEDS_NOTHING = {
    "plain pod": {},
    "restart rule restarting only its container": {
        "containers": [with_restart_rule(container("app"), action="Restart")]
    },
    "restart-all rule on an ephemeral container": {
        "containers": [container("app")],
        "ephemeralContainers": [with_restart_rule(container("debug"))],
    },
    "host network, hostUsers unset": {"hostNetwork": True},
    "host network with host users": {"hostNetwork": True, "hostUsers": True},
    "user namespace without host network": {"hostUsers": False},
    "user namespace, hostNetwork false": {"hostNetwork": False, "hostUsers": False},
    "volume mount without bind options": {
        "containers": [
            {**container("app"), "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
        ]
    },
    "empty bind mount options": {"containers": [with_bind_mount_options(container("app"), [])]},
    "pod-level resources": {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}},
    "memory-backed emptyDir with a size limit": {
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]
    },
    "resource claims": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]},
}


def test_registry_lists_upstream_features_in_name_order():
    assert [f.name for f in FEATURES] == [
        "DRANodeAllocatableResources",
        "DRAOptionalNodeOperations",
        "ExtendWebSocketsToKubelet",
        "InPlacePodLevelResourcesVerticalScaling",
        "InPlacePodVerticalScalingInitContainers",
        "InPlacePodVerticalScalingMemoryBackedVolumes",
        RESTART_ALL,
        USERNS_HOST_NETWORK,
        BIND_MOUNT_OPTIONS,
    ]
    assert all(f.max_version is None for f in FEATURES)


@pytest.mark.parametrize("spec", NEEDS_NOTHING.values(), ids=NEEDS_NOTHING.keys())
def test_pod_needing_no_feature_skips(spec):
    pod = pod_with(**spec)
    assert required_features(pod.spec) == frozenset()
    assert NodeDeclaredFeatures().pre_filter(CycleState(), pod, FakeSnapshot()) is SKIP
    assert run_filter(NodeDeclaredFeatures(), pod, [node_declaring("bare")]) == {"bare": None}


@pytest.mark.parametrize(("feature", "spec"), NEEDS.values(), ids=NEEDS.keys())
def test_pod_needing_a_feature_goes_only_to_nodes_declaring_it(feature, spec):
    pod = pod_with(**spec)
    assert required_features(pod.spec) == {feature}
    others = [f.name for f in FEATURES if f.name != feature]
    nodes = [
        node_declaring("bare"),
        node_declaring("others", *others),
        node_declaring("it", feature),
        node_declaring("all", *(f.name for f in FEATURES)),
    ]
    got = run_filter(NodeDeclaredFeatures(), pod, nodes)
    assert got["it"] is None
    assert got["all"] is None
    for name in ("bare", "others"):
        assert got[name].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert got[name].reasons == ("node(s) didn't match Pod's required features",)


def test_pod_needing_several_features_needs_all_on_one_node():
    pod = pod_with(
        hostNetwork=True,
        hostUsers=False,
        containers=[with_bind_mount_options(with_restart_rule(container("app")), ["noexec"])],
    )
    assert required_features(pod.spec) == {RESTART_ALL, USERNS_HOST_NETWORK, BIND_MOUNT_OPTIONS}
    nodes = [
        node_declaring("two", USERNS_HOST_NETWORK, BIND_MOUNT_OPTIONS),
        node_declaring("three", RESTART_ALL, USERNS_HOST_NETWORK, BIND_MOUNT_OPTIONS),
    ]
    got = run_filter(NodeDeclaredFeatures(), pod, nodes)
    assert got["two"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert got["three"] is None


def test_unknown_declared_names_are_ignored():
    node = make_node("n")
    node["status"]["declaredFeatures"] = ["Bogus", "UserNamespacesHostNetworkSupportV2", "ZZZ"]
    assert declared_features(node) == frozenset()
    node["status"]["declaredFeatures"] = ["Bogus", USERNS_HOST_NETWORK, "ZZZ"]
    assert declared_features(node) == {USERNS_HOST_NETWORK}

    pod = pod_with(hostNetwork=True, hostUsers=False)
    unknown_only = node_declaring("unknown", "Bogus", "userNamespacesHostNetworkSupport")
    mixed = node_declaring("mixed", "Bogus", USERNS_HOST_NETWORK)
    got = run_filter(NodeDeclaredFeatures(), pod, [unknown_only, mixed])
    assert got["unknown"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert got["mixed"] is None


def test_node_without_status_or_object_declares_nothing():
    assert declared_features(None) == frozenset()
    assert declared_features({"metadata": {"name": "n"}}) == frozenset()
    pod = pod_with(hostNetwork=True, hostUsers=False)
    st = NodeDeclaredFeatures().filter(CycleState(), pod, node_info("n"))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_filter_without_pre_filter_state_infers_requirements():
    plugin = NodeDeclaredFeatures()
    pod = pod_with(hostNetwork=True, hostUsers=False)
    assert plugin.filter(CycleState(), pod, node_declaring("it", USERNS_HOST_NETWORK)) is None
    st = plugin.filter(CycleState(), pod, node_declaring("bare"))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_pre_filter_stores_requirements_for_filter():
    plugin = NodeDeclaredFeatures()
    state = CycleState()
    pod = pod_with(hostNetwork=True, hostUsers=False)
    assert plugin.pre_filter(state, pod, FakeSnapshot()) is None
    assert list(state.values()) == [frozenset({USERNS_HOST_NETWORK})]


def uses_host_network(spec: dict) -> bool:
    return bool(spec.get("hostNetwork"))


@pytest.mark.parametrize(
    ("version", "required"),
    [
        ((1, 36, 0), True),
        ((1, 37, 0), True),  # the max version itself still checks the feature
        ((1, 37, 1), False),
        ((1, 38, 0), False),
        ((2, 0, 0), False),
    ],
)
def test_feature_past_its_max_version_is_not_required(version, required):
    table = (
        Feature("Bounded", uses_host_network, max_version=(1, 37, 0)),
        Feature("Unbounded", uses_host_network),
    )
    want = {"Bounded", "Unbounded"} if required else {"Unbounded"}
    assert required_features({"hostNetwork": True}, version, table) == want
    assert required_features({}, version, table) == frozenset()
