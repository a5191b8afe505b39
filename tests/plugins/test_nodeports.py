"""NodePorts: host port conflicts as kube-scheduler's HostPortInfo decides them."""

from __future__ import annotations

import pytest

from scheduler.core.framework import SKIP, Code, CycleState
from scheduler.plugins.nodeports import NodePorts

from .builders import FakeSnapshot, container, host_port, node_info, pod_info, run_filter

REASON = "node(s) didn't have free ports for the requested pod ports"


def hp(spec: str) -> dict:
    """'UDP/127.0.0.1/8080' -> a container port; an empty IP or protocol is left unset."""
    proto, ip, port = spec.split("/")
    return host_port(int(port), proto or None, ip or None)


def ports_pod(*specs: str, name: str = "p"):
    return pod_info(name, host_ports=[hp(s) for s in specs])


def fits(want: list[str], existing: list[str]) -> bool:
    node = node_info("n1", pods=[ports_pod(*existing, name="existing")] if existing else [])
    st = run_filter(NodePorts(None, None), ports_pod(*want), [node])["n1"]
    if st is not None:
        assert st.code == Code.UNSCHEDULABLE
        assert st.reasons == (REASON,)
    return st is None


@pytest.mark.parametrize(
    ("want", "existing", "ok"),
    [
        (["UDP/127.0.0.1/8080"], [], True),
        (["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], False),  # same udp port
        (["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], False),  # same tcp port
        (["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], True),  # different host ip
        (["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], True),  # different protocol
        (["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8001", "UDP/127.0.0.1/8080"], False),
        (["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"], False),
        (["TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], False),  # wildcard wants, specific used
        (["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], False),
        (["TCP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], False),  # specific wants, wildcard used
        (["UDP/0.0.0.0/8001"], ["TCP/0.0.0.0/8001"], True),  # wildcard, other protocol
        (["UDP/0.0.0.0/8001"], ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"], False),
        # unset IP means 0.0.0.0 and unset protocol TCP
        (["//8001"], ["TCP/127.0.0.1/8001"], False),
        (["TCP/127.0.0.1/8001"], ["//8001"], False),
        (["UDP//8001"], ["//8001"], True),
        (["TCP/10.0.0.1/8001"], ["TCP/10.0.0.2/8001", "TCP/10.0.0.3/8002"], True),
    ],
)
def test_port_conflicts(want, existing, ok):
    assert fits(want, existing) is ok


def test_pod_without_host_ports_is_skipped():
    pod = pod_info(containers=[container(ports=[{"containerPort": 80}])])
    assert NodePorts(None, None).pre_filter(CycleState(), pod, FakeSnapshot()) is SKIP


def test_sidecar_ports_count_but_classic_init_container_ports_do_not():
    sidecar = container("sidecar", ports=[hp("TCP//9000")], restart_policy="Always")
    classic = container("init", ports=[hp("TCP//9001")])
    existing = pod_info("existing", containers=[container()], init_containers=[sidecar, classic])
    node = node_info("n1", pods=[existing])
    assert not fits_pod(ports_pod("TCP//9000"), node)
    assert fits_pod(ports_pod("TCP//9001"), node)


def fits_pod(pod, node) -> bool:
    return run_filter(NodePorts(None, None), pod, [node])[node.name] is None


def test_ports_are_free_again_when_the_pod_leaves():
    existing = ports_pod("TCP/127.0.0.1/8001", name="existing")
    node = node_info("n1", pods=[existing])
    pod = ports_pod("TCP/0.0.0.0/8001")
    assert not fits_pod(pod, node)  # fills the node's memo
    node.remove_pod(node.pods[next(iter(node.pods))].uid)
    assert fits_pod(pod, node)


def test_two_pods_sharing_a_port_keep_it_used_until_both_leave():
    a, b = ports_pod("TCP/0.0.0.0/80", name="a"), ports_pod("TCP/0.0.0.0/80", name="b")
    node = node_info("n1", pods=[a, b])
    uids = list(node.pods)
    node.remove_pod(uids[0])
    assert not fits_pod(ports_pod("TCP/10.0.0.1/80"), node)
    node.remove_pod(uids[1])
    assert fits_pod(ports_pod("TCP/10.0.0.1/80"), node)


def test_filter_runs_without_prefilter():
    node = node_info("n1", pods=[ports_pod("TCP/127.0.0.1/8001", name="existing")])
    pl = NodePorts(None, None)
    assert pl.filter(CycleState(), ports_pod("TCP/0.0.0.0/8001"), node).reasons == (REASON,)
    assert pl.filter(CycleState(), ports_pod("TCP/127.0.0.2/8001"), node) is None
