"""PersistentVolume(Claim) rules VolumeBinding decides with, on the raw API dicts.

The same rules as kube's ``component-helpers/storage/volume`` (``pv_helpers.go``)
and the scheduler's ``volumebinding/binder.go``: which claims are bound, which
class they are in, whether a PV may be bound to a claim on a given node, and
whether a StorageClass can provision for a node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from scheduler.core.resources import QuantityError, int_value
from scheduler.plugins.labelselector import compile_label_selector
from scheduler.plugins.noderesources.scoring import broken_linear
from scheduler.plugins.nodeselector import NodeSelector, compile_node_selector_terms

ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"

Obj = dict[str, Any]


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return meta(obj).get("annotations") or {}


def spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def key(obj: Mapping[str, Any]) -> str:
    """The store key: ``namespace/name``, or ``name`` for cluster-scoped objects."""
    m = meta(obj)
    return f"{m['namespace']}/{m['name']}" if m.get("namespace") else m["name"]


def claim_class(pvc: Mapping[str, Any]) -> str:
    """``GetPersistentVolumeClaimClass``: the beta annotation first, then ``spec.storageClassName``."""
    ann = annotations_of(pvc)
    if ANN_BETA_STORAGE_CLASS in ann:
        return ann[ANN_BETA_STORAGE_CLASS]
    return spec(pvc).get("storageClassName") or ""


def volume_class(pv: Mapping[str, Any]) -> str:
    """``GetPersistentVolumeClass``."""
    ann = annotations_of(pv)
    if ANN_BETA_STORAGE_CLASS in ann:
        return ann[ANN_BETA_STORAGE_CLASS]
    return spec(pv).get("storageClassName") or ""


def fully_bound(pvc: Mapping[str, Any]) -> bool:
    """The PV controller finished binding: a volume name and the bind-completed annotation."""
    return bool(spec(pvc).get("volumeName")) and ANN_BIND_COMPLETED in annotations_of(pvc)


def _bytes(resources: Mapping[str, Any] | None) -> int:
    return quantity_bytes((resources or {}).get("storage"))


def quantity_bytes(value: Any) -> int:
    """A quantity's bytes; 0 for none or a malformed one."""
    if value is None:
        return 0
    try:
        return int_value(value)
    except QuantityError:
        return 0


def requested_bytes(pvc: Mapping[str, Any]) -> int:
    return _bytes((spec(pvc).get("resources") or {}).get("requests"))


def capacity_bytes(pv: Mapping[str, Any]) -> int:
    return _bytes(spec(pv).get("capacity"))


def bound_to_claim(pv: Mapping[str, Any], pvc: Mapping[str, Any]) -> bool:
    """``IsVolumeBoundToClaim``: the PV's claimRef names the claim (and its UID, if set)."""
    ref = spec(pv).get("claimRef")
    if not ref:
        return False
    m = meta(pvc)
    if ref.get("name") != m.get("name") or (ref.get("namespace") or "") != (m.get("namespace") or ""):
        return False
    return not ref.get("uid") or ref.get("uid") == m.get("uid")


def node_affinity(pv: Mapping[str, Any]) -> NodeSelector | None:
    """The PV's compiled required node affinity; None when it has none (every node fits)."""
    required = (spec(pv).get("nodeAffinity") or {}).get("required")
    if required is None:
        return None
    return compile_node_selector_terms(required.get("nodeSelectorTerms"))


def node_affinity_matches(pv: Mapping[str, Any], labels: Mapping[str, str], node_name: str) -> bool:
    """``CheckNodeAffinity``: the PV's required node affinity (if any) selects the node.

    kube-scheduler matches on the labels only; the node name is passed too, so
    a ``matchFields: metadata.name`` term selects the node it names.
    """
    selector = node_affinity(pv)
    return selector is None or selector.matches(labels, node_name)


def access_modes_fit(pvc: Mapping[str, Any], pv: Mapping[str, Any]) -> bool:
    """``CheckAccessModes``: the PV offers every access mode the claim asks for."""
    offered = set(spec(pv).get("accessModes") or ())
    return all(m in offered for m in spec(pvc).get("accessModes") or ())


def _volume_mode(obj: Mapping[str, Any]) -> str:
    return spec(obj).get("volumeMode") or "Filesystem"


def find_matching_volume(
    pvc: Mapping[str, Any],
    volumes: Iterable[Obj],
    fits_node: Callable[[Mapping[str, Any]], bool],
    excluded: set[str],
) -> Obj | None:
    """``FindMatchingVolume`` on the scheduler path: the PV pre-bound to the claim if it suits
    the node, else the smallest available PV of the claim's class that fits it on this node.

    ``fits_node(pv)`` says whether the PV's node affinity admits the node.
    """
    requested = requested_bytes(pvc)
    klass = claim_class(pvc)
    selector_raw = spec(pvc).get("selector")
    selector = compile_label_selector(selector_raw) if selector_raw is not None else None
    vac = spec(pvc).get("volumeAttributesClassName") or ""
    smallest: Obj | None = None
    smallest_bytes = 0
    for pv in volumes:
        m = meta(pv)
        if m.get("name") in excluded:
            continue
        pv_spec = spec(pv)
        prebound = bound_to_claim(pv, pvc)
        if pv_spec.get("claimRef") and not prebound:
            continue
        size = capacity_bytes(pv)
        if size < requested or _volume_mode(pv) != _volume_mode(pvc) or m.get("deletionTimestamp"):
            continue
        affinity_ok = fits_node(pv)
        if prebound:
            return pv if affinity_ok else None
        if (pv.get("status") or {}).get("phase") != "Available":
            continue
        if selector is not None and not selector.matches(m.get("labels") or {}):
            continue
        if volume_class(pv) != klass or (pv_spec.get("volumeAttributesClassName") or "") != vac:
            continue
        if not affinity_ok or not access_modes_fit(pvc, pv):
            continue
        if smallest is None or size < smallest_bytes:
            smallest, smallest_bytes = pv, size
    return smallest


def topology_allows(
    allowed_topologies: Iterable[Mapping[str, Any]] | None, labels: Mapping[str, str]
) -> bool:
    """``MatchTopologySelectorTerms``: no terms allow every node; terms are ORed, a term's
    ``matchLabelExpressions`` ANDed (the label present, with one of the values)."""
    terms = list(allowed_topologies or ())
    if not terms:
        return True
    for term in terms:
        exprs = term.get("matchLabelExpressions") or ()
        if not exprs:
            continue  # an empty term selects nothing
        if all(e.get("values") and labels.get(e.get("key", "")) in e["values"] for e in exprs):
            return True
    return False


def can_provision(klass: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """The class has a provisioner and its ``allowedTopologies`` admit the node."""
    provisioner = klass.get("provisioner") or ""
    if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
        return False
    return topology_allows(klass.get("allowedTopologies"), labels)


def enough_capacity(
    pvc: Mapping[str, Any], capacities: Iterable[Obj], labels: Mapping[str, str]
) -> tuple[bool, Obj | None]:
    """``hasEnoughCapacity``: (whether there is room for the claim on the node, the
    CSIStorageCapacity that has it). A claim without a storage request needs none; otherwise
    the first CSIStorageCapacity (of the claim's class, given here) whose ``nodeTopology``
    selects the node (none: unavailable) that offers at least the request, by its
    ``maximumVolumeSize`` where set (the more precise), else its ``capacity``."""
    requested = (spec(pvc).get("resources") or {}).get("requests") or {}
    if "storage" not in requested:
        return True, None
    size = requested_bytes(pvc)
    for capacity in capacities:
        limit = capacity.get("maximumVolumeSize")
        if limit is None:
            limit = capacity.get("capacity")
        if limit is None or quantity_bytes(limit) < size:
            continue
        if compile_label_selector(capacity.get("nodeTopology")).matches(labels):
            return True, capacity
    return False, None


def capacity_score(shape: Sequence[tuple[int, int]]) -> Callable[[Mapping[str, tuple[int, int]]], int]:
    """StorageCapacityScoring's node score (``buildScorerFunction``) over class -> (requested,
    capacity) bytes: per class, the utilization in percent through ``shape`` (points of 0..100
    utilization and score), 100 % where the capacity is 0 or too small; the mean over the
    classes, rounded half away from zero (Go's ``math.Round``); 0 without classes."""
    raw = broken_linear(shape)

    def score(classes: Mapping[str, tuple[int, int]]) -> int:
        if not classes:
            return 0
        total = 0
        for requested, capacity in classes.values():
            utilization = 100 if capacity == 0 or requested > capacity else requested * 100 // capacity
            total += raw(utilization)
        return math.floor(total / len(classes) + 0.5)

    return score


def claim_ref(pvc: Mapping[str, Any]) -> dict[str, Any]:
    """An ObjectReference to the claim, as ``reference.GetReference`` builds it."""
    m = meta(pvc)
    ref = {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": m.get("namespace"),
        "name": m.get("name"),
        "uid": m.get("uid"),
        "resourceVersion": m.get("resourceVersion"),
    }
    return {k: v for k, v in ref.items() if v}


def bind_volume_to_claim(pv: Obj, pvc: Mapping[str, Any]) -> Obj | None:
    """``GetBindVolumeToClaim``: the PV with its claimRef set to the claim (and
    ``bound-by-controller`` when it was not pre-bound), or None if nothing changes."""
    ref = spec(pv).get("claimRef") or {}
    m = meta(pvc)
    same = (
        ref.get("name") == m.get("name")
        and ref.get("namespace") == m.get("namespace")
        and ref.get("uid") == m.get("uid")
    )
    set_annotation = not bound_to_claim(pv, pvc) and ANN_BOUND_BY_CONTROLLER not in annotations_of(pv)
    if same and not set_annotation:
        return None
    new_meta = dict(meta(pv))
    if set_annotation:
        new_meta["annotations"] = {**annotations_of(pv), ANN_BOUND_BY_CONTROLLER: "yes"}
    return {**pv, "metadata": new_meta, "spec": {**spec(pv), "claimRef": claim_ref(pvc)}}


def with_selected_node(pvc: Mapping[str, Any], node_name: str) -> Obj:
    """The claim annotated for provisioning on ``node_name``."""
    new_meta = {**meta(pvc), "annotations": {**annotations_of(pvc), ANN_SELECTED_NODE: node_name}}
    return {**pvc, "metadata": new_meta}
