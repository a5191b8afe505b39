"""The ``dra`` workload's pods and slices, as the API server and the scheduler read them."""

from __future__ import annotations

from bench import dra, kwok
from bench import workloads as wl
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.dynamicresources.allocator import pools_for_node
from scheduler.plugins.dynamicresources.claims import pod_claims


def test_a_dra_pod_claims_one_device_through_the_template() -> None:
    w = wl.BY_NAME["dra"]
    assert w.devices and not w.raw
    pod = w.pod(3, "ours", wl.Shape(nodes=10, pods=20))
    assert pod["spec"]["resourceClaims"] == [{"name": dra.CLAIM, "resourceClaimTemplateName": dra.TEMPLATE}]
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": dra.CLAIM}]
    # the claim is found once the resourceclaim controller names it in the pod's status
    pod["metadata"]["uid"] = "u"
    pod["status"] = {"resourceClaimStatuses": [{"name": dra.CLAIM, "resourceClaimName": "made"}]}
    assert [c.claim for c in pod_claims(PodInfo.from_pod(pod))] == ["made"]


def test_each_kwok_node_publishes_its_own_pool_of_devices() -> None:
    node = kwok.node_name(7)
    (pool,) = pools_for_node([dra.slice_body(node)], node, {})
    assert (pool.driver, pool.name, len(pool.devices)) == (dra.DRIVER, node, dra.DEVICES_PER_NODE)
    assert pools_for_node([dra.slice_body(node)], kwok.node_name(8), {}) == []
