"""PodInfo.from_pod's requests: the scoring view (non-zero requests) is the same as computing it
on its own for every shape of pod, and shares the requests' object only where nothing is
defaulted."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.podinfo import PodInfo
from scheduler.core.resources import pod_requests

QUANTITIES = {
    "cpu": st.sampled_from(["100m", "250m", "1", "2500m"]),
    "memory": st.sampled_from(["64Mi", "1Gi", "300M"]),
}


@st.composite
def requests(draw: Any) -> dict[str, str]:
    names = draw(st.sets(st.sampled_from(["cpu", "memory", "ephemeral-storage", "example.com/gpu"])))
    out = {}
    for n in names:
        out[n] = draw(QUANTITIES[n]) if n in QUANTITIES else draw(st.sampled_from(["1", "2", "1Gi"]))
    return out


@st.composite
def containers(draw: Any, init: bool = False) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(0 if init else 1, 3))):
        c: dict[str, Any] = {"name": f"c{i}"}
        if draw(st.booleans()):
            c["resources"] = {"requests": draw(requests())}
        if init and draw(st.booleans()):
            c["restartPolicy"] = "Always"
        out.append(c)
    return out


@st.composite
def specs(draw: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": draw(containers())}
    if init := draw(containers(init=True)):
        spec["initContainers"] = init
    if draw(st.booleans()):
        spec["resources"] = {"requests": draw(requests())}
    if draw(st.booleans()):
        spec["overhead"] = {"cpu": "50m", "memory": "10Mi"}
    return spec


@settings(max_examples=300, deadline=None)
@given(specs())
def test_the_scoring_view_is_what_it_is_when_computed_alone(spec: dict[str, Any]) -> None:
    pi = PodInfo.from_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec})
    assert pi.requests == pod_requests(spec)
    assert pi.non_zero_requests == pod_requests(spec, non_zero=True)


def test_a_pod_requesting_cpu_and_memory_everywhere_has_one_object_for_both() -> None:
    full = {"requests": {"cpu": "1", "memory": "1Gi"}}
    spec = {
        "containers": [{"name": "a", "resources": full}],
        "initContainers": [{"name": "i", "resources": full}],
    }
    pi = PodInfo.from_pod({"metadata": {"name": "p", "uid": "u"}, "spec": spec})
    assert pi.non_zero_requests is pi.requests
    spec["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "1"}}}]
    pi = PodInfo.from_pod({"metadata": {"name": "p", "uid": "u"}, "spec": spec})
    assert pi.non_zero_requests is not pi.requests
    assert pi.non_zero_requests == pi.requests  # the init container's default 200Mi is below 1Gi
    spec["containers"] = [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]
    pi = PodInfo.from_pod({"metadata": {"name": "p", "uid": "u"}, "spec": spec})
    assert (pi.requests.memory, pi.non_zero_requests.memory) == (0, 200 * 2**20)
