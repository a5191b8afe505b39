"""``deploy prometheus`` with static discovery: each node's kubelet address, as kubernetes_sd_configs
(role node) would scrape it: the first address by type, the kubelet port the node reports."""

from __future__ import annotations

import pytest
from kubernetes.client import (
    V1DaemonEndpoint,
    V1Node,
    V1NodeAddress,
    V1NodeDaemonEndpoints,
    V1NodeStatus,
    V1ObjectMeta,
)

from scheduler.deploy.cmdline import DeployError
from scheduler.deploy.prometheus import kubelet_address
from scheduler.deploy.values import KUBELET_ADDRESS


def node(addresses: list[tuple[str, str]], port: int | None = 10250) -> V1Node:
    return V1Node(
        metadata=V1ObjectMeta(name="kind-worker"),
        status=V1NodeStatus(
            addresses=[V1NodeAddress(type=t, address=a) for t, a in addresses],
            daemon_endpoints=V1NodeDaemonEndpoints(
                kubelet_endpoint=V1DaemonEndpoint(port=port) if port is not None else None
            ),
        ),
    )


@pytest.mark.parametrize(
    ("addresses", "port", "want"),
    [
        ([("Hostname", "kind-worker"), ("InternalIP", "172.18.0.3")], 10250, "172.18.0.3:10250"),
        ([("InternalIP", "172.18.0.3"), ("InternalIP", "fd00::3")], 10250, "172.18.0.3:10250"),
        (
            [("ExternalIP", "203.0.113.7"), ("InternalDNS", "ip-10-0-0-3.internal")],
            10250,
            "ip-10-0-0-3.internal:10250",
        ),
        ([("InternalIP", "fd00::3")], 10250, "[fd00::3]:10250"),
        ([("Hostname", "node-1")], 11250, "node-1:11250"),
        ([("InternalIP", "10.0.0.3")], None, "10.0.0.3:10250"),  # no port reported yet: the default
    ],
)
def test_the_address_discovery_would_pick(
    addresses: list[tuple[str, str]], port: int | None, want: str
) -> None:
    got = kubelet_address(node(addresses, port))
    assert got == want
    assert KUBELET_ADDRESS.ok(got)  # what the values schema then accepts


def test_a_node_without_an_address_is_an_error() -> None:
    with pytest.raises(DeployError, match=r"^node kind-worker has no address in its status"):
        kubelet_address(node([]))
