"""Matching rules shared by the plugins: label selectors, node selector terms, taints.

The semantics are those of the Kubernetes API machinery the scheduler uses
(``metav1.LabelSelector``, ``v1.NodeSelector``, ``v1.Toleration``), applied to
the raw API dicts. Matching a selector against many nodes is the hot path, so
each selector can be compiled once (:func:`compile_label_selector`,
:func:`compile_node_selector_terms`) and the compiled form reused; the
``match_*`` functions are one-shot conveniences over the same code.

Invalid selectors never raise from ``match_*``: as in kube-scheduler, an
invalid label selector or node selector term matches nothing. The
``compile_*`` functions raise :class:`SelectorError` when asked to be strict,
for callers that must report the problem (plugin arguments).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from functools import lru_cache
from typing import Any

__all__ = [
    "EVERYTHING",
    "NOTHING",
    "NO_SCHEDULE",
    "NO_EXECUTE",
    "PREFER_NO_SCHEDULE",
    "DO_NOT_SCHEDULE_EFFECTS",
    "METADATA_NAME",
    "LabelSelector",
    "NodeSelector",
    "PreferredTerms",
    "RequiredNodeAffinity",
    "SelectorError",
    "compile_label_selector",
    "compile_node_selector_terms",
    "compile_preferred_terms",
    "find_untolerated_taint",
    "match_label_selector",
    "match_node_selector_terms",
    "parse_int64",
    "required_node_affinity",
    "tolerates",
    "tolerates_everything",
    "tolerations_tolerate_taint",
    "valid_label_key",
    "valid_label_value",
]

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
DO_NOT_SCHEDULE_EFFECTS = frozenset((NO_SCHEDULE, NO_EXECUTE))
"""The effects the Filter plugins enforce (``helper.DoNotScheduleTaintsFilterFunc``)."""

METADATA_NAME = "metadata.name"


class SelectorError(ValueError):
    """A selector the API machinery would refuse to parse."""


# Requirement operators, compiled to small ints so matching is a few comparisons.
_IN, _NOT_IN, _EXISTS, _NOT_EXISTS, _GT, _LT = range(6)
_LABEL_OPS = {"In": _IN, "NotIn": _NOT_IN, "Exists": _EXISTS, "DoesNotExist": _NOT_EXISTS}
_NODE_OPS = {**_LABEL_OPS, "Gt": _GT, "Lt": _LT}

_INT64 = re.compile(r"[+-]?[0-9]+\Z")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_int64(text: Any) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: an int, or None when Go would fail."""
    if not isinstance(text, str) or not _INT64.match(text):
        return None
    v = int(text)
    return v if _INT64_MIN <= v <= _INT64_MAX else None


Requirement = tuple[int, str, Any]
"""(operator, key, argument): a frozenset of values for In/NotIn, an int for Gt/Lt."""


_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def valid_label_key(key: Any) -> bool:
    """``validation.IsQualifiedName``: ``[prefix/]name``, name of at most 63 characters."""
    if not isinstance(key, str):
        return False
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or "/" in prefix or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME.match(name))


def valid_label_value(value: Any) -> bool:
    """``validation.IsValidLabelValue``: empty, or at most 63 name characters."""
    return isinstance(value, str) and (value == "" or (len(value) <= 63 and bool(_NAME.match(value))))


def _requirement(key: str, op: int, values: list[Any], opname: str) -> Requirement:
    # labels.NewRequirement: the key and every value must be valid, and the
    # number of values must suit the operator.
    if not valid_label_key(key):
        raise SelectorError(f"invalid label key {key!r}")
    for v in values:
        if not valid_label_value(v):
            raise SelectorError(f"{key}: invalid label value {v!r}")
    if op in (_IN, _NOT_IN):
        if not values:
            raise SelectorError(f"{key}: for 'in', 'notin' operators, values set can't be empty")
        return (op, key, frozenset(values))
    if op in (_EXISTS, _NOT_EXISTS):
        if values:
            raise SelectorError(f"{key}: values set must be empty for exists and does not exist")
        return (op, key, None)
    if len(values) != 1:
        raise SelectorError(f"{key}: for '{opname}' operator, exactly one value is required")
    bound = parse_int64(values[0])
    if bound is None:
        raise SelectorError(f"{key}: for 'Gt', 'Lt' operators, the value must be an integer")
    return (op, key, bound)


# ---------------------------------------------------------------------------
# Matchers
#
# A compiled selector is one Python function, generated once per distinct
# selector and cached: ``lambda L, N: L.get(k0) in v0 and k1 not in L ...``
# over the node's labels ``L`` and name ``N``. Only generated identifiers
# appear in the source; keys and values are bound as constants, so nothing
# from the API object is ever evaluated. Matching a node is then one call and
# a few dict lookups, which matters: it runs for every node of every cycle.


def _gt(value: str | None, bound: int) -> bool:
    v = parse_int64(value)
    return v is not None and v > bound


def _lt(value: str | None, bound: int) -> bool:
    v = parse_int64(value)
    return v is not None and v < bound


class _Codegen:
    def __init__(self) -> None:
        self.ns: dict[str, Any] = {"_gt": _gt, "_lt": _lt}

    def const(self, value: Any) -> str:
        name = f"c{len(self.ns)}"
        self.ns[name] = value
        return name

    def requirements(self, reqs: tuple[Requirement, ...]) -> str:
        """All requirements hold (``labels.Requirement.Matches``, ANDed)."""
        parts = []
        for op, key, arg in reqs:
            k = self.const(key)
            if op == _IN:  # an absent label (None) is in no set
                parts.append(f"L.get({k}) in {self.const(arg)}")
            elif op == _NOT_IN:
                parts.append(f"L.get({k}) not in {self.const(arg)}")
            elif op == _EXISTS:
                parts.append(f"{k} in L")
            elif op == _NOT_EXISTS:
                parts.append(f"{k} not in L")
            else:  # Gt / Lt: the label must exist and parse as an integer
                parts.append(f"{'_gt' if op == _GT else '_lt'}(L.get({k}), {self.const(arg)})")
        return " and ".join(f"({p})" for p in parts) if parts else "True"

    def term(
        self, label_reqs: tuple[Requirement, ...] | None, field_reqs: tuple[tuple[bool, str, str], ...] | None
    ) -> str:
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
        return " and ".join(f"({p})" for p in parts) if parts else "True"

    def function(self, expr: str) -> Callable[..., Any]:
        return eval(f"lambda L, N='': {expr}", self.ns)  # noqa: S307 - generated source, see above


@lru_cache(maxsize=4096)
def _label_matcher(reqs: tuple[Requirement, ...]) -> Callable[..., bool]:
    g = _Codegen()
    return g.function(g.requirements(reqs))


TermReqs = tuple[tuple[Requirement, ...] | None, tuple[tuple[bool, str, str], ...] | None]


@lru_cache(maxsize=4096)
def _node_matcher(
    node_selector: tuple[tuple[str, str], ...], terms: tuple[TermReqs, ...] | None
) -> Callable[[Mapping[str, str], str], bool]:
    g = _Codegen()
    parts = [f"(L.get({g.const(k)}) == {g.const(v)})" for k, v in node_selector]
    if terms is not None:
        parts.append("(" + (" or ".join(f"({g.term(*t)})" for t in terms) or "False") + ")")
    return g.function(" and ".join(parts) or "True")


@lru_cache(maxsize=4096)
def _weight_matcher(terms: tuple[tuple[int, Any, Any], ...]) -> Callable[[Mapping[str, str], str], int]:
    g = _Codegen()
    return g.function(" + ".join(f"({w} if ({g.term(lr, fr)}) else 0)" for w, lr, fr in terms) or "0")


# ---------------------------------------------------------------------------
# metav1.LabelSelector


class LabelSelector:
    """A compiled ``metav1.LabelSelector``; ``matches(labels)`` is a generated function."""

    __slots__ = ("reqs", "matches")

    def __init__(self, reqs: tuple[Requirement, ...] | None) -> None:
        """``reqs`` None selects nothing; ``()`` everything."""
        self.reqs = reqs
        self.matches: Callable[[Mapping[str, str]], bool] = _nothing if reqs is None else _label_matcher(reqs)

    def __repr__(self) -> str:
        return f"LabelSelector({'<nothing>' if self.reqs is None else self.reqs or '<everything>'})"


def _nothing(labels: Mapping[str, str], name: str = "") -> bool:
    return False


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
        reqs: list[Requirement] = [_requirement(k, _IN, [v], "=") for k, v in match_labels.items()]
        for e in exprs:
            opname = e.get("operator")
            op = _LABEL_OPS.get(opname)
            if op is None:
                raise SelectorError(f"{opname!r} is not a valid label selector operator")
            reqs.append(_requirement(e.get("key", ""), op, list(e.get("values") or ()), opname))
    except SelectorError:
        if strict:
            raise
        return NOTHING
    return LabelSelector(tuple(reqs))


def match_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` match a ``metav1.LabelSelector`` (None matches nothing, {} everything)."""
    return compile_label_selector(selector).matches(labels)


# ---------------------------------------------------------------------------
# v1.NodeSelector


def _compile_term(term: Mapping[str, Any]) -> TermReqs:
    """A non-empty ``v1.NodeSelectorTerm`` as (label requirements, field requirements)."""
    label_reqs = None
    exprs = term.get("matchExpressions") or ()
    if exprs:
        reqs = []
        for e in exprs:
            opname = e.get("operator")
            op = _NODE_OPS.get(opname)
            if op is None:
                raise SelectorError(f"{opname!r} is not a valid node selector operator")
            reqs.append(_requirement(e.get("key", ""), op, list(e.get("values") or ()), opname))
        label_reqs = tuple(reqs)
    field_reqs = None
    fields = term.get("matchFields") or ()
    if fields:
        freqs = []
        for f in fields:
            opname = f.get("operator")
            values = f.get("values") or ()
            if opname not in ("In", "NotIn"):
                raise SelectorError(f"{opname!r} is not a valid node field selector operator")
            if len(values) != 1:
                raise SelectorError(
                    f"unexpected number of value ({len(values)}) for node field selector operator {opname!r}"
                )
            freqs.append((opname == "In", f.get("key", ""), values[0]))
        field_reqs = tuple(freqs)
    return label_reqs, field_reqs


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


def _is_empty_term(term: Mapping[str, Any] | None) -> bool:
    return not term or (not term.get("matchExpressions") and not term.get("matchFields"))


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
        if weight == 0 or _is_empty_term(pref):
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


# ---------------------------------------------------------------------------
# Taints and tolerations


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``v1.Toleration.ToleratesTaint``.

    An empty effect matches every effect and an empty key every key; ``Exists``
    matches any value, ``Equal`` (or no operator) the same value; ``Gt``/``Lt``
    compare the taint's value with the toleration's as integers.
    """
    effect = toleration.get("effect")
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key")
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    if op == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    if op in ("Gt", "Lt"):
        bound = parse_int64(toleration.get("value"))
        actual = parse_int64(taint.get("value"))
        if bound is None or actual is None:
            return False
        return actual > bound if op == "Gt" else actual < bound
    return False


def tolerations_tolerate_taint(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Some toleration tolerates ``taint``."""
    for t in tolerations:  # noqa: SIM110 - cheaper than any() over a generator
        if tolerates(t, taint):
            return True
    return False


def find_untolerated_taint(
    taints: Iterable[Mapping[str, Any]] | None,
    tolerations: Iterable[Mapping[str, Any]] | None,
    effects: Collection[str] | None = DO_NOT_SCHEDULE_EFFECTS,
) -> dict | None:
    """The first taint with one of ``effects`` (None: any) that no toleration tolerates."""
    tols = tuple(tolerations or ())
    for taint in taints or ():
        if effects is not None and taint.get("effect") not in effects:
            continue
        if not tolerations_tolerate_taint(tols, taint):
            return dict(taint)
    return None


def tolerates_everything(
    tolerations: Iterable[Mapping[str, Any]] | None, effects: Collection[str] | None = None
) -> bool:
    """Some toleration tolerates every taint (with one of ``effects``, when given).

    That is ``operator: Exists`` with no key, and no effect or (for a single
    ``effects`` value) that effect.
    """
    for t in tolerations or ():
        if t.get("key") or (t.get("operator") or "Equal") != "Exists":
            continue
        effect = t.get("effect")
        if not effect or (effects is not None and len(effects) == 1 and effect in effects):
            return True
    return False
