"""``dynamic-scheduler finalize-namespace NAME``: release a namespace stuck in Terminating.

The field note's fix (1.7), through the client instead of ``kubectl proxy`` and
curl: read the namespace, empty ``spec.finalizers`` and PUT it to the
``finalize`` subresource. Normally the namespace controller does this once it
has deleted everything in the namespace; doing it by hand skips that, so what
is left inside stays behind in etcd, unreachable. Use it when the controller
cannot finish (an unavailable API service, a finalizer no controller serves).

A namespace that is not terminating is refused unless ``--force``: clearing its
finalizers would let a later delete skip the cleanup, and leave the namespace
Terminating until it is finalized again: a terminating namespace whose
``spec.finalizers`` is already empty still gets the (empty) finalize update,
which is what makes the API server delete it. ``metadata.finalizers``
(other controllers' claims) are reported, not touched.
"""

from __future__ import annotations

import contextlib
import logging

from kubernetes.client import CoreV1Api, V1NamespaceSpec
from kubernetes.client.exceptions import ApiException

from scheduler.deploy import cmdline
from scheduler.deploy.cmdline import DeployError, api_message, out
from scheduler.deploy.values import DNS_LABEL
from scheduler.deploy.waiting import poll

logger = logging.getLogger(__name__)

GONE_TIMEOUT = 30.0


def finalize(core: CoreV1Api, name: str, force: bool) -> list[str]:
    """Empty the namespace's spec.finalizers; the ones removed."""
    try:
        ns = core.read_namespace(name, _request_timeout=30)
    except ApiException as e:
        if e.status == 404:
            raise DeployError(f"namespace {name} not found") from None
        raise DeployError(f"cannot read namespace {name}: {api_message(e)}") from None
    terminating = ns.metadata.deletion_timestamp is not None
    if not terminating and not force:
        raise DeployError(
            f"namespace {name} is {ns.status.phase if ns.status else 'not terminating'}, not "
            f"Terminating: its finalizers make a delete clean up its contents; pass --force to "
            f"remove them anyway"
        )
    removed = list((ns.spec.finalizers if ns.spec else None) or [])
    # A terminating namespace whose spec.finalizers is already empty (emptied before the delete)
    # is stuck too: the namespace controller leaves it as finalized and the API server deletes a
    # namespace only on a finalize update. The same empty update releases it.
    if removed or terminating:
        if ns.spec is None:
            ns.spec = V1NamespaceSpec()
        ns.spec.finalizers = []
        try:
            core.replace_namespace_finalize(name, ns, _request_timeout=30)
        except ApiException as e:
            raise DeployError(f"cannot finalize namespace {name}: {api_message(e)}") from None
    return removed


def main(argv: list[str]) -> int:
    p = cmdline.parser(
        "finalize-namespace", "Remove the spec.finalizers of a namespace stuck in Terminating."
    )
    p.add_argument("name", help="the namespace")
    p.add_argument("--force", action="store_true", help="also when the namespace is not terminating")
    cmdline.add_cluster_flags(p)
    cmdline.add_log_flags(p)

    def body() -> int:
        ns = p.parse_args(argv)
        cmdline.setup_logging(ns.v)
        if not DNS_LABEL.ok(ns.name):
            raise cmdline.UsageError(
                f"name: expected a namespace name ({DNS_LABEL.expected}), got {ns.name!r}"
            )
        core = CoreV1Api(cmdline.connect(ns.kubeconfig, ns.context))
        removed = finalize(core, ns.name, ns.force)
        out(
            f"namespace {ns.name}: removed spec.finalizers {removed}"
            if removed
            else f"namespace {ns.name}: spec.finalizers was already empty"
        )
        state: list[str] = [""]

        def settled() -> tuple[bool, str]:
            try:
                live = core.read_namespace(ns.name, _request_timeout=30)
            except ApiException as e:
                if e.status != 404:
                    raise
                state[0] = "gone"
                return True, "gone"
            if live.metadata.deletion_timestamp is None:
                state[0] = "active"
                return True, "Active"
            held = live.metadata.finalizers or []
            state[0] = f"held by metadata.finalizers {held}" if held else "Terminating"
            return bool(held), state[0]

        with contextlib.suppress(DeployError):  # the state says what happened
            poll(f"namespace {ns.name}", settled, GONE_TIMEOUT, interval=0.5)
        if state[0] == "gone":
            out(f"namespace {ns.name} is gone")
            return 0
        if state[0] == "active":
            return 0
        out(
            f"namespace {ns.name} is still Terminating, {state[0]}: other controllers' claims, which "
            f"this command does not remove"
        )
        return 1

    return cmdline.run("finalize-namespace", body)
