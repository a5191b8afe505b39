from scheduler.core.cache import Cache
from scheduler.core.podinfo import PodInfo
from tests.core.util import node, pinfo, pod


def test_assume_counts_before_the_bind_and_forget_undoes_it() -> None:
    c = Cache()
    c.add_node(node("n1"))
    p = pinfo("p", cpu="500m", memory="1Gi")
    c.assume(p, "n1")
    ni = c.get("n1")
    assert ni.requested.milli_cpu == 500 and ni.requested.memory == 2**30
    assert c.is_assumed(p.uid)
    c.forget(p)
    assert ni.requested.milli_cpu == 0 and not c.has_pod(p.uid)


def test_sizes_count_nodes_pods_and_assumed_pods_as_kube_schedulers_cache() -> None:
    c = Cache()
    c.add_node(node("n1"))
    c.add_pod(pinfo("bound", cpu="1", node="n1"))
    c.add_pod(pinfo("ghost", cpu="1", node="n2"))  # its node not seen yet: counted, as upstream
    assumed = pinfo("p", cpu="1")
    c.assume(assumed, "n1")
    assert c.sizes() == {"assumed_pods": 1, "pods": 3, "nodes": 2}
    c.forget(assumed)
    assert c.sizes() == {"assumed_pods": 0, "pods": 2, "nodes": 2}


def test_informer_confirms_an_assumed_pod() -> None:
    c = Cache()
    c.add_node(node("n1"))
    raw = pod("p", cpu="1")
    c.assume(PodInfo.from_pod(raw), "n1")
    bound = {**raw, "spec": {**raw["spec"], "nodeName": "n1"}}
    c.add_pod(PodInfo.from_pod(bound))
    assert not c.is_assumed(raw["metadata"]["uid"])
    assert c.get("n1").requested.milli_cpu == 1000, "confirmed, not counted twice"
    c.forget(PodInfo.from_pod(raw))  # a late forget of a confirmed pod changes nothing
    assert c.get("n1").requested.milli_cpu == 1000


def test_pod_before_its_node_and_node_removal_keep_accounting() -> None:
    c = Cache()
    p = pinfo("p", cpu="1", node="n1")
    c.add_pod(p)
    assert c.list() == [], "a node only known from its pods is not schedulable"
    c.add_node(node("n1"))
    assert c.get("n1").requested.milli_cpu == 1000
    c.remove_node(node("n1"))
    assert c.get("n1") is None and c.list() == []
    c.add_node(node("n1"))
    assert c.get("n1").requested.milli_cpu == 1000
    c.remove_pod(p.uid)
    assert c.get("n1").requested.milli_cpu == 0


def test_generation_changes_on_every_change() -> None:
    c = Cache()
    c.add_node(node("n1"))
    g0 = c.get("n1").generation
    p = pinfo("p", node="n1")
    c.add_pod(p)
    g1 = c.get("n1").generation
    c.remove_pod(p.uid)
    assert g0 < g1 < c.get("n1").generation


def test_affinity_lists() -> None:
    c = Cache()
    c.add_node(node("n1"))
    c.add_node(node("n2"))
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    c.add_pod(pinfo("p", node="n2", affinity=anti))
    assert [n.name for n in c.have_pods_with_required_anti_affinity()] == ["n2"]
    assert [n.name for n in c.have_pods_with_affinity()] == ["n2"]


def test_affinity_lists_follow_pods_and_nodes() -> None:
    c = Cache()
    c.add_node(node("n1"))
    c.add_node(node("n2"))
    assert c.have_pods_with_affinity() == [] and c.have_pods_with_required_anti_affinity() == []
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    p = pinfo("p", node="n1", affinity=anti)
    c.add_pod(p)
    assert [n.name for n in c.have_pods_with_required_anti_affinity()] == ["n1"]
    c.add_pod(pinfo("plain", node="n2"))
    assert [n.name for n in c.have_pods_with_affinity()] == ["n1"]
    c.remove_node(node("n1"))
    assert c.have_pods_with_affinity() == [], "a node gone from the snapshot leaves the lists"
    c.add_node(node("n1"))
    assert [n.name for n in c.have_pods_with_affinity()] == ["n1"]
    c.remove_pod(p.uid)
    assert c.have_pods_with_affinity() == [] and c.have_pods_with_required_anti_affinity() == []
