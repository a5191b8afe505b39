"""Label selectors, node selector terms and tolerations, with the API machinery's semantics."""

from __future__ import annotations

import pytest

from scheduler.plugins.helpers import (
    SelectorError,
    compile_label_selector,
    compile_node_selector_terms,
    compile_preferred_terms,
    find_untolerated_taint,
    match_label_selector,
    match_node_selector_terms,
    parse_int64,
    required_node_affinity,
    tolerates,
    tolerates_everything,
    valid_label_key,
)

from .builders import node_selector_requirement as req
from .builders import pod_info, taint, toleration

# ---------------------------------------------------------------------------
# metav1.LabelSelector


def test_none_selector_matches_nothing_and_empty_matches_everything():
    assert not match_label_selector(None, {})
    assert not match_label_selector(None, {"a": "b"})
    assert match_label_selector({}, {})
    assert match_label_selector({"matchLabels": {}, "matchExpressions": []}, {"a": "b"})


@pytest.mark.parametrize(
    ("selector", "labels", "want"),
    [
        ({"matchLabels": {"app": "web"}}, {"app": "web", "tier": "x"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        ({"matchLabels": {"app": "web"}}, {}, False),
        ({"matchLabels": {"app": "web", "tier": "fe"}}, {"app": "web"}, False),
        ({"matchExpressions": [req("app", "In", "web", "api")]}, {"app": "api"}, True),
        ({"matchExpressions": [req("app", "In", "web")]}, {}, False),
        ({"matchExpressions": [req("app", "NotIn", "web")]}, {}, True),  # absent key satisfies NotIn
        ({"matchExpressions": [req("app", "NotIn", "web")]}, {"app": "web"}, False),
        ({"matchExpressions": [req("app", "NotIn", "web")]}, {"app": "db"}, True),
        ({"matchExpressions": [req("app", "Exists")]}, {"app": ""}, True),
        ({"matchExpressions": [req("app", "Exists")]}, {"other": "x"}, False),
        ({"matchExpressions": [req("app", "DoesNotExist")]}, {"other": "x"}, True),
        ({"matchExpressions": [req("app", "DoesNotExist")]}, {"app": "x"}, False),
        # matchLabels and matchExpressions are ANDed
        ({"matchLabels": {"app": "web"}, "matchExpressions": [req("tier", "Exists")]}, {"app": "web"}, False),
        (
            {"matchLabels": {"app": "web"}, "matchExpressions": [req("tier", "Exists")]},
            {"app": "web", "tier": "1"},
            True,
        ),
    ],
)
def test_label_selector(selector, labels, want):
    assert match_label_selector(selector, labels) is want


@pytest.mark.parametrize(
    "selector",
    [
        {"matchExpressions": [req("app", "In")]},  # In needs values
        {"matchExpressions": [req("app", "NotIn")]},
        {"matchExpressions": [req("app", "Exists", "x")]},  # Exists takes none
        {"matchExpressions": [req("app", "Gt", "1")]},  # not a LabelSelector operator
        {"matchExpressions": [req("app", "in", "x")]},  # operators are case-sensitive
        {"matchExpressions": [req("invalid key", "Exists")]},
        {"matchLabels": {"app": "not a valid value"}},
    ],
)
def test_invalid_label_selector_matches_nothing_or_raises_when_strict(selector):
    assert not match_label_selector(selector, {"app": "x", "invalid key": "x"})
    with pytest.raises(SelectorError):
        compile_label_selector(selector, strict=True)


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("app", True),
        ("app.kubernetes.io/name", True),
        ("k8s.io/a-b_c.d", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("", False),
        ("/name", False),
        ("Bad_Prefix/name", False),
        ("a/b/c", False),
        ("-app", False),
        ("app-", False),
        ("has space", False),
    ],
)
def test_label_key_validation(key, valid):
    assert valid_label_key(key) is valid


def test_compiled_selector_is_reusable():
    sel = compile_label_selector({"matchExpressions": [req("zone", "In", "a", "b")]})
    assert [sel.matches({"zone": z}) for z in ("a", "b", "c")] == [True, True, False]


# ---------------------------------------------------------------------------
# v1.NodeSelector


def term(*exprs, fields=()):
    t = {}
    if exprs:
        t["matchExpressions"] = list(exprs)
    if fields:
        t["matchFields"] = list(fields)
    return t


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


# ---------------------------------------------------------------------------
# Tolerations


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


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("0", 0),
        ("+7", 7),
        ("-12", -12),
        ("0204", 204),
        ("9223372036854775807", 2**63 - 1),
        ("9223372036854775808", None),
        ("", None),
        (" 1", None),
        ("1_000", None),
        ("1.0", None),
        (None, None),
    ],
)
def test_parse_int64_follows_go(text, want):
    assert parse_int64(text) == want
