"""Volcano's pkg/scheduler/plugins/network-topology-aware/network_topology_aware_test.go
(volcano-sh/volcano ed72c7c8), its sub-job and node-score parts as data; each case is named by Go
test and ``name``.

- TestNew: the arguments read (``getPriorityWeight``): ``weight`` and the ``hypernode.binpack.*``
  weights, negatives taken as the default. Caldera refuses a value of the wrong type when the conf
  is read, so the Go case that passes ``"a"`` for a bool is left out of its data; the
  ``hypernode.binpack.normal-pod.*`` keys are left out too (normal-pod bin-packing is not
  implemented; ``normal-pod.enable: false`` is accepted).
- TestNetworkTopologyAwareNodeScore_Hard / _Soft: ``batchNodeOrderFnForNetworkAwarePods``, checked
  on ``framework.topology.network_aware_scores`` times 100 times ``weight`` (what the plugin's
  node-order part returns): the job's allocated HyperNode (Go: the PodGroup's annotation) is the
  narrowest group holding its placed pods, which is the annotation in every case. The Hard and Soft
  tests hold the same cases. Caldera gives this score to the pods of jobs with sub-group policies
  (a whole job is placed by its group choice, actions/topology.py); the function is the same.
- TestHyperNodeOrderFn: the HyperNode bin-packing score of a sub-job over every HyperNode and the
  cluster (``ClusterTopHyperNode``), through the session's ``hypernode_scores``.
"""

from __future__ import annotations

import numpy as np
import pytest

from caldera.config.conf import parse_conf
from caldera.framework.objects import HyperNode, convert
from caldera.framework.session import close_session, open_session
from caldera.framework.subjobs import sub_jobs
from caldera.framework.topology import CLUSTER_GROUP, build_topology, network_aware_scores
from caldera.hack import scenario
from caldera.plugins.network_topology_aware import NetworkTopologyAwarePlugin, weights_from
from volcano.port import REGISTRY, T0, build_node, build_pod, build_queue, res

EPS = 1e-1  # the Go test's eps


def hypernodes(tree: dict[str, tuple[int, list[str]]]) -> dict[str, HyperNode]:
    out = {}
    for name, (tier, members) in tree.items():
        kind = "HyperNode" if members[0] in tree else "Node"
        spec = {
            "tier": tier,
            "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
        }
        out[name] = convert(HyperNode, {"metadata": {"name": name, "creationTimestamp": T0}, "spec": spec})
    return out


LEAVES = {f"s{i}": (1, [f"s{i}-n1", f"s{i}-n2"]) for i in (3, 4, 5, 6)}
THREE_TIERS = {"s0": (3, ["s1", "s2"]), "s1": (2, ["s3", "s4"]), "s2": (2, ["s5", "s6"]), **LEAVES}
#: s0 holds s1 only: s2 (s5, s6) meets s3 at the cluster alone
SPLIT = {"s0": (3, ["s1"]), "s1": (2, ["s3", "s4"]), "s2": (2, ["s5", "s6"]), **LEAVES}
TWO_TIERS = {"s0": (2, ["s1", "s2"]), "s1": (1, ["s1-n1", "s1-n2"]), "s2": (1, ["s2-n1", "s2-n2"])}
ONE_TIER = {"s1": (1, ["s1-n1", "s1-n2"]), "s2": (1, ["s2-n1", "s2-n2"])}

# -- TestNew --------------------------------------------------------------------------------------
NEW_CASES = {
    "build plugin with no arguments": ({}, 1, {"cpu": 1, "memory": 1}),
    "build plugin with customized valid arguments": (
        {
            "weight": 2,
            "hypernode.binpack.cpu": 3,
            "hypernode.binpack.memory": 4,
            "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
            "hypernode.binpack.resources.nvidia.com/gpuxxx": 5,
            "hypernode.binpack.resources.example.com/foo": 6,
            "hypernode.binpack.normal-pod.enable": False,
        },
        2,
        {"cpu": 3, "memory": 4, "nvidia.com/gpu": 1, "example.com/foo": 6},
    ),
    "build plugin with customized invalid arguments": (
        {
            "weight": -1,
            "hypernode.binpack.cpu": -1,
            "hypernode.binpack.memory": -1,
            "hypernode.binpack.resources": "nvidia.com/gpuxxx, example.com/foo",
            "hypernode.binpack.resources.nvidia.com/gpu": -1,
            "hypernode.binpack.resources.example.com/foo": -1,
        },
        1,
        {"cpu": 1, "memory": 1, "nvidia.com/gpuxxx": 1, "example.com/foo": 1},
    ),
}


def _arguments(args: dict):
    lines = "".join(
        f"      {k}: {v!r}\n".replace("'", '"')
        if isinstance(v, str)
        else f"      {k}: {str(v).lower() if isinstance(v, bool) else v}\n"
        for k, v in args.items()
    )
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: network-topology-aware\n' + (
        f"    arguments:\n{lines}" if args else ""
    )
    parsed = parse_conf(text, REGISTRY)
    return parsed.tiers[0].plugins[0].arguments


@pytest.mark.parametrize("name", list(NEW_CASES))
def test_new(name):
    args, weight, weights = NEW_CASES[name]
    plugin = NetworkTopologyAwarePlugin(_arguments(args))
    assert (plugin.weight, plugin.weights) == (weight, weights)
    assert weights_from(_arguments(args)) == (weight, weights)


# -- TestNetworkTopologyAwareNodeScore_Hard / _Soft ----------------------------------------------
#: name → (tree, placed pods' nodes, pods in the job, weight, expected scores)
NODE_SCORE_CASES = {
    "Tasks in job first scheduler, score all nodes zero": (
        THREE_TIERS,
        [],
        1,
        1,
        {"s3-n1": 0.0, "s4-n1": 0.0, "s5-n1": 0.0},
    ),
    "Tasks in job rescheduled, score zero when the hyperNode of node has empty LCA hyperNode with jobAllocatedHyperNode": (
        SPLIT,
        ["s3-n1", "s3-n2"],
        3,
        1,
        {"s5-n1": 0.0, "s6-n1": 0.0},
    ),
    "Tasks in job rescheduled, score nodes according to node hypernode LCA hyperNode tier": (
        THREE_TIERS,
        ["s3-n1", "s3-n2"],
        3,
        1,
        {"s3-n1": 100.0, "s4-n1": 66.6, "s5-n1": 33.3},
    ),
    "Tasks in job rescheduled, score hyperNodes according to node LCA hyperNode tier of the hyperNode and jobAllocatedHyperNode when hyperNodesInfo has two tier": (
        TWO_TIERS,
        ["s1-n1"],
        2,
        1,
        {"s1-n1": 100.0, "s2-n1": 50.0},
    ),
    "Tasks in job rescheduled, score hyperNodes according to node LCA hyperNode tier of the hyperNode and jobAllocatedHyperNode when hyperNodesInfo has one tier": (
        ONE_TIER,
        ["s1-n1"],
        2,
        1,
        {"s1-n1": 100.0, "s2-n1": 0.0},
    ),
    "Tasks in job rescheduled, score hyperNodes according to node LCA hyperNode tier of the hyperNode and jobAllocatedHyperNode with plugin weight 2": (
        THREE_TIERS,
        ["s3-n1", "s3-n2"],
        3,
        2,
        {"s3-n1": 200.0, "s4-n1": 133.3, "s5-n1": 66.6},
    ),
    "Tasks in job rescheduled, score hyperNodes according to node LCA hyperNode tier and task num of the hyperNode when there are at least two hyperNodes have max hyperNode tier score": (
        THREE_TIERS,
        ["s3-n1", "s3-n2", "s4-n1"],
        4,
        1,
        {"s3-n1": 116.6, "s4-n1": 91.6, "s5-n1": 33.3},
    ),
}


@pytest.mark.parametrize(
    "go_test", ["TestNetworkTopologyAwareNodeScore_Hard", "TestNetworkTopologyAwareNodeScore_Soft"]
)
@pytest.mark.parametrize("name", list(NODE_SCORE_CASES))
def test_network_aware_node_score(go_test, name):
    tree, placed, tasks, weight, expected = NODE_SCORE_CASES[name]
    names = sorted({m for _, members in tree.values() for m in members if "-" in m})
    row = {n: i for i, n in enumerate(names)}
    node_list = [type("N", (), {"name": n, "row": row[n], "labels": {}})() for n in names]
    topo = build_topology(node_list, (), hypernodes(tree))
    placed_rows = np.asarray(sorted(row[n] for n in placed), dtype=np.intp)
    found = topo.containing(placed_rows) if placed else []
    rows = np.asarray([row[n] for n in expected], dtype=np.intp)
    got = 100.0 * weight * network_aware_scores(topo, rows, found[0] if found else None, placed_rows, tasks)
    for (node, want), have in zip(expected.items(), got.tolist(), strict=True):
        assert abs(have - want) <= EPS, (node, have, want)


# -- TestHyperNodeOrderFn -------------------------------------------------------------------------
FOO = "example.com/foo"
ORDER_CASES = {
    "score hypernodes for a subjob with default plugin arguments": (
        {},
        {},
        {"s3": ("2", "4G", 0), "s4": ("4", "4G", 0), "s5": ("2", "8G", 0), "s6": ("4", "8G", 0)},
        {
            "s0": 25.0,
            "s1": 58.3,
            "s2": 45.8,
            "s3": 0.0,
            "s4": 100.0,
            "s5": 0.0,
            "s6": 75.0,
            CLUSTER_GROUP: 25.0,
        },
    ),
    "score hypernodes for a subjob with customized plugin arguments": (
        {
            "weight": 10,
            "hypernode.binpack.cpu": 3,
            "hypernode.binpack.memory": 4,
            "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
            "hypernode.binpack.resources.nvidia.com/gpu": 2,
            "hypernode.binpack.resources.example.com/foo": 3,
        },
        {FOO: "8"},
        {"s3": ("2", "4G", 8), "s4": ("4", "4G", 8), "s5": ("2", "8G", 16), "s6": ("4", "8G", 16)},
        {
            "s0": 266.7,
            "s1": 700.0,
            "s2": 450.0,
            "s3": 0.0,
            "s4": 0.0,
            "s5": 0.0,
            "s6": 800.0,
            CLUSTER_GROUP: 266.7,
        },
    ),
}


@pytest.mark.parametrize("name", list(ORDER_CASES))
def test_hypernode_order_fn(name):
    args, extra, leaves, expected = ORDER_CASES[name]
    nodes = []
    for leaf, (cpu, mem, foo) in leaves.items():
        # the leaf's first node has the foo devices (n2 has 0)
        nodes.append(build_node(f"{leaf}-n1", res(cpu, mem, pods="10", **({FOO: str(foo)} if foo else {}))))
        nodes.append(build_node(f"{leaf}-n2", res(cpu, mem, pods="10")))
    pg = scenario.podgroup_dict(
        "pg1",
        min_member=2,
        queue="q1",
        namespace="ns1",
        phase="Inqueue",
        uid="ns1-pg1",
        network_topology={"mode": "hard", "highestTierAllowed": 2},
        sub_group_policy=[{"name": "task1", "matchLabelKeys": ["volcano.sh/task-spec"]}],
    )
    pg["metadata"]["creationTimestamp"] = T0
    pods = [
        build_pod("ns1", p, "", "Pending", res("4", "4G", **extra), "pg1", {"volcano.sh/task-spec": "worker"})
        for p in ("p1", "p2")
    ]
    snap = scenario.cluster(
        nodes=nodes, pods=pods, podgroups=[convert(scenario.PodGroup, pg)], queues=[build_queue("q1", 1)]
    )
    snap.hypernodes = hypernodes(THREE_TIERS)
    lines = "".join(f"      {k}: {v}\n" for k, v in args.items())
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: network-topology-aware\n' + (
        f"    arguments:\n{lines}" if args else ""
    )
    parsed = parse_conf(text, REGISTRY)
    ssn = open_session(snap, parsed.tiers, REGISTRY.plugins, parsed.configurations)
    try:
        job = ssn.jobs["ns1/pg1"]
        sub = next(s for s in sub_jobs(ssn, job) if s.uid == "ns1/pg1/task1-worker")
        topo, _ = ssn.report.topology
        groups = [g for t in topo.tiers for g in topo.groups(t)] + [topo.cluster]
        got = ssn.hypernode_scores(sub, groups)
    finally:
        close_session(ssn)
    assert set(got) == set(expected)
    for group, want in expected.items():
        assert abs(got[group] - want) <= EPS, (group, got[group], want)


# -- TestReverseAndCapEvictionGradients -----------------------------------------------------------
def test_reverse_and_cap_eviction_gradients():
    """TestReverseAndCapEvictionGradients: widest first, at most 3 groups (a tier cut short keeps
    its last); a cap of 0 leaves the gradients as they are."""
    from caldera.framework.topology import NodeGroup, reverse_and_cap

    def g(name: str) -> NodeGroup:
        return NodeGroup(name, 1, np.zeros(0, dtype=np.intp), "hypernode")

    found = [[g("a"), g("b")], [g("c"), g("d")]]
    assert [[x.name for x in level] for level in reverse_and_cap(found, 3)] == [["c", "d"], ["b"]]
    assert reverse_and_cap(found, 0) is found
