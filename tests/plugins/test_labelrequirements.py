"""Label keys and integer values, validated and parsed as the API machinery and Go do."""

from __future__ import annotations

import pytest

from scheduler.plugins.labelrequirements import parse_int64, valid_label_key


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
