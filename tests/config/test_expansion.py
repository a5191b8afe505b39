"""Default plugins and their expansion per extension point, as kube-scheduler does it."""

from __future__ import annotations

import logging

import pytest

from scheduler.config import default_config
from scheduler.config.expansion import merge_plugin_set
from scheduler.config.registry import NOT_IMPLEMENTED
from scheduler.config.types import PluginRef, PluginSet
from tests.config.util import DYNAMIC_CONFIG, error, load

# kube-scheduler v1.37's default plugins per extension point (its MultiPoint list expanded, as
# "Scheduling plugins" in kubernetes.io/docs/reference/scheduling/config lists them), with the
# score weights; tests/config/test_kube_defaults.py compares the list with the binary's own.
KUBE_DEFAULTS = {
    "pre_enqueue": ["SchedulingGates", "DynamicResources"],
    "queue_sort": ["PrioritySort"],
    "pre_filter": [
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "NodeDeclaredFeatures",
    ],
    "filter": [
        "NodeName",
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "NodeDeclaredFeatures",
    ],
    "post_filter": ["DynamicResources", "DefaultPreemption"],
    "pre_score": [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "VolumeBinding",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
    ],
    "score": [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "VolumeBinding",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
    ],
    "reserve": ["VolumeBinding", "DynamicResources"],
    "permit": [],
    "pre_bind": ["VolumeBinding", "DynamicResources"],
    "bind": ["DefaultBinder"],
    "post_bind": [],
}
KUBE_WEIGHTS = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "VolumeBinding": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "DynamicResources": 2,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
}


def only_implemented(names: list[str]) -> tuple[str, ...]:
    return tuple(n for n in names if n not in NOT_IMPLEMENTED)


@pytest.mark.parametrize("point", list(KUBE_DEFAULTS))
def test_defaults_are_kube_schedulers_less_the_unimplemented(point: str) -> None:
    (profile,) = default_config().profiles
    assert profile.plugins.at(point) == only_implemented(KUBE_DEFAULTS[point])


def test_default_score_weights() -> None:
    (profile,) = default_config().profiles
    assert dict(profile.score_weights) == {k: v for k, v in KUBE_WEIGHTS.items() if k not in NOT_IMPLEMENTED}


def test_score_weight_given_at_score_overrides_the_default() -> None:
    (p,) = load("profiles: [{plugins: {score: {enabled: [{name: NodeResourcesFit, weight: 5}]}}}]\n").profiles
    assert p.score_weights["NodeResourcesFit"] == 5
    # kube-scheduler puts a re-configured MultiPoint plugin first at that point
    assert p.plugins.score[0] == "NodeResourcesFit"
    assert sorted(p.plugins.score) == sorted(only_implemented(KUBE_DEFAULTS["score"]))
    assert p.plugins.filter == only_implemented(KUBE_DEFAULTS["filter"])


def test_score_weight_given_in_multi_point_overrides_the_default_in_place() -> None:
    (p,) = load(
        "profiles: [{plugins: {multiPoint: {enabled: [{name: TaintToleration, weight: 7}]}}}]\n"
    ).profiles
    assert p.score_weights["TaintToleration"] == 7
    assert p.plugins.score == only_implemented(KUBE_DEFAULTS["score"])


def test_weight_zero_or_none_means_one() -> None:
    (p,) = load("profiles: [{plugins: {score: {enabled: [{name: NodeAffinity, weight: 0}]}}}]\n").profiles
    assert p.score_weights["NodeAffinity"] == 1


def test_disabling_one_default_at_one_point() -> None:
    (p,) = load(
        "profiles: [{plugins: {score: {disabled: [{name: NodeResourcesBalancedAllocation}]}}}]\n"
    ).profiles
    assert "NodeResourcesBalancedAllocation" not in p.plugins.score
    assert "NodeResourcesBalancedAllocation" not in p.score_weights
    assert "NodeResourcesBalancedAllocation" in p.plugins.pre_score  # only score was disabled


def test_disabling_all_defaults_of_a_point() -> None:
    (p,) = load("""\
        profiles:
          - plugins:
              score:
                disabled: [{name: "*"}]
                enabled: [{name: NodeResourcesFit, weight: 2}]
        """).profiles
    assert p.plugins.score == ("NodeResourcesFit",)
    assert dict(p.score_weights) == {"NodeResourcesFit": 2}
    assert p.plugins.filter == only_implemented(KUBE_DEFAULTS["filter"])


def test_disabling_a_plugin_in_multi_point_removes_it_everywhere() -> None:
    (p,) = load("profiles: [{plugins: {multiPoint: {disabled: [{name: NodePorts}]}}}]\n").profiles
    assert "NodePorts" not in p.plugins.names()


def test_the_seed_shape_appends_dynamic_at_score_and_post_bind() -> None:
    (p,) = load(
        """\
        profiles:
          - schedulerName: default-scheduler
            plugins:
              score: {enabled: [{name: Dynamic, weight: 3}]}
              postBind: {enabled: [{name: Dynamic}]}
            pluginConfig: [DYNAMIC]
        """.replace("DYNAMIC", DYNAMIC_CONFIG)
    ).profiles
    assert p.plugins.score == (*only_implemented(KUBE_DEFAULTS["score"]), "Dynamic")
    assert p.scores()[-1] == ("Dynamic", 3)
    assert p.plugins.post_bind == ("Dynamic",)
    assert p.plugins.reserve == ("VolumeBinding", "DynamicResources")


def test_dynamic_in_multi_point_runs_at_all_its_points() -> None:
    (p,) = load(
        "profiles: [{plugins: {multiPoint: {enabled: [{name: Dynamic, weight: 3}]}}, "
        f"pluginConfig: [{DYNAMIC_CONFIG}]}}]\n"
    ).profiles
    assert (
        p.plugins.filter[-1]
        == p.plugins.score[-1]
        == p.plugins.reserve[-1]
        == p.plugins.post_bind[-1]
        == "Dynamic"
    )
    assert p.score_weights["Dynamic"] == 3


def test_explicit_point_and_multi_point_order() -> None:
    # kube-scheduler's order: re-configured MultiPoint plugins, then MultiPoint, then the other explicit ones
    (p,) = load("""\
        profiles:
          - plugins:
              multiPoint:
                disabled: [{name: "*"}]
                enabled: [{name: PrioritySort}, {name: DefaultBinder}, {name: NodeName}, {name: NodePorts}]
              filter:
                enabled: [{name: NodeUnschedulable}, {name: NodePorts}]
        """).profiles
    assert p.plugins.filter == ("NodePorts", "NodeName", "NodeUnschedulable")
    assert p.plugins.pre_filter == ("NodePorts",)


def test_merge_plugin_set_replaces_in_place_and_appends() -> None:
    default = PluginSet(enabled=(PluginRef("A", 1), PluginRef("B", 1), PluginRef("C", 1)))
    custom = PluginSet(enabled=(PluginRef("D", 4), PluginRef("B", 9)), disabled=(PluginRef("C"),))
    merged = merge_plugin_set(default, custom)
    assert merged.enabled == (PluginRef("A", 1), PluginRef("B", 9), PluginRef("D", 4))
    assert merged.disabled == (PluginRef("C"),)


def test_not_implemented_plugins_load_disabled_with_one_warning_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="scheduler.config")
    (p,) = load("""\
        profiles:
          - plugins:
              score:
                enabled: [{name: AzureDiskLimits, weight: 1}]
                disabled: [{name: AzureDiskLimits}]
              filter:
                disabled: [{name: GCEPDLimits}, {name: EBSLimits}]
        """).profiles
    names = p.plugins.names()
    assert not set(names) & NOT_IMPLEMENTED
    warned = [
        r.kv["plugin"]
        for r in caplog.records
        if "not implemented" in r.getMessage()  # type: ignore[attr-defined]
    ]  # type: ignore[attr-defined]
    assert sorted(warned) == ["AzureDiskLimits", "EBSLimits", "GCEPDLimits"]


def test_default_profile_loads_without_warnings(caplog: pytest.LogCaptureFixture) -> None:
    # DefaultPreemption is a plugin like any other now: nothing to warn about.
    caplog.set_level(logging.WARNING, logger="scheduler.config")
    cfg = load("profiles: [{schedulerName: a}, {schedulerName: b}]\n")
    assert not caplog.records
    assert all(p.plugins.post_filter == ("DynamicResources", "DefaultPreemption") for p in cfg.profiles)


@pytest.mark.parametrize(
    ("plugins", "path", "expected"),
    [
        (
            "{score: {enabled: [{name: Dynamc}]}}",
            "profiles[0].plugins.score.enabled[0].name",
            'unknown plugin "Dynamc"; known plugins: DefaultBinder, DefaultPreemption, Dynamic, DynamicResources,',
        ),
        (
            "{filter: {disabled: [{name: SelectorSpread}]}}",
            "profiles[0].plugins.filter.disabled[0].name",
            'unknown plugin "SelectorSpread"',
        ),
        (
            "{score: {enabled: [{name: '*'}]}}",
            "profiles[0].plugins.score.enabled[0].name",
            "only valid in disabled",
        ),
        (
            "{score: {enabled: [{name: NodePorts}]}}",
            "profiles[0].plugins.score.enabled[0].name",
            'plugin "NodePorts" does not run at score; it runs at: preFilter, filter',
        ),
        (
            "{filter: {enabled: [{name: NodeName}, {name: NodeName}]}}",
            "profiles[0].plugins.filter.enabled[1].name",
            'expected each plugin once, got "NodeName" again',
        ),
        (
            "{multiPoint: {enabled: [{name: NodeName}, {name: NodeName}]}}",
            "profiles[0].plugins.multiPoint.enabled[1].name",
            "again",
        ),
        (
            "{queueSort: {disabled: [{name: '*'}]}}",
            "profiles[0].plugins.queueSort",
            "expected exactly one queueSort plugin, got 0",
        ),
        (
            "{multiPoint: {disabled: [{name: DefaultBinder}]}}",
            "profiles[0].plugins.bind",
            "expected at least one bind",
        ),
        (
            "{score: {enabled: [{name: NodeAffinity, weight: -1}]}}",
            "profiles[0].plugins.score.enabled[0].weight",
            "expected an integer >= 0, got -1",
        ),
        ("{scroe: {}}", "profiles[0].plugins.scroe", 'did you mean "score"'),
    ],
)
def test_plugin_errors(plugins: str, path: str, expected: str) -> None:
    e = error(f"profiles: [{{schedulerName: a, plugins: {plugins}}}]\n")
    assert e.path == path
    assert expected in e.message


def test_profiles_must_share_the_queue_sort() -> None:
    e = error(
        "profiles: [{schedulerName: a}, {schedulerName: b, plugins: {queueSort: {disabled: [{name: '*'}]}}}]\n"
    )
    assert e.path == "profiles[1].plugins.queueSort"
