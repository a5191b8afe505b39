"""The API client every part of the scheduler talks through.

:func:`new_api_client` builds a ``kubernetes.client.ApiClient`` the way
kube-scheduler builds its clientset:

- from ``--kubeconfig`` when given, else from the in-cluster service account
  only (kube-scheduler does not fall back to ``~/.kube/config`` either);
- client-side rate limiting, a token bucket of ``qps``/``burst`` (50/100 as
  kube-scheduler) shared by every request made through this client, watches
  included, as client-go's ``flowcontrol`` limiter;
- a connection pool large enough for concurrent binds;
- a ``User-Agent`` of ``dynamic-scheduler/<version> (<os>/<arch>) ...``;
- a default timeout on every request that does not set its own, and no silent
  retries of requests that may have reached the server (retries are the
  caller's decision: the binder retries, the informer relists), but one:
  libcurl sends a request again on a new connection when a kept-alive one
  died before any answer (the binder reads a 409 back for that reason);
- :func:`api_request` for every call but the watches: raw JSON (orjson) over
  libcurl (:mod:`scheduler.cluster.curl`); the watches stream through the
  client's urllib3 pool.

Build one client per concern when they must not starve each other: kube-scheduler
uses a separate client (and so a separate rate limiter) for leader election.
"""

from __future__ import annotations

import logging
import platform
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import kubernetes
import orjson
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from scheduler import __version__
from scheduler.cluster.curl import CurlPool, Timeout
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)


# What new_api_client leaves on the ApiClient for api_request: its limiter, its default
# timeout, and api_request's lookups (built at the first call).
_BUCKET = "_dynamic_scheduler_bucket"
_TIMEOUT = "_dynamic_scheduler_timeout"
_ROUTE = "_dynamic_scheduler_route"


class ClientConfigError(Exception):
    """No usable cluster configuration (bad kubeconfig, or not in a pod)."""


@dataclass
class ClientOptions:
    kubeconfig: str | None = None
    """Path of a kubeconfig. None means the in-cluster service account."""
    context: str | None = None
    """The kubeconfig context to use (its current-context when None)."""
    qps: float = 50.0
    """Sustained requests per second (kube-scheduler's default). 0 or less disables the limiter."""
    burst: int = 100
    """Requests allowed at once above ``qps`` (kube-scheduler's default)."""
    pool_maxsize: int = 32
    """Connections kept open to the API server: at least the number of concurrent binds
    plus the informers' watches, or requests queue for a connection."""
    timeout: tuple[float, float] = (5.0, 30.0)
    """(connect, read) seconds for requests that do not pass ``_request_timeout``."""
    user_agent_suffix: str = ""
    """Appended to the User-Agent after a ``/``, e.g. ``leader-election``."""


def user_agent(suffix: str = "") -> str:
    """``dynamic-scheduler/0.1.0 (linux/x86_64) kubernetes-python/36.0.3[/suffix]``."""
    ua = (
        f"dynamic-scheduler/{__version__} ({platform.system().lower()}/{platform.machine()}) "
        f"kubernetes-python/{kubernetes.__version__}"
    )
    return f"{ua}/{suffix}" if suffix else ua


class TokenBucket:
    """A thread-safe token bucket: ``qps`` tokens a second, at most ``burst`` saved up.

    Like golang.org/x/time/rate (client-go's limiter), a caller reserves a token
    under the lock, possibly going into debt, and then sleeps outside the lock
    until its reservation is due; so waiters are served in arrival order.
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if qps > 0 and burst < 1:
            raise ValueError("burst must be at least 1 when qps is positive")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last = clock()

    def reserve(self) -> float:
        """Take a token; the seconds the caller must wait before using it."""
        if self.qps <= 0:
            return 0.0
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def acquire(self) -> float:
        """Wait for a token; returns how long it waited."""
        delay = self.reserve()
        if delay > 0:
            self._sleep(delay)
        return delay

    def wait(self, verb: str, url: str) -> None:
        """:meth:`acquire` for one request, logged at ``-v=4`` when it waited (as client-go)."""
        waited = self.acquire()
        if waited > 0.05:
            logger.log(
                V(4),
                "Waited for client-side throttling",
                extra=kv(seconds=round(waited, 3), verb=verb, url=url),
            )


def _install_throttle(api_client: client.ApiClient, bucket: TokenBucket, default_timeout: Timeout) -> None:
    """Route every request of ``api_client`` through ``bucket`` and give it a timeout.

    All API methods, ``call_api`` and ``Watch.stream`` end in
    ``RESTClientObject.request`` (GET/POST/... call ``self.request``), so one
    wrapper on the instance covers them all. :func:`api_request`, which does not go
    through ``call_api``, finds the bucket and the timeout on the client.
    """
    rest = api_client.rest_client
    inner = rest.request

    def request(
        method: str,
        url: str,
        query_params: Any = None,
        headers: Any = None,
        body: Any = None,
        post_params: Any = None,
        _preload_content: bool = True,
        _request_timeout: Timeout | None = None,
    ) -> Any:
        bucket.wait(method, url)
        return inner(
            method,
            url,
            query_params=query_params,
            headers=headers,
            body=body,
            post_params=post_params,
            _preload_content=_preload_content,
            _request_timeout=_request_timeout if _request_timeout else default_timeout,
        )

    rest.request = request
    setattr(api_client, _BUCKET, bucket)
    setattr(api_client, _TIMEOUT, default_timeout)


def new_api_client(opts: ClientOptions | None = None) -> client.ApiClient:
    """An ``ApiClient`` for the scheduler; see the module docstring.

    Raises :class:`ClientConfigError` when the kubeconfig cannot be loaded, or
    when no kubeconfig is given outside a pod.
    """
    opts = opts or ClientOptions()
    cfg = client.Configuration()
    try:
        if opts.kubeconfig:
            # load_kube_config (not load_config, which print()s and prefers
            # ~/.kube/config) into our own Configuration: no global state.
            config.load_kube_config(
                config_file=opts.kubeconfig,
                context=opts.context,
                client_configuration=cfg,
                persist_config=False,
            )
            source = opts.kubeconfig
        else:
            config.load_incluster_config(client_configuration=cfg)
            source = "in-cluster"
    except ConfigException as e:
        if not opts.kubeconfig:
            raise ClientConfigError(
                "no --kubeconfig given and not running in a pod (KUBERNETES_SERVICE_HOST/PORT unset "
                f"or no service account token): pass --kubeconfig ({e})"
            ) from e
        raise ClientConfigError(f"cannot load kubeconfig {opts.kubeconfig}: {e}") from e
    except OSError as e:
        raise ClientConfigError(f"cannot load kubeconfig {opts.kubeconfig}: {e}") from e
    cfg.connection_pool_maxsize = opts.pool_maxsize
    # One attempt to connect again on a refused/reset connection (the request
    # was not sent), nothing else: a read timeout on a watch or a bind must
    # reach the caller, not be replayed three times by urllib3.
    cfg.retries = urllib3.Retry(
        total=1, connect=1, read=0, status=0, other=0, redirect=0, raise_on_status=False
    )
    api = client.ApiClient(configuration=cfg)
    api.user_agent = user_agent(opts.user_agent_suffix)
    _install_throttle(api, TokenBucket(opts.qps, opts.burst), opts.timeout)
    logger.log(
        V(2),
        "Built API client",
        extra=kv(source=source, host=cfg.host, qps=opts.qps, burst=opts.burst, poolMaxsize=opts.pool_maxsize),
    )
    return api


def encode(body: Any) -> bytes:
    """A request body as JSON (orjson: a few times faster than ``json`` on pod-sized documents)."""
    return orjson.dumps(body)


def decode(data: bytes | str) -> Any:
    """JSON from the API server (watch lines included); None for an empty body."""
    return orjson.loads(data) if data else None


class _Route:
    """What :func:`api_request` needs of one ``ApiClient``, made at its first request."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api = api_client
        self.config = api_client.configuration
        self.curl = CurlPool(self.config, self.config.connection_pool_maxsize or 4)
        self.host = self.curl.base
        self.bucket: TokenBucket | None = getattr(api_client, _BUCKET, None)
        self.default_timeout: Timeout | None = getattr(api_client, _TIMEOUT, None)

    def headers(self, content_type: str | None) -> list[str]:
        h = {"Accept": "application/json", "Content-Type": content_type or "application/json"}
        h.update(self.api.default_headers)
        if self.api.cookie:
            h["Cookie"] = self.api.cookie
        # auth_settings() reads the token through the configuration's refresh hook, as
        # call_api's update_params_for_auth does: a rotated token is picked up.
        auth = self.config.auth_settings().get("BearerToken")
        if auth and auth.get("value"):
            h[auth["key"]] = auth["value"]
        # No "Expect: 100-continue" pause before a large body: the API server answers at once.
        return [f"{k}: {v}" for k, v in h.items()] + ["Expect:"]


_route_lock = threading.Lock()


def _route(api_client: client.ApiClient) -> _Route:
    route = getattr(api_client, _ROUTE, None)
    if route is None:
        with _route_lock:
            route = getattr(api_client, _ROUTE, None)
            if route is None:
                route = _Route(api_client)
                setattr(api_client, _ROUTE, route)
    return route


def api_request(
    api_client: client.ApiClient,
    method: str,
    path: str,
    *,
    query: list[tuple[str, Any]] | None = None,
    body: Any = None,
    content_type: str | None = None,
    timeout: Timeout | None = None,
) -> Any:
    """One API call: ``body`` (a dict, or None) sent as JSON, the answer's JSON returned as a
    dict (None when empty); no model parsing.

    It goes past the generated client's ``call_api`` (which sanitizes headers and body
    recursively, turns parameters into tuples and wraps the answer once more) and its
    urllib3 pool, to libcurl (:mod:`scheduler.cluster.curl`): a third to a half of the CPU
    of the same request through them. Kept from the client: its server and TLS settings,
    proxy, default headers (User-Agent), auth header, and (for clients of
    :func:`new_api_client`) its rate limiter and default timeout.

    A non-2xx answer raises ``kubernetes.client.ApiException`` as the typed methods do, with
    the status, reason, body (text) and headers (``Retry-After`` included), and ``resent``:
    True when libcurl may have sent the request twice (:attr:`scheduler.cluster.curl.Response.resent`);
    no answer at all raises :class:`TimeoutError` or :class:`ConnectionError`.
    """
    route = _route(api_client)
    url = route.host + path
    if query:
        url += "?" + urlencode([(k, v) for k, v in query if v is not None])
    if route.bucket is not None:
        route.bucket.wait(method, url)
    resp = route.curl.request(
        method,
        url,
        route.headers(content_type),
        body=None if body is None else encode(body),
        timeout=timeout or route.default_timeout,
    )
    if not 200 <= resp.status <= 299:
        e = ApiException(status=resp.status, reason=resp.reason)
        e.body = resp.data.decode("utf-8", errors="replace")
        e.headers = resp.headers
        e.resent = resp.resent
        raise e
    return decode(resp.data)
