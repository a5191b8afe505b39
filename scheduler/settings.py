"""The running scheduler's tunables, in one typed object.

``KubeSchedulerConfiguration`` and the flags say what a user configures, as
kube-scheduler's; these are the numbers behind them that kube-scheduler keeps
in its code (client-go's timeouts, the number of threads, retry budgets).
Each component takes its part (``Binder(api, settings.binding)``) and the app
passes :class:`Settings` down, so a test or an embedding program changes one
field without reaching into module constants::

    App(options, settings=Settings(binding=BindingSettings(workers=16)))

Every class is a frozen dataclass: a value is set when it is made, and a
component never sees it change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Timeout = tuple[float, float]
"""(connect, read) seconds for one request, as urllib3 takes them."""


@dataclass(frozen=True)
class WatchSettings:
    """How an informer lists and watches (``scheduler.cluster.informers``)."""

    stream_initial_state: bool = True
    """Get the whole state as a stream of watch events from the API server's watch cache
    (WatchList, as client-go's informers in v1.37), falling back to a paged list where the
    server does not offer it."""
    page_size: int = 500
    """Objects per list page (``limit``), as client-go's pager."""
    watch_timeout: int = 300
    """The server-side ``timeoutSeconds`` of a watch, randomised up to twice that (as client-go's
    reflector does), so that the watches do not all end together."""
    read_timeout: float = 90.0
    """The longest a watch waits for any byte before it calls the connection dead and watches
    again. The API server sends a bookmark at least once a minute to watchers that allow them,
    and one shortly before ``timeoutSeconds`` ends, so this should exceed ``min(watch_timeout, 60)``."""
    connect_timeout: float = 5.0
    """Seconds to open a connection, for lists and watches."""
    list_timeout: float = 60.0
    """Seconds to read one list page."""
    backoff: tuple[float, float] = (0.8, 30.0)
    """(first, longest) wait before listing again after a failure, doubling, with jitter
    (client-go's reflector backs off from 800 ms to 30 s)."""


@dataclass(frozen=True)
class BindingSettings:
    """The binding cycles and the Binding calls (``scheduler.core.loop``, ``scheduler.cluster.binder``)."""

    workers: int = 64
    """Binding cycles run at once. kube-scheduler gives every binding cycle its own goroutine;
    with a fixed pool, throughput is at most workers / Binding-call latency, and on a busy API
    server a Binding call takes hundreds of ms (16 workers held ours near 50 pods/s while the
    cluster took 150). The threads mostly wait on the socket, so many are cheap."""
    attempts: int = 5
    """Tries of one write (a Binding, a pod status patch) on 429, 5xx and dropped connections."""
    max_seconds: float = 15.0
    """The longest one write is retried for."""
    initial_wait: float = 0.2
    """The first backoff between tries; it doubles, with jitter, up to ``max_wait``."""
    max_wait: float = 5.0
    """The longest backoff between tries."""
    retry_after_cap: float = 10.0
    """A server's ``Retry-After`` is honoured up to this many seconds."""
    timeout: Timeout = (5.0, 15.0)
    """(connect, read) seconds of one try."""


@dataclass(frozen=True)
class EventSettings:
    """The events writer (``scheduler.cluster.events``)."""

    writers: int = 128
    """Threads writing events; they share the events client's connection pool. One request at a
    time each, so at most ``writers / latency`` events a second: kube-scheduler writes each event
    from a goroutine of its own. Twice the binding workers, so that the events keep up with
    the binds on an API server that answers events slower than bindings:
    ``tests.cluster.measure_events`` (300 events/s for 10 s, each request held 0.3 s) has the
    last event 5.5 s after the last one queued with 64 writers, 1.0 s with 128; 32 writers
    left the Scheduled events of a 5000-pod backlog 6 s behind its binds (``make bench``)."""
    queue_size: int = 10000
    """Events waiting to be written; a full queue drops the event and counts it. client-go's
    broadcaster queues 1000 but writes each from a goroutine at once; 1000 here dropped a quarter
    of the Scheduled events of a 5000-pod backlog (``make bench``, backlog mode)."""
    window: float = 360.0
    """An event identical to one written this many seconds ago is counted on the first one's
    series instead of written again."""
    series_interval: float = 10.0
    """A series' count is patched at most once per this many seconds."""
    attempts: int = 3
    """Tries of one event write."""
    max_seconds: float = 5.0
    """The longest one event write is retried for."""
    timeout: Timeout = (5.0, 10.0)
    """(connect, read) seconds of one try."""


@dataclass(frozen=True)
class PrometheusSettings:
    """The Dynamic plugin's Prometheus queries (``scheduler.plugins.dynamic.source``); the query
    timeout itself is the plugin's ``queryTimeout`` argument."""

    retry_base: float = 10.0
    """Seconds before the first retry of a failed query; doubling, capped by ``retry_max`` and by
    the metric's sync period."""
    retry_max: float = 360.0
    """The longest wait between retries of a failed query."""
    max_body: int = 64 << 20
    """Bytes read at most from one response (5000 nodes' series take about 1 MiB)."""


@dataclass(frozen=True)
class ServingSettings:
    """The HTTPS port and its delegated authentication and authorization (``scheduler.serving``)."""

    max_connections: int = 64
    """Connections served at once; a further one waits for a free slot (each is a thread)."""
    request_timeout: float = 10.0
    """Seconds a connection has for its TLS handshake and its request."""
    review_timeout: float = 10.0
    """Seconds a TokenReview or SubjectAccessReview (with its retries) may take, and a read of
    the ``extension-apiserver-authentication`` ConfigMap."""
    ca_refresh: float = 60.0
    """Seconds between two reads of the client CAs and the front proxy's settings
    (kube-scheduler's dynamic CA controllers look once a minute too)."""


@dataclass(frozen=True)
class ShadowSettings:
    """Shadow mode's judge (``scheduler.shadow.judge``)."""

    kept: int = 1000
    """Decisions kept for the report (the oldest go first)."""
    summary_every: float = 60.0
    """Seconds between two ``Shadow summary`` log lines."""
    sweep_every: float = 10.0
    """Seconds between two looks at the pods the active scheduler left Pending."""
    relook_every: float = 60.0
    """Seconds before a Pending pod that ours could not place either is judged again (each
    judgement is a cycle over every node: a thousand such pods must not cost one each sweep)."""


@dataclass(frozen=True)
class Settings:
    """Everything above, and the process's own numbers (``scheduler.app``)."""

    watch: WatchSettings = field(default_factory=WatchSettings)
    binding: BindingSettings = field(default_factory=BindingSettings)
    events: EventSettings = field(default_factory=EventSettings)
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    serving: ServingSettings = field(default_factory=ServingSettings)
    shadow: ShadowSettings = field(default_factory=ShadowSettings)
    preemption_workers: int = 16
    """Preemptions carried out at once (kube-scheduler starts a goroutine for each)."""
    preemption_victim_workers: int = 64
    """Victims evicted at once, over all preemptions. kube-scheduler evicts up to 16 of each
    preemption at once (its parallelizer), with no bound over preemptions: a bound of 16 here
    left a burst of preemptions waiting a minute and more for their victims to go."""
    shutdown_grace: float = 10.0
    """Seconds a stopping scheduler waits for its binds and events in flight."""
