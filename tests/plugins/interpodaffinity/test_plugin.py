"""InterPodAffinity, with cases modelled on kube-scheduler's interpodaffinity filtering_test.go
and scoring_test.go (same pods, nodes and expected statuses/scores)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from scheduler.core.framework import SKIP, Code, CycleState, Status
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.interpodaffinity.plugin import (
    ERR_AFFINITY,
    ERR_ANTI_AFFINITY,
    ERR_EXISTING_ANTI_AFFINITY,
    InterPodAffinity,
)
from tests.plugins.builders import FakeHandle, FakeSnapshot, make_pod, node_info, pod_info

# --- builders -------------------------------------------------------------------------


def term(
    key: str,
    op: str,
    values: list[str] | None = None,
    topology: str = "region",
    *,
    namespaces: list[str] | None = None,
    ns_selector: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    expr: dict[str, Any] = {"key": key, "operator": op}
    if values is not None:
        expr["values"] = values
    t: dict[str, Any] = {"labelSelector": {"matchExpressions": [expr]}, "topologyKey": topology, **extra}
    if namespaces is not None:
        t["namespaces"] = namespaces
    if ns_selector is not None:
        t["namespaceSelector"] = ns_selector
    return t


def weighted(weight: int, t: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": t}


def affinity(
    required: list | None = None,
    anti: list | None = None,
    preferred: list | None = None,
    preferred_anti: list | None = None,
) -> dict[str, Any]:
    a: dict[str, Any] = {}
    req, pref = (
        "requiredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution",
    )
    if required or preferred:
        a["podAffinity"] = {k: v for k, v in ((req, required), (pref, preferred)) if v}
    if anti or preferred_anti:
        a["podAntiAffinity"] = {k: v for k, v in ((req, anti), (pref, preferred_anti)) if v}
    return a


def pod(
    name: str = "p",
    ns: str = "default",
    labels: dict[str, str] | None = None,
    aff: dict[str, Any] | None = None,
) -> PodInfo:
    return pod_info(name, ns, labels=labels, affinity=aff or None)


def node(name: str, labels: dict[str, str], *pods: PodInfo) -> NodeInfo:
    ni = node_info(name, labels=labels)
    # node_info adds the hostname label; kube's tests use only the labels given.
    ni.set_node({**ni.node, "metadata": {**ni.node["metadata"], "labels": dict(labels)}})
    for p in pods:
        p.pod["spec"]["nodeName"] = name
        ni.add_pod(PodInfo.from_pod(p.pod))
    return ni


def namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


NAMESPACES = [
    namespace("subteam1.team1", {"team": "team1"}),
    namespace("subteam2.team1", {"team": "team1"}),
    namespace("subteam1.team2", {"team": "team2"}),
    namespace("subteam2.team2", {"team": "team2"}),
]


def run_filter(
    incoming: PodInfo, nodes: list[NodeInfo], args: Any = None
) -> tuple[Status | None, dict[str, Status | None]]:
    snap = FakeSnapshot(nodes)
    plugin = InterPodAffinity(args, FakeHandle(snap, stores={"namespaces": NAMESPACES}))
    state = CycleState()
    st = plugin.pre_filter(state, incoming, snap)
    if st is not None:
        return st, {}
    each = {n.name: plugin.filter(state, incoming, n) for n in nodes}
    # The batch that a cycle runs gives the same verdicts.
    assert (plugin.filter_nodes(state, incoming, nodes) or [None] * len(nodes)) == list(each.values())
    return None, each


def run_score(incoming: PodInfo, nodes: list[NodeInfo], args: Any = None) -> Status | dict[str, int]:
    snap = FakeSnapshot(nodes)
    plugin = InterPodAffinity(args, FakeHandle(snap, stores={"namespaces": NAMESPACES}))
    state = CycleState()
    st = plugin.pre_score(state, incoming, nodes)
    if st is not None:
        return st
    scores = {n.name: plugin.score(state, incoming, n) for n in nodes}
    plugin.normalize_scores(state, incoming, scores)
    return scores


def codes(statuses: dict[str, Status | None]) -> dict[str, tuple[Code, str] | None]:
    return {n: None if s is None else (s.code, s.message()) for n, s in statuses.items()}


U, UR = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
SECURITY_SCAN = {"service": "securityscan"}
S1_LABEL = {"security": "S1"}

# --- Filter: one node (TestRequiredAffinitySingleNode) ----------------------------------

NODE1 = {"region": "r1", "zone": "z11"}


def existing_scan() -> PodInfo:
    return pod("existing", labels=SECURITY_SCAN)


SINGLE_NODE_CASES = [
    (
        "affinity In matching the existing pod",
        pod(labels=S1_LABEL, aff=affinity([term("service", "In", ["securityscan", "value2"])])),
        [existing_scan()],
        None,
    ),
    (
        "affinity NotIn satisfied by the existing pod",
        pod(labels=S1_LABEL, aff=affinity([term("service", "NotIn", ["securityscan3", "value3"])])),
        [existing_scan()],
        None,
    ),
    (
        "affinity limited to another namespace",
        pod(
            labels=S1_LABEL,
            aff=affinity([term("service", "In", ["securityscan"], namespaces=["DiffNameSpace"])]),
        ),
        [pod("e", "ns", SECURITY_SCAN)],
        (UR, ERR_AFFINITY),
    ),
    (
        "affinity selector matching no existing pod",
        pod(labels=SECURITY_SCAN, aff=affinity([term("service", "In", ["antivirusscan", "value2"])])),
        [existing_scan()],
        (UR, ERR_AFFINITY),
    ),
    (
        "affinity terms are ANDed: one of two does not match",
        pod(
            labels=S1_LABEL,
            aff=affinity([term("service", "Exists"), term("service", "In", ["securityscan2"])]),
        ),
        [existing_scan()],
        (UR, ERR_AFFINITY),
    ),
    (
        "affinity satisfied, anti-affinity on zone matches the existing pod",
        pod(
            labels=S1_LABEL,
            aff=affinity(
                [term("service", "In", ["securityscan"])], [term("service", "In", ["securityscan"], "zone")]
            ),
        ),
        [existing_scan()],
        (U, ERR_ANTI_AFFINITY),
    ),
    (
        "existing pod's anti-affinity selects the incoming pod (symmetry)",
        pod(labels=SECURITY_SCAN),
        [
            pod(
                "e",
                labels=SECURITY_SCAN,
                aff=affinity(anti=[term("service", "In", ["securityscan"], "zone")]),
            )
        ],
        (U, ERR_EXISTING_ANTI_AFFINITY),
    ),
    (
        "incoming anti-affinity matches the existing pod only partially: any term counts",
        pod(
            labels=SECURITY_SCAN,
            aff=affinity(
                anti=[term("service", "Exists", None, "zone"), term("security", "Exists", None, "zone")]
            ),
        ),
        [pod("e", labels=S1_LABEL, aff=affinity(anti=[term("security", "Exists", None, "zone")]))],
        (U, ERR_ANTI_AFFINITY),
    ),
    (
        "affinity with a matching namespaceSelector",
        pod(
            labels=S1_LABEL,
            aff=affinity(
                [term("service", "In", ["securityscan"], ns_selector={"matchLabels": {"team": "team1"}})]
            ),
        ),
        [pod("e", "subteam1.team1", SECURITY_SCAN)],
        None,
    ),
    (
        "affinity with a namespaceSelector not selecting the pod's namespace",
        pod(
            labels=S1_LABEL,
            aff=affinity(
                [term("service", "In", ["securityscan"], ns_selector={"matchLabels": {"team": "team1"}})]
            ),
        ),
        [pod("e", "subteam1.team2", SECURITY_SCAN)],
        (UR, ERR_AFFINITY),
    ),
    (
        "anti-affinity with a matching namespaceSelector",
        pod(
            ns="subteam1.team1",
            labels=S1_LABEL,
            aff=affinity(
                anti=[
                    term(
                        "service",
                        "In",
                        ["securityscan"],
                        "zone",
                        ns_selector={"matchLabels": {"team": "team1"}},
                    )
                ]
            ),
        ),
        [pod("e", "subteam2.team1", SECURITY_SCAN)],
        (U, ERR_ANTI_AFFINITY),
    ),
    (
        "anti-affinity with the all-namespaces selector {}",
        pod(
            ns="subteam1.team1",
            labels=S1_LABEL,
            aff=affinity(anti=[term("service", "In", ["securityscan"], "zone", ns_selector={})]),
        ),
        [pod("e", "subteam2.team1", SECURITY_SCAN)],
        (U, ERR_ANTI_AFFINITY),
    ),
    (
        "anti-affinity with a non-matching namespaceSelector",
        pod(
            ns="subteam1.team1",
            labels=S1_LABEL,
            aff=affinity(
                anti=[
                    term(
                        "service",
                        "In",
                        ["securityscan"],
                        "zone",
                        ns_selector={"matchLabels": {"team": "team1"}},
                    )
                ]
            ),
        ),
        [pod("e", "subteam1.team2", SECURITY_SCAN)],
        None,
    ),
    (
        "existing pod's anti-affinity selects the incoming pod's namespace by its labels",
        pod(ns="subteam1.team1", labels=SECURITY_SCAN),
        [
            pod(
                "e",
                "subteam1.team2",
                aff=affinity(
                    anti=[
                        term(
                            "service", "Exists", None, "zone", ns_selector={"matchLabels": {"team": "team1"}}
                        )
                    ]
                ),
            )
        ],
        (U, ERR_EXISTING_ANTI_AFFINITY),
    ),
]


@pytest.mark.parametrize(
    "name,incoming,existing,want", SINGLE_NODE_CASES, ids=[c[0] for c in SINGLE_NODE_CASES]
)
def test_filter_single_node(
    name: str, incoming: PodInfo, existing: list[PodInfo], want: tuple[Code, str] | None
) -> None:
    st, statuses = run_filter(incoming, [node("node1", NODE1, *existing)])
    assert st is None
    assert codes(statuses)["node1"] == want


def test_pod_without_terms_skips_unless_an_existing_anti_affinity_selects_it() -> None:
    n = node(
        "node1",
        NODE1,
        pod(
            "e", labels=SECURITY_SCAN, aff=affinity(anti=[term("service", "NotIn", ["securityscan"], "zone")])
        ),
    )
    assert run_filter(pod(labels=SECURITY_SCAN), [n])[0] is SKIP
    assert run_filter(pod(labels={"service": "other"}), [n])[1] == {
        "node1": Status(U, (ERR_EXISTING_ANTI_AFFINITY,))
    }


def test_existing_anti_affinity_on_a_topology_key_no_node_has_skips() -> None:
    nodes = [
        node(
            "nodeA",
            {"region": "r1", "zone": "z1"},
            pod("e", aff=affinity(anti=[term("foo", "Exists", None, "invalid-node-label")])),
        ),
        node("nodeB", {"region": "r1", "zone": "z1"}),
    ]
    assert run_filter(pod(labels={"foo": ""}), nodes)[0] is SKIP


def test_invalid_selector_fails_pre_filter() -> None:
    bad = pod(aff=affinity([term("service", "In", ["{{.bad-value.}}"])]))
    st, _ = run_filter(bad, [node("node1", NODE1)])
    assert st is not None and st.code == UR
    assert st.message().startswith("parsing pod: requiredAffinityTerms[0]")


# --- Filter: several nodes (TestRequiredAffinityMultipleNodes) --------------------------

CHINA, CHINA_AZ1, INDIA = {"region": "China"}, {"region": "China", "az": "az1"}, {"region": "India"}


def test_affinity_admits_every_node_of_the_matching_domain() -> None:
    incoming = pod(aff=affinity([term("foo", "In", ["bar"], "region")]))
    nodes = [
        node("node1", CHINA, pod("p1", labels={"foo": "bar"})),
        node("node2", CHINA_AZ1),
        node("node3", INDIA),
    ]
    assert codes(run_filter(incoming, nodes)[1]) == {
        "node1": None,
        "node2": None,
        "node3": (UR, ERR_AFFINITY),
    }


def test_first_pod_of_a_self_affine_group_may_go_anywhere_with_the_topology_key() -> None:
    labels = {"foo": "bar", "service": "securityscan"}
    aff = affinity([term("foo", "In", ["bar"], "zone"), term("service", "In", ["securityscan"], "zone")])
    # p1 matches only one of the two terms, so no pod matches the pair anywhere.
    p1 = pod("p1", labels={"foo": "bar"})
    nodes = [
        node("nodeA", {"zone": "az1", "hostname": "h1"}, p1),
        node("nodeB", {"zone": "az2", "hostname": "h2"}),
    ]
    assert codes(run_filter(pod(labels=labels, aff=aff), nodes)[1]) == {"nodeA": None, "nodeB": None}
    # ... but only onto nodes that have every topology key.
    nodes = [
        node("nodeA", {"zoneLabel": "az1"}, pod("p1", labels={"foo": "bar"})),
        node("nodeB", {"zoneLabel": "az2"}),
    ]
    assert codes(run_filter(pod(labels=labels, aff=aff), nodes)[1]) == {
        "nodeA": (UR, ERR_AFFINITY),
        "nodeB": (UR, ERR_AFFINITY),
    }


def test_first_pod_rule_does_not_apply_once_a_matching_pod_exists() -> None:
    labels = {"app": "db"}
    aff = affinity([term("app", "In", ["db"], "zone")])
    nodes = [node("nodeA", {"zone": "az1"}, pod("db-0", labels=labels)), node("nodeB", {"zone": "az2"})]
    assert codes(run_filter(pod(labels=labels, aff=aff), nodes)[1]) == {
        "nodeA": None,
        "nodeB": (UR, ERR_AFFINITY),
    }
    # A pod that does not match its own terms is never the "first pod".
    nodes = [node("nodeA", {"zone": "az1"}), node("nodeB", {"zone": "az2"})]
    assert codes(run_filter(pod(labels={"app": "web"}, aff=aff), nodes)[1]) == {
        "nodeA": (UR, ERR_AFFINITY),
        "nodeB": (UR, ERR_AFFINITY),
    }


def test_anti_affinity_rejects_the_whole_domain() -> None:
    incoming = pod(aff=affinity(anti=[term("foo", "In", ["abc"], "region")]))
    nodes = [
        node("nodeA", CHINA, pod("e", labels={"foo": "abc"})),
        node("nodeB", CHINA_AZ1),
        node("nodeC", INDIA),
    ]
    assert codes(run_filter(incoming, nodes)[1]) == {
        "nodeA": (U, ERR_ANTI_AFFINITY),
        "nodeB": (U, ERR_ANTI_AFFINITY),
        "nodeC": None,
    }


def test_existing_anti_affinity_only_covers_its_own_namespace() -> None:
    incoming = pod(ns="NS1", labels={"foo": "123"}, aff=affinity(anti=[term("foo", "In", ["bar"], "region")]))
    nodes = [
        node("nodeA", CHINA, pod("a", "NS1", {"foo": "bar"})),
        node("nodeB", CHINA_AZ1),
        node("nodeC", INDIA, pod("c", "NS2", aff=affinity(anti=[term("foo", "In", ["123"], "region")]))),
    ]
    assert codes(run_filter(incoming, nodes)[1]) == {
        "nodeA": (U, ERR_ANTI_AFFINITY),
        "nodeB": (U, ERR_ANTI_AFFINITY),
        "nodeC": None,
    }


def test_hostname_anti_affinity_spreads_replicas() -> None:
    aff = affinity(anti=[term("app", "In", ["web"], "kubernetes.io/hostname")])
    nodes = [node(f"n{i}", {"kubernetes.io/hostname": f"n{i}"}) for i in range(3)]
    nodes[0].add_pod(PodInfo.from_pod(make_pod("web-0", labels={"app": "web"}, affinity=aff, node_name="n0")))
    got = codes(run_filter(pod(labels={"app": "web"}, aff=aff), nodes)[1])
    # web-0's own term rejects n0 too; the incoming pod's term is checked first.
    assert got == {"n0": (U, ERR_ANTI_AFFINITY), "n1": None, "n2": None}


def test_match_label_keys_narrow_the_selector_to_the_pods_revision() -> None:
    t = term("app", "In", ["web"], "kubernetes.io/hostname", matchLabelKeys=["pod-template-hash"])
    aff = affinity(anti=[t])
    nodes = [
        node(
            "n0",
            {"kubernetes.io/hostname": "n0"},
            pod("old", labels={"app": "web", "pod-template-hash": "1"}),
        ),
        node(
            "n1",
            {"kubernetes.io/hostname": "n1"},
            pod("new", labels={"app": "web", "pod-template-hash": "2"}),
        ),
    ]
    got = codes(run_filter(pod(labels={"app": "web", "pod-template-hash": "2"}, aff=aff), nodes)[1])
    assert got == {"n0": None, "n1": (U, ERR_ANTI_AFFINITY)}


def test_mismatch_label_keys_exclude_pods_sharing_the_value() -> None:
    # "not with pods of another tenant": anti-affinity to app=x pods whose tenant differs.
    t = term("app", "In", ["x"], "kubernetes.io/hostname", mismatchLabelKeys=["tenant"])
    nodes = [
        node("n0", {"kubernetes.io/hostname": "n0"}, pod("a", labels={"app": "x", "tenant": "a"})),
        node("n1", {"kubernetes.io/hostname": "n1"}, pod("b", labels={"app": "x", "tenant": "b"})),
    ]
    got = codes(run_filter(pod(labels={"app": "x", "tenant": "a"}, aff=affinity(anti=[t])), nodes)[1])
    assert got == {"n0": None, "n1": (U, ERR_ANTI_AFFINITY)}


def test_counts_follow_changes_of_the_nodes() -> None:
    """Per-node results are memoized; a pod added to a node must be seen by the next cycle."""
    aff = affinity(anti=[term("app", "In", ["web"], "zone")])
    nodes = [node("n0", {"zone": "a"}), node("n1", {"zone": "b"})]
    assert codes(run_filter(pod(labels={"app": "web"}, aff=aff), nodes)[1]) == {"n0": None, "n1": None}
    nodes[1].add_pod(PodInfo.from_pod(make_pod("web-1", labels={"app": "web"}, node_name="n1")))
    assert codes(run_filter(pod(labels={"app": "web"}, aff=aff), nodes)[1]) == {
        "n0": None,
        "n1": (U, ERR_ANTI_AFFINITY),
    }
    # The symmetric direction: web-1 now has anti-affinity of its own.
    nodes[1].remove_pod(next(iter(nodes[1].pods)))
    nodes[1].add_pod(PodInfo.from_pod(make_pod("web-1", labels={"app": "web"}, affinity=aff, node_name="n1")))
    assert codes(run_filter(pod(labels={"app": "web"}), nodes)[1]) == {
        "n0": None,
        "n1": (U, ERR_EXISTING_ANTI_AFFINITY),
    }


# --- Score (TestPreferredAffinity) -------------------------------------------------------

S2_LABEL = {"security": "S2"}
AZ1, AZ2 = {"az": "az1"}, {"az": "az2"}
STAY_WITH_S1_IN_REGION = affinity(preferred=[weighted(5, term("security", "In", ["S1"], "region"))])
STAY_WITH_S2_IN_REGION = affinity(preferred=[weighted(6, term("security", "In", ["S2"], "region"))])
AWAY_FROM_S1_IN_AZ = affinity(preferred_anti=[weighted(5, term("security", "In", ["S1"], "az"))])
AWAY_FROM_S2_IN_AZ = affinity(preferred_anti=[weighted(5, term("security", "In", ["S2"], "az"))])
HARD_AFFINITY = affinity(
    [term("security", "In", ["S1", "value2"], "region"), term("security", "Exists", None, "region")]
)


def test_score_skips_when_nobody_has_affinity() -> None:
    nodes = [node("node1", CHINA), node("node2", INDIA), node("node3", AZ1)]
    assert run_score(pod(labels=S1_LABEL), nodes) is SKIP


def test_score_prefers_the_domain_with_matching_pods() -> None:
    nodes = [
        node("node1", CHINA, pod("a", labels=S1_LABEL)),
        node("node2", INDIA, pod("b", labels=S2_LABEL)),
        node("node3", AZ1, pod("c", labels=S1_LABEL)),
    ]
    assert run_score(pod(labels=S1_LABEL, aff=STAY_WITH_S1_IN_REGION), nodes) == {
        "node1": 100,
        "node2": 0,
        "node3": 0,
    }


def test_score_gives_the_whole_domain_the_same_score() -> None:
    nodes = [node("node1", CHINA, pod("a", labels=S1_LABEL)), node("node2", CHINA_AZ1), node("node3", INDIA)]
    assert run_score(pod(aff=STAY_WITH_S1_IN_REGION), nodes) == {"node1": 100, "node2": 100, "node3": 0}


def test_score_mixed_operators_and_weights() -> None:
    # weight 8: NotIn S1 and In S2; weight 2: security exists and wrongkey does not.
    aff = affinity(
        preferred=[
            weighted(
                8,
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "security", "operator": "NotIn", "values": ["S1"]},
                            {"key": "security", "operator": "In", "values": ["S2"]},
                        ]
                    },
                    "topologyKey": "region",
                },
            ),
            weighted(
                2,
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "security", "operator": "Exists"},
                            {"key": "wrongkey", "operator": "DoesNotExist"},
                        ]
                    },
                    "topologyKey": "region",
                },
            ),
        ]
    )
    nodes = [
        node("node1", CHINA, pod("a", labels=S1_LABEL)),
        node("node2", INDIA, pod("b", labels=S2_LABEL)),
        node("node3", AZ1, pod("c", labels=S1_LABEL)),
    ]
    # Raw: China 2, India 8+2 = 10, no region 0; normalized 100*(2-0)/10 = 20.
    assert run_score(pod(labels=S1_LABEL, aff=aff), nodes) == {"node1": 20, "node2": 100, "node3": 0}


def test_score_symmetry_of_existing_pods_preferred_affinity() -> None:
    nodes = [
        node("node1", CHINA, pod("a", labels=S1_LABEL, aff=STAY_WITH_S1_IN_REGION)),
        node("node2", INDIA, pod("b", labels=S2_LABEL, aff=STAY_WITH_S2_IN_REGION)),
        node("node3", AZ1),
    ]
    assert run_score(pod(labels=S2_LABEL), nodes) == {"node1": 0, "node2": 100, "node3": 0}


def test_score_symmetry_with_namespace_selector() -> None:
    ns_aff = affinity(
        preferred=[
            weighted(
                5,
                term(
                    "security",
                    "In",
                    ["S1"],
                    "region",
                    namespaces=["subteam2.team2"],
                    ns_selector={"matchLabels": {"team": "team1"}},
                ),
            )
        ]
    )
    nodes = [
        node("node1", CHINA, pod("a", labels=S1_LABEL, aff=ns_aff)),
        node("node2", INDIA, pod("b", labels=S2_LABEL, aff=STAY_WITH_S2_IN_REGION)),
        node("node3", AZ1),
    ]
    assert run_score(pod(ns="subteam1.team1", labels=S1_LABEL), nodes) == {
        "node1": 100,
        "node2": 0,
        "node3": 0,
    }


def test_score_existing_required_affinity_uses_hard_pod_affinity_weight() -> None:
    def nodes() -> list[NodeInfo]:
        return [
            node("node1", CHINA, pod("a", labels=S1_LABEL, aff=HARD_AFFINITY)),
            node("node2", INDIA, pod("b", labels=S2_LABEL, aff=HARD_AFFINITY)),
            node("node3", AZ1),
        ]

    assert run_score(pod(labels=S1_LABEL), nodes()) == {"node1": 100, "node2": 100, "node3": 0}
    args = SimpleNamespace(hard_pod_affinity_weight=0, ignore_preferred_terms_of_existing_pods=False)
    assert run_score(pod(labels=S1_LABEL), nodes(), args) is SKIP


def test_score_anti_affinity_and_its_symmetry() -> None:
    nodes = [
        node("node1", AZ1, pod("a", labels=S1_LABEL), pod("a2", labels=S1_LABEL)),
        node("node2", INDIA, pod("b", labels=S2_LABEL)),
    ]
    assert run_score(pod(labels=S1_LABEL, aff=AWAY_FROM_S1_IN_AZ), nodes) == {"node1": 0, "node2": 100}
    nodes = [
        node("node1", AZ1, pod("a", labels=S1_LABEL, aff=AWAY_FROM_S2_IN_AZ)),
        node("node2", AZ2, pod("b", labels=S2_LABEL, aff=AWAY_FROM_S1_IN_AZ)),
    ]
    assert run_score(pod(labels=S2_LABEL), nodes) == {"node1": 0, "node2": 100}


def test_score_affinity_anti_affinity_and_symmetry_together() -> None:
    both = affinity(
        preferred=[weighted(8, term("security", "In", ["S1"], "region"))],
        preferred_anti=[weighted(5, term("security", "In", ["S2"], "az"))],
    )
    nodes = [
        node("node1", CHINA, pod("a", labels=S1_LABEL)),
        node("node2", AZ1, pod("b", labels=S2_LABEL)),
        node("node3", INDIA, pod("c", aff=both)),
        node("node4", AZ2, pod("d", aff=AWAY_FROM_S1_IN_AZ)),
    ]
    # Raw: 8, -5, 8 (c's preferred affinity selects the S1 pod), -5 (d's anti-affinity).
    assert run_score(pod(labels=S1_LABEL, aff=both), nodes) == {
        "node1": 100,
        "node2": 0,
        "node3": 100,
        "node4": 0,
    }


def test_ignore_preferred_terms_of_existing_pods() -> None:
    nodes = [
        node("node1", CHINA, pod("a", labels=S1_LABEL, aff=STAY_WITH_S1_IN_REGION)),
        node("node2", INDIA),
    ]
    args = SimpleNamespace(hard_pod_affinity_weight=1, ignore_preferred_terms_of_existing_pods=True)
    assert run_score(pod(labels=S1_LABEL), nodes, args) is SKIP
    assert run_score(pod(labels=S1_LABEL), nodes) == {"node1": 100, "node2": 0}
    # With terms of its own the pod is scored as usual, existing pods' terms included:
    # China +5 (a's preference selects it), az1 -5 (its own anti-affinity to x).
    nodes.append(node("node3", AZ1, pod("x", labels=S1_LABEL)))
    got = run_score(pod(labels=S1_LABEL, aff=AWAY_FROM_S1_IN_AZ), nodes, args)
    assert got == {"node1": 100, "node2": 50, "node3": 0}


def test_score_invalid_preferred_term_is_an_error() -> None:
    bad = affinity(preferred=[weighted(8, term("security", "In", ["{{.bad-value.}}"]))])
    st = run_score(pod(aff=bad), [node("node1", CHINA), node("node2", CHINA)])
    assert isinstance(st, Status) and st.code == Code.ERROR


def test_normalize_is_min_max() -> None:
    plugin = InterPodAffinity()
    scores = {"a": -10, "b": 0, "c": 5}
    plugin.normalize_scores(CycleState(), pod(), scores)
    assert scores == {"a": 0, "b": 66, "c": 100}  # int(100 * 10/15) = 66
    scores = {"a": 3, "b": 3}
    plugin.normalize_scores(CycleState(), pod(), scores)
    assert scores == {"a": 0, "b": 0}
