"""The secure port's authenticator and authorizer, built from the flags and the cluster.

As kube-scheduler (``DelegatingAuthenticationOptions.ApplyTo`` and
``DelegatingAuthorizationOptions.ApplyTo``, with kube-scheduler's settings:
the kubeconfigs are optional and a failed in-cluster lookup is tolerated):

- TokenReviews are sent with ``--authentication-kubeconfig``, else the
  in-cluster service account; outside a pod without the flag, tokens are not
  reviewed (a request with one is refused) and a warning says so.
- SubjectAccessReviews likewise with ``--authorization-kubeconfig``; without a
  client only the always-allowed paths and ``system:masters`` get through.
- The client CA is ``--client-ca-file``, else the ``client-ca-file`` of the
  ConfigMap ``kube-system/extension-apiserver-authentication`` (which
  kube-apiserver keeps), unless ``--authentication-skip-lookup``; the front
  proxy's CA and headers likewise (``--requestheader-*``, else the
  ConfigMap's ``requestheader-*`` keys).
- Files and the ConfigMap are read again every minute; a change rebuilds the
  TLS context for new connections (``on_change``), as upstream's dynamic CA
  controllers do.

The clients are the scheduler's own (``scheduler.cluster.client``) with
upstream's limits for delegation (200 QPS, burst 400), 10 s per review, and
the webhook's retries on errors worth retrying.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from kubernetes.client import ApiClient

from scheduler.cluster.client import ClientConfigError, ClientOptions, api_request, new_api_client
from scheduler.cluster.retry import call_with_retries
from scheduler.config.options import AuthenticationOptions, AuthorizationOptions
from scheduler.logs import V, kv
from scheduler.serving.authentication import (
    ClientCertAuthenticator,
    DelegatingAuthenticator,
    RequestHeaderAuthenticator,
    RequestHeaderConfig,
    TokenAuthenticator,
    UserInfo,
    load_ca_bundle,
)
from scheduler.serving.authorization import (
    ALWAYS_ALLOW_GROUPS,
    AlwaysAllowPaths,
    Decision,
    UnionAuthorizer,
    Verdict,
    WebhookAuthorizer,
    privileged_groups,
)
from scheduler.serving.tls import ServingError
from scheduler.settings import ServingSettings

logger = logging.getLogger(__name__)

CONFIGMAP_NAMESPACE, CONFIGMAP_NAME = "kube-system", "extension-apiserver-authentication"


def delegation_client(kubeconfig: str | None, what: str) -> ApiClient | None:
    """The client for ``what`` (authentication or authorization) reviews, or None when there
    is no kubeconfig and no in-cluster service account (``getClient``'s optional case)."""
    if kubeconfig is None and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None  # rest.ErrNotInCluster: quietly none
    try:
        return new_api_client(
            ClientOptions(kubeconfig=kubeconfig, qps=200, burst=400, user_agent_suffix=f"delegated-{what}")
        )
    except ClientConfigError as e:
        if kubeconfig is not None:
            raise ServingError(f"--{what}-kubeconfig: {e}") from None
        logger.warning(f"Failed to read the in-cluster kubeconfig for delegated {what}", extra=kv(err=str(e)))
        return None


def _post(api: ApiClient, path: str, body: dict[str, Any], what: str, timeout: float) -> dict[str, Any]:
    out = call_with_retries(
        lambda: api_request(api, "POST", path, body=body, timeout=timeout),
        what=what,
        attempts=5,
        max_seconds=timeout,
        initial_wait=0.5,
    )
    return out or {}


def token_review(api: ApiClient, timeout: float) -> Callable[[str], UserInfo | None]:
    def review(token: str) -> UserInfo | None:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        status = (
            _post(api, "/apis/authentication.k8s.io/v1/tokenreviews", body, "TokenReview", timeout).get(
                "status"
            )
            or {}
        )
        if not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        extra = user.get("extra") or {}
        return UserInfo(
            name=str(user.get("username", "")),
            uid=str(user.get("uid", "")),
            groups=tuple(str(g) for g in user.get("groups") or ()),
            extra=tuple(sorted((str(k), tuple(str(x) for x in v or ())) for k, v in extra.items())),
        )

    return review


def subject_access_review(api: ApiClient, timeout: float) -> Callable[[UserInfo, str, str], Verdict]:
    def review(user: UserInfo, verb: str, path: str) -> Verdict:
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        status = (
            _post(
                api,
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                body,
                "SubjectAccessReview",
                timeout,
            ).get("status")
            or {}
        )
        reason = str(status.get("reason", ""))
        if status.get("allowed"):
            return Verdict(Decision.ALLOW, reason)
        if status.get("denied"):
            return Verdict(Decision.DENY, reason)
        return Verdict(Decision.NO_OPINION, reason)

    return review


@dataclass(frozen=True)
class _Sources:
    """The CA bundles and proxy settings as last read."""

    client_ca: bytes = b""
    client_cas: tuple[x509.Certificate, ...] = ()
    """``client_ca`` parsed, once per read rather than per request."""
    request_header: RequestHeaderConfig | None = None
    request_header_ca: bytes = b""


def _read_file(path: str, flag: str) -> tuple[bytes, tuple[x509.Certificate, ...]]:
    """The PEM bundle of ``path`` and its certificates."""
    try:
        with open(path, "rb") as f:
            pem = f.read()
    except OSError as e:
        raise ServingError(f"{flag}: cannot read {path}: {e.strerror or e}") from None
    try:
        return pem, tuple(load_ca_bundle(pem))
    except ValueError:
        raise ServingError(f"{flag}: {path}: no PEM certificate found") from None


def _json_list(data: dict[str, str], key: str) -> tuple[str, ...]:
    raw = data.get(key)
    if not raw:
        return ()
    value = json.loads(raw)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key}: expected a JSON list of strings")
    return tuple(value)


@dataclass
class Delegation:
    """Authenticator, authorizer and the client CAs for the TLS layer (see the module docstring)."""

    authn: AuthenticationOptions
    authz: AuthorizationOptions
    authn_client: ApiClient | None = None
    authz_client: ApiClient | None = None
    on_change: Callable[[], None] | None = None
    """Called (from the refresh thread) after the client CAs changed."""
    settings: ServingSettings = field(default_factory=ServingSettings)
    """The reviews' timeout and how often the CAs are read again."""
    authenticator: DelegatingAuthenticator = field(init=False)
    authorizer: UnionAuthorizer = field(init=False)
    _sources: _Sources = field(init=False, default_factory=_Sources)
    _stop: threading.Event = field(init=False, default_factory=threading.Event)
    _thread: threading.Thread | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.authenticator = DelegatingAuthenticator(
            request_header=RequestHeaderAuthenticator(lambda: self._sources.request_header),
            client_cert=ClientCertAuthenticator(self._client_cas),
        )
        if self.authn_client is not None:
            self.authenticator.token = TokenAuthenticator(
                token_review(self.authn_client, self.settings.review_timeout), self.authn.cache_ttl
            )
        else:
            logger.warning(
                "No authentication-kubeconfig provided, so tokens cannot be reviewed: "
                "requests with a bearer token are refused, those without one are anonymous"
            )
        authorizers: list[Callable[[UserInfo, str, str], Verdict]] = [privileged_groups(ALWAYS_ALLOW_GROUPS)]
        try:
            if self.authz.always_allow_paths:
                authorizers.append(AlwaysAllowPaths(self.authz.always_allow_paths))
        except ValueError as e:
            raise ServingError(f"--authorization-always-allow-paths: {e}") from None
        if self.authz_client is not None:
            authorizers.append(
                WebhookAuthorizer(
                    subject_access_review(self.authz_client, self.settings.review_timeout),
                    self.authz.allow_cache_ttl,
                    self.authz.deny_cache_ttl,
                )
            )
        else:
            logger.warning(
                "No authorization-kubeconfig provided, so SubjectAccessReview of authorization tokens "
                "won't work: only the always-allowed paths and system:masters are served"
            )
        self.authorizer = UnionAuthorizer(authorizers)
        self._sources = self._read(initial=True)

    @classmethod
    def from_options(
        cls,
        authn: AuthenticationOptions,
        authz: AuthorizationOptions,
        settings: ServingSettings | None = None,
    ) -> Delegation:
        return cls(
            authn,
            authz,
            authn_client=delegation_client(authn.kubeconfig, "authentication"),
            authz_client=delegation_client(authz.kubeconfig, "authorization"),
            settings=settings or ServingSettings(),
        )

    # --- the CAs ----------------------------------------------------------------------------

    def _client_cas(self) -> tuple[x509.Certificate, ...]:
        return self._sources.client_cas

    def client_ca_bundle(self) -> bytes:
        """Every CA a client certificate may be signed by (client CA and front-proxy CA), PEM."""
        s = self._sources
        return b"\n".join(p.strip() for p in (s.client_ca, s.request_header_ca) if p) + (
            b"\n" if s.client_ca or s.request_header_ca else b""
        )

    def _read(self, *, initial: bool) -> _Sources:
        o = self.authn
        client_ca = b""
        client_cas: tuple[x509.Certificate, ...] = ()
        if o.client_ca_file:
            client_ca, client_cas = _read_file(o.client_ca_file, "--client-ca-file")
        header_ca = b""
        header: RequestHeaderConfig | None = None
        if o.requestheader_client_ca_file:
            header_ca, header_cas = _read_file(
                o.requestheader_client_ca_file, "--requestheader-client-ca-file"
            )
            header = RequestHeaderConfig(
                cas=header_cas,
                allowed_names=o.requestheader_allowed_names,
                username_headers=o.requestheader_username_headers,
                uid_headers=o.requestheader_uid_headers,
                group_headers=o.requestheader_group_headers,
                extra_headers_prefix=o.requestheader_extra_headers_prefix,
            )
        need_lookup = not o.skip_lookup and (not o.client_ca_file or not o.requestheader_client_ca_file)
        if need_lookup and self.authn_client is None:
            if initial:
                logger.warning(
                    "No authentication-kubeconfig provided in order to look up the client CAs in "
                    f"configmap/{CONFIGMAP_NAME} in {CONFIGMAP_NAMESPACE}, so client certificate "
                    "authentication won't work unless --client-ca-file is given"
                )
        elif need_lookup:
            try:
                data = self._configmap()
                if not o.client_ca_file:
                    client_ca = data.get("client-ca-file", "").encode()
                    client_cas = tuple(load_ca_bundle(client_ca)) if client_ca else ()
                if not o.requestheader_client_ca_file and data.get("requestheader-client-ca-file"):
                    header_ca = data["requestheader-client-ca-file"].encode()
                    header = RequestHeaderConfig(
                        cas=tuple(load_ca_bundle(header_ca)),
                        allowed_names=_json_list(data, "requestheader-allowed-names"),
                        username_headers=_json_list(data, "requestheader-username-headers"),
                        uid_headers=_json_list(data, "requestheader-uid-headers"),
                        group_headers=_json_list(data, "requestheader-group-headers"),
                        extra_headers_prefix=_json_list(data, "requestheader-extra-headers-prefix"),
                    )
            except Exception as e:
                where = f"configmap/{CONFIGMAP_NAME} in {CONFIGMAP_NAMESPACE}"
                if not initial:
                    logger.warning(
                        "Failed to refresh the client CAs; keeping the last ones", extra=kv(err=str(e))
                    )
                    return self._sources
                if not o.tolerate_lookup_failure:
                    raise ServingError(
                        f"unable to load the authentication configuration from {where}: {e}"
                    ) from None
                logger.warning(
                    "Error looking up in-cluster authentication configuration; continuing without it "
                    "(--authentication-tolerate-lookup-failure=false makes this fatal)",
                    extra=kv(configmap=f"{CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}", err=str(e)),
                )
        return _Sources(
            client_ca=client_ca, client_cas=client_cas, request_header=header, request_header_ca=header_ca
        )

    def _configmap(self) -> dict[str, str]:
        assert self.authn_client is not None
        cm = api_request(
            self.authn_client,
            "GET",
            f"/api/v1/namespaces/{CONFIGMAP_NAMESPACE}/configmaps/{CONFIGMAP_NAME}",
            timeout=self.settings.review_timeout,
        )
        return dict((cm or {}).get("data") or {})

    def refresh(self) -> bool:
        """Read the CA sources again; True (and ``on_change``) when the client CAs changed."""
        try:
            new = self._read(initial=False)
        except ServingError as e:
            logger.warning("Failed to refresh the client CAs; keeping the last ones", extra=kv(err=str(e)))
            return False
        old, self._sources = self._sources, new
        changed = (old.client_ca, old.request_header_ca) != (new.client_ca, new.request_header_ca)
        if changed:
            logger.info("Client CAs changed; new connections use them")
            if self.on_change is not None:
                self.on_change()
        elif old != new:
            logger.log(V(2), "Front-proxy settings changed")
        return changed

    def start(self) -> None:
        """Refresh every ``settings.ca_refresh`` seconds in a daemon thread, until :meth:`stop`."""
        if self._thread is not None:
            return

        def loop() -> None:
            while not self._stop.wait(self.settings.ca_refresh):
                self.refresh()

        self._thread = threading.Thread(target=loop, name="delegation-refresh", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
