"""PreFilter extensions (``add_pod``/``remove_pod``) of PodTopologySpread and InterPodAffinity.

The property: PreFilter's state, cloned and then told that some pods were
removed and others added, gives the same Filter verdicts (and the same
counts) as PreFilter run afresh on a cluster where that really happened.
Preemption's what-if runs and the nominated-pods filter pass rely on it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.cache import Cache
from scheduler.core.framework import SKIP, CycleState
from scheduler.core.podinfo import PodInfo
from scheduler.plugins.interpodaffinity.plugin import InterPodAffinity
from scheduler.plugins.podtopologyspread.plugin import PodTopologySpread
from tests.plugins.builders import FakeHandle, make_node, make_pod

NODES = [("n0", "z0"), ("n1", "z0"), ("n2", "z1"), ("n3", "z1")]
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"

# (node index, namespace, app label or None, the role its anti-affinity keeps away, terminating)
pod_specs = st.tuples(
    st.integers(0, len(NODES) - 1),
    st.sampled_from(["a", "b"]),
    st.sampled_from(["x", "y", None]),
    st.sampled_from([None, "incoming", "other"]),
    st.booleans(),
)


def build_pod(i: int, spec: tuple[int, str, str | None, str | None, bool], prefix: str = "p") -> PodInfo:
    node, ns, app, anti, terminating = spec
    affinity = None
    if anti:
        affinity = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"role": anti}},
                        "namespaces": ["a"],
                        "topologyKey": ZONE,
                    }
                ]
            }
        }
    pod = make_pod(
        f"{prefix}{i}",
        ns,
        labels={"app": app} if app else None,
        affinity=affinity,
        node_name=NODES[node][0],
        uid=f"{prefix}-uid-{i}",
    )
    if terminating:
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return PodInfo.from_pod(pod)


def incoming() -> PodInfo:
    x = {"matchLabels": {"app": "x"}}
    return PodInfo.from_pod(
        make_pod(
            "incoming",
            "a",
            labels={"role": "incoming", "app": "x"},
            topology_spread_constraints=[
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": x},
                {"maxSkew": 2, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": x},
            ],
            affinity={
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": x, "topologyKey": ZONE}
                    ]
                },
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "y"}}, "topologyKey": HOST}
                    ]
                },
            },
        )
    )


def cluster(pods: list[PodInfo]) -> Cache:
    cache = Cache()
    for name, zone in NODES:
        cache.add_node(make_node(name, labels={ZONE: zone}))
    for p in pods:
        cache.add_pod(p)
    return cache


def plugins(cache: Cache) -> list[Any]:
    handle = FakeHandle(cache)  # type: ignore[arg-type]
    spread_args = type("Args", (), {"defaulting_type": "List"})()
    return [PodTopologySpread(spread_args, handle), InterPodAffinity(None, handle)]


def verdicts(plugin: Any, state: CycleState, pod: PodInfo, cache: Cache) -> dict[str, Any]:
    out = {}
    nodes = cache.list()
    for ni in nodes:
        st_ = plugin.filter(state, pod, ni)
        out[ni.name] = None if st_ is None else (st_.code, st_.reasons)
    batch = plugin.filter_nodes(state, pod, list(nodes)) or [None] * len(nodes)
    assert [None if st_ is None else (st_.code, st_.reasons) for st_ in batch] == list(out.values())
    return out


def counts(plugin: Any, state: CycleState) -> Any:
    s = state.get(plugin.name + "/filter")
    if isinstance(plugin, PodTopologySpread):
        return s.counts, s.minimums
    # InterPodAffinity: groups left empty are the same as absent
    return (
        {g: by for g, by in s.incoming.items() if by},
        {g: by for g, by in s.existing.items() if by},
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(pod_specs, max_size=8),
    st.lists(st.booleans(), min_size=8, max_size=8),
    st.lists(pod_specs, max_size=3),
)
def test_extensions_match_a_fresh_prefilter(
    existing: list[Any], removed_flags: list[bool], added_specs: list[Any]
) -> None:
    pod = incoming()
    pods = [build_pod(i, s) for i, s in enumerate(existing)]
    removed = [p for p, gone in zip(pods, removed_flags, strict=False) if gone]
    added = [build_pod(i, s, prefix="new") for i, s in enumerate(added_specs)]

    before = cluster(pods)
    after = cluster([p for p in pods if p not in removed] + added)
    for plugin_before, plugin_after in zip(plugins(before), plugins(after), strict=True):
        state = CycleState()
        fresh = CycleState()
        assert plugin_before.pre_filter(state, pod, before) is not SKIP
        assert plugin_after.pre_filter(fresh, pod, after) is not SKIP

        changed = state.clone()
        # Verdicts taken before the changes must not outlive them.
        assert verdicts(plugin_before, changed, pod, before) == verdicts(plugin_before, state, pod, before)
        for p in removed:
            ni = before.get(p.node_name).clone()
            ni.remove_pod(p.uid)
            assert plugin_before.remove_pod(changed, pod, p, ni) is None
        for p in added:
            ni = before.get(p.node_name).clone()
            ni.add_pod(p)
            assert plugin_before.add_pod(changed, pod, p, ni) is None

        assert counts(plugin_before, changed) == counts(plugin_after, fresh)
        assert verdicts(plugin_before, changed, pod, after) == verdicts(plugin_after, fresh, pod, after)
        # and the original state, with the running sums it shares, is untouched
        again = CycleState()
        plugin_before.pre_filter(again, pod, before)
        assert counts(plugin_before, state) == counts(plugin_before, again)


@pytest.mark.parametrize("plugin_type", [PodTopologySpread, InterPodAffinity])
def test_extensions_refuse_a_state_that_was_not_cloned(plugin_type: type) -> None:
    pod = incoming()
    other = build_pod(0, (0, "a", "x", None, False))
    cache = cluster([])
    plugin = next(p for p in plugins(cache) if isinstance(p, plugin_type))
    state = CycleState()
    plugin.pre_filter(state, pod, cache)
    with pytest.raises(RuntimeError, match="not cloned"):
        plugin.add_pod(state, pod, other, cache.get("n0"))
