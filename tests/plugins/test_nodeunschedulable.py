"""NodeUnschedulable: cordoned nodes reject pods unless they tolerate the unschedulable taint."""

from __future__ import annotations

import pytest

from scheduler.core.framework import Code
from scheduler.plugins.nodeunschedulable import NodeUnschedulable

from .builders import node_info, pod_info, run_filter, toleration


def filter_status(pod, node):
    """The node's status, the plugin run node by node and over a list (with a schedulable node)."""
    return run_filter(NodeUnschedulable(None, None), pod, [node_info("schedulable"), node])[node.name]


def test_schedulable_node_admits_any_pod():
    assert filter_status(pod_info(), node_info("n1")) is None


def test_unschedulable_node_rejects_pod_without_toleration():
    st = filter_status(pod_info(), node_info("n1", unschedulable=True))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ("node(s) were unschedulable",)


@pytest.mark.parametrize(
    ("tol", "admitted"),
    [
        (toleration("node.kubernetes.io/unschedulable", effect="NoSchedule"), True),
        (toleration("node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule"), True),
        (toleration("node.kubernetes.io/unschedulable", operator="Exists"), True),
        (toleration(operator="Exists"), True),
        (toleration("node.kubernetes.io/unschedulable", effect="NoExecute"), False),
        (toleration("node.kubernetes.io/unschedulable", "true", effect="NoSchedule"), False),
        (toleration("other", operator="Exists"), False),
    ],
)
def test_unschedulable_node_admits_pod_tolerating_the_unschedulable_taint(tol, admitted):
    st = filter_status(pod_info(tolerations=[tol]), node_info("n1", unschedulable=True))
    assert (st is None) is admitted
