"""NodeAffinity: nodeSelector, required/preferred node affinity, and the profile's addedAffinity."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from scheduler.core.framework import SKIP, Code, CycleState, PreFilterResult
from scheduler.plugins.nodeaffinity import NodeAffinity

from .builders import FakeSnapshot, node_info, pod_info, run_filter, run_score
from .builders import node_selector_requirement as req
from .builders import node_selector_term as term

POD_REASON = "node(s) didn't match Pod's node affinity/selector"
ENFORCED_REASON = "node(s) didn't match scheduler-enforced node affinity"


def required(*terms):
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def name_in(*names):
    return req("metadata.name", "In", *names)


def plugin(added=None):
    return NodeAffinity(SimpleNamespace(added_affinity=added) if added is not None else None, None)


def check(pod, labels, name="node1", pl=None):
    """The filter verdict for one node: None, or the (code, reasons) of the rejection."""
    got = run_filter(pl or plugin(), pod, [node_info(name, labels=labels)])[name]
    return got if got is None or isinstance(got, str) else (got.code, got.reasons)


REJECTED = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (POD_REASON,))


@pytest.mark.parametrize(
    ("kwargs", "labels", "fits"),
    [
        ({}, {}, True),
        ({"node_selector": {"foo": "bar"}}, {}, False),
        ({"node_selector": {"foo": "bar"}}, {"foo": "bar"}, True),
        ({"node_selector": {"foo": "bar"}}, {"foo": "bar", "baz": "blah"}, True),
        ({"node_selector": {"foo": "bar", "baz": "blah"}}, {"foo": "bar"}, False),
        ({"affinity": required(term(req("foo", "In", "bar", "value2")))}, {"foo": "bar"}, True),
        ({"affinity": required(term(req("kernel-version", "Gt", "0204")))}, {"kernel-version": "0206"}, True),
        ({"affinity": required(term(req("mem-type", "NotIn", "DDR", "DDR2")))}, {"mem-type": "DDR3"}, True),
        ({"affinity": required(term(req("GPU", "Exists")))}, {"GPU": "NVIDIA-GRID-K1"}, True),
        ({"affinity": required(term(req("foo", "In", "value1", "value2")))}, {"foo": "bar"}, False),
        # required affinity without terms, or with only empty terms, matches no node
        (
            {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}},
            {"foo": "bar"},
            False,
        ),
        ({"affinity": required()}, {"foo": "bar"}, False),
        ({"affinity": required({"matchExpressions": []})}, {"foo": "bar"}, False),
        # affinity without a required part, or no affinity at all
        ({"affinity": {"nodeAffinity": {}}}, {"foo": "bar"}, True),
        ({"affinity": {"podAffinity": {}}}, {"foo": "bar"}, True),
        # expressions of one term are ANDed, terms are ORed
        (
            {"affinity": required(term(req("foo", "In", "bar"), req("diffkey", "In", "wrong")))},
            {"foo": "bar"},
            False,
        ),
        (
            {
                "affinity": required(
                    term(req("foo", "In", "bar", "value2")), term(req("diffkey", "In", "wrong"))
                )
            },
            {"foo": "bar"},
            True,
        ),
        # nodeSelector and affinity must both hold
        (
            {"node_selector": {"foo": "bar"}, "affinity": required(term(req("foo", "Exists")))},
            {"foo": "bar"},
            True,
        ),
        (
            {"node_selector": {"foo": "bar"}, "affinity": required(term(req("foo", "Exists")))},
            {"foo": "baz"},
            False,
        ),
        # an invalid value makes the term unparseable: it matches nothing
        ({"affinity": required(term(req("foo", "In", "invalid value: ___@#$%^")))}, {"foo": "bar"}, False),
    ],
)
def test_filter(kwargs, labels, fits):
    assert check(pod_info(**kwargs), labels) == (None if fits else REJECTED)


def test_pod_without_selector_or_affinity_is_skipped():
    assert plugin().pre_filter(CycleState(), pod_info(), FakeSnapshot()) is SKIP
    assert plugin().pre_filter(CycleState(), pod_info(node_selector={"a": "b"}), FakeSnapshot()) is None


def test_match_fields_narrow_the_candidates_with_a_prefilter_result():
    pod = pod_info(affinity=required(term(fields=[name_in("node1")])))
    res = plugin().pre_filter(CycleState(), pod, FakeSnapshot())
    assert res == PreFilterResult(frozenset({"node1"}))
    assert check(pod, {}, "node1") is None
    assert check(pod, {}, "node2") == "excluded by PreFilterResult"
    # Filter alone still rejects a node the result would have excluded.
    assert plugin().filter(CycleState(), pod, node_info("node2")).reasons == (POD_REASON,)


def test_two_terms_of_node_names_union():
    pod = pod_info(affinity=required(term(fields=[name_in("node1")]), term(fields=[name_in("node2")])))
    assert plugin().pre_filter(CycleState(), pod, FakeSnapshot()) == PreFilterResult(
        frozenset({"node1", "node2"})
    )


def test_a_term_without_node_names_leaves_all_nodes_possible():
    pod = pod_info(affinity=required(term(fields=[name_in("node1")]), term(req("foo", "In", "bar"))))
    assert plugin().pre_filter(CycleState(), pod, FakeSnapshot()) is None
    assert check(pod, {"foo": "bar"}, "node2") is None
    assert check(pod, {}, "node2") == REJECTED


def test_match_fields_and_expressions_in_one_term_are_anded():
    pod = pod_info(affinity=required(term(req("foo", "In", "bar"), fields=[name_in("node1")])))
    assert check(pod, {"foo": "bar"}, "node1") is None
    assert check(pod, {}, "node1") == REJECTED
    assert check(pod, {"foo": "bar"}, "node2") == "excluded by PreFilterResult"


def test_conflicting_node_name_requirements_reject_the_pod_in_prefilter():
    pod = pod_info(affinity=required(term(fields=[name_in("node1"), name_in("node2")])))
    st = plugin().pre_filter(CycleState(), pod, FakeSnapshot())
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ("pod affinity terms conflict",)


ADDED = {
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term(req("zone", "In", "foo"))]}
}


@pytest.mark.parametrize(
    ("labels", "want"),
    [
        ({"zone": "foo", "foo": "bar"}, None),
        ({"zone": "foo"}, REJECTED),
        ({"foo": "bar"}, (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ENFORCED_REASON,))),
    ],
)
def test_added_affinity_is_enforced_before_the_pods_own(labels, want):
    pod = pod_info(affinity=required(term(req("foo", "In", "bar"))))
    assert check(pod, labels, pl=plugin(ADDED)) == want


def test_added_affinity_applies_to_pods_without_affinity():
    pl = plugin(ADDED)
    assert pl.pre_filter(CycleState(), pod_info(), FakeSnapshot()) is None
    assert check(pod_info(), {"zone": "bar"}, pl=pl) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        (ENFORCED_REASON,),
    )
    assert check(pod_info(), {"zone": "foo"}, pl=pl) is None


def test_invalid_added_affinity_is_a_configuration_error():
    with pytest.raises(ValueError, match="addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"):
        plugin(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term(fields=[name_in("a", "b")])]
                }
            }
        )
    with pytest.raises(ValueError, match="addedAffinity.preferredDuringSchedulingIgnoredDuringExecution"):
        plugin(
            {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": term(req("zone", "Gt", "x"))}
                ]
            }
        )


# ---------------------------------------------------------------------------
# Score


def preferred(*weighted_terms):
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "preference": t} for w, t in weighted_terms
            ]
        }
    }


NODES = [
    node_info("node1", labels={"foo": "bar"}),
    node_info("node2", labels={"key": "value"}),
    node_info("node3", labels={"az": "az1"}),
    node_info("node5", labels={"foo": "bar", "key": "value", "az": "az1"}),
]


def test_pod_without_preferred_affinity_is_not_scored():
    assert run_score(plugin(), pod_info(), NODES) is None
    assert run_score(plugin(), pod_info(affinity=required(term(req("foo", "Exists")))), NODES) is None


def test_no_matching_preferred_term_scores_zero_everywhere():
    pod = pod_info(affinity=preferred((2, term(req("foo", "In", "nope")))))
    assert run_score(plugin(), pod, NODES) == dict.fromkeys(["node1", "node2", "node3", "node5"], 0)


def test_only_the_matching_node_gets_the_top_score():
    pod = pod_info(affinity=preferred((2, term(req("foo", "In", "bar")))))
    assert run_score(plugin(), pod, NODES) == {"node1": 100, "node2": 0, "node3": 0, "node5": 100}


def test_weights_of_matching_terms_add_up_and_are_normalized_to_the_best_node():
    pod = pod_info(
        affinity=preferred(
            (2, term(req("foo", "In", "bar"))),
            (4, term(req("key", "In", "value"))),
            (5, term(req("foo", "In", "bar"), req("key", "In", "value"), req("az", "In", "az1"))),
        )
    )
    # raw: node1 2, node2 4, node3 0, node5 2+4+5=11 -> 100 * raw // 11
    assert run_score(plugin(), pod, NODES) == {"node1": 18, "node2": 36, "node3": 0, "node5": 100}


def test_zero_weight_terms_are_ignored():
    pod = pod_info(affinity=preferred((0, term(req("foo", "In", "bar"))), (3, term(req("az", "Exists")))))
    assert run_score(plugin(), pod, NODES) == {"node1": 0, "node2": 0, "node3": 100, "node5": 100}


def test_preferred_match_fields_score_by_node_name():
    pod = pod_info(affinity=preferred((1, term(fields=[name_in("node2")]))))
    assert run_score(plugin(), pod, NODES) == {"node1": 0, "node2": 100, "node3": 0, "node5": 0}


def test_added_preferred_terms_add_to_the_pods_own():
    pl = plugin(
        {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 3, "preference": term(req("az", "In", "az1"))}
            ]
        }
    )
    pod = pod_info(affinity=preferred((1, term(req("foo", "In", "bar")))))
    # raw: node1 1, node2 0, node3 3, node5 4
    assert run_score(pl, pod, NODES) == {"node1": 25, "node2": 0, "node3": 75, "node5": 100}
    # and score pods that have no preference of their own
    assert run_score(pl, pod_info(), NODES) == {"node1": 0, "node2": 0, "node3": 100, "node5": 100}


def test_invalid_preferred_term_fails_prescore():
    pod = pod_info(affinity=preferred((1, term(req("foo", "Gt", "not-a-number")))))
    st = plugin().pre_score(CycleState(), pod, NODES)
    assert st is not None and st.code == Code.ERROR


def test_verdicts_follow_node_label_changes():
    from .builders import make_node

    pl = plugin()
    pod_spec = {"node_selector": {"disk": "ssd"}, "affinity": preferred((1, term(req("zone", "In", "a"))))}
    node = node_info("n1", labels={"disk": "hdd", "zone": "b"})
    other = node_info("n2", labels={"zone": "b"})
    assert run_filter(pl, pod_info(**pod_spec), [node])["n1"] is not None
    assert run_score(pl, pod_info(**pod_spec), [node, other]) == {"n1": 0, "n2": 0}
    node.set_node(make_node("n1", labels={"disk": "ssd", "zone": "a"}))
    assert run_filter(pl, pod_info(**pod_spec), [node])["n1"] is None
    assert run_score(pl, pod_info(**pod_spec), [node, other]) == {"n1": 100, "n2": 0}


def test_plugins_with_different_added_affinity_keep_their_own_verdicts():
    node = node_info("n1", labels={"zone": "bar"})
    pod = pod_info(node_selector={"zone": "bar"})
    assert check(pod, {"zone": "bar"}, pl=plugin()) is None
    assert run_filter(plugin(ADDED), pod, [node])["n1"].reasons == (ENFORCED_REASON,)
    assert run_filter(plugin(), pod, [node])["n1"] is None


def test_score_without_prescore_gives_the_raw_weights():
    pl = plugin(
        {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 3, "preference": term(req("az", "In", "az1"))}
            ]
        }
    )
    pod = pod_info(affinity=preferred((1, term(req("foo", "In", "bar")))))
    state = CycleState()
    assert {n.name: pl.score(state, pod, n) for n in NODES} == {
        "node1": 1,
        "node2": 0,
        "node3": 3,
        "node5": 4,
    }
    assert {n.name: plugin().score(CycleState(), pod_info(), n) for n in NODES} == dict.fromkeys(
        ["node1", "node2", "node3", "node5"], 0
    )
