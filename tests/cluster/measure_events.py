"""Measure how far the Scheduled events trail the binds when the API server is slow.

Run by hand (it starts its own API server; about a minute on 2 cores)::

    .venv/bin/python -m tests.cluster.measure_events [--rate 300] [--seconds 10] [--latency 0.15]

The events writer (``scheduler.cluster.events``) sends each event as one request on a
connection of its own, so it writes at most ``writers / latency`` events a second. Here a
proxy (``tests.cluster.netproxy``) holds each request for ``--latency`` seconds, as an API
server busy with a backlog's binds answers, and events are queued at ``--rate`` a second
(one per bind) for ``--seconds``. For each number of writers it logs the seconds from the
last event queued to the last one written, and the events written per second.
"""

from __future__ import annotations

import argparse
import logging
import time

from scheduler.cluster.client import ClientOptions, api_request, new_api_client
from scheduler.cluster.events import EventRecorder
from scheduler.logs import kv, setup
from scheduler.settings import EventSettings
from tests.apiserver import ControlPlane, measure_on_standalone
from tests.cluster.netproxy import TCPProxy

logger = logging.getLogger("measure_events")
NS = "measure"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=300.0, help="events queued per second")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--latency", type=float, default=0.15, help="seconds the proxy holds each request")
    ap.add_argument("--writers", default="32,64", help="writer counts to compare")
    args = ap.parse_args()
    setup(0)
    return measure_on_standalone(measure, args)


def measure(cp: ControlPlane, args: argparse.Namespace) -> int:
    admin = new_api_client(ClientOptions(kubeconfig=cp.kubeconfig, qps=0))
    api_request(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
    proxy = TCPProxy(cp.port)
    proxy.delay = args.latency
    kc = cp.kubeconfig_for("admin", ("system:masters",), server=proxy.url)
    api = new_api_client(ClientOptions(kubeconfig=str(kc), qps=0, pool_maxsize=256))
    n = int(args.rate * args.seconds)
    try:
        for writers in (int(w) for w in args.writers.split(",")):
            rec = EventRecorder(api, settings=EventSettings(writers=writers)).start()
            start = time.perf_counter()
            for i in range(n):
                # queue at the rate of a backlog's binds
                wait = start + i / args.rate - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                pod = {
                    "kind": "Pod",
                    "metadata": {"namespace": NS, "name": f"w{writers}-{i}", "uid": f"u{i}"},
                }
                rec.scheduled(pod, "node-1", "default-scheduler")
            queued = time.perf_counter()
            rec.flush(300)
            done = time.perf_counter()
            rec.stop()
            logger.info(
                "measured",
                extra=kv(
                    writers=writers,
                    events=rec.stats.written,
                    dropped=rec.stats.dropped,
                    failed=rec.stats.failed,
                    lastEventAfterLastQueuedSeconds=round(done - queued, 2),
                    writtenPerSecond=round(rec.stats.written / (done - start)),
                ),
            )
    finally:
        proxy.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
