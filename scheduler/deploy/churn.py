"""``dynamic-scheduler churn``: delete a namespace's pods on a timer, so their controllers make new ones.

The field note's stability check (1.6): every ``--every`` seconds, every pod of
``--namespace`` (matching ``--selector``, if given) is deleted at once (up to
``DELETE_WORKERS`` deletes in flight), as ``kubectl delete --force
--grace-period=0`` does, so the scheduler keeps
placing their replacements. Each delete carries the pod's UID as a
precondition: a replacement that took the same name (a StatefulSet's) is left
for the next round. Bounded by ``--count`` rounds and ``--duration`` seconds
(no round starts after it); without either it runs until Ctrl-C, which stops
it cleanly between or during rounds. One line per round on stdout.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException

from scheduler.deploy import cmdline
from scheduler.deploy.cmdline import DeployError, api_message
from scheduler.deploy.values import DNS_LABEL
from scheduler.logs import kv

logger = logging.getLogger(__name__)

DELETE_WORKERS = 8
"""Deletes in flight at once in a round."""


@dataclass
class Round:
    number: int
    deleted: list[str]
    gone: int
    """Pods that were already gone, or replaced under the same name."""


def delete_round(api: ApiClient, namespace: str, selector: str | None, number: int) -> Round:
    core = CoreV1Api(api)
    pods = sorted(
        core.list_namespaced_pod(namespace, label_selector=selector or None, _request_timeout=30).items,
        key=lambda p: p.metadata.name,
    )

    def delete(pod: Any) -> bool:
        """True when deleted, False when already gone or replaced."""
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": pod.metadata.uid}}
        try:
            core.delete_namespaced_pod(
                pod.metadata.name, namespace, body=body, grace_period_seconds=0, _request_timeout=30
            )
        except ApiException as e:
            if e.status in (404, 409):
                return False
            raise DeployError(
                f"cannot delete pod {namespace}/{pod.metadata.name}: {api_message(e)}"
            ) from None
        return True

    # Concurrently: one by one, 30 deletes took 11 s on a busy kind cluster, not "at once".
    with ThreadPoolExecutor(
        max_workers=max(1, min(DELETE_WORKERS, len(pods))), thread_name_prefix="churn-delete"
    ) as pool:
        done = list(pool.map(delete, pods))
    deleted = [p.metadata.name for p, ok in zip(pods, done, strict=True) if ok]
    return Round(number, deleted, len(pods) - len(deleted))


def churn(
    api: ApiClient,
    namespace: str,
    selector: str | None,
    every: float,
    count: int | None,
    duration: float | None,
    stop: threading.Event,
    report: Callable[[Round], None],
) -> int:
    """Run rounds until ``count``, ``duration`` or ``stop``; the number of rounds run."""
    start = time.monotonic()
    n = 0
    while not stop.is_set():
        if count is not None and n >= count:
            break
        if duration is not None and time.monotonic() - start >= duration:
            break
        n += 1
        began = time.monotonic()
        report(delete_round(api, namespace, selector, n))
        if count is not None and n >= count:
            break
        # The timer runs from the start of the round (a round of many deletes can take seconds);
        # set() by a signal handler ends it early.
        stop.wait(max(0.0, every - (time.monotonic() - began)))
    return n


def main(argv: list[str]) -> int:
    p = cmdline.parser("churn", "Delete a namespace's pods on a timer (forced, grace period 0).")
    p.add_argument("-n", "--namespace", required=True, help="whose pods to delete")
    p.add_argument("-l", "--selector", metavar="LABELS", help="only the pods matching this label selector")
    p.add_argument(
        "--every",
        type=cmdline.positive_float,
        default=10.0,
        metavar="SECONDS",
        help="between the starts of two rounds (default 10)",
    )
    p.add_argument("--count", type=cmdline.positive_int, metavar="N", help="stop after N rounds")
    p.add_argument(
        "--duration", type=cmdline.positive_float, metavar="SECONDS", help="start no round after this long"
    )
    cmdline.add_cluster_flags(p)
    cmdline.add_log_flags(p)

    def body() -> int:
        ns = p.parse_args(argv)
        cmdline.setup_logging(ns.v)
        if not DNS_LABEL.ok(ns.namespace):
            raise cmdline.UsageError(f"--namespace: expected {DNS_LABEL.expected}, got {ns.namespace!r}")
        api = cmdline.connect(ns.kubeconfig, ns.context)
        total = [0, 0]

        def report(r: Round) -> None:
            total[0] += 1
            total[1] += len(r.deleted)
            bound = f"/{ns.count}" if ns.count else ""
            names = ", ".join(r.deleted[:10]) + (
                f", ... ({len(r.deleted) - 10} more)" if len(r.deleted) > 10 else ""
            )
            sys.stdout.write(
                f"round {r.number}{bound}: deleted {len(r.deleted)} pods in {ns.namespace}"
                + (f": {names}" if names else "")
                + "\n"
            )
            sys.stdout.flush()

        stop = threading.Event()
        try:
            churn(api, ns.namespace, ns.selector, ns.every, ns.count, ns.duration, stop, report)
        except KeyboardInterrupt:
            stop.set()
            logger.info("Interrupted; stopping", extra=kv(rounds=total[0], deleted=total[1]))
        logger.info("Churn done", extra=kv(rounds=total[0], deleted=total[1]))
        return 0

    return cmdline.run("churn", body)
