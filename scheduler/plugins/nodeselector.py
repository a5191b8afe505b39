"""Node selectors (``v1.NodeSelector``): node affinity terms, preferred terms, a pod's required affinity.

Terms are ORed and the requirements within a term ANDed; ``matchFields``
knows only ``metadata.name``. Each selector is compiled once
(:func:`compile_node_selector_terms`, :func:`compile_preferred_terms`) into a
generated function of the node's labels and name, and the compiled form
reused for every node; :func:`match_node_selector_terms` is a one-shot
convenience over the same code.

An invalid term never raises from :func:`match_node_selector_terms`: as in
kube-scheduler, it matches nothing. :func:`compile_node_selector_terms`
raises :class:`~scheduler.plugins.labelrequirements.SelectorError` when asked
to be strict, for callers that must report the problem (plugin arguments).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

from scheduler.plugins.labelrequirements import (
    NODE_OPERATORS,
    Codegen,
    Requirement,
    SelectorError,
    parse_expressions,
)

__all__ = [
    "METADATA_NAME",
    "NodeSelector",
    "PreferredTerms",
    "RequiredNodeAffinity",
    "compile_node_selector_terms",
    "compile_preferred_terms",
    "match_node_selector_terms",
    "required_node_affinity",
]

METADATA_NAME = "metadata.name"

FieldRequirement = tuple[bool, str, str]
"""(operator is In, key, value) of a ``matchFields`` requirement."""
TermReqs = tuple[tuple[Requirement, ...] | None, tuple[FieldRequirement, ...] | None]
"""A compiled ``v1.NodeSelectorTerm``: its label requirements and field requirements, None when absent."""


class _NodeCodegen(Codegen):
    def term(
        self, label_reqs: tuple[Requirement, ...] | None, field_reqs: tuple[FieldRequirement, ...] | None
    ) -> str:
        """The term's label and field requirements all hold."""
        parts = []
        if label_reqs is not None:
            parts.append(self.requirements(label_reqs))
        if field_reqs is not None:
            # Only metadata.name is a node field (others read as ""); a node
            # without a name has no fields, and field requirements are then ignored.
            checks = []
            for is_in, key, value in field_reqs:
                if key == METADATA_NAME:
                    checks.append(f"N {'==' if is_in else '!='} {self.const(value)}")
                elif (value == "") != is_in:
                    checks.append("False")
            if checks:
                parts.append(f"(not N or ({' and '.join(checks)}))")
        return self.all_of(parts)


@lru_cache(maxsize=4096)
def _node_matcher(
    node_selector: tuple[tuple[str, str], ...], terms: tuple[TermReqs, ...] | None
) -> Callable[[Mapping[str, str], str], bool]:
    g = _NodeCodegen()
    parts = [f"(L.get({g.const(k)}) == {g.const(v)})" for k, v in node_selector]
    if terms is not None:
        parts.append("(" + (" or ".join(f"({g.term(*t)})" for t in terms) or "False") + ")")
    return g.function(" and ".join(parts) or "True")


@lru_cache(maxsize=4096)
def _weight_matcher(terms: tuple[tuple[int, Any, Any], ...]) -> Callable[[Mapping[str, str], str], int]:
    g = _NodeCodegen()
    return g.function(" + ".join(f"({w} if ({g.term(lr, fr)}) else 0)" for w, lr, fr in terms) or "0")


def _compile_term(term: Mapping[str, Any]) -> TermReqs:
    """A non-empty ``v1.NodeSelectorTerm`` as (label requirements, field requirements)."""
    label_reqs = None
    exprs = term.get("matchExpressions") or ()
    if exprs:
        label_reqs = tuple(parse_expressions(exprs, NODE_OPERATORS, "node selector"))
    field_reqs = None
    fields = term.get("matchFields") or ()
    if fields:
        freqs = []
        for f in fields:
            opname = f.get("operator")
            values = f.get("values") or []
            if opname not in ("In", "NotIn"):
                raise SelectorError(f"{opname!r} is not a valid node field selector operator")
            if len(values) != 1:
                raise SelectorError(
                    f"unexpected number of value ({len(values)}) for node field selector operator {opname!r}"
                )
            freqs.append((opname == "In", f.get("key", ""), values[0]))
        field_reqs = tuple(freqs)
    return label_reqs, field_reqs


def _is_empty_term(term: Mapping[str, Any] | None) -> bool:
    return not term or (not term.get("matchExpressions") and not term.get("matchFields"))


class NodeSelector:
    """Compiled ``v1.NodeSelectorTerm`` list: terms ORed, requirements ANDed.

    An empty term selects nothing; so does a selector without terms.
    ``matches(labels, name)`` is a generated function.
    """

    __slots__ = ("terms", "matches")

    def __init__(self, terms: tuple[TermReqs, ...]) -> None:
        self.terms = terms
        self.matches: Callable[[Mapping[str, str], str], bool] = _node_matcher((), terms)

    def __repr__(self) -> str:
        return f"NodeSelector({self.terms!r})"


def compile_node_selector_terms(
    terms: Iterable[Mapping[str, Any]] | None, strict: bool = False
) -> NodeSelector:
    """Compile ``nodeSelectorTerms``.

    A term kube cannot parse never matches (``LazyErrorNodeSelector``); with
    ``strict`` it raises :class:`SelectorError` instead (``NewNodeSelector``).
    """
    compiled = []
    for term in terms or ():
        if _is_empty_term(term):
            continue
        try:
            compiled.append(_compile_term(term))
        except SelectorError:
            if strict:
                raise
    return NodeSelector(tuple(compiled))


def match_node_selector_terms(
    terms: Iterable[Mapping[str, Any]] | None, node_labels: Mapping[str, str], node_name: str
) -> bool:
    """Whether a node matches ``nodeSelectorTerms`` (ORed; expressions and fields ANDed)."""
    return compile_node_selector_terms(terms).matches(node_labels, node_name)


class PreferredTerms:
    """Compiled ``[]v1.PreferredSchedulingTerm``; ``score(labels, name)`` sums the matching weights."""

    __slots__ = ("terms", "score")

    def __init__(self, terms: tuple[tuple[int, Any, Any], ...]) -> None:
        self.terms = terms
        self.score: Callable[[Mapping[str, str], str], int] = _weight_matcher(terms)

    def __bool__(self) -> bool:
        return bool(self.terms)


def compile_preferred_terms(terms: Iterable[Mapping[str, Any]] | None) -> PreferredTerms:
    """``nodeaffinity.NewPreferredSchedulingTerms``: zero-weight and empty terms are dropped.

    Raises :class:`SelectorError` if any term is invalid, as kube does.
    """
    compiled = []
    for t in terms or ():
        weight = int(t.get("weight") or 0)
        pref = t.get("preference")
        if weight == 0 or pref is None or _is_empty_term(pref):
            continue
        compiled.append((weight, *_compile_term(pref)))
    return PreferredTerms(tuple(compiled))


class RequiredNodeAffinity:
    """A pod's ``spec.nodeSelector`` and required node affinity, both of which must hold.

    ``nodeaffinity.GetRequiredNodeAffinity``: an affinity with
    ``nodeSelectorTerms: []`` matches no node. ``matches(labels, name)`` is a
    generated function.
    """

    __slots__ = ("node_selector", "terms", "matches")

    def __init__(self, node_selector: Mapping[str, str] | None, terms: NodeSelector | None) -> None:
        self.node_selector = tuple(node_selector.items()) if node_selector else ()
        self.terms = terms
        self.matches: Callable[[Mapping[str, str], str], bool] = _node_matcher(
            self.node_selector, None if terms is None else terms.terms
        )

    @property
    def empty(self) -> bool:
        """Nothing is required: every node matches."""
        return not self.node_selector and self.terms is None


def required_node_affinity(pod: Any) -> RequiredNodeAffinity:
    """The required node affinity of a :class:`~scheduler.core.podinfo.PodInfo` (memoized on it).

    Topology spreading (nodeAffinityPolicy: Honor) and NodeAffinity share it.
    """
    memo = pod.memo
    rna = memo.get("RequiredNodeAffinity")
    if rna is None:
        spec = pod.spec
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        terms = None
        if required is not None:
            terms = compile_node_selector_terms(required.get("nodeSelectorTerms"))
        rna = RequiredNodeAffinity(spec.get("nodeSelector"), terms)
        memo["RequiredNodeAffinity"] = rna
    return rna
