"""Label selectors (``metav1.LabelSelector``), compiled once and matched against many pods.

None selects nothing and ``{}`` everything (``metav1.LabelSelectorAsSelector``);
``matchLabels`` and ``matchExpressions`` are ANDed. Matching a selector
against many pods is a hot path, so a selector is compiled once
(:func:`compile_label_selector`, cached by the identity of the API object)
into a generated function; :func:`match_label_selector` is a one-shot
convenience over the same code.

An invalid selector never raises from :func:`match_label_selector`: as in
kube-scheduler, it matches nothing. :func:`compile_label_selector` raises
:class:`~scheduler.plugins.labelrequirements.SelectorError` when asked to be
strict, for callers that must report the problem (plugin arguments).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from scheduler.plugins.labelrequirements import (
    IN,
    LABEL_OPERATORS,
    Codegen,
    Requirement,
    SelectorError,
    parse_expressions,
    requirement,
)

__all__ = [
    "EVERYTHING",
    "NOTHING",
    "LabelSelector",
    "compile_label_selector",
    "match_label_selector",
]


@lru_cache(maxsize=4096)
def _label_matcher(reqs: tuple[Requirement, ...]) -> Callable[..., bool]:
    g = Codegen()
    return g.function(g.requirements(reqs))


def _nothing(labels: Mapping[str, str], name: str = "") -> bool:
    return False


class LabelSelector:
    """A compiled ``metav1.LabelSelector``; ``matches(labels)`` is a generated function."""

    __slots__ = ("reqs", "matches")

    def __init__(self, reqs: tuple[Requirement, ...] | None) -> None:
        """``reqs`` None selects nothing; ``()`` everything."""
        self.reqs = reqs
        self.matches: Callable[[Mapping[str, str]], bool] = _nothing if reqs is None else _label_matcher(reqs)

    def __repr__(self) -> str:
        return f"LabelSelector({'<nothing>' if self.reqs is None else self.reqs or '<everything>'})"


EVERYTHING = LabelSelector(())
NOTHING = LabelSelector(None)


_compiled_selectors: dict[int, tuple[Any, LabelSelector]] = {}
_COMPILED_SELECTORS_MAX = 8192


def compile_label_selector(selector: Mapping[str, Any] | None, strict: bool = False) -> LabelSelector:
    """``metav1.LabelSelectorAsSelector``: None selects nothing, ``{}`` everything.

    An invalid selector raises :class:`SelectorError` with ``strict``, and
    otherwise compiles to one that selects nothing. The result is cached by
    the identity of ``selector`` (API objects are replaced, never mutated), so
    matching the same selector against many pods compiles it once.
    """
    if selector is None:
        return NOTHING
    if strict:
        return _compile_label_selector(selector, strict)
    hit = _compiled_selectors.get(id(selector))
    if hit is not None and hit[0] is selector:
        return hit[1]
    compiled = _compile_label_selector(selector, strict)
    if len(_compiled_selectors) >= _COMPILED_SELECTORS_MAX:
        _compiled_selectors.clear()
    # The entry keeps the selector alive, so its id cannot be reused meanwhile.
    _compiled_selectors[id(selector)] = (selector, compiled)
    return compiled


def _compile_label_selector(selector: Mapping[str, Any], strict: bool) -> LabelSelector:
    match_labels = selector.get("matchLabels") or {}
    exprs = selector.get("matchExpressions") or ()
    if not match_labels and not exprs:
        return EVERYTHING
    try:
        reqs = [requirement(k, IN, [v], "=") for k, v in match_labels.items()]
        reqs += parse_expressions(exprs, LABEL_OPERATORS, "label selector")
    except SelectorError:
        if strict:
            raise
        return NOTHING
    return LabelSelector(tuple(reqs))


def match_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` match a ``metav1.LabelSelector`` (None matches nothing, {} everything)."""
    return compile_label_selector(selector).matches(labels)
