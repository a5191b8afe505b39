"""Node selector terms, preferred terms and a pod's required node affinity."""

from __future__ import annotations

import pytest

from scheduler.plugins.labelrequirements import SelectorError
from scheduler.plugins.nodeselector import (
    compile_node_selector_terms,
    compile_preferred_terms,
    match_node_selector_terms,
    required_node_affinity,
)

from .builders import node_selector_requirement as req
from .builders import node_selector_term as term
from .builders import pod_info


@pytest.mark.parametrize(
    ("terms", "labels", "name", "want"),
    [
        ([term(req("foo", "In", "bar", "value2"))], {"foo": "bar"}, "n", True),
        ([term(req("foo", "In", "value1", "value2"))], {"foo": "bar"}, "n", False),
        ([term(req("kernel-version", "Gt", "0204"))], {"kernel-version": "0206"}, "n", True),
        ([term(req("kernel-version", "Gt", "0204"))], {"kernel-version": "0204"}, "n", False),
        ([term(req("kernel-version", "Lt", "0204"))], {"kernel-version": "0200"}, "n", True),
        ([term(req("kernel-version", "Gt", "1"))], {}, "n", False),  # absent label
        ([term(req("kernel-version", "Gt", "1"))], {"kernel-version": "v2"}, "n", False),  # not an integer
        ([term(req("mem-type", "NotIn", "DDR", "DDR2"))], {"mem-type": "DDR3"}, "n", True),
        ([term(req("GPU", "Exists"))], {"GPU": "NVIDIA-GRID-K1"}, "n", True),
        ([term(req("GPU", "DoesNotExist"))], {"GPU": "x"}, "n", False),
        # expressions within a term are ANDed
        ([term(req("foo", "In", "bar"), req("diffkey", "In", "wrong"))], {"foo": "bar"}, "n", False),
        # terms are ORed
        ([term(req("foo", "In", "x")), term(req("diffkey", "Exists"))], {"diffkey": "1"}, "n", True),
        # no terms, or only empty terms, select nothing
        ([], {"foo": "bar"}, "n", False),
        (None, {"foo": "bar"}, "n", False),
        ([{}], {"foo": "bar"}, "n", False),
        ([{"matchExpressions": []}], {"foo": "bar"}, "n", False),
        # matchFields on metadata.name
        ([term(fields=[req("metadata.name", "In", "host_1")])], {}, "host_1", True),
        ([term(fields=[req("metadata.name", "In", "host_1")])], {}, "host_2", False),
        ([term(fields=[req("metadata.name", "NotIn", "host_1")])], {}, "host_2", True),
        (
            [term(req("label_1", "In", "label_1_val"), fields=[req("metadata.name", "In", "host_1")])],
            {},
            "host_1",
            False,
        ),
        (
            [term(req("label_1", "In", "label_1_val"), fields=[req("metadata.name", "In", "host_1")])],
            {"label_1": "label_1_val"},
            "host_1",
            True,
        ),
        (
            [term(req("label_1", "In", "label_1_val")), term(fields=[req("metadata.name", "In", "host_1")])],
            {},
            "host_1",
            True,
        ),
        # a field other than metadata.name reads as empty
        ([term(fields=[req("spec.foo", "In", "x")])], {}, "host_1", False),
    ],
)
def test_node_selector_terms(terms, labels, name, want):
    assert match_node_selector_terms(terms, labels, name) is want


def test_invalid_term_is_skipped_but_other_terms_still_match():
    terms = [
        term(fields=[req("metadata.name", "In", "host_1", "host_2")]),  # one value only
        term(req("invalid key", "In", "v")),
        term(req("zone", "Gt", "abc")),  # Gt needs an integer
        term(req("zone", "Exists")),
    ]
    assert match_node_selector_terms(terms, {"zone": "a"}, "host_1")
    assert not match_node_selector_terms(terms[:3], {"zone": "a", "invalid key": "v"}, "host_1")
    with pytest.raises(SelectorError):
        compile_node_selector_terms(terms, strict=True)


def test_preferred_terms_sum_weights_of_matching_terms():
    prefs = compile_preferred_terms(
        [
            {"weight": 5, "preference": term(fields=[req("metadata.name", "In", "host_1")])},
            {"weight": 7, "preference": term(req("unknown_label", "In", "unknown_label_val"))},
            {"weight": 11, "preference": term(req("label_1", "In", "label_1_val"))},
        ]
    )
    assert prefs.score({"label_1": "label_1_val"}, "host_1") == 16
    assert prefs.score({}, "host_2") == 0


def test_preferred_terms_skip_zero_weight_even_if_invalid_but_reject_invalid_weighted():
    bad = term(fields=[req("metadata.name", "In", "host_1", "host_2")])
    assert not compile_preferred_terms([{"weight": 0, "preference": bad}])
    with pytest.raises(SelectorError):
        compile_preferred_terms([{"weight": 1, "preference": bad}])


def test_required_node_affinity_combines_node_selector_and_affinity():
    pod = pod_info(
        node_selector={"disk": "ssd"},
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term(req("zone", "In", "a"))]
                }
            }
        },
    )
    rna = required_node_affinity(pod)
    assert rna.matches({"disk": "ssd", "zone": "a"}, "n")
    assert not rna.matches({"disk": "ssd", "zone": "b"}, "n")
    assert not rna.matches({"zone": "a"}, "n")
    assert required_node_affinity(pod) is rna  # memoized on the PodInfo
    assert required_node_affinity(pod_info()).empty


def test_required_node_affinity_with_empty_terms_matches_no_node():
    pod = pod_info(
        affinity={
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
        }
    )
    assert not required_node_affinity(pod).matches({"foo": "bar"}, "n")
