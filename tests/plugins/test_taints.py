"""Tolerations against taints (``v1.Toleration.ToleratesTaint``)."""

from __future__ import annotations

import pytest

from scheduler.plugins.taints import find_untolerated_taint, tolerates, tolerates_everything

from .builders import taint, toleration


@pytest.mark.parametrize(
    ("tol", "tnt", "want"),
    [
        (toleration("foo", "bar", "NoSchedule"), taint("foo", "bar", "NoSchedule"), True),
        (toleration("foo", "bar", "NoSchedule", "Equal"), taint("foo", "bar", "NoSchedule"), True),
        (toleration("foo", "bar", "NoSchedule"), taint("foo", "baz", "NoSchedule"), False),
        (toleration("foo", "bar", "NoSchedule"), taint("foo", "bar", "NoExecute"), False),
        (toleration("foo", "bar"), taint("foo", "bar", "NoExecute"), True),  # empty effect: all
        (toleration("foo", operator="Exists", effect="NoSchedule"), taint("foo", "any", "NoSchedule"), True),
        (toleration("foo", operator="Exists"), taint("bar", "x", "NoSchedule"), False),
        (toleration(operator="Exists"), taint("anything", "x", "NoExecute"), True),  # empty key + Exists
        (toleration(operator="Exists", effect="NoSchedule"), taint("k", "v", "PreferNoSchedule"), False),
        (toleration("foo"), taint("foo", None, "NoSchedule"), True),  # "" == ""
        (toleration("foo", "bar", operator="Bogus"), taint("foo", "bar", "NoSchedule"), False),
        (toleration("foo", "5", operator="Gt"), taint("foo", "7", "NoSchedule"), True),
        (toleration("foo", "5", operator="Gt"), taint("foo", "5", "NoSchedule"), False),
        (toleration("foo", "5", operator="Lt"), taint("foo", "3", "NoSchedule"), True),
        (toleration("foo", "5", operator="Lt"), taint("foo", "x", "NoSchedule"), False),
    ],
)
def test_tolerates(tol, tnt, want):
    assert tolerates(tol, tnt) is want


def test_find_untolerated_taint_returns_first_untolerated_with_the_effects():
    taints = [
        taint("a", "1", "PreferNoSchedule"),
        taint("b", "2", "NoSchedule"),
        taint("c", "3", "NoExecute"),
    ]
    assert find_untolerated_taint(taints, []) == taint("b", "2", "NoSchedule")
    assert find_untolerated_taint(taints, [toleration("b", "2")]) == taint("c", "3", "NoExecute")
    assert find_untolerated_taint(taints, [toleration("b", "2"), toleration("c", operator="Exists")]) is None
    assert find_untolerated_taint(taints, [], effects=None) == taint("a", "1", "PreferNoSchedule")
    assert find_untolerated_taint(taints, [], effects={"PreferNoSchedule"}) == taint(
        "a", "1", "PreferNoSchedule"
    )
    assert find_untolerated_taint([], []) is None
    assert find_untolerated_taint(None, None) is None


def test_tolerates_everything():
    assert tolerates_everything([toleration(operator="Exists")])
    assert not tolerates_everything([toleration(operator="Exists", effect="NoSchedule")])
    assert tolerates_everything([toleration(operator="Exists", effect="NoSchedule")], {"NoSchedule"})
    assert not tolerates_everything([toleration("k", operator="Exists")])
    assert not tolerates_everything([toleration(value="x")])
    assert not tolerates_everything(None)
