"""``python -m bench.clean``: remove what an interrupted ``make bench`` left in the cluster.

An interrupted bench (or one run with ``--keep-nodes``) leaves its kwok nodes,
its churn nodes, its namespaces, and the ``dra`` workload's ResourceSlices and
DeviceClass. Each namespace's pods are deleted (grace 0) before it. ``make bench-clean`` runs this; ``make e2e`` does on a reused
cluster, as its suites count every node and pod.

The labels come from where the bench sets them (``bench.kwok.LABEL``,
``bench.churn.CHURN_LABEL``, ``bench.load.PART_OF``), so there is one place to
change them.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from bench import churn, dra, kwok, load
from scheduler import logs
from scheduler.cluster.client import ClientConfigError, ClientOptions, api_request, new_api_client
from scheduler.cluster.retry import status_message
from scheduler.polling import PollTimeoutError, poll

logger = logging.getLogger("bench.clean")


@dataclass(frozen=True)
class Leftovers:
    kwok_nodes: int
    churn_nodes: int
    namespaces: int
    resource_slices: int = 0

    @property
    def total(self) -> int:
        return self.kwok_nodes + self.churn_nodes + self.namespaces + self.resource_slices

    def __str__(self) -> str:
        slices = f", {self.resource_slices} ResourceSlices" if self.resource_slices else ""
        return f"{self.kwok_nodes} kwok nodes, {self.churn_nodes} churn nodes, {self.namespaces} namespaces{slices}"


def _names(api: ApiClient, path: str, selector: str) -> list[str]:
    items = api_request(api, "GET", path, query=[("labelSelector", selector)], timeout=(5, 60)).get("items")
    return [o["metadata"]["name"] for o in items or ()]


def leftovers(api: ApiClient) -> Leftovers:
    """What of the bench is in the cluster now."""
    return Leftovers(
        kwok_nodes=len(kwok.list_bench_nodes(api)),
        churn_nodes=len(_names(api, "/api/v1/nodes", "=".join(churn.CHURN_LABEL))),
        namespaces=len(_names(api, "/api/v1/namespaces", "=".join(load.PART_OF))),
        resource_slices=len(_names(api, f"{dra.DRA}/resourceslices", f"{kwok.LABEL}=true")),
    )


def clean(api: ApiClient, found: Leftovers, *, timeout: float = 300) -> None:
    """Delete the bench's nodes and namespaces (``found``: what ``leftovers`` counted) and
    wait until they are gone. Raises TimeoutError naming what is left after ``timeout``."""
    kwok.delete_nodes(api)
    churn.clean_up(api)
    dra.delete_devices(api)
    for name in _names(api, "/api/v1/namespaces", "=".join(load.PART_OF)):
        # their pods first, grace 0: the garbage collector and the namespace controller delete
        # the pods of gone nodes at a few per second (hours for a scale benchmark's)
        load.delete_pods(api, name, timeout=timeout)
        load.delete_namespace(api, name)
    left = [found]

    def gone() -> bool:
        left[0] = leftovers(api)
        return not left[0].total

    try:
        # The nodes go at once; the namespaces once the pods that were bound to the nodes are.
        poll(gone, timeout, "the benchmark's leftovers to go", 2)
    except PollTimeoutError:
        raise TimeoutError(
            f"after {timeout:.0f}s {left[0]} of the benchmark are left "
            f"(kubectl get namespaces -l {'='.join(load.PART_OF)})"
        ) from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.clean", description=__doc__.split("\n")[0])
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--timeout", type=float, default=300, help="seconds to wait for them to go")
    args = p.parse_args(argv)
    logs.setup(warnings_only=True)
    try:
        api = new_api_client(ClientOptions(kubeconfig=args.kubeconfig, qps=5000, burst=5000, pool_maxsize=40))
        found = leftovers(api)
        if not found.total:
            print("no benchmark leftovers in the cluster", file=sys.stderr)
            return 0
        print(f"removing the benchmark's leftovers: {found}", file=sys.stderr)
        clean(api, found, timeout=args.timeout)
    except (ClientConfigError, TimeoutError, ConnectionError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ApiException as e:
        print(f"error: the API server answered {e.status}: {status_message(e)}", file=sys.stderr)
        return 1
    print("benchmark leftovers removed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
