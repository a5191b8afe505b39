"""A pod's ResourceClaims, found as kube-scheduler finds them, and the claims' state in this scheduler.

* :func:`pod_claims` reads ``spec.resourceClaims``: a claim named directly
  (``resourceClaimName``), or one the resourceclaim controller created from a
  template, found through ``status.resourceClaimStatuses`` and owned by the pod
  (``resourceclaim.Name``, ``resourceclaim.IsForPod``).
* :class:`Assumed` holds the allocations made at Reserve and not yet seen in the
  informer: their devices count as in use for the next pods' cycles, as the
  assume cache of kube-scheduler's plugin (``claimTracker``/``inFlightAllocations``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.core.podinfo import PodInfo
from scheduler.plugins.dynamicresources.allocator import Held, allocated

Obj = Mapping[str, Any]


class ClaimMissingError(Exception):
    """A claim the pod names does not exist (yet) or is not the pod's: the pod waits."""


@dataclass(frozen=True, slots=True)
class PodClaim:
    pod_claim: str
    """The entry's name in ``spec.resourceClaims``."""
    claim: str
    """The ResourceClaim's name."""
    from_template: bool


def pod_claims(pod: PodInfo) -> list[PodClaim]:
    """The claims the pod needs; ClaimMissingError for one whose name is not known yet.

    A template's entry with a status but no claim name needs no claim (the
    controller decided none is needed) and is left out."""
    out = []
    statuses = {s.get("name"): s for s in (pod.pod.get("status") or {}).get("resourceClaimStatuses") or ()}
    for entry in pod.spec.get("resourceClaims") or ():
        name = entry.get("name", "")
        if entry.get("resourceClaimName"):
            out.append(PodClaim(name, entry["resourceClaimName"], False))
        elif entry.get("resourceClaimTemplateName"):
            status = statuses.get(name)
            if status is None:
                raise ClaimMissingError(f'pod "{pod.key}": ResourceClaim not created yet')
            if status.get("resourceClaimName"):
                out.append(PodClaim(name, status["resourceClaimName"], True))
    return out


def owned_by(claim: Obj, pod: PodInfo) -> bool:
    """The claim's controller is the pod (a claim from a template must be)."""
    for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("uid") == pod.uid:
            return True
    return False


def allocation(claim: Obj) -> Obj | None:
    return (claim.get("status") or {}).get("allocation")


class Assumed:
    """Allocations decided here and not yet in the informer's copy of their claims.

    Keyed by the claim's UID; an entry goes when the informer shows the claim
    allocated (or gone), or when the pod's binding fails (Unreserve). The claim
    for a pod's extended resources is not written until PreBind: its entry is
    kept under a temporary UID until then (:meth:`rename`), gone or not."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, Held] = {}
        """Claim UID -> what its allocation holds."""
        self._unwritten: set[str] = set()

    def add(self, uid: str, held: Held, unwritten: bool = False) -> None:
        with self._lock:
            self._entries[uid] = held
            if unwritten:
                self._unwritten.add(uid)

    def rename(self, uid: str, new_uid: str) -> None:
        """The unwritten claim ``uid`` now exists as ``new_uid``."""
        with self._lock:
            held = self._entries.pop(uid, None)
            self._unwritten.discard(uid)
            if held is not None:
                self._entries[new_uid] = held

    def drop(self, uid: str) -> None:
        with self._lock:
            self._entries.pop(uid, None)
            self._unwritten.discard(uid)

    def holds(self, uid: str) -> bool:
        """The claim's allocation is being made here (kube-scheduler's pending allocation)."""
        with self._lock:
            return uid in self._entries

    def in_use(self, claims: Iterable[Obj]) -> Held:
        """What the allocated claims and the assumed allocations hold; an assumed one the
        informer now shows allocated (or whose written claim is gone) is forgotten."""
        claims = list(claims)
        used = allocated(claims)
        with self._lock:
            if not self._entries:
                return used
            present = {}
            for c in claims:
                uid = (c.get("metadata") or {}).get("uid")
                if uid in self._entries:
                    present[uid] = c
            for uid in list(self._entries):
                kept = present.get(uid)
                if (kept is None and uid not in self._unwritten) or (kept is not None and allocation(kept)):
                    del self._entries[uid]
                else:
                    used.add(self._entries[uid])
        return used
