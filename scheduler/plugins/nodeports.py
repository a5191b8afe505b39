"""NodePorts: a pod's host ports must be free on the node.

Conflicts follow kube-scheduler's ``HostPortInfo``: on the same protocol and
port, a wildcard host IP (``0.0.0.0``, or unset) conflicts with any IP, and a
specific IP conflicts with the same IP or with the wildcard.
"""

from __future__ import annotations

from typing import Any, ClassVar

from scheduler.core.framework import SKIP, CycleState, Snapshot, Status, unschedulable
from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import HostPort, PodInfo

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
WILDCARD_IP = "0.0.0.0"

_REJECTED = unschedulable(ERR_REASON)
_MEMO = "NodePorts"
_FILTER_KEY = "NodePorts"


def _sanitize(port: HostPort) -> HostPort:
    ip, protocol, number = port
    return (ip or WILDCARD_IP, protocol or "TCP", number)


def _used_protocol_ports(node: NodeInfo) -> frozenset[tuple[str, int]]:
    """(protocol, port) in use on the node on any IP; memoized until the node changes."""
    memo = node.memo
    used = memo.get(_MEMO)
    if used is None:
        used = frozenset((proto, port) for (_, proto, port), n in node.used_ports.items() if n > 0)
        memo[_MEMO] = used
    return used


def conflicts(used: Any, port: HostPort, any_ip: frozenset[tuple[str, int]] | None = None) -> bool:
    """Whether ``port`` (ip, protocol, port) conflicts with the ``used`` Counter of a node."""
    ip, protocol, number = _sanitize(port)
    if number <= 0:
        return False
    if ip == WILDCARD_IP:
        if any_ip is not None:
            return (protocol, number) in any_ip
        return any(n > 0 and p == protocol and q == number for (_, p, q), n in used.items())
    return used.get((ip, protocol, number), 0) > 0 or used.get((WILDCARD_IP, protocol, number), 0) > 0


class NodePorts:
    name: ClassVar[str] = "NodePorts"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Status | None:
        if not pod.host_ports:
            return SKIP
        wanted = tuple(_sanitize(p) for p in pod.host_ports if p[2] > 0)
        state[_FILTER_KEY] = (wanted, any(ip == WILDCARD_IP for ip, _, _ in wanted))
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        used = node.used_ports
        if not used:
            return None
        st = state.get(_FILTER_KEY)
        if st is None:  # PreFilter disabled
            st = state[_FILTER_KEY] = (tuple(_sanitize(p) for p in pod.host_ports if p[2] > 0), True)
        wanted, wants_wildcard = st
        any_ip = _used_protocol_ports(node) if wants_wildcard else None
        for port in wanted:
            if conflicts(used, port, any_ip):
                return _REJECTED
        return None
