import random

import pytest

from scheduler.core.cache import Cache
from scheduler.core.filtering import FitError, SchedulingError, num_feasible_nodes_to_find
from scheduler.core.framework import (
    SKIP,
    CycleState,
    PreFilterResult,
    default_normalize,
    default_normalize_list,
    unresolvable,
    unschedulable,
)
from scheduler.core.profile import Profile
from scheduler.logs import V
from tests.core.util import node, pinfo


class RejectNodes:
    """A filter rejecting a fixed set of nodes with a fixed reason."""

    def __init__(self, name: str, nodes: set[str], reason: str) -> None:
        self.name, self.nodes, self.reason = name, nodes, reason
        self.calls = 0

    def filter(self, state, pod, ni):
        self.calls += 1
        return unschedulable(self.reason) if ni.name in self.nodes else None


class ScoreTable:
    def __init__(self, name: str, table: dict[str, int], normalize: bool = False) -> None:
        self.name, self.table, self._normalize = name, table, normalize

    def score(self, state, pod, ni):
        return self.table.get(ni.name, 0)

    def normalize_scores(self, state, pod, scores):
        if self._normalize:
            default_normalize(scores)


def cluster(n: int) -> Cache:
    c = Cache()
    for i in range(n):
        c.add_node(node(f"n{i}"))
    return c


@pytest.mark.parametrize(
    ("pct", "nodes", "want"),
    [
        (0, 50, 50),
        (0, 100, 100),
        (0, 1000, 420),
        (0, 5000, 500),
        (0, 6000, 300),
        (10, 5000, 500),
        (100, 5000, 5000),
        (1, 500, 100),
        (50, 300, 150),
    ],
)
def test_num_feasible_nodes_to_find_matches_kube_scheduler(pct, nodes, want) -> None:
    # 1000 nodes: adaptive 50 - 1000/125 = 42%; 6000 nodes: 50 - 48 = 2% -> floor 5% = 300.
    assert num_feasible_nodes_to_find(pct, nodes) == want


def test_fit_error_message_aggregates_reasons_like_kube_scheduler() -> None:
    taint = RejectNodes("TaintToleration", {"n0"}, "node(s) had untolerated taint(s)")
    cpu = RejectNodes("NodeResourcesFit", {"n1", "n2"}, "Insufficient cpu")
    prof = Profile("default-scheduler", [taint, cpu], filters=["TaintToleration", "NodeResourcesFit"])
    with pytest.raises(FitError) as e:
        prof.schedule(CycleState(), pinfo("p"), cluster(3))
    assert e.value.message() == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."
    )
    assert e.value.unschedulable_plugins() == {"TaintToleration", "NodeResourcesFit"}


@pytest.mark.parametrize("reverse", [False, True])
def test_normalizing_a_list_equals_normalizing_by_name(reverse) -> None:
    rng = random.Random(3)
    for scores in (
        [],
        [0, 0, 0],
        [5],
        [0, 7, 3],
        *([rng.randrange(0, 50) for _ in range(9)] for _ in range(50)),
    ):
        by_name = {f"n{i}": s for i, s in enumerate(scores)}
        default_normalize(by_name, reverse=reverse)
        listed = list(scores)
        default_normalize_list(listed, reverse=reverse)
        assert listed == list(by_name.values())


def test_no_nodes() -> None:
    prof = Profile("p", [], filters=[])
    with pytest.raises(FitError) as e:
        prof.schedule(CycleState(), pinfo("p"), Cache())
    assert e.value.message() == "no nodes available to schedule pods"


def test_filtering_stops_after_enough_feasible_nodes_and_rotates_the_start() -> None:
    f = RejectNodes("F", set(), "")
    prof = Profile("p", [f], filters=["F"], percentage_of_nodes_to_score=10)
    c = cluster(1000)
    r = prof.schedule(CycleState(), pinfo("p"), c)
    assert f.calls == 100 and r.feasible == 100
    seen_first = {c.list()[i].name for i in range(100)}
    r2_nodes = set()

    class Record:
        name = "R"

        def score(self, state, pod, ni):
            r2_nodes.add(ni.name)
            return 0

    prof2 = Profile("p", [f, Record()], filters=["F"], scores=[("R", 1)], percentage_of_nodes_to_score=10)
    prof2.filtering._next_start = 100
    prof2.schedule(CycleState(), pinfo("p"), c)
    assert r2_nodes and not (r2_nodes & seen_first), "the next cycle starts where the last one stopped"


def _sequential_search(names, rejected, start, want):
    """Filtering node by node, as kube-scheduler describes it: (feasible, processed)."""
    feasible, processed = [], 0
    for i in range(len(names)):
        name = names[(start + i) % len(names)]
        processed += 1
        if name not in rejected:
            feasible.append(name)
            if len(feasible) >= want:
                break
    return feasible, processed


@pytest.mark.parametrize(("share_rejected", "pct"), [(0.0, 10), (0.3, 10), (0.95, 10), (0.5, 0), (0.99, 50)])
def test_filtering_in_chunks_evaluates_the_nodes_a_node_by_node_search_would(share_rejected, pct) -> None:
    rng = random.Random(share_rejected)
    c = cluster(1000)
    names = [ni.name for ni in c.list()]
    cpu = RejectNodes(
        "NodeResourcesFit", {n for n in names if rng.random() < share_rejected / 2}, "Insufficient cpu"
    )
    taint = RejectNodes("TaintToleration", {n for n in names if rng.random() < share_rejected / 2}, "tainted")
    scored: list[str] = []

    class Record:
        name = "R"

        def score(self, state, pod, ni):
            scored.append(ni.name)
            return 0

    prof = Profile(
        "p",
        [taint, cpu, Record()],
        filters=["TaintToleration", "NodeResourcesFit"],
        scores=[("R", 1)],
        percentage_of_nodes_to_score=pct,
    )
    want = num_feasible_nodes_to_find(pct, 1000)
    start = 0
    for _ in range(5):
        expected, processed = _sequential_search(names, cpu.nodes | taint.nodes, start, want)
        scored.clear()
        try:
            r = prof.schedule(CycleState(), pinfo("p"), c)
        except FitError as e:
            assert not expected
            assert len(e.statuses) == 1000
        else:
            assert (r.evaluated, r.feasible) == (processed, len(expected))
            if len(expected) > 1:
                assert scored == expected, "the same nodes, in the same order"
        start = (start + processed) % 1000
        assert prof.filtering._next_start == start


def test_pre_filter_skip_and_result() -> None:
    class OnlyN1:
        name = "NodeAffinity"

        def pre_filter(self, state, pod, snapshot):
            return PreFilterResult(frozenset({"n1"}))

        def filter(self, state, pod, ni):
            return None

    class Skipped:
        name = "NodePorts"
        called = False

        def pre_filter(self, state, pod, snapshot):
            return SKIP

        def filter(self, state, pod, ni):
            Skipped.called = True
            return unschedulable("no")

    prof = Profile("p", [OnlyN1(), Skipped()], filters=["NodeAffinity", "NodePorts"])
    r = prof.schedule(CycleState(), pinfo("p"), cluster(3))
    assert r.node == "n1" and not Skipped.called

    busy = RejectNodes("NodeResourcesFit", {"n1"}, "Insufficient cpu")
    prof = Profile("p", [OnlyN1(), busy], filters=["NodeAffinity", "NodeResourcesFit"])
    with pytest.raises(FitError) as e:
        prof.schedule(CycleState(), pinfo("p"), cluster(3))
    assert e.value.message() == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )


def test_pre_filter_rejection_is_the_message() -> None:
    class NoClaim:
        name = "VolumeBinding"

        def pre_filter(self, state, pod, snapshot):
            return unschedulable('persistentvolumeclaim "data" not found')

    prof = Profile("p", [NoClaim()], filters=[], pre_filters=["VolumeBinding"])
    with pytest.raises(FitError) as e:
        prof.schedule(CycleState(), pinfo("p"), cluster(2))
    assert e.value.message() == '0/2 nodes are available: persistentvolumeclaim "data" not found.'


def test_weighted_scores_pick_the_best_node() -> None:
    a = ScoreTable("A", {"n0": 100, "n1": 0, "n2": 50})
    b = ScoreTable("B", {"n0": 0, "n1": 100, "n2": 60})
    # n0: 100*1 + 0*2 = 100; n1: 0 + 200 = 200; n2: 50 + 120 = 170
    prof = Profile("p", [a, b], filters=[], scores=[("A", 1), ("B", 2)])
    assert prof.schedule(CycleState(), pinfo("p"), cluster(3)).node == "n1"
    # normalization: B's raw scores scaled so the top is 100
    b2 = ScoreTable("B", {"n0": 1, "n1": 2, "n2": 4}, normalize=True)
    prof = Profile("p", [a, b2], filters=[], scores=[("A", 1), ("B", 1)])
    # n0: 100 + 25 = 125, n1: 0 + 50, n2: 50 + 100 = 150
    assert prof.schedule(CycleState(), pinfo("p"), cluster(3)).node == "n2"


def test_at_v5_a_cycle_logs_the_top_nodes_and_the_plugin_that_decided(
    caplog: pytest.LogCaptureFixture,
) -> None:
    a = ScoreTable("A", {"n0": 100, "n1": 0, "n2": 50})
    b = ScoreTable("B", {"n0": 0, "n1": 100, "n2": 60})
    prof = Profile("p", [a, b], filters=[], scores=[("A", 1), ("B", 2)])
    with caplog.at_level(V(4), logger="scheduler.core.breakdown"):
        prof.schedule(CycleState(), pinfo("quiet"), cluster(3))
    assert not [r for r in caplog.records if r.getMessage() == "Scored nodes"]
    with caplog.at_level(V(5), logger="scheduler.core.breakdown"):
        prof.schedule(CycleState(), pinfo("p"), cluster(3))
    (rec,) = [r for r in caplog.records if r.getMessage() == "Scored nodes"]
    got = rec.kv  # type: ignore[attr-defined]
    # n1: 0 + 200 = 200, n2: 50 + 120 = 170, n0: 100 + 0 = 100; over n2, B gives n1 +80 (A: -50)
    assert got["node"] == "n1" and got["top"] == "n1=200,n2=170,n0=100"
    assert got["decidedBy"] == "B +80 over n2"


def test_ties_are_broken_at_random() -> None:
    prof = Profile("p", [ScoreTable("A", {})], filters=[], scores=[("A", 1)], rng=random.Random(7))
    c = cluster(5)
    picks = {prof.schedule(CycleState(), pinfo("p"), c).node for _ in range(60)}
    assert len(picks) > 1


def test_plugin_errors_become_scheduling_errors() -> None:
    class Boom:
        name = "Boom"

        def filter(self, state, pod, ni):
            raise RuntimeError("bug")

    prof = Profile("p", [Boom()], filters=["Boom"])
    with pytest.raises(SchedulingError, match="running Boom: bug"):
        prof.schedule(CycleState(), pinfo("p"), cluster(2))


def test_reserve_failure_unreserves_in_reverse_order() -> None:
    calls = []

    class R:
        def __init__(self, name, ok):
            self.name, self.ok = name, ok

        def reserve(self, state, pod, node):
            calls.append(("reserve", self.name))
            return None if self.ok else unschedulable("full")

        def unreserve(self, state, pod, node):
            calls.append(("unreserve", self.name))

    prof = Profile("p", [R("a", True), R("b", False), R("c", True)], filters=[], reserves=["a", "b", "c"])
    st = prof.reserve(CycleState(), pinfo("p"), "n0")
    assert st.plugin == "b"
    assert calls == [("reserve", "a"), ("reserve", "b"), ("unreserve", "b"), ("unreserve", "a")]


class LoadLimit(RejectNodes):
    """A relaxable filter (as Dynamic's limits): rejects its nodes unless the pass is relaxed,
    and ``always`` (as FailClosed's missing data) even then."""

    def __init__(self, nodes: set[str], always: set[str] = frozenset(), relaxable: bool = True) -> None:
        super().__init__("Load", nodes, "node(s) had load above 0.65")
        self.always, self.relaxable = always, relaxable

    def filter(self, state, pod, ni):
        if ni.name in self.always:
            return unresolvable("node(s) had no fresh load data")
        return None if state.relaxed else super().filter(state, pod, ni)


def load_profile(load: LoadLimit, *others) -> Profile:
    return Profile(
        "p",
        [load, *others],
        filters=[load.name, *(o.name for o in others)],
        scores=[(o.name, 1) for o in others if isinstance(o, ScoreTable)],
    )


def test_when_only_a_relaxable_filter_stands_in_the_way_the_pod_goes_where_it_else_would() -> None:
    load = LoadLimit({"n0", "n1", "n2"})
    prof = load_profile(load, ScoreTable("Score", {"n1": 9}))
    state = CycleState()
    r = prof.schedule(state, pinfo("p"), cluster(3))
    assert (r.node, r.relaxed) == ("n1", ("Load",))
    assert r.unrelaxed_message == "0/3 nodes are available: 3 node(s) had load above 0.65."
    assert state.relaxed


def test_no_relaxed_pass_while_a_node_passes_every_filter_or_the_plugin_may_not_relax() -> None:
    state = CycleState()
    r = load_profile(LoadLimit({"n0", "n1"}), ScoreTable("Score", {"n1": 9})).schedule(
        state, pinfo("p"), cluster(3)
    )
    assert (r.node, r.relaxed, state.relaxed) == ("n2", (), False)
    with pytest.raises(FitError) as e:
        load_profile(LoadLimit({"n0", "n1", "n2"}, relaxable=False)).schedule(
            CycleState(), pinfo("p"), cluster(3)
        )
    assert e.value.message() == "0/3 nodes are available: 3 node(s) had load above 0.65."


def test_the_relaxed_pass_still_runs_every_other_filter_and_what_the_plugin_must_reject() -> None:
    taint = RejectNodes("TaintToleration", {"n0"}, "node(s) had untolerated taint(s)")
    cpu = RejectNodes("NodeResourcesFit", {"n1"}, "Insufficient cpu")
    load = LoadLimit({"n1", "n2", "n3"}, always={"n2"})
    r = load_profile(load, taint, cpu).schedule(CycleState(), pinfo("p"), cluster(4))
    assert (r.node, r.relaxed) == ("n3", ("Load",))
    # Nothing fits even relaxed: the relaxed statuses explain it (and go to preemption), as
    # kube-scheduler without the limits would say.
    load = LoadLimit({"n1", "n2"}, always={"n2"})
    with pytest.raises(FitError) as e:
        load_profile(load, taint, cpu).schedule(CycleState(), pinfo("p"), cluster(3))
    assert e.value.message() == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had no fresh load data, "
        "1 node(s) had untolerated taint(s)."
    )
