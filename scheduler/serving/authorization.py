"""May they: delegated authorization of the secure port's requests, as kube-scheduler's.

kube-scheduler's authorizer is k8s.io/apiserver's
``DelegatingAuthorizationOptions.toAuthorizer``, a union asked in order; the
first that allows or denies decides:

1. members of ``system:masters`` are allowed everything (``AlwaysAllowGroups``);
2. ``--authorization-always-allow-paths`` (default ``/healthz,/readyz,/livez``)
   are allowed to anyone, anonymous included: exact paths, or prefixes ending
   in ``*`` (``path.NewAuthorizer``);
3. a SubjectAccessReview of the non-resource request (the path and the
   lower-cased HTTP method as the verb, e.g. ``get /metrics``) asks the API
   server; allowed answers are cached ``allow_ttl`` and the others
   ``deny_ttl`` (10 s each).

No opinion from any of them is a 403; a review that failed is a 500, as
upstream's ``WithAuthorization`` answers.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from scheduler.config.decode import describe
from scheduler.logs import V, kv
from scheduler.serving.authentication import UserInfo
from scheduler.serving.reviewcache import ReviewCache

logger = logging.getLogger(__name__)

DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
ALWAYS_ALLOW_GROUPS = ("system:masters",)


class Decision(Enum):
    ALLOW = "allow"
    DENY = "deny"
    NO_OPINION = "no-opinion"


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    reason: str = ""


class AuthorizationError(Exception):
    """The decision could not be made (the review failed): 500."""


class AlwaysAllowPaths:
    """Paths anyone may ask for; ``ValueError`` for a ``*`` anywhere but at the end."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.exact: set[str] = set()
        self.prefixes: list[str] = []
        for path in paths:
            p = path.removeprefix("/")
            if p and "*" in p[:-1]:
                raise ValueError(f"only a trailing * is allowed, got {describe(path)}")
            if p.endswith("*"):
                self.prefixes.append(p[:-1])
            else:
                self.exact.add(p)

    def __call__(self, user: UserInfo, verb: str, path: str) -> Verdict:
        p = path.removeprefix("/")
        if p in self.exact or any(p.startswith(prefix) for prefix in self.prefixes):
            return Verdict(Decision.ALLOW)
        return Verdict(Decision.NO_OPINION)


def privileged_groups(groups: Sequence[str]) -> Callable[[UserInfo, str, str], Verdict]:
    wanted = frozenset(groups)

    def authorize(user: UserInfo, verb: str, path: str) -> Verdict:
        return Verdict(Decision.ALLOW if wanted.intersection(user.groups) else Decision.NO_OPINION)

    return authorize


SubjectAccessReview = Callable[[UserInfo, str, str], Verdict]
"""Asks the API server whether ``user`` may ``verb`` the non-resource ``path``; raises when the
review itself failed (the answer is then not cached)."""


class WebhookAuthorizer:
    """SubjectAccessReviews, answers cached (upstream's webhook authorizer and its cache)."""

    def __init__(
        self,
        review: SubjectAccessReview,
        allow_ttl: float = 10.0,
        deny_ttl: float = 10.0,
        *,
        max_entries: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._review = review
        self._allow_ttl, self._deny_ttl = allow_ttl, deny_ttl
        self._cache: ReviewCache[tuple[UserInfo, str, str], Verdict] = ReviewCache(
            max_entries=max_entries, clock=clock
        )

    @property
    def reviews(self) -> int:
        """SubjectAccessReviews sent (the cache's misses)."""
        return self._cache.misses

    def __call__(self, user: UserInfo, verb: str, path: str) -> Verdict:
        key = (user, verb, path)
        hit, cached = self._cache.get(key)
        if hit and cached is not None:
            return cached
        try:
            verdict = self._review(user, verb, path)
        except Exception as e:
            logger.log(V(2), "SubjectAccessReview failed", extra=kv(user=user.name, path=path, err=str(e)))
            raise AuthorizationError(str(e)) from None
        self._cache.put(
            key, verdict, self._allow_ttl if verdict.decision is Decision.ALLOW else self._deny_ttl
        )
        return verdict


class UnionAuthorizer:
    """The first allow or deny decides; otherwise no opinion, with every reason given."""

    def __init__(self, authorizers: Sequence[Callable[[UserInfo, str, str], Verdict]]) -> None:
        self.authorizers = list(authorizers)

    def __call__(self, user: UserInfo, verb: str, path: str) -> Verdict:
        reasons: list[str] = []
        errors: list[str] = []
        for a in self.authorizers:
            try:
                verdict = a(user, verb, path)
            except AuthorizationError as e:
                errors.append(str(e))
                continue
            if verdict.decision is not Decision.NO_OPINION:
                return verdict
            if verdict.reason:
                reasons.append(verdict.reason)
        if errors:
            raise AuthorizationError("; ".join(errors))
        return Verdict(Decision.NO_OPINION, "\n".join(reasons))


def forbidden_message(user: UserInfo, verb: str, path: str, reason: str) -> str:
    """``forbidden: User "system:anonymous" cannot get path "/metrics"`` (and ``: <reason>``),
    upstream's ``responsewriters.ForbiddenStatusError`` for a non-resource request."""
    msg = f"forbidden: User {json.dumps(user.name)} cannot {verb} path {json.dumps(path)}"
    return f"{msg}: {reason}" if reason else msg
