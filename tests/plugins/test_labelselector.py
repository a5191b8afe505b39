"""Label selectors, with the API machinery's semantics (``metav1.LabelSelectorAsSelector``)."""

from __future__ import annotations

import pytest

from scheduler.plugins.labelrequirements import SelectorError
from scheduler.plugins.labelselector import compile_label_selector, match_label_selector

from .builders import node_selector_requirement as req


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


def test_compiled_selector_is_reusable():
    sel = compile_label_selector({"matchExpressions": [req("zone", "In", "a", "b")]})
    assert [sel.matches({"zone": z}) for z in ("a", "b", "c")] == [True, True, False]
