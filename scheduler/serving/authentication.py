"""Who is asking: delegated authentication of the secure port's requests, as kube-scheduler's.

kube-scheduler authenticates with k8s.io/apiserver's delegating authenticator
(``DelegatingAuthenticatorConfig.New``); this is the same chain:

1. **Request headers** (a front proxy): a client certificate signed by the
   request-header CA, with a common name among the allowed names (any, when
   none are listed), vouches for the user in the username, UID, group and
   extra headers. Without a username header the next authenticator is asked.
2. **Client certificate**: one signed by the client CA is the user of its
   common name, in the groups of its organizations.
3. **Bearer token**: ``Authorization: Bearer <token>`` is sent to the API
   server as a TokenReview; answers are cached for ``cache_ttl`` (10 s),
   the rejections too, as upstream's cached token authenticator does.
4. **Anonymous**: a request that presents no credentials at all is
   ``system:anonymous`` in ``system:unauthenticated``.

As upstream's union authenticator, the first that recognizes the request
wins; credentials that are presented and rejected (a token the API server
does not know, a certificate no CA signed) end in 401 unless another
authenticator accepts the request: a bad token never becomes anonymous.
Every authenticated user but ``system:anonymous`` is also in
``system:authenticated`` (upstream's ``AuthenticatedGroupAdder``).

Certificates are checked here against each CA on its own
(``cryptography``'s client verifier), after the TLS layer, which loads both
CAs, asked for the certificate and checked it against their union. One
difference from Go: the TLS layer of Python's ``ssl`` refuses a certificate
that neither CA signed in the handshake, so such a client sees a TLS alert,
not a 401. A chain is checked from the leaf (Python 3.11 does not expose the
intermediates a client sends), so client certificates must be signed by the
CA itself, as kubeadm's are.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import (
    Criticality,
    ExtensionPolicy,
    PolicyBuilder,
    Store,
    VerificationError,
)

from scheduler.logs import V, kv
from scheduler.serving.reviewcache import ReviewCache

logger = logging.getLogger(__name__)

ANONYMOUS_USER = "system:anonymous"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
AUTHENTICATED_GROUP = "system:authenticated"


@dataclass(frozen=True)
class UserInfo:
    """An authenticated user, as TokenReview and SubjectAccessReview spell it."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(key, values) pairs, sorted by key."""


ANONYMOUS = UserInfo(ANONYMOUS_USER, groups=(UNAUTHENTICATED_GROUP,))


class AuthenticationError(Exception):
    """The request presented credentials that were rejected, or could not be checked: 401."""


@dataclass(frozen=True)
class Credentials:
    """What a request presents: its headers (lower-case names) and the client certificate."""

    headers: Mapping[str, Sequence[str]]
    """Header name (lower case) -> values, in the order received."""
    peer_certificate: bytes | None = None
    """DER of the client's certificate, when it sent one."""

    def header(self, name: str) -> str | None:
        values = self.headers.get(name.lower())
        return values[0] if values else None


# --- certificates -------------------------------------------------------------------------------


def load_ca_bundle(pem: bytes) -> list[x509.Certificate]:
    """The certificates of a PEM bundle; ValueError when there is none."""
    return x509.load_pem_x509_certificates(pem)


_CA_POLICY = ExtensionPolicy.permit_all().require_present(
    x509.BasicConstraints, Criticality.AGNOSTIC, None
)  # a CA must say it is one; nothing else is required


def verify_client_certificate(der: bytes, cas: Sequence[x509.Certificate]) -> x509.Certificate:
    """The client certificate, if one of ``cas`` signed it for client authentication.

    Raises :class:`AuthenticationError` with the reason otherwise (expired, unknown authority,
    not for client authentication)."""
    try:
        cert = x509.load_der_x509_certificate(der)
    except ValueError as e:
        raise AuthenticationError(f"unreadable client certificate: {e}") from None
    if not cas:
        raise AuthenticationError("no client CA")
    # Go's x509.Verify checks signatures, validity and key usage, not the Web PKI's profile
    # (cryptography's default would refuse a certificate without an authority key identifier,
    # which Go-made and many self-made client certificates lack): permit any extension, and
    # check the extended key usage as Go does.
    verifier = (
        PolicyBuilder()
        .store(Store(list(cas)))
        .time(datetime.datetime.now(datetime.UTC))
        .extension_policies(ca_policy=_CA_POLICY, ee_policy=ExtensionPolicy.permit_all())
        .build_client_verifier()
    )
    try:
        verifier.verify(cert, [])
    except VerificationError as e:
        raise AuthenticationError(f"x509: {e}") from None
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return cert  # no extended key usage: any usage, as Go reads it
    if (
        ExtendedKeyUsageOID.CLIENT_AUTH not in usages
        and ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in usages
    ):
        raise AuthenticationError("x509: certificate specifies an incompatible key usage")
    return cert


def _common_name(cert: x509.Certificate) -> str:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""


class ClientCertAuthenticator:
    """A client certificate signed by the client CA is the user of its CN, in its O groups
    (k8s.io/apiserver's ``x509.CommonNameUserConversion``)."""

    def __init__(self, cas: Callable[[], Sequence[x509.Certificate]]) -> None:
        self._cas = cas

    def authenticate(self, creds: Credentials) -> UserInfo | None:
        if creds.peer_certificate is None:
            return None
        cert = verify_client_certificate(creds.peer_certificate, self._cas())
        name = _common_name(cert)
        if not name:
            raise AuthenticationError("x509: certificate has no common name")
        groups = tuple(str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
        return UserInfo(name, groups=groups)


@dataclass(frozen=True)
class RequestHeaderConfig:
    """Front-proxy authentication: whom to trust and which headers carry the user."""

    cas: tuple[x509.Certificate, ...]
    allowed_names: tuple[str, ...] = ()
    """Common names of proxies allowed to vouch; empty: any certificate the CA signed."""
    username_headers: tuple[str, ...] = ("x-remote-user",)
    uid_headers: tuple[str, ...] = ()
    group_headers: tuple[str, ...] = ("x-remote-group",)
    extra_headers_prefix: tuple[str, ...] = ("x-remote-extra-",)


class RequestHeaderAuthenticator:
    """k8s.io/apiserver's request-header authenticator behind its CN-checking verifier
    (``headerrequest.NewDynamicVerifyOptionsSecure``)."""

    def __init__(self, config: Callable[[], RequestHeaderConfig | None]) -> None:
        self._config = config

    def authenticate(self, creds: Credentials) -> UserInfo | None:
        cfg = self._config()
        if cfg is None or creds.peer_certificate is None:
            return None
        cert = verify_client_certificate(creds.peer_certificate, cfg.cas)
        if cfg.allowed_names and _common_name(cert) not in cfg.allowed_names:
            raise AuthenticationError(
                f"x509: subject with cn={_common_name(cert)} is not in the allowed list"
            )
        name = _first_value(creds, cfg.username_headers)
        if not name:
            return None
        uid = _first_value(creds, cfg.uid_headers) or ""
        groups = tuple(v for h in cfg.group_headers for v in creds.headers.get(h.lower(), ()))
        extra: dict[str, list[str]] = {}
        for prefix in cfg.extra_headers_prefix:
            p = prefix.lower()
            for header, values in creds.headers.items():
                if header.startswith(p) and len(header) > len(p):
                    # upstream lower-cases the key and unescapes its %-encoding
                    extra.setdefault(unquote(header[len(p) :]).lower(), []).extend(values)
        return UserInfo(
            name, uid=uid, groups=groups, extra=tuple(sorted((k, tuple(v)) for k, v in extra.items()))
        )


def _first_value(creds: Credentials, headers: Sequence[str]) -> str | None:
    for h in headers:
        v = creds.header(h)
        if v:
            return v
    return None


# --- tokens ------------------------------------------------------------------------------------


TokenReview = Callable[[str], UserInfo | None]
"""Asks the API server about a token: the user, None when it is not authenticated; raises when
the review itself failed (the answer is then not cached)."""


class TokenAuthenticator:
    """``Authorization: Bearer <token>`` checked by a TokenReview, answers cached for ``ttl``."""

    def __init__(
        self,
        review: TokenReview,
        ttl: float = 10.0,
        *,
        max_entries: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._review = review
        self._ttl = ttl
        self._cache: ReviewCache[bytes, UserInfo | None] = ReviewCache(max_entries=max_entries, clock=clock)

    @property
    def reviews(self) -> int:
        """TokenReviews sent (the cache's misses)."""
        return self._cache.misses

    def authenticate(self, creds: Credentials) -> UserInfo | None:
        auth = (creds.header("authorization") or "").strip()
        scheme, _, token = auth.partition(" ")
        token = token.strip()
        # upstream's bearertoken authenticator: another scheme, or an empty token, is no token
        if scheme.lower() != "bearer" or not token:
            return None
        user = self._lookup(token)
        if user is None:
            raise AuthenticationError("invalid bearer token")
        return user

    def _lookup(self, token: str) -> UserInfo | None:
        key = hashlib.sha256(token.encode()).digest()  # the cache never holds a token
        hit, user = self._cache.get(key)
        if hit:
            return user
        try:
            user = self._review(token)
        except Exception as e:
            logger.log(V(2), "TokenReview failed", extra=kv(err=str(e)))
            raise AuthenticationError(f"token review failed: {e}") from None
        self._cache.put(key, user, self._ttl)
        return user


# --- the chain ---------------------------------------------------------------------------------


@dataclass
class DelegatingAuthenticator:
    """Request headers, client certificate, bearer token, then anonymous (see the module docstring)."""

    request_header: RequestHeaderAuthenticator | None = None
    client_cert: ClientCertAuthenticator | None = None
    token: TokenAuthenticator | None = None
    anonymous: bool = True
    warnings: list[str] = field(default_factory=list)
    """What will not work, for the start-up log (e.g. no kubeconfig to review tokens with)."""

    def authenticate(self, creds: Credentials) -> UserInfo:
        """The user; raises :class:`AuthenticationError` (401)."""
        errors: list[str] = []
        for a in (self.request_header, self.client_cert, self.token):
            if a is None:
                continue
            try:
                user = a.authenticate(creds)
            except AuthenticationError as e:
                errors.append(str(e))
                continue
            if user is not None:
                return _with_authenticated_group(user)
        if errors:
            raise AuthenticationError("; ".join(errors))
        if not self.anonymous:
            raise AuthenticationError("no credentials")
        return ANONYMOUS


def _with_authenticated_group(user: UserInfo) -> UserInfo:
    if user.name == ANONYMOUS_USER or AUTHENTICATED_GROUP in user.groups:
        return user
    return UserInfo(user.name, user.uid, (*user.groups, AUTHENTICATED_GROUP), user.extra)
