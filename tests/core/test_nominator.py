"""The nominated pods the queue keeps, as kube-scheduler's nominator."""

from __future__ import annotations

from scheduler.core.nominator import Nominator
from scheduler.core.podinfo import PodInfo
from tests.core.util import pod


def pi(name: str, nnn: str = "", uid: str | None = None, node: str = "") -> PodInfo:
    raw = pod(name, uid=uid or f"uid-{name}", node=node)
    if nnn:
        raw["status"]["nominatedNodeName"] = nnn
    return PodInfo.from_pod(raw)


def test_nominate_from_status_or_explicitly() -> None:
    n = Nominator()
    n.nominate(pi("a", nnn="n1"))
    n.nominate(pi("b"))  # no status nomination: nothing
    n.nominate(pi("c"), "n1")
    assert sorted(p.name for p in n.pods_for_node("n1")) == ["a", "c"]
    assert n.node_of("uid-b") == "" and len(n) == 2
    n.nominate(pi("c"), "n2")  # moves
    assert [p.name for p in n.pods_for_node("n2")] == ["c"]
    n.nominate(pi("c"), "")  # ends it
    assert n.node_of("uid-c") == "" and n.snapshot() == {"n1": (n.pods_for_node("n1")[0],)}


def test_a_bound_pod_is_never_nominated() -> None:
    n = Nominator()
    n.nominate(pi("a", nnn="n1", node="n1"))
    n.nominate(pi("b", node="n2"), "n2")
    assert len(n) == 0


def test_update_keeps_a_nomination_made_in_memory() -> None:
    n = Nominator()
    old = pi("a")
    n.nominate(old, "n1")
    # an update that arrives before the status write (both sides without nominatedNodeName)
    n.update(old, pi("a"))
    assert n.node_of("uid-a") == "n1"
    # the status write arrives, then a later one clears it
    written = pi("a", nnn="n1")
    n.update(pi("a"), written)
    assert n.node_of("uid-a") == "n1"
    n.update(written, pi("a"))
    assert n.node_of("uid-a") == ""


def test_delete() -> None:
    n = Nominator()
    n.nominate(pi("a"), "n1")
    n.delete("uid-a")
    n.delete("uid-a")
    assert n.snapshot() == {} and n.pods_for_node("n1") == []
