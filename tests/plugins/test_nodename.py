"""NodeName: a pod with spec.nodeName fits only that node."""

from __future__ import annotations

from scheduler.core.framework import SKIP, Code, CycleState
from scheduler.plugins.nodename import NodeName

from .builders import FakeSnapshot, node_info, pod_info, run_filter


def test_pod_without_node_name_is_skipped():
    pod = pod_info()
    assert NodeName(None, None).pre_filter(CycleState(), pod, FakeSnapshot()) is SKIP
    assert NodeName(None, None).filter(CycleState(), pod, node_info("n1")) is None


def test_pod_fits_only_the_named_node():
    pod = pod_info(node_name="n2")
    result = run_filter(NodeName(None, None), pod, [node_info("n1"), node_info("n2")])
    assert result["n2"] is None
    st = result["n1"]
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ("node(s) didn't match the requested node name",)
