"""PodTopologySpread. Filter cases follow the rules of kube-scheduler's podtopologyspread
filtering.go (skew, minDomains, node inclusion policies); the Score cases and their
expected scores are kube-scheduler's scoring_test.go cases."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.framework import SKIP, Code, CycleState, Status
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.logs import V
from scheduler.plugins.podtopologyspread.plugin import (
    ERR_CONSTRAINTS,
    ERR_MISSING_LABEL,
    HOSTNAME,
    PodTopologySpread,
)
from tests.plugins.builders import FakeHandle, FakeSnapshot, make_pod, taint, toleration

FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
U, UR = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def spread(
    max_skew: int, key: str, when: str = "DoNotSchedule", selector: dict | None = FOO, **extra: Any
) -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, **extra}
    if selector is not None:
        c["labelSelector"] = selector
    return c


def incoming(*constraints: dict[str, Any], labels: dict[str, str] | None = None, **kw: Any) -> PodInfo:
    return PodInfo.from_pod(
        make_pod(
            "p",
            labels={"foo": ""} if labels is None else labels,
            topology_spread_constraints=list(constraints) or None,
            **kw,
        )
    )


def node(
    name: str,
    labels: dict[str, str],
    pods: list[dict[str, str]] = (),
    taints: list | None = None,
    **pod_kw: Any,
) -> NodeInfo:
    """A node with exactly ``labels`` and one pod per entry of ``pods`` (the pod's labels)."""
    spec: dict[str, Any] = {"taints": taints} if taints else {}
    ni = NodeInfo(
        name,
        {
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        },
    )
    for i, pl in enumerate(pods):
        ni.add_pod(PodInfo.from_pod(make_pod(f"{name}-{i}", labels=pl, node_name=name, **pod_kw)))
    return ni


def zones(a: int, b: int, x: int, y: int, labels: dict[str, str] | None = None) -> list[NodeInfo]:
    """kube's test layout: node-a, node-b in zone1, node-x, node-y in zone2, with n matching pods each."""
    pl = labels or {"foo": ""}
    return [
        node(f"node-{n}", {"zone": z, "node": f"node-{n}"}, [pl] * count)
        for n, z, count in (("a", "zone1", a), ("b", "zone1", b), ("x", "zone2", x), ("y", "zone2", y))
    ]


def plugin(nodes: list[NodeInfo], args: Any = None) -> tuple[PodTopologySpread, FakeSnapshot]:
    snap = FakeSnapshot(nodes)
    return PodTopologySpread(args, FakeHandle(snap)), snap


def run_filter(
    pod: PodInfo, nodes: list[NodeInfo], args: Any = None
) -> Status | dict[str, tuple[Code, str] | None]:
    pl, snap = plugin(nodes, args)
    state = CycleState()
    st = pl.pre_filter(state, pod, snap)
    if st is not None:
        return st
    out = {}
    each = []
    for n in nodes:
        s = pl.filter(state, pod, n)
        each.append(s)
        out[n.name] = None if s is None else (s.code, s.message())
    # The batch that a cycle runs gives the same verdicts.
    assert (pl.filter_nodes(state, pod, nodes) or [None] * len(nodes)) == each
    return out


def passing(result: Status | dict) -> list[str]:
    assert isinstance(result, dict), result
    return sorted(n for n, s in result.items() if s is None)


# --- Filter ------------------------------------------------------------------------------


def test_no_constraints_skips() -> None:
    assert run_filter(incoming(), zones(1, 0, 0, 0)) is SKIP
    # ScheduleAnyway constraints are for Score only.
    assert run_filter(incoming(spread(1, "zone", "ScheduleAnyway")), zones(1, 0, 0, 0)) is SKIP


@settings(max_examples=150, deadline=None)
@given(
    layout=st.lists(
        st.tuples(st.sampled_from(["z1", "z2", "z3", None]), st.integers(0, 3), st.booleans()),
        min_size=1,
        max_size=8,
    ),
    skews=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    two=st.booleans(),
    matches_itself=st.booleans(),
    min_domains=st.sampled_from([None, 1, 3, 4]),
)
def test_the_batch_filter_agrees_with_the_per_node_one(
    layout: list[tuple[str | None, int, bool]],
    skews: tuple[int, int],
    two: bool,
    matches_itself: bool,
    min_domains: int | None,
) -> None:
    """Nodes missing a key, domains over and under the skew, two constraints, minDomains:
    ``run_filter`` compares ``filter_nodes`` with ``filter`` node by node."""
    nodes = []
    for i, (zone, pods, has_hostname) in enumerate(layout):
        labels = {"zone": zone} if zone else {}
        if has_hostname:
            labels["node"] = f"n{i}"
        nodes.append(node(f"n{i}", labels, [{"foo": ""}] * pods))
    first = spread(skews[0], "zone", **({"minDomains": min_domains} if min_domains else {}))
    constraints = [first, spread(skews[1], "node")] if two else [first]
    run_filter(incoming(*constraints, labels={"foo": ""} if matches_itself else {"bar": ""}), nodes)


def test_skew_over_zones() -> None:
    # zone1 holds 3 matching pods, zone2 1: the global minimum is 1.
    nodes = zones(2, 1, 0, 1)
    got = run_filter(incoming(spread(1, "zone")), nodes)
    assert got == {
        "node-a": (U, ERR_CONSTRAINTS),
        "node-b": (U, ERR_CONSTRAINTS),
        "node-x": None,
        "node-y": None,
    }
    assert passing(run_filter(incoming(spread(3, "zone")), nodes)) == ["node-a", "node-b", "node-x", "node-y"]


def test_at_v5_the_batch_filter_logs_each_rejected_node(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(V(5), logger="scheduler.plugins.podtopologyspread.plugin")
    nodes = zones(2, 1, 0, 1)
    pod = incoming(spread(1, "zone"))
    pl, snap = plugin(nodes)
    state = CycleState()
    assert pl.pre_filter(state, pod, snap) is None
    got = pl.filter_nodes(state, pod, nodes)
    assert got is not None and [s is None for s in got] == [False, False, True, True]
    logged = [r for r in caplog.records if r.getMessage() == "Node failed spreadConstraint"]
    assert len(logged) == 2


def test_pod_not_matching_its_own_selector_adds_no_skew() -> None:
    nodes = zones(2, 1, 0, 1)  # 3 - 1 = 2
    assert passing(run_filter(incoming(spread(2, "zone")), nodes)) == ["node-x", "node-y"]
    assert passing(run_filter(incoming(spread(2, "zone"), labels={"bar": ""}), nodes)) == [
        "node-a",
        "node-b",
        "node-x",
        "node-y",
    ]


def test_node_without_every_key_is_unresolvable_and_not_counted() -> None:
    # node-z is in zone2 but lacks the "node" key: its 5 pods count for neither constraint.
    nodes = [*zones(1, 0, 0, 0), node("node-z", {"zone": "zone2"}, [{"foo": ""}] * 5)]
    got = run_filter(incoming(spread(1, "zone"), spread(3, "node")), nodes)
    assert got["node-z"] == (UR, ERR_MISSING_LABEL)
    assert passing(got) == ["node-x", "node-y"]  # zone1: 1 + 1 - 0 > 1


def test_only_live_pods_of_the_same_namespace_count() -> None:
    nodes = [
        node("node-a", {"zone": "zone1"}, [{"foo": ""}], namespace="other"),
        node("node-b", {"zone": "zone1"}, [{"foo": ""}], phase="Succeeded"),
        node("node-x", {"zone": "zone2"}),
    ]
    nodes[1].add_pod(
        PodInfo.from_pod(
            {
                **make_pod("gone", labels={"foo": ""}, node_name="node-b"),
                "metadata": {
                    "name": "gone",
                    "namespace": "default",
                    "uid": "gone",
                    "labels": {"foo": ""},
                    "deletionTimestamp": "2026-01-01T00:00:00Z",
                },
            }
        )
    )
    assert passing(run_filter(incoming(spread(1, "zone")), nodes)) == ["node-a", "node-b", "node-x"]
    nodes.append(node("node-y", {"zone": "zone1"}, [{"foo": ""}]))
    assert passing(run_filter(incoming(spread(1, "zone")), nodes)) == ["node-x"]


def test_every_constraint_must_hold() -> None:
    # zone: zone1 2, zone2 1 -> a and b fail; node: a 0, b 2, x 1, y 0 -> b and x fail.
    got = run_filter(incoming(spread(1, "zone"), spread(1, "node")), zones(0, 2, 1, 0))
    assert got == {
        "node-a": (U, ERR_CONSTRAINTS),
        "node-b": (U, ERR_CONSTRAINTS),
        "node-x": (U, ERR_CONSTRAINTS),
        "node-y": None,
    }


def test_min_domains_treats_the_global_minimum_as_zero() -> None:
    nodes = zones(1, 0, 1, 0)  # 1/1 over two zones
    assert passing(run_filter(incoming(spread(1, "zone")), nodes)) == ["node-a", "node-b", "node-x", "node-y"]
    got = run_filter(incoming(spread(1, "zone", minDomains=3)), nodes)
    assert passing(got) == []
    assert passing(run_filter(incoming(spread(2, "zone", minDomains=3)), nodes)) == [
        "node-a",
        "node-b",
        "node-x",
        "node-y",
    ]
    assert passing(run_filter(incoming(spread(1, "zone", minDomains=2)), nodes)) == [
        "node-a",
        "node-b",
        "node-x",
        "node-y",
    ]


def test_node_affinity_policy() -> None:
    # zone3 has no pods, but the pod's nodeSelector excludes it.
    nodes = [*zones(2, 0, 1, 0), node("node-z", {"zone": "zone3", "node": "node-z", "disk": "hdd"})]
    for n in nodes[:4]:
        n.set_node({**n.node, "metadata": {**n.node["metadata"], "labels": {**n.labels, "disk": "ssd"}}})
    honor = incoming(spread(1, "zone"), node_selector={"disk": "ssd"})
    # The minimum is over zone1/zone2 only: 1. (node-z itself passes here; NodeAffinity rejects it.)
    assert passing(run_filter(honor, nodes)) == ["node-x", "node-y", "node-z"]
    ignore = incoming(spread(1, "zone", nodeAffinityPolicy="Ignore"), node_selector={"disk": "ssd"})
    assert passing(run_filter(ignore, nodes)) == ["node-z"]  # zone3 counts: the minimum is 0


def test_node_taints_policy() -> None:
    nodes = [
        *zones(1, 0, 1, 0),
        node("node-z", {"zone": "zone3", "node": "node-z"}, taints=[taint("dedicated")]),
    ]
    # Ignore (default): the tainted zone3 counts, with 0 pods.
    assert passing(run_filter(incoming(spread(1, "zone")), nodes)) == ["node-z"]
    honor = spread(1, "zone", nodeTaintsPolicy="Honor")
    assert passing(run_filter(incoming(honor), nodes)) == ["node-a", "node-b", "node-x", "node-y", "node-z"]
    tolerant = incoming(honor, tolerations=[toleration("dedicated", operator="Exists")])
    assert passing(run_filter(tolerant, nodes)) == ["node-z"]


def test_match_label_keys_count_only_the_same_revision() -> None:
    old = {"foo": "", "pod-template-hash": "old"}
    nodes = [node("node-a", {"zone": "zone1"}, [old, old]), node("node-x", {"zone": "zone2"})]
    plain = incoming(spread(1, "zone"), labels={"foo": "", "pod-template-hash": "new"})
    assert passing(run_filter(plain, nodes)) == ["node-x"]
    keyed = incoming(
        spread(1, "zone", matchLabelKeys=["pod-template-hash"]),
        labels={"foo": "", "pod-template-hash": "new"},
    )
    assert passing(run_filter(keyed, nodes)) == ["node-a", "node-x"]


def test_empty_selector_counts_no_pods() -> None:
    # kube-scheduler's countPodsMatchSelector: an empty selector matches every pod but counts none.
    nodes = zones(3, 0, 0, 0)
    assert passing(run_filter(incoming(spread(1, "zone", selector={})), nodes)) == [
        "node-a",
        "node-b",
        "node-x",
        "node-y",
    ]


def test_invalid_selector_is_an_error() -> None:
    bad = spread(1, "zone", selector={"matchLabels": {"foo": "{{bad}}"}})
    st = run_filter(incoming(bad), zones(0, 0, 0, 0))
    assert isinstance(st, Status) and st.code == Code.ERROR


def test_counts_follow_changes_of_the_nodes() -> None:
    nodes = zones(1, 0, 1, 0)
    assert passing(run_filter(incoming(spread(1, "zone")), nodes)) == ["node-a", "node-b", "node-x", "node-y"]
    nodes[2].add_pod(PodInfo.from_pod(make_pod("late", labels={"foo": ""}, node_name="node-x")))
    assert passing(run_filter(incoming(spread(1, "zone")), nodes)) == ["node-a", "node-b"]


# --- default constraints -------------------------------------------------------------------


def owned(kind: str | None, labels: dict[str, str]) -> PodInfo:
    return PodInfo.from_pod(make_pod("p", labels=labels, owner_kind=kind))


def list_args(*constraints: dict[str, Any]) -> SimpleNamespace:
    return SimpleNamespace(defaulting_type="List", default_constraints=list(constraints))


def test_list_defaults_apply_to_controller_owned_pods_by_their_labels() -> None:
    args = list_args({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"})
    web = {"app": "web", "pod-template-hash": "1"}
    nodes = zones(2, 0, 0, 0, labels=web)
    assert passing(run_filter(owned("ReplicaSet", web), nodes, args)) == ["node-x", "node-y"]
    assert run_filter(owned(None, web), nodes, args) is SKIP  # no controller: no defaults
    assert run_filter(owned("DaemonSet", web), nodes, args) is SKIP
    other = {"app": "api", "pod-template-hash": "1"}
    assert passing(run_filter(owned("ReplicaSet", other), nodes, args)) == [
        "node-a",
        "node-b",
        "node-x",
        "node-y",
    ]


def test_default_selector_ignores_statefulset_per_pod_labels() -> None:
    args = list_args({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"})
    nodes = [
        node(
            "node-a",
            {"zone": "zone1"},
            [{"app": "db", "statefulset.kubernetes.io/pod-name": "db-0", "controller-revision-hash": "r1"}],
        ),
        node("node-x", {"zone": "zone2"}),
    ]
    pod = owned(
        "StatefulSet",
        {"app": "db", "statefulset.kubernetes.io/pod-name": "db-1", "controller-revision-hash": "r2"},
    )
    assert passing(run_filter(pod, nodes, args)) == ["node-x"]


def test_pod_constraints_replace_the_defaults() -> None:
    args = list_args({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"})
    pod = PodInfo.from_pod(
        make_pod(
            "p", labels={"foo": ""}, owner_kind="ReplicaSet", topology_spread_constraints=[spread(5, "zone")]
        )
    )
    assert passing(run_filter(pod, zones(2, 0, 0, 0), args)) == ["node-a", "node-b", "node-x", "node-y"]


def test_default_constraints_from_configuration_objects() -> None:
    """The configuration decodes defaultConstraints into objects with snake_case attributes."""
    c = SimpleNamespace(
        max_skew=1,
        topology_key="zone",
        when_unsatisfiable="DoNotSchedule",
        node_affinity_policy=None,
        node_taints_policy=None,
    )
    args = SimpleNamespace(defaulting_type="List", default_constraints=(c,))
    assert passing(run_filter(owned("ReplicaSet", {"foo": ""}), zones(2, 0, 0, 0), args)) == [
        "node-x",
        "node-y",
    ]


# --- Score (kube-scheduler's TestPodTopologySpreadScore) --------------------------------------


def hostnames(*counts: int, names: str = "abcd", labels: dict[str, str] | None = None) -> list[NodeInfo]:
    return [
        node(f"node-{n}", {HOSTNAME: f"node-{n}"}, [labels or {"foo": ""}] * c)
        for n, c in zip(names[: len(counts)], counts, strict=True)
    ]


def run_score(
    pod: PodInfo, nodes: list[NodeInfo], failed: list[NodeInfo] = (), args: Any = None
) -> Status | dict[str, int]:
    pl, _ = plugin([*nodes, *failed], args)
    state = CycleState()
    st = pl.pre_score(state, pod, nodes)
    if st is not None:
        return st
    scores = {n.name: pl.score(state, pod, n) for n in nodes}
    pl.normalize_scores(state, pod, scores)
    return scores


def soft(max_skew: int, key: str, selector: dict = FOO) -> dict[str, Any]:
    return spread(max_skew, key, "ScheduleAnyway", selector)


SCORE_CASES = [
    (
        "no existing pods",
        incoming(soft(1, HOSTNAME)),
        hostnames(0, 0, names="ab"),
        [],
        {"node-a": 100, "node-b": 100},
    ),
    (
        "all nodes have the same number of matching pods",
        incoming(soft(1, HOSTNAME)),
        hostnames(1, 1, names="ab"),
        [],
        {"node-a": 100, "node-b": 100},
    ),
    (
        "2/1/0/3, maxSkew=2",
        incoming(soft(2, HOSTNAME)),
        hostnames(2, 1, 0, 3),
        [],
        {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16},
    ),
    (
        "4/3/2/1, maxSkew=3",
        incoming(soft(3, HOSTNAME)),
        hostnames(4, 3, 2, 1),
        [],
        {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
    ),
    (
        "3 out of 4 nodes are candidates",
        incoming(soft(1, HOSTNAME)),
        hostnames(4, 2, 1, names="abx"),
        hostnames(3, names="y"),
        {"node-a": 33, "node-b": 83, "node-x": 100},
    ),
    (
        "one candidate lacks the topology key",
        incoming(soft(1, HOSTNAME)),
        [
            *hostnames(4, names="a"),
            node("node-b", {"n": "node-b"}, [{"foo": ""}] * 2),
            *hostnames(1, names="x"),
        ],
        hostnames(3, names="y"),
        {"node-a": 16, "node-b": 0, "node-x": 100},
    ),
]


@pytest.mark.parametrize("name,pod,nodes,failed,want", SCORE_CASES, ids=[c[0] for c in SCORE_CASES])
def test_score(
    name: str, pod: PodInfo, nodes: list[NodeInfo], failed: list[NodeInfo], want: dict[str, int]
) -> None:
    assert run_score(pod, nodes, failed) == want


def zone_nodes(pods: dict[str, list[dict[str, str]]]) -> dict[str, NodeInfo]:
    layout = {"a": "zone1", "b": "zone1", "x": "zone2", "y": "zone2"}
    return {
        n: node(f"node-{n}", {"zone": z, HOSTNAME: f"node-{n}"}, pods.get(n, [])) for n, z in layout.items()
    }


def test_score_one_zone_constraint_with_three_candidates() -> None:
    f = {"foo": ""}
    n = zone_nodes({"a": [f] * 4, "b": [f] * 2, "x": [f], "y": [f] * 3})
    assert run_score(incoming(soft(1, "zone")), [n["a"], n["b"], n["x"]], [n["y"]]) == {
        "node-a": 75,
        "node-b": 75,
        "node-x": 100,
    }


def test_score_zone_and_hostname_with_two_candidates() -> None:
    f = {"foo": ""}
    n = zone_nodes({"a": [f] * 2, "b": [f], "x": [f] * 2, "y": [f] * 4})
    got = run_score(incoming(soft(1, "zone"), soft(1, HOSTNAME)), [n["a"], n["x"]], [n["b"], n["y"]])
    assert got == {"node-a": 100, "node-x": 63}


def test_score_constraints_with_different_selectors() -> None:
    n = zone_nodes({"a": [{"foo": ""}], "b": [{"foo": "", "bar": ""}], "y": [{"foo": ""}, {"bar": ""}]})
    pod = incoming(soft(1, "zone", FOO), soft(1, HOSTNAME, BAR), labels={"foo": "", "bar": ""})
    assert run_score(pod, list(n.values())) == {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60}
    n = zone_nodes({"b": [{"bar": ""}], "x": [{"foo": ""}], "y": [{"foo": "", "bar": ""}]})
    assert run_score(pod, list(n.values())) == {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0}


def test_score_system_defaults_without_zone_labels() -> None:
    # kube's case uses a Service selecting foo; here the ReplicaSet owner stands in for it.
    nodes = hostnames(4, 3, 2, 1, labels={"foo": ""})
    pod = owned("ReplicaSet", {"foo": ""})
    assert run_score(pod, nodes) == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}


def test_score_skips_pods_without_constraints_or_controller() -> None:
    nodes = hostnames(1, 0, names="ab")
    assert run_score(owned(None, {"foo": ""}), nodes) is SKIP
    assert run_score(owned("ReplicaSet", {"foo": ""}), nodes, args=list_args()) is SKIP  # List, no defaults
    assert run_score(incoming(spread(1, HOSTNAME)), nodes) is SKIP  # DoNotSchedule only


def test_score_own_constraints_ignore_nodes_missing_a_key() -> None:
    # With the pod's own constraints every key is required: node-b gets 0 and is left out of min/max.
    nodes = [*hostnames(2, names="a"), node("node-b", {"other": "x"}), *hostnames(0, names="c")]
    assert run_score(incoming(soft(1, HOSTNAME)), nodes) == {"node-a": 0, "node-b": 0, "node-c": 100}


def test_score_counts_only_nodes_with_every_key_for_own_constraints() -> None:
    # node-c (not a candidate) is in zone1 but has no rack label: its pods count for no domain.
    f = {"foo": ""}
    nodes = [
        node("node-a", {"zone": "zone1", "rack": "r1"}, [f]),
        node("node-b", {"zone": "zone2", "rack": "r2"}, [f]),
    ]
    failed = [node("node-c", {"zone": "zone1"}, [f] * 5)]
    pod = incoming(soft(1, "zone"), soft(1, "rack"))
    assert run_score(pod, nodes, failed) == {"node-a": 100, "node-b": 100}


def test_score_system_defaults_skip_the_hostname_term_of_nodes_without_it() -> None:
    # Raw: node-a round(2*log(5) + 2) = 5 (hostname maxSkew 3), node-b 0 + 2, node-c (no hostname label) 0.
    nodes = [*hostnames(2, 0, names="ab", labels={"foo": ""}), node("node-c", {}, [{"foo": ""}] * 2)]
    pod = owned("ReplicaSet", {"foo": ""})
    assert run_score(pod, nodes) == {"node-a": 0, "node-b": 60, "node-c": 100}  # 100 * (5 + 0 - 2) // 5
