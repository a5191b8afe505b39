"""Pod (anti-)affinity terms as InterPodAffinity matches them.

A ``v1.PodAffinityTerm`` becomes an :class:`AffinityTerm`: the namespaces it
names (the pod's own when it names none and has no ``namespaceSelector``),
the compiled ``namespaceSelector`` (absent selects nothing, ``{}`` every
namespace), the compiled ``labelSelector`` with ``matchLabelKeys`` /
``mismatchLabelKeys`` folded in, and the ``topologyKey``.

The parsed terms of a pod never change, so they are memoized on its
:class:`~scheduler.core.podinfo.PodInfo`; existing pods are parsed once for
their whole life in the cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.core.podinfo import PodInfo
from scheduler.plugins.labelrequirements import SelectorError
from scheduler.plugins.labelselector import EVERYTHING, NOTHING, LabelSelector, compile_label_selector

NAME = "InterPodAffinity"
_NO_LABELS: Mapping[str, str] = {}


def selector_key(sel: LabelSelector) -> Any:
    """A hashable identity of a compiled selector."""
    if sel is NOTHING:
        return None
    if sel is EVERYTHING:
        return "*"
    return sel.reqs


class AffinityTerm:
    """One processed pod affinity term (``framework.AffinityTerm``), with its weight if preferred."""

    __slots__ = ("namespaces", "ns_selector", "selector", "topology_key", "weight", "key")

    def __init__(
        self,
        namespaces: frozenset[str],
        ns_selector: LabelSelector,
        selector: LabelSelector,
        topology_key: str,
        weight: int = 0,
    ) -> None:
        self.namespaces = namespaces
        self.ns_selector = ns_selector
        self.selector = selector
        self.topology_key = topology_key
        self.weight = weight
        self.key = (topology_key, weight, namespaces, selector_key(ns_selector), selector_key(selector))
        """Hashable identity: two terms with equal keys match exactly the same pods."""

    def matches(self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str] | None) -> bool:
        """The pod (its namespace, its labels, its namespace's labels) is selected by this term."""
        if namespace in self.namespaces or (
            self.ns_selector is not NOTHING and self.ns_selector.matches(ns_labels or _NO_LABELS)
        ):
            return self.selector.matches(labels)
        return False

    def with_namespaces(self, names: Iterable[str]) -> AffinityTerm:
        """The term with ``names`` added and its namespace selector resolved away."""
        return AffinityTerm(
            self.namespaces | frozenset(names), NOTHING, self.selector, self.topology_key, self.weight
        )

    def __repr__(self) -> str:
        return (
            f"AffinityTerm({self.topology_key!r}, ns={sorted(self.namespaces)}, "
            f"nsSelector={self.ns_selector!r}, selector={self.selector!r}, weight={self.weight})"
        )


@dataclass(frozen=True, slots=True)
class PodTerms:
    required_affinity: tuple[AffinityTerm, ...]
    required_anti_affinity: tuple[AffinityTerm, ...]
    preferred_affinity: tuple[AffinityTerm, ...]
    preferred_anti_affinity: tuple[AffinityTerm, ...]
    errors: tuple[str, ...]
    """Why a selector of the pod could not be parsed (such a selector matches nothing)."""

    @property
    def has_required(self) -> bool:
        return bool(self.required_affinity or self.required_anti_affinity)

    @property
    def has_preferred(self) -> bool:
        return bool(self.preferred_affinity or self.preferred_anti_affinity)


def _label_selector(term: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any] | None:
    """``labelSelector`` with ``matchLabelKeys``/``mismatchLabelKeys`` merged in.

    As the API server does at admission (KEP-3633): each listed key the pod
    carries adds ``key In (value)`` (``NotIn`` for mismatch); a term without a
    ``labelSelector`` is left alone. Merging again a selector the API server
    already merged adds requirements it already has, so it is harmless.
    """
    selector = term.get("labelSelector")
    match_keys = term.get("matchLabelKeys") or ()
    mismatch_keys = term.get("mismatchLabelKeys") or ()
    if selector is None or not (match_keys or mismatch_keys):
        return selector
    exprs = list(selector.get("matchExpressions") or ())
    for keys, op in ((match_keys, "In"), (mismatch_keys, "NotIn")):
        for k in keys:
            if k in labels:
                exprs.append({"key": k, "operator": op, "values": [labels[k]]})
    return {**selector, "matchExpressions": exprs}


def _parse(
    pod: PodInfo, raw: Iterable[Mapping[str, Any]], weighted: bool, what: str, errors: list[str]
) -> tuple[AffinityTerm, ...]:
    out = []
    for i, item in enumerate(raw):
        weight = 0
        term = item
        if weighted:
            weight = int(item.get("weight") or 0)
            term = item.get("podAffinityTerm") or {}
        try:
            selector = compile_label_selector(_label_selector(term, pod.labels), strict=True)
        except SelectorError as e:
            errors.append(f"{what}[{i}]: {e}")
            selector = NOTHING
        ns_raw = term.get("namespaceSelector")
        try:
            ns_selector = compile_label_selector(ns_raw, strict=True)
        except SelectorError as e:
            errors.append(f"{what}[{i}].namespaceSelector: {e}")
            ns_selector = NOTHING
        names = term.get("namespaces") or ()
        namespaces = frozenset(names) if names or ns_raw is not None else frozenset((pod.namespace,))
        out.append(AffinityTerm(namespaces, ns_selector, selector, term.get("topologyKey") or "", weight))
    return tuple(out)


_EMPTY = PodTerms((), (), (), (), ())


def pod_terms(pod: PodInfo) -> PodTerms:
    """The parsed (anti-)affinity terms of ``pod``, memoized on it."""
    terms = pod.memo.get(NAME)
    if terms is not None:
        return terms
    if not pod.has_affinity:
        terms = _EMPTY
    else:
        affinity = pod.spec.get("affinity") or {}
        pa = affinity.get("podAffinity") or {}
        paa = affinity.get("podAntiAffinity") or {}
        errors: list[str] = []
        req = "requiredDuringSchedulingIgnoredDuringExecution"
        pref = "preferredDuringSchedulingIgnoredDuringExecution"
        terms = PodTerms(
            _parse(pod, pa.get(req) or (), False, "requiredAffinityTerms", errors),
            _parse(pod, paa.get(req) or (), False, "requiredAntiAffinityTerms", errors),
            _parse(pod, pa.get(pref) or (), True, "preferredAffinityTerms", errors),
            _parse(pod, paa.get(pref) or (), True, "preferredAntiAffinityTerms", errors),
            tuple(errors),
        )
    pod.memo[NAME] = terms
    return terms


def resolve_namespace_selectors(
    terms: tuple[AffinityTerm, ...], namespaces: Iterable[dict[str, Any]]
) -> tuple[AffinityTerm, ...]:
    """The incoming pod's terms with each namespace selector replaced by the namespaces it selects.

    kube-scheduler does this once per cycle (``mergeAffinityTermNamespacesIfNotEmpty``)
    so that the existing pods need not have their namespace's labels looked up.
    A ``{}`` selector (every namespace) is kept as it is.
    """
    if all(t.ns_selector is NOTHING or t.ns_selector is EVERYTHING for t in terms):
        return terms
    ns_list = list(namespaces)
    out = []
    for t in terms:
        sel = t.ns_selector
        if sel is NOTHING or sel is EVERYTHING:
            out.append(t)
            continue
        names = [
            ns["metadata"]["name"]
            for ns in ns_list
            if sel.matches(ns["metadata"].get("labels") or _NO_LABELS)
        ]
        out.append(t.with_namespaces(names))
    return tuple(out)


def matches_all(terms: tuple[AffinityTerm, ...], namespace: str, labels: Mapping[str, str]) -> bool:
    """``podMatchesAllAffinityTerms`` for resolved terms: non-empty, and every term selects the pod."""
    return bool(terms) and all(t.matches(namespace, labels, None) for t in terms)
