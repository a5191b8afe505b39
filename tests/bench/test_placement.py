"""The placement benchmark's pure parts: the seeded scenarios, the figures (worked out by hand on
small cases), the oracle's choice, the scrape configuration and the goals."""

from __future__ import annotations

import dataclasses

import pytest

from bench.placement import contenders as pc
from bench.placement import figures as fig
from bench.placement import model, report
from bench.placement import run as prun
from bench.placement.model import NODE_CPU_MILLI, NodeSpec, Outage, PodSpec, Rise, Scenario
from bench.placement.oracle import choose


def test_a_seed_gives_every_contender_and_every_run_the_same_scenario() -> None:
    for name in model.SCENARIOS:
        a, b = model.build(name, 7, 8), model.build(name, 7, 8)
        assert a == b
        assert a != model.build(name, 8, 8)
        assert len(a.nodes) == 8


def test_requests_predict_usage_badly_and_backgrounds_are_uneven() -> None:
    s = model.build("steady", 1, 16, scale=4)
    ratios = [p.usage_milli / p.request_milli for p in s.pods]
    assert sum(r < 0.5 for r in ratios) / len(ratios) > 0.45
    assert any(r > 1.0 for r in ratios)
    backgrounds = [n.background_milli / NODE_CPU_MILLI for n in s.nodes]
    assert max(backgrounds) - min(backgrounds) > 0.2


def test_the_scenarios_put_their_events_where_they_say() -> None:
    bursts = model.build("bursts", 1, 10)
    assert bursts.bursts == {0: 20, 1: 20, 2: 20}
    assert sorted({p.at for p in bursts.pods}) == [0.0, 90.0, 180.0]
    rising = model.build("rising", 1, 10)
    (rise,) = rising.rises
    assert rise.node == min(rising.nodes, key=lambda n: n.background_milli).index
    gone = model.build("prometheus-gone", 1, 10)
    assert gone.outages[0].seconds == 90
    with pytest.raises(ValueError, match="unknown scenario 'x'"):
        model.build("x", 1, 10)


def small() -> Scenario:
    """Two nodes: 10 % and 50 % busy; three pods of 400m real use each (1000m requested)."""
    nodes = (NodeSpec(0, 800, 0), NodeSpec(1, 4000, 0))
    pods = tuple(PodSpec(i, 0.0, 1000, 0, 400, 0, burst=0) for i in range(3))
    return Scenario("small", "", nodes, pods, duration=20, rises=(Rise(10, 0, 4400),), bursts={0: 3})


def test_utilization_counts_pods_from_their_bind_and_rises_from_theirs() -> None:
    s = small()
    placements = [fig.Placement(0, 0, 0.0), fig.Placement(1, 0, 6.0), fig.Placement(2, 1, 6.0)]
    assert fig.utilization(s, placements, 5.0) == [0.15, 0.5]
    assert fig.utilization(s, placements, 10.0) == [(800 + 800 + 4400) / 8000, 0.55]
    f = fig.figures(s, placements)
    # samples at 0, 5, 10, 15, 20 s
    cvs = [fig.cv(fig.utilization(s, placements, t)) for t in (0, 5, 10, 15, 20)]
    assert f["cv_mean"] == round(sum(cvs) / 5, 4)
    assert f["hottest_end"] == 0.75
    assert f["node_minutes_above_65"] == round(3 * 5 / 60, 2)  # node 0 from 10 s on
    assert f["burst_max_share"] == round(2 / 3, 4) and f["burst_max_fair_shares"] == round(4 / 3, 2)
    assert f["pending"] == 0
    assert fig.figures(s, placements[:2])["pending"] == 1
    assert f["cv_mean_outage"] is None  # no outage in this scenario


def test_the_outage_figure_averages_the_cv_while_prometheus_is_gone_only() -> None:
    s = dataclasses.replace(small(), outages=(Outage(5.0, 10.0),))
    placements = [fig.Placement(0, 0, 0.0), fig.Placement(1, 0, 6.0), fig.Placement(2, 1, 6.0)]
    cvs = [fig.cv(fig.utilization(s, placements, t)) for t in (5, 10, 15)]  # the samples from 5 to 15 s
    assert fig.figures(s, placements)["cv_mean_outage"] == round(sum(cvs) / 3, 4)


def test_a_pod_placed_above_the_limit_counts_only_while_another_node_had_room() -> None:
    s = small()
    # after the rise node 0 is at 65 % + pods: the third pod going there at 15 s is above the
    # limit while node 1 (50 %) had room
    assert fig.placed_above_limit(s, [fig.Placement(0, 0, 0.0), fig.Placement(1, 0, 15.0)]) == 1
    # before the rise node 0 was at 15 %: not above
    assert fig.placed_above_limit(s, [fig.Placement(0, 0, 0.0), fig.Placement(1, 0, 5.0)]) == 0
    # node 1 above the limit too (a pod of 1500m there first): no other room, so it does not count
    busy = Scenario("b", "", s.nodes, (*s.pods[:2], PodSpec(2, 0, 1000, 0, 1500, 0)), 20, s.rises)
    placements = [fig.Placement(2, 1, 1.0), fig.Placement(0, 0, 2.0), fig.Placement(1, 0, 15.0)]
    assert fig.utilization(busy, placements, 14.0)[1] > model.LIMIT
    assert fig.placed_above_limit(busy, placements) == 0


def test_the_oracle_takes_the_most_free_real_cpu_where_the_pod_fits_by_requests() -> None:
    pod = PodSpec(0, 0, 1000, 0, 100, 0)
    assert choose(pod, [4000, 1000, 2000], [0, 7500, 0], [1, 1, 1]) == 2  # 1 has the most free, no room
    assert choose(pod, [4000, 4000], [0, 0], [1, 1]) == 0  # ties: the first
    assert choose(pod, [0, 0], [7500, 7001], [1, 1]) is None
    assert choose(pod, [0, 100], [0, 0], [110, 1]) == 1  # pod count


def test_each_node_is_a_target_at_kwoks_server_with_its_own_path_and_labels() -> None:
    (job,) = prun.scrape_configs(9999, ["pl-a-00", "pl-a-01"])
    assert [c["labels"] for c in job["static_configs"]] == [
        {
            "__metrics_path__": "/metrics/nodes/pl-a-00/metrics/resource",
            "node": "pl-a-00",
            "instance": "pl-a-00",
        },
        {
            "__metrics_path__": "/metrics/nodes/pl-a-01/metrics/resource",
            "node": "pl-a-01",
            "instance": "pl-a-01",
        },
    ]
    assert {t for c in job["static_configs"] for t in c["targets"]} == {"127.0.0.1:9999"}


def outcome(
    cv: float, *, pending: int = 0, above: int = 0, shares: float | None = None, cpu: float = 1.0
) -> dict:
    figures = {
        "cv_mean": cv,
        "pending": pending,
        "placed_above_limit": above,
        "burst_max_fair_shares": shares,
    }
    return {"figures": figures, "cpu_seconds": cpu, "decisions": 10}


def test_goals_state_each_figure_and_whether_it_is_met() -> None:
    runs = [
        {
            "steady": {
                "oracle": outcome(0.1),
                "kube-scheduler": outcome(0.4),
                "ours": outcome(0.4, cpu=1.0),
                "ours-dynamic": outcome(0.12, cpu=1.1),
            },
            "bursts": {
                "oracle": outcome(0.3, shares=1.0),
                "kube-scheduler": outcome(0.4, shares=1.5),
                "ours": outcome(0.4, shares=1.5),
                "ours-dynamic": outcome(0.5, shares=2.5, pending=1),
            },
        }
    ]
    goals = {g["goal"].split(" (")[0]: g for g in report.goals(report.summarize(runs), runs)}
    assert goals["steady: CV of node CPU utilization at most 1.25x the oracle's"]["figure"] == 1.2
    assert goals["steady: CV of node CPU utilization at most 1.25x the oracle's"]["met"] is True
    assert goals["bursts: CV of node CPU utilization at most 1.25x the oracle's"]["met"] is False
    assert goals["steady: CV at most 0.6x kube-scheduler's"]["figure"] == 0.3  # oracle 0.25x there
    assert not any(g.startswith("bursts: CV at most") for g in goals)  # oracle only 0.75x there
    assert goals["some scenario where the oracle's CV is 0.5x kube-scheduler's or better"]["met"] is True
    assert goals["in a burst, no node gets more than twice its fair share"]["figure"] == 2.5
    assert goals["in a burst, no node gets more than twice its fair share"]["met"] is False
    assert goals["no pod left Pending that kube-scheduler would place"]["figure"] == 1
    cpu = goals["CPU per decision with Dynamic at most 1.2x ours without it"]
    assert (cpu["figure"], cpu["met"]) == (1.05, True)  # (1.1 + 1.0) / (1.0 + 1.0)
    assert all(set(g) >= {"goal", "figure", "met"} for g in goals.values())


def test_ours_crane_keeps_cranes_policy_and_ours_dynamic_takes_the_other(tmp_path) -> None:
    setup = pc.Setup("kc", tmp_path, "ks", "http://prom", "crane.yaml", {"metricsLag": "20s"}, "try.yaml", 10)

    def dynamic(contender: str) -> tuple[str, int, bool]:
        (profile,) = pc.ours_config(contender, setup)["profiles"]
        (score,) = profile["plugins"]["score"]["enabled"]
        (cfg,) = profile["pluginConfig"]
        return cfg["args"]["policyConfigPath"], score["weight"], cfg["args"]["estimator"]["enabled"]

    assert dynamic("ours-dynamic") == ("try.yaml", 10, True)
    assert dynamic("ours-crane") == ("crane.yaml", pc.CRANE_WEIGHT, False)
    assert "plugins" not in pc.ours_config("ours", setup)["profiles"][0]
    default = pc.Setup("kc", tmp_path, "ks", "http://prom", "crane.yaml", {}, "manifests.yaml", 7)
    (profile,) = pc.ours_config("ours-dynamic", default)["profiles"]
    assert profile["pluginConfig"][0]["args"]["policyConfigPath"] == "manifests.yaml"
    assert profile["plugins"]["score"]["enabled"][0]["weight"] == 7
