"""The topology tree: groups per tier from label keys and from HyperNode objects, their nodes,
their parents, and the group a job already runs in."""

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from caldera.framework.objects import HyperNode, convert
from caldera.framework.resource import Resource
from caldera.framework.topology import CLUSTER_GROUP, NormalPodBinpack, build_topology
from caldera.hack.scenario import cluster, node, pod, podgroup

LEAF, SPINE = "example.com/leaf", "example.com/spine"


def hypernode(name: str, tier: int, *members: dict[str, Any]) -> HyperNode:
    return convert(
        HyperNode,
        {"metadata": {"name": name}, "spec": {"tier": tier, "members": list(members)}},
    )


def exact(name: str, kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def regex(pattern: str) -> dict[str, Any]:
    return {"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}


def labelled(**labels: str) -> dict[str, Any]:
    return {"type": "Node", "selector": {"labelMatch": {"matchLabels": labels}}}


def fabric():
    """Two spines, each with two leaves of two nodes; one node outside any leaf."""
    nodes = []
    for spine in ("s1", "s2"):
        for leaf in ("a", "b"):
            for i in range(2):
                name = f"{spine}{leaf}{i}"
                nodes.append(node(name, labels={LEAF: f"{spine}-{leaf}", SPINE: spine, "rack": leaf}))
    nodes.append(node("loner"))
    return cluster(nodes=nodes)


def names(snap, group) -> list[str]:
    rows = snap.node_list
    return sorted(rows[int(r)].name for r in group.rows)


def test_label_keys_make_one_tier_each_narrowest_first_with_the_cluster_on_top():
    snap = fabric()
    topo = build_topology(snap.node_list, [LEAF, SPINE])
    assert topo.tiers == [1, 2]
    assert [g.name for g in topo.groups(1)] == ["s1-a", "s1-b", "s2-a", "s2-b"]
    assert [g.name for g in topo.groups(2)] == ["s1", "s2"]
    assert names(snap, topo.group("s2-b", 1)) == ["s2b0", "s2b1"]
    assert topo.top_tier == 3
    assert topo.groups(3) == [topo.cluster]
    assert topo.cluster.name == CLUSTER_GROUP and topo.cluster.size == 9
    assert topo.tier_label(1) == LEAF and topo.tier_label(3) == "cluster"


def test_label_groups_find_their_parent_by_containment():
    snap = fabric()
    topo = build_topology(snap.node_list, [LEAF, SPINE])
    assert topo.group("s1-b", 1).parent is topo.group("s1", 2)
    assert topo.group("s1", 2).parent is topo.cluster
    assert [g.name for g in topo.group("s2", 2).children] == ["s2-a", "s2-b"]


def test_a_label_value_shared_across_parents_is_parented_by_the_cluster():
    snap = fabric()
    # "rack" a spans both spines: no spine holds it whole
    topo = build_topology(snap.node_list, ["rack", SPINE])
    assert topo.group("a", 1).parent is topo.cluster
    assert names(snap, topo.group("a", 1)) == ["s1a0", "s1a1", "s2a0", "s2a1"]


def test_hypernodes_resolve_exact_regex_label_and_nested_members():
    snap = fabric()
    hns = {
        "leaf-1": hypernode("leaf-1", 1, exact("s1a0"), exact("s1a1")),
        "leaf-2": hypernode("leaf-2", 1, regex("^s1b")),
        "leaf-3": hypernode("leaf-3", 1, labelled(**{LEAF: "s2-a"})),
        "spine-1": hypernode("spine-1", 2, exact("leaf-1", "HyperNode"), exact("leaf-2", "HyperNode")),
        "spine-2": hypernode("spine-2", 2, exact("leaf-3", "HyperNode"), exact("s2b0"), exact("s2b1")),
    }
    topo = build_topology(snap.node_list, hypernodes=hns)
    assert topo.errors == []
    assert names(snap, topo.group("leaf-2")) == ["s1b0", "s1b1"]
    assert names(snap, topo.group("leaf-3")) == ["s2a0", "s2a1"]
    assert names(snap, topo.group("spine-1")) == ["s1a0", "s1a1", "s1b0", "s1b1"]
    assert names(snap, topo.group("spine-2")) == ["s2a0", "s2a1", "s2b0", "s2b1"]
    assert topo.group("leaf-1").parent is topo.group("spine-1")
    assert topo.group("spine-1").parent is topo.cluster
    assert topo.tier_label(1) == "hypernode tier 1"


def test_hypernode_mistakes_are_reported_and_contained():
    snap = fabric()
    hns = {
        "bad-regex": hypernode("bad-regex", 1, regex("(")),
        "ghost-node": hypernode("ghost-node", 1, exact("no-such-node")),
        "leaf": hypernode("leaf", 1, exact("s1a0")),
        "p1": hypernode("p1", 2, exact("leaf", "HyperNode")),
        "p2": hypernode("p2", 2, exact("leaf", "HyperNode")),
        "upside": hypernode("upside", 1, exact("p1", "HyperNode")),
        "missing": hypernode("missing", 2, exact("nowhere", "HyperNode")),
    }
    topo = build_topology(snap.node_list, hypernodes=hns)
    assert topo.group("bad-regex").size == 0
    assert topo.group("ghost-node").size == 0
    assert names(snap, topo.group("p1")) == ["s1a0"]
    assert topo.group("p2").size == 0  # leaf already has parent p1
    assert topo.group("upside").size == 0  # a member must sit in a lower tier
    text = " | ".join(topo.errors)
    assert "two parents" in text and "lower tier" in text and "does not exist" in text


def test_labels_and_hypernodes_combine_into_one_tree():
    snap = fabric()
    hns = {"island": hypernode("island", 3, exact("loner"), regex("^s"))}
    topo = build_topology(snap.node_list, [LEAF, SPINE], hns)
    assert topo.tiers == [1, 2, 3]
    assert topo.group("s1", 2).parent is topo.group("island", 3)
    assert topo.group("island", 3).size == 9


def test_job_group_is_the_narrowest_group_holding_all_its_placed_pods():
    pg = podgroup("train", min_member=3)
    pods = [
        pod("train-0", group="train", node_name="s1a0", phase="Running"),
        pod("train-1", group="train", node_name="s1a1", phase="Running"),
        pod("train-2", group="train"),
    ]
    snap = fabric()
    snap2 = cluster(nodes=[n.node for n in snap.node_list], pods=pods, podgroups=[pg])
    topo = build_topology(snap2.node_list, [LEAF, SPINE])
    job = snap2.jobs["default/train"]
    assert topo.job_group(job, snap2.nodes).name == "s1-a"
    # a pod elsewhere in the same spine widens it to the spine
    moved = cluster(
        nodes=[n.node for n in snap.node_list],
        pods=[*pods[:1], pod("train-1", group="train", node_name="s1b0", phase="Running"), pods[2]],
        podgroups=[pg],
    )
    topo = build_topology(moved.node_list, [LEAF, SPINE])
    job = moved.jobs["default/train"]
    assert topo.job_group(job, moved.nodes).name == "s1"
    assert topo.job_group(job, moved.nodes, max_tier=1) is None


def test_containing_lists_groups_narrowest_first():
    snap = fabric()
    topo = build_topology(snap.node_list, [LEAF, SPINE])
    row = snap.nodes["s2b1"].row
    found = topo.containing(np.asarray([row]))
    assert [g.name for g in found] == ["s2-b", "s2", CLUSTER_GROUP]
    assert [g.name for g in topo.containing(np.asarray([row]), max_tier=2)] == ["s2-b", "s2"]


# -- HyperNode bin-packing of pods without a network topology (NormalPodBinpack) ------------------
GI = 2**30


def _use(table, row: int, cpu_m: float, pipelined_m: float = 0.0) -> None:
    """Set a node's used (and pipelined) cpu, in millicores; the rest of it idle."""
    alloc = table.allocatable[row]
    used = Resource(cpu_m, 0.0)
    idle = Resource(alloc[0] - cpu_m, alloc[1])
    table.write_usage(row, idle, used, Resource(), Resource(pipelined_m, 0.0))


def test_normal_pod_binpack_prefers_the_fuller_group_and_a_node_in_no_group():
    """Two tiers (leaf, spine) and the cluster, fading 1: a node's score is the mean of its leaf's,
    its spine's and the cluster's fill with the pod; "loner" is in no leaf or spine, which count 1
    for it (Volcano prefers nodes outside every HyperNode); a leaf the pod would overflow counts 0."""
    snap = fabric()
    table = snap.table
    row = {n.name: n.row for n in snap.node_list}
    topo = build_topology(snap.node_list, [LEAF, SPINE])
    _use(table, row["s1a0"], 4000)  # leaf s1-a: 4 of 16 cpu used
    _use(table, row["s2b0"], 8000)
    _use(table, row["s2b1"], 7500)  # leaf s2-b: 15.5 of 16 cpu used: a 1-cpu pod overflows it
    pod_ = SimpleNamespace(resreq=Resource(1000, 0.0))
    got = dict(
        zip(
            table.names,
            NormalPodBinpack(topo, table, {"cpu": 1}, 1.0).scores(pod_, table.all_rows),
            strict=True,
        )
    )
    cluster_fill = (4000 + 15500 + 1000) / 72000
    assert got["s1a0"] == pytest.approx(((5000 / 16000) + (5000 / 32000) + cluster_fill) / 3)
    assert got["s1b0"] == pytest.approx(((1000 / 16000) + (5000 / 32000) + cluster_fill) / 3)
    assert got["s2b0"] == pytest.approx((0.0 + (16500 / 32000) + cluster_fill) / 3)
    assert got["loner"] == pytest.approx((1.0 + 1.0 + cluster_fill) / 3)
    # fading 0: tier 1 alone
    alone = NormalPodBinpack(topo, table, {"cpu": 1}, 0.0).scores(pod_, table.all_rows)
    assert dict(zip(table.names, alone, strict=True))["s1a0"] == pytest.approx(5000 / 16000)


def _hypernode_fabric():
    """Leaves a (n0, n1, n2) and b (n2, n3): n2 is in both; spine s over them; n4 in none."""
    snap = cluster(nodes=[node(f"n{i}") for i in range(5)])
    hns = {
        "a": hypernode("a", 1, exact("n0"), exact("n1"), exact("n2")),
        "b": hypernode("b", 1, exact("n2"), exact("n3")),
        "s": hypernode("s", 2, exact("a", "HyperNode"), exact("b", "HyperNode")),
    }
    return snap, build_topology(snap.node_list, (), hns)


@pytest.mark.parametrize("fabric_of", [fabric, _hypernode_fabric])
def test_normal_pod_binpack_follows_placements_as_a_fresh_count_does(fabric_of):
    """The per-group sums follow the node table's write log (a few rows rewritten: only their
    groups move; many: all recounted); the scores always equal those of a scorer made afresh, and
    a node in two groups of a tier moves both."""
    got = fabric_of()
    snap, topo = got if isinstance(got, tuple) else (got, build_topology(got.node_list, [LEAF, SPINE]))
    table = snap.table
    table.log = []
    pod_ = SimpleNamespace(resreq=Resource(1000, GI))
    kept = NormalPodBinpack(topo, table)
    before = kept.scores(pod_, table.all_rows)
    steps = [
        [(2, 3000, 0.0)],
        [(0, 1000, 500.0), (3, 6000, 0.0)],
        [(r, 2000, 0.0) for r in range(table.rows)],
    ]
    for step in steps:
        for r, cpu_m, pipelined_m in step:
            _use(table, r, cpu_m, pipelined_m)
        now = kept.scores(pod_, table.all_rows)
        assert now == pytest.approx(NormalPodBinpack(topo, table).scores(pod_, table.all_rows))
        assert not np.allclose(now, before)
        before = now


def test_normal_pod_binpack_scores_nothing_for_a_pod_asking_no_weighted_resource():
    """Volcano's getPodHyperNodeBinPackingScore: no weighted resource asked, every group scores 0;
    a node outside a tier's groups still counts 1 there."""
    snap, topo = _hypernode_fabric()
    table = snap.table
    empty = SimpleNamespace(resreq=Resource(0.0, 0.0, 1.0, {"example.com/foo": 2}))
    got = dict(
        zip(table.names, NormalPodBinpack(topo, table, fading=1.0).scores(empty, table.all_rows), strict=True)
    )
    assert got["n0"] == 0.0
    assert got["n4"] == pytest.approx(2 / 3)  # in no leaf and no spine; the cluster scores 0
