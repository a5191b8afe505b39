"""TaintToleration: filtering on NoSchedule/NoExecute taints, scoring on PreferNoSchedule ones."""

from __future__ import annotations

import pytest

from scheduler.core.framework import SKIP, Code, CycleState
from scheduler.plugins import topologycounts
from scheduler.plugins.tainttoleration import TaintToleration

from .builders import (
    FakeSnapshot,
    make_node,
    node_info,
    pod_info,
    run_filter,
    run_score,
    taint,
    toleration,
)


def filter_one(pod, node):
    return run_filter(TaintToleration(None, None), pod, [node])[node.name]


@pytest.mark.parametrize(
    ("tolerations", "taints", "rejected_by"),
    [
        # no tolerations, tainted node
        ([], [taint("dedicated", "user1", "NoSchedule")], "{dedicated: user1}"),
        # dedicated node for user1
        ([toleration("dedicated", "user1", "NoSchedule")], [taint("dedicated", "user1", "NoSchedule")], None),
        # dedicated node for someone else
        (
            [toleration("dedicated", "user2", "NoSchedule")],
            [taint("dedicated", "user1", "NoSchedule")],
            "{dedicated: user1}",
        ),
        # operator Exists tolerates any value
        (
            [toleration("foo", operator="Exists", effect="NoSchedule")],
            [taint("foo", "bar", "NoSchedule")],
            None,
        ),
        # several tolerations, several taints, all tolerated
        (
            [
                toleration("cpu-type", "arm64", "NoSchedule"),
                toleration("disk-type", operator="Exists", effect="NoSchedule"),
            ],
            [taint("cpu-type", "arm64", "NoSchedule"), taint("disk-type", "ssd", "NoSchedule")],
            None,
        ),
        # key and value match but a different (non-empty) effect
        ([toleration("foo", "bar", "PreferNoSchedule")], [taint("foo", "bar", "NoSchedule")], "{foo: bar}"),
        # empty toleration effect matches every effect
        ([toleration("foo", "bar")], [taint("foo", "bar", "NoSchedule")], None),
        # PreferNoSchedule taints never filter
        ([toleration("foo", "bar", "NoSchedule")], [taint("dedicated", "user1", "PreferNoSchedule")], None),
        ([], [taint("dedicated", "user1", "PreferNoSchedule")], None),
        # NoExecute filters like NoSchedule
        ([], [taint("node.kubernetes.io/not-ready", None, "NoExecute")], "{node.kubernetes.io/not-ready: }"),
        # any untolerated NoSchedule/NoExecute taint rejects
        (
            [toleration("a", operator="Exists")],
            [
                taint("a", "1", "NoSchedule"),
                taint("b", "2", "PreferNoSchedule"),
                taint("c", "3", "NoExecute"),
                taint("d", "4", "NoSchedule"),
            ],
            "{c: 3}",
        ),
    ],
)
def test_filter(tolerations, taints, rejected_by):
    st = filter_one(pod_info(tolerations=tolerations), node_info("n1", taints=taints))
    if rejected_by is None:
        assert st is None
    else:
        assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert st.reasons == ("node(s) had untolerated taint(s)",)  # kube-scheduler 1.37's words


def test_filter_runs_without_prefilter():
    st = TaintToleration(None, None).filter(
        CycleState(), pod_info(), node_info("n1", taints=[taint("k", "v", "NoSchedule")])
    )
    assert st.reasons == ("node(s) had untolerated taint(s)",)


def test_nodes_tainted_alike_share_a_verdict_and_other_taints_get_their_own():
    # One cycle's verdicts are kept per set of taints; nodes with other taints (another value,
    # effect or an extra taint) are decided on their own, whatever order they come in.
    pod = pod_info(tolerations=[toleration("k", "v", "NoSchedule")])
    nodes = [
        node_info("other-value", taints=[taint("k", "w")]),
        node_info("a", taints=[taint("k", "v")]),
        node_info("b", taints=[taint("k", "v")]),
        node_info("noexecute", taints=[taint("k", "v", "NoExecute")]),
        node_info("extra", taints=[taint("k", "v"), taint("x", "1")]),
        node_info("untainted"),
        node_info("c", taints=[taint("k", "v")]),
        node_info("other-value-again", taints=[taint("k", "w")]),
    ]
    got = {
        n: (st.reasons[0] if st else None)
        for n, st in run_filter(TaintToleration(None, None), pod, nodes).items()
    }
    assert got == {
        "other-value": "node(s) had untolerated taint(s)",
        "a": None,
        "b": None,
        "noexecute": "node(s) had untolerated taint(s)",
        "extra": "node(s) had untolerated taint(s)",
        "untainted": None,
        "c": None,
        "other-value-again": "node(s) had untolerated taint(s)",
    }


def test_verdicts_stay_right_when_the_table_of_taint_sets_is_cleared(monkeypatch):
    # Sets of taints are numbered; when the table is full it is cleared, and nodes read before
    # keep their old number. A number must never stand for two different sets.
    monkeypatch.setattr(topologycounts, "SHAPES_LIMIT", 2)
    pod = pod_info(tolerations=[toleration("k", "0", "NoSchedule")])
    nodes = [node_info(f"n{i}", taints=[taint("k", str(i % 5))]) for i in range(12)]
    got = {
        n: (st.reasons[0] if st else None)
        for n, st in run_filter(TaintToleration(None, None), pod, nodes).items()
    }
    assert got == {f"n{i}": None if i % 5 == 0 else "node(s) had untolerated taint(s)" for i in range(12)}
    assert len(topologycounts._shape_ids) <= 2


def test_a_node_is_read_again_when_it_changes_not_when_its_pods_do():
    pl = TaintToleration(None, None)
    ni = node_info("n1", taints=[taint("k", "v")])
    assert pl.filter(CycleState(), pod_info(), ni).reasons == ("node(s) had untolerated taint(s)",)
    ni.add_pod(pod_info("p", node_name="n1"))
    assert pl.filter(CycleState(), pod_info(), ni).reasons == ("node(s) had untolerated taint(s)",)
    ni.set_node(make_node("n1", taints=[taint("k", "w", "PreferNoSchedule")]))
    assert pl.filter(CycleState(), pod_info(), ni) is None
    assert run_score(pl, pod_info(), [ni, node_info("n2")]) == {"n1": 0, "n2": 100}
    ni.set_node(make_node("n1"))
    assert run_score(pl, pod_info(), [ni, node_info("n2")]) == {"n1": 100, "n2": 100}


def test_pod_tolerating_everything_skips_filtering():
    pl = TaintToleration(None, None)
    assert (
        pl.pre_filter(CycleState(), pod_info(tolerations=[toleration(operator="Exists")]), FakeSnapshot())
        is SKIP
    )
    assert (
        pl.pre_filter(
            CycleState(), pod_info(tolerations=[toleration("k", operator="Exists")]), FakeSnapshot()
        )
        is None
    )
    assert pl.pre_filter(CycleState(), pod_info(), FakeSnapshot()) is None


def scores(tolerations, nodes):
    return run_score(TaintToleration(None, None), pod_info(tolerations=tolerations), nodes)


def test_score_prefers_nodes_whose_taints_are_tolerated():
    got = scores(
        [toleration("foo", "bar", "PreferNoSchedule")],
        [
            node_info("tolerated", taints=[taint("foo", "bar", "PreferNoSchedule")]),
            node_info("intolerable", taints=[taint("foo", "blah", "PreferNoSchedule")]),
        ],
    )
    assert got == {"tolerated": 100, "intolerable": 0}


def test_score_of_nodes_tainted_alike_is_the_same():
    got = scores(
        [toleration("foo", "bar", "PreferNoSchedule")],
        [
            node_info("tolerated", taints=[taint("foo", "bar", "PreferNoSchedule")]),
            node_info("intolerable", taints=[taint("foo", "blah", "PreferNoSchedule")]),
            node_info("tolerated-too", taints=[taint("foo", "bar", "PreferNoSchedule")]),
            node_info("intolerable-too", taints=[taint("foo", "blah", "PreferNoSchedule")]),
        ],
    )
    assert got == {"tolerated": 100, "intolerable": 0, "tolerated-too": 100, "intolerable-too": 0}


def test_score_ignores_how_many_tolerated_taints_a_node_has():
    got = scores(
        [
            toleration("cpu-type", "arm64", "PreferNoSchedule"),
            toleration("disk-type", "ssd", "PreferNoSchedule"),
        ],
        [
            node_info("none"),
            node_info("one", taints=[taint("cpu-type", "arm64", "PreferNoSchedule")]),
            node_info(
                "two",
                taints=[
                    taint("cpu-type", "arm64", "PreferNoSchedule"),
                    taint("disk-type", "ssd", "PreferNoSchedule"),
                ],
            ),
        ],
    )
    assert got == {"none": 100, "one": 100, "two": 100}


def test_score_falls_with_the_number_of_intolerable_taints():
    # raw counts 0, 1, 2 -> reversed normalization: 100 - count * 100 // 2
    got = scores(
        [toleration("foo", "bar", "PreferNoSchedule")],
        [
            node_info("zero"),
            node_info("one", taints=[taint("cpu-type", "arm64", "PreferNoSchedule")]),
            node_info(
                "two",
                taints=[
                    taint("cpu-type", "arm64", "PreferNoSchedule"),
                    taint("disk-type", "ssd", "PreferNoSchedule"),
                ],
            ),
        ],
    )
    assert got == {"zero": 100, "one": 50, "two": 0}


def test_score_counts_only_prefer_no_schedule_taints_and_tolerations():
    got = scores(
        [toleration("cpu-type", "arm64", "NoSchedule"), toleration("disk-type", "ssd", "NoSchedule")],
        [
            node_info("untainted"),
            node_info("noschedule", taints=[taint("cpu-type", "arm64", "NoSchedule")]),
            # a NoSchedule toleration does not tolerate a PreferNoSchedule taint
            node_info("prefer", taints=[taint("disk-type", "ssd", "PreferNoSchedule")]),
        ],
    )
    assert got == {"untainted": 100, "noschedule": 100, "prefer": 0}


def test_score_with_empty_effect_toleration_tolerates_prefer_no_schedule():
    got = scores(
        [toleration("disk-type", operator="Exists")],
        [
            node_info("a", taints=[taint("disk-type", "ssd", "PreferNoSchedule")]),
            node_info("b", taints=[taint("gpu", "yes", "PreferNoSchedule")]),
        ],
    )
    assert got == {"a": 100, "b": 0}


def test_score_without_tolerations_favours_untainted_nodes():
    got = scores(
        [],
        [node_info("clean"), node_info("tainted", taints=[taint("cpu-type", "arm64", "PreferNoSchedule")])],
    )
    assert got == {"clean": 100, "tainted": 0}


def test_score_runs_without_prescore():
    pl = TaintToleration(None, None)
    pod = pod_info(tolerations=[toleration("a", "1", "PreferNoSchedule")])
    node = node_info(
        "n",
        taints=[
            taint("a", "1", "PreferNoSchedule"),
            taint("b", "2", "PreferNoSchedule"),
            taint("c", "3", "NoSchedule"),
        ],
    )
    assert pl.score(CycleState(), pod, node) == 1
