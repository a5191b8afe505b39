"""The scheduler process: wires the pipeline together and runs it.

    informers (pods, nodes, what the plugins read) → cache + queue
    leader election ─ gates ─→ scheduling loop → binder, events, pod conditions
    HTTPS: /healthz /livez /readyz /metrics /metrics/resources /configz /debug/flags/v

In shadow mode (``--shadow``) the loop, the binder, the events and the Lease are left
out: the pod events go to the shadow judge (scheduler.shadow), served at /shadow/decisions.

As kube-scheduler: the caches fill on every replica (a standby is warm and
ready); only the leader schedules; losing the lease exits with code 1; SIGTERM
stops scheduling, lets in-flight binds finish, releases the lease and exits 0.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes.client import ApiClient

from scheduler.cluster import informers as inf
from scheduler.cluster.binder import Binder
from scheduler.cluster.client import ClientConfigError, ClientOptions, new_api_client
from scheduler.cluster.events import EventRecorder
from scheduler.cluster.leaderelection import LeaderElectionConfig, LeaderElector
from scheduler.cluster.podstatus import PodStatusWriter
from scheduler.cluster.preemption import PreemptionExecutor
from scheduler.cluster.store import RESOURCES
from scheduler.config.options import Options
from scheduler.config.writing import config_document
from scheduler.core.cache import Cache
from scheduler.core.eventhandlers import EventHandlers
from scheduler.core.framework import Store
from scheduler.core.loop import BindOutcome, Scheduler
from scheduler.core.podinfo import PodInfo
from scheduler.core.preemption import Preemption
from scheduler.core.profile import Profile
from scheduler.core.queue import SchedulingQueue
from scheduler.logs import V, kv, set_verbosity_from
from scheduler.metrics import Metrics
from scheduler.profiles import Handle, build_profile, resources_needed
from scheduler.serving import READYZ, SecureServer, ServingError, handler_sync_check, shutdown_check
from scheduler.serving.podresources import pod_resources_registry
from scheduler.settings import Settings
from scheduler.shadow.events import ShadowEventHandlers
from scheduler.shadow.judge import Judge

logger = logging.getLogger(__name__)

SHADOW_PATH = "/shadow/decisions"
CONFIGZ_PATH = "/configz"
POD_RESOURCES_PATH = "/metrics/resources"
VERBOSITY_PATH = "/debug/flags/v"
LOSS_GRACE = 2.0
"""After the Lease is lost, how long the Bindings already sent may take to be answered and
their ``Scheduled`` events to be written before the process exits; nothing new starts (no
cycle, no Binding, no retry). kube-scheduler exits at once and drops its queued events."""


class KubeIO:
    """core.loop.ClusterIO over the API server. Pod conditions are written off the loop's thread."""

    def __init__(
        self, binder: Binder, recorder: EventRecorder, preemption: PreemptionExecutor, pods: Store
    ) -> None:
        self.binder = binder
        self.recorder = recorder
        self.preemption = preemption
        self.status = PodStatusWriter(binder, pods)

    def bind(self, pod: PodInfo, node: str) -> tuple[BindOutcome, str]:
        # No stale PodScheduled=False after the Binding, which sets it True.
        if not self.status.settle(pod.uid, self.binder.settings.timeout[1]):
            logger.log(V(2), "Binding before the pod's failure was written", extra=kv(pod=pod.key))
        r = self.binder.bind(pod.namespace, pod.name, pod.uid, node)
        return r.status, r.message

    def scheduled(self, pod: PodInfo, node: str, profile: str) -> None:
        self.recorder.scheduled(pod.pod, node, profile)

    def relaxed(self, pod: PodInfo, node: str, profile: str, plugins: tuple[str, ...], why: str) -> None:
        self.recorder.filter_relaxed(pod.pod, node, plugins, why, profile)

    def unschedulable(
        self, pod: PodInfo, message: str, profile: str, reason: str, nominated_node: str | None = ""
    ) -> None:
        self.recorder.failed_scheduling(pod.pod, message, profile)
        self.status.submit(pod, message, reason, nominated_node)

    def preempt(self, preemption: Preemption, profile: str, done: Callable[[bool], None]) -> None:
        self.preemption.preempt(preemption, profile, done)

    def halt(self) -> None:
        """Send nothing more (the Lease is lost): writes queued are dropped, retries end."""
        self.binder.halt()
        self.status.halt()

    def stop(self) -> None:
        self.preemption.stop()
        self.status.stop()


class LoopMetrics:
    def __init__(self, metrics: Metrics) -> None:
        self.m = metrics

    def attempt(self, result: str, profile: str, seconds: float) -> None:
        self.m.schedule_attempt(result, profile, seconds)

    def scheduled(self, profile: str, attempts: int, sli_seconds: float) -> None:
        self.m.pod_bound(attempts, sli_seconds)

    def algorithm(self, seconds: float) -> None:
        self.m.scheduling_algorithm(seconds)

    def preemption(self, victims: int | None) -> None:
        self.m.preemption_attempt(victims)


class App:
    """The scheduler process of ``options``; its tunables are ``settings`` (scheduler.settings)."""

    def __init__(self, options: Options, settings: Settings | None = None) -> None:
        self.options = options
        self.settings = settings or Settings()
        self.cfg = options.config
        self.stop = threading.Event()
        self.scheduling = threading.Event()
        self.metrics = Metrics()
        self.informers: list[inf.Informer] = []
        self.elector: LeaderElector | None = None
        self.server: SecureServer | None = None
        self.scheduler: Scheduler | None = None
        self.io: KubeIO | None = None
        self.recorder: EventRecorder | None = None
        self.loop_thread: threading.Thread | None = None
        self.judge: Judge | None = None
        """Shadow mode's (``--shadow``); None when scheduling."""
        self.profiles: dict[str, Profile] = {}
        self._pods: Any = None
        self.halted = False
        """The Lease was lost while leading: everything stopped writing."""
        self._wake = threading.Event()

    # --- setup ----------------------------------------------------------------------

    def _client(self, *, pool_maxsize: int, user_agent_suffix: str = "") -> ApiClient:
        """An API client of ``clientConnection``, with a rate limiter of its own."""
        cc = self.options.client_connection
        return new_api_client(
            ClientOptions(
                kubeconfig=cc.kubeconfig or None,
                qps=cc.qps,
                burst=cc.burst,
                pool_maxsize=pool_maxsize,
                user_agent_suffix=user_agent_suffix,
            )
        )

    def build(self) -> None:
        self.api = self._client(pool_maxsize=self.settings.binding.workers + 16)
        self.cache = Cache()
        self.metrics.cache_sizes = self.cache.sizes
        self.queue = SchedulingQueue(
            self.cfg.pod_initial_backoff_seconds,
            self.cfg.pod_max_backoff_seconds,
            on_change=self.metrics.set_pending_pods,
            on_enqueue=self.metrics.pod_enqueued,
        )
        shadow = (
            ShadowEventHandlers(self.cache, self.queue, self.cfg.scheduler_names())
            if self.options.shadow
            else None
        )
        handlers = shadow or EventHandlers(self.cache, self.queue, self.cfg.scheduler_names())

        for plural in sorted(resources_needed(self.cfg)):
            informer = inf.Informer(self.api, RESOURCES[plural], settings=self.settings.watch)
            if plural == "pods":
                informer.add_handlers(handlers.on_pod_add, handlers.on_pod_update, handlers.on_pod_delete)
            elif plural == "nodes":
                informer.add_handlers(handlers.on_node_add, handlers.on_node_update, handlers.on_node_delete)
            else:
                informer.add_handlers(*handlers.object_handlers(plural))
            self.informers.append(informer)
        stores = {i.resource.plural: i.store for i in self.informers}
        self._pods = stores["pods"]

        profiles = {}
        handles = []
        for prof in self.cfg.profiles:
            handle = Handle(
                self.cache,
                stores,
                self.api,
                prof.scheduler_name,
                self.metrics.registry,
                self.queue,
                self.settings.prometheus,
            )
            handles.append(handle)
            profiles[prof.scheduler_name] = build_profile(
                self.cfg,
                prof,
                handle,
                self.queue.nominator,
                self.metrics.extension_point_observer(prof.scheduler_name),
            )
        if shadow is not None:
            self._build_shadow(shadow, profiles, stores)
            return
        # Events have a client (so a rate limit) of their own, as kube-scheduler's eventClient:
        # at the default 50 QPS, sharing one would halve the binds and drop events.
        settings = self.settings
        events_api = self._client(pool_maxsize=settings.events.writers + 4, user_agent_suffix="events")
        self.recorder = EventRecorder(events_api, settings=settings.events)
        for handle in handles:
            handle.recorder = self.recorder
        binder = Binder(self.api, settings.binding)
        self.io = KubeIO(
            binder,
            self.recorder,
            PreemptionExecutor(
                binder,
                self.recorder,
                workers=settings.preemption_workers,
                victim_workers=settings.preemption_victim_workers,
            ),
            stores["pods"],
        )
        self.scheduler = Scheduler(
            self.cache,
            self.queue,
            profiles,
            self.io,
            LoopMetrics(self.metrics),
            bind_workers=settings.binding.workers,
        )

        le = self.options.leader_election
        if le.leader_elect:
            # Its own client, as kube-scheduler's: a burst of binds must not use up
            # the rate-limit tokens the renewals need (losing the lease exits).
            le_api = self._client(pool_maxsize=4, user_agent_suffix="leader-election")
            self.elector = LeaderElector(
                le_api,
                LeaderElectionConfig(
                    namespace=le.resource_namespace,
                    name=le.resource_name,
                    lease_duration=le.lease_duration,
                    renew_deadline=le.renew_deadline,
                    retry_period=le.retry_period,
                    takeover=self.options.leader_elect_takeover,
                ),
                on_started_leading=self._start_scheduling,
                on_stopped_leading=self._stopped_leading,
                gauge=self.metrics.leader_election_master_status,
            )

        self._build_server()

    def _build_server(self) -> None:
        self.server = SecureServer.from_options(
            self.options.serving,
            self.metrics.registry,
            pod_ip=os.environ.get("POD_IP"),
            settings=self.settings.serving,
        )
        if self.server is not None:
            if self.elector is not None:
                # As kube-scheduler's Run (cmd/kube-scheduler/app/server.go): the leader-election
                # watchdog is a /healthz and /readyz check; /livez stays a ping.
                self.server.add_check("leaderElection", self.elector.check, ("healthz", READYZ))
            self.server.add_check(
                "sched-handler-sync",
                handler_sync_check(lambda: all(i.has_synced() for i in self.informers)),
                [READYZ],
            )
            self.server.add_check("shutdown", shutdown_check(self.stop.is_set), [READYZ])
            # As kube-scheduler's configz (installMetricHandler in cmd/kube-scheduler/app): the
            # effective configuration in v1, flags applied, under "componentconfig".
            configz = {"componentconfig": config_document(self.cfg)}
            self.server.add_json(CONFIGZ_PATH, lambda _query: configz)
            if self.cfg.enable_profiling:
                # As kube-scheduler's DebugFlags (with enableProfiling, its default): -v, now.
                self.server.add_setter(VERBOSITY_PATH, set_verbosity_from)
            if self.judge is None:
                # As kube-scheduler's installMetricHandler: every pod's requests and limits,
                # answered by the leader only.
                self.server.add_metrics(
                    POD_RESOURCES_PATH, pod_resources_registry(self._pods.list), self._leads
                )
            if self.judge is not None:
                self.server.add_json(SHADOW_PATH, self._shadow_decisions)

    def _leads(self) -> bool:
        """This replica schedules now, or will once its caches are synced (no leader election)."""
        if self.halted:
            return False
        return self.elector.is_leader() if self.elector is not None else True

    def _build_shadow(
        self, handlers: ShadowEventHandlers, profiles: dict[str, Profile], stores: dict[str, Any]
    ) -> None:
        """Shadow mode: no binder, no events, no Lease; the judge and its sweep of Pending pods."""
        self.judge = Judge(self.cache, profiles, self.metrics.registry, settings=self.settings.shadow)
        handlers.judge = self.judge
        handlers.bound_plugins = [
            p for prof in profiles.values() for p in prof.plugins.values() if hasattr(p, "note_bound")
        ]
        self.profiles = profiles
        if self.options.leader_election.leader_elect:
            logger.info("Shadow mode: no leader election, nothing is bound or written")
        self._build_server()

    def _shadow_decisions(self, query: dict[str, list[str]]) -> Any:
        text = (query.get("limit") or ["50"])[0]
        try:
            limit = int(text)
        except ValueError:
            raise ValueError(f"limit: expected a whole number, got {text!r}") from None
        if limit < 0:
            raise ValueError(f"limit: expected a whole number >= 0, got {limit}")
        assert self.judge is not None
        return self.judge.report(limit)

    # --- running --------------------------------------------------------------------

    def _stopped_leading(self) -> None:
        """``OnStoppedLeading``: from now on nothing is scheduled, bound or written, at once;
        :meth:`run` then exits with 1 (kube-scheduler exits right away)."""
        if self.elector is None or not self.elector.lost.is_set():
            return  # a release at shutdown, not a loss
        self.halted = True
        if self.scheduler is not None:
            self.scheduler.halt()
        if self.io is not None:
            self.io.halt()
        self._wake.set()

    def _start_scheduling(self) -> None:
        if self.stop.is_set() or self.scheduling.is_set():
            return
        scheduler = self.scheduler
        assert scheduler is not None  # built in every mode but the shadow, which never leads
        self.scheduling.set()
        logger.info(
            "Started leading; scheduling",
            extra=kv(
                identity=self.elector.identity if self.elector else "",
                profiles=sorted(scheduler.profiles),
            ),
        )
        self.loop_thread = threading.Thread(
            target=scheduler.run, args=(self.stop,), name="scheduling-loop", daemon=True
        )
        self.loop_thread.start()

    def run(self) -> int:
        if self.server is not None:
            self.server.start()
            logger.info(
                "Serving securely",
                extra=kv(address=f"{self.options.serving.bind_address}:{self.server.port}"),
            )
        if self.recorder is not None:
            self.recorder.start()
        with inf.initial_load():
            for i in self.informers:
                i.start()
            while not self.stop.is_set():
                if all(i.has_synced() for i in self.informers):
                    break
                self.stop.wait(0.1)
        if self.stop.is_set():
            return self.shutdown(0)
        pods = next((len(i.store) for i in self.informers if i.resource.plural == "pods"), 0)
        logger.info("Caches are synced", extra=kv(pods=pods))

        if self.judge is not None:
            return self._run_shadow()
        if self.elector is None:
            self._start_scheduling()
            self.stop.wait()
            return self.shutdown(0)

        self.elector.start()
        while not self.stop.is_set() and not self.elector.lost.is_set() and not self.elector.done.is_set():
            self._wake.wait(0.5)
        if self.elector.lost.is_set() and not self.stop.is_set():
            logger.error(
                "Leaderelection lost",
                extra=kv(lease=f"{self.elector.config.namespace}/{self.elector.config.name}"),
            )
            return self.shutdown(1, release=False, grace=LOSS_GRACE)
        return self.shutdown(0)

    def _run_shadow(self) -> int:
        logger.info(
            "Shadow mode: judging the active scheduler's binds",
            extra=kv(profiles=",".join(sorted(self.profiles))),
        )
        self.scheduling.set()
        judge = self.judge
        assert judge is not None
        sweeper = threading.Thread(
            target=judge.run, args=(self.stop, self._pods.list), name="shadow-sweep", daemon=True
        )
        sweeper.start()
        self.stop.wait()
        judge.summarize()
        code = self.shutdown(0)
        sweeper.join(5)
        return code

    def shutdown(self, code: int, release: bool = True, grace: float | None = None) -> int:
        """Stop scheduling, let binds in flight finish (up to ``grace`` seconds, by default the
        settings' ``shutdown_grace``), release the lease, stop the rest. After a lost Lease
        (:data:`LOSS_GRACE`) the binder is halted: only answers to Bindings already sent and
        the events of those that succeeded are waited for."""
        grace = self.settings.shutdown_grace if grace is None else grace
        self.stop.set()
        start = time.monotonic()
        if self.scheduler is not None:
            self.scheduler.shutdown(grace)
        if self.loop_thread is not None:
            self.loop_thread.join(max(grace, 1.0))
        if self.elector is not None:
            self.elector.stop(release=release)
        if self.io is not None and not self.halted:
            self.io.stop()
        if self.recorder is not None:
            # What is left of the grace, at least 2 s: after a burst of binds the events lag
            # (binds come first), and a backlog's last seconds of them are still queued.
            left = max(2.0, grace - (time.monotonic() - start))
            self.recorder.stop(timeout=left)
        for i in self.informers:
            i.stop()
        if self.server is not None:
            self.server.stop()
        logger.info("Stopped", extra=kv(exitCode=code, seconds=round(time.monotonic() - start, 2)))
        return code


def run(options: Options) -> int:
    app = App(options)
    try:
        app.build()
    except (ClientConfigError, ServingError) as e:
        logger.error(str(e))
        return 1

    def on_signal(signum: int, _frame: Any) -> None:
        logger.info("Received signal; shutting down", extra=kv(signal=signal.Signals(signum).name))
        app.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        code = app.run()
    except ServingError as e:
        logger.error(str(e))
        return app.shutdown(1)
    if app.halted:
        # As kube-scheduler (klog.FlushAndExit): out now, without waiting for the threads of
        # requests already sent (the interpreter would join them at exit).
        logging.shutdown()
        os._exit(code)
    return code
