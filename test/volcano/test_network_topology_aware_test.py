"""Volcano's pkg/scheduler/plugins/network-topology-aware/network_topology_aware_test.go
(volcano-sh/volcano ed72c7c8), its sub-job and node-score parts as data; each case is named by Go
test and ``name``.

- TestNew: the arguments read (``getPriorityWeight``, ``getNormalPodConfig``): ``weight``, the
  ``hypernode.binpack.*`` weights and ``hypernode.binpack.normal-pod.enable`` / ``.fading``,
  negatives taken as the default. Caldera refuses a value of the wrong type when the conf is read,
  so the Go case's ``"a"`` for the bool ``normal-pod.enable`` is left out of its data.
- TestNetworkTopologyAwareNodeScore_Hard / _Soft: ``batchNodeOrderFnForNetworkAwarePods``, checked
  on ``framework.topology.network_aware_scores`` times 100 times ``weight`` (what the plugin's
  node-order part returns): the job's allocated HyperNode (Go: the PodGroup's annotation) is the
  narrowest group holding its placed pods, which is the annotation in every case. The Hard and Soft
  tests hold the same cases. Caldera gives this score to the pods of jobs with sub-group policies
  (a whole job is placed by its group choice, actions/topology.py); the function is the same.
- TestHyperNodeOrderFn: the HyperNode bin-packing score of a sub-job over every HyperNode and the
  cluster (``ClusterTopHyperNode``), through the session's ``hypernode_scores``.
- TestReverseAndCapEvictionGradients, TestHyperNodeGradientPreFiltering (``isEligibleHyperNode``,
  allocation and eviction) and TestHyperNodeGradientForSubJobFn_NoSubJobPolicyRespectsHardTopology:
  ``framework.topology.gradients``.
- TestBatchNodeOrderFn: its four cases of pods without a network topology (none, or HyperNode
  bin-packing, ``batchNodeOrderFnForNormalPods``), through the session's node-order parts of the
  plugin, the only one in the conf.
- Test_batchNodeOrderFnForNormalPods: ``framework.topology.NormalPodBinpack`` over tiers 1 to 4, as
  the Go test sets ``hyperNodesTier`` by hand (no cluster tier), unscaled.

Not passing: TestBatchNodeOrderFn's "score nodes for tasks with network topology": the Go test
gives the pending pod a ``JobAllocatedHyperNode`` of s1 (from the PodGroup's annotation; in
Volcano's allocate, the HyperNode being tried), where Caldera takes the narrowest group holding the
sub-group's placed pods (s4), so s4's nodes score 150 where Go expects 116.7 (the ranking is the
same). Not ported: Test_initHyperNodeResourceCache (the plugin's per-HyperNode sums, which Caldera
keeps in ``NormalPodBinpack`` from the node table, checked through the scores above).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from caldera.config.conf import parse_conf
from caldera.framework.nodetable import NodeTable
from caldera.framework.objects import HyperNode, convert
from caldera.framework.resource import Resource
from caldera.framework.session import close_session, open_session
from caldera.framework.subjobs import sub_jobs
from caldera.framework.topology import (
    CLUSTER_GROUP,
    NormalPodBinpack,
    build_topology,
    network_aware_scores,
)
from caldera.hack import scenario
from caldera.plugins.network_topology_aware import (
    NetworkTopologyAwarePlugin,
    normal_pod_config,
    weights_from,
)
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
#: name → (arguments, weight, binpack weights, (normal-pod enable, fading))
NEW_CASES = {
    "build plugin with no arguments": ({}, 1, {"cpu": 1, "memory": 1}, (True, 0.8)),
    "build plugin with customized valid arguments": (
        {
            "weight": 2,
            "hypernode.binpack.cpu": 3,
            "hypernode.binpack.memory": 4,
            "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
            "hypernode.binpack.resources.nvidia.com/gpuxxx": 5,
            "hypernode.binpack.resources.example.com/foo": 6,
            "hypernode.binpack.normal-pod.enable": False,
            "hypernode.binpack.normal-pod.fading": 0,
        },
        2,
        {"cpu": 3, "memory": 4, "nvidia.com/gpu": 1, "example.com/foo": 6},
        (False, 0.0),
    ),
    "build plugin with customized invalid arguments": (
        {
            "weight": -1,
            "hypernode.binpack.cpu": -1,
            "hypernode.binpack.memory": -1,
            "hypernode.binpack.resources": "nvidia.com/gpuxxx, example.com/foo",
            "hypernode.binpack.resources.nvidia.com/gpu": -1,
            "hypernode.binpack.resources.example.com/foo": -1,
            "hypernode.binpack.normal-pod.fading": -1,
        },
        1,
        {"cpu": 1, "memory": 1, "nvidia.com/gpuxxx": 1, "example.com/foo": 1},
        (True, 0.8),
    ),
}


def nta_conf(args: dict | None = None):
    """A conf of one allocate action and network-topology-aware with ``args`` (YAML values)."""
    lines = "".join(f"      {k}: {json.dumps(v)}\n" for k, v in (args or {}).items())
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: network-topology-aware\n' + (
        f"    arguments:\n{lines}" if args else ""
    )
    return parse_conf(text, REGISTRY)


def opened(snap, args: dict | None = None):
    parsed = nta_conf(args)
    return open_session(snap, parsed.tiers, REGISTRY.plugins, parsed.configurations)


def _arguments(args: dict):
    return nta_conf(args).tiers[0].plugins[0].arguments


@pytest.mark.parametrize("name", list(NEW_CASES))
def test_new(name):
    args, weight, weights, normal = NEW_CASES[name]
    plugin = NetworkTopologyAwarePlugin(_arguments(args))
    assert (plugin.weight, plugin.weights) == (weight, weights)
    assert weights_from(_arguments(args)) == (weight, weights)
    assert (plugin.normal_pods, plugin.fading) == normal
    assert normal_pod_config(_arguments(args)) == normal


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
    ssn = opened(snap, args)
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


# -- TestHyperNodeGradientPreFiltering, TestHyperNodeGradientForSubJobFn_NoSubJobPolicyRespectsHardTopology
GI = 2**30
#: name → (purpose is evict, min (cpu, Gi), hn-1-0's idle (cpu, Gi), its future idle (cpu, Gi) or
#: None (Go: unset, nothing), hn-1-0 kept). hn-1-0 holds 10 nodes of 4 cpu and 8Gi (40 cpu, 80Gi).
PRE_FILTER = {
    "Job - idle sufficient, futureIdle sufficient": (False, (20, 40), (30, 60), (35, 70), True),
    "Job - idle sufficient, futureIdle insufficient": (False, (20, 40), (30, 60), (10, 20), True),
    "Job - idle insufficient, futureIdle sufficient": (False, (20, 40), (10, 20), (30, 60), True),
    "Job - idle insufficient, futureIdle insufficient": (False, (20, 40), (10, 20), (15, 30), False),
    "SubJob - idle sufficient, futureIdle sufficient": (False, (20, 40), (30, 60), (35, 70), True),
    "SubJob - idle sufficient, futureIdle insufficient": (False, (20, 40), (30, 60), None, True),
    "SubJob - idle insufficient, futureIdle sufficient": (False, (20, 40), (10, 20), (30, 60), True),
    "SubJob - idle insufficient, futureIdle insufficient": (False, (20, 40), (10, 20), (15, 30), False),
    "Evict purpose - idle insufficient, futureIdle insufficient": (True, (20, 40), (15, 30), (15, 30), True),
    "Evict purpose - allocatable insufficient": (True, (50, 100), (15, 30), (15, 30), False),
}


@pytest.mark.parametrize("name", list(PRE_FILTER))
def test_hypernode_gradient_pre_filtering(name):
    """TestHyperNodeGradientPreFiltering (``isEligibleHyperNode``), over two tier-1 HyperNodes of
    ten nodes under one tier-2 (the Go test has a hundred; only hn-1-0 is looked at); the job and
    sub-job cases run the same gradient function."""
    from caldera.framework.resource import Resource
    from caldera.framework.topology import GradientRequest, gradients

    evict, (cpu, mem), idle, future, kept = PRE_FILTER[name]
    names = [f"node-{i}" for i in range(20)]
    tree = {
        "hn-1-0": (1, names[:10]),
        "hn-1-1": (1, names[10:]),
        "hn-2-0": (2, ["hn-1-0", "hn-1-1"]),
    }
    snap = scenario.cluster(nodes=[build_node(n, res("4", "8Gi")) for n in names])
    snap.hypernodes = hypernodes(tree)
    ssn = opened(snap)
    try:
        topo, _ = ssn.report.topology
        table = ssn.table
        group = topo.group("hn-1-0", 1)
        cpu_col, mem_col = table.dims["cpu"], table.dims["memory"]
        for column, share in ((table.idle, idle), (table.future, future or (0, 0))):
            column[group.rows, cpu_col] = share[0] * 1000 / 10  # (millicores)
            column[group.rows, mem_col] = share[1] * GI / 10
        request = GradientRequest(
            topo, table, topo.group("hn-2-0", 2), 2, None, Resource(cpu * 1000, mem * GI), evict=evict
        )
        found = [g.name for level in gradients(request) or [] for g in level]
    finally:
        close_session(ssn)
    assert ("hn-1-0" in found) is kept
    tiers = [topo.group(n).tier for n in found]
    assert tiers == (sorted(tiers, reverse=True) if evict else sorted(tiers))


def test_hypernode_gradient_for_sub_job_no_sub_job_policy_respects_hard_topology():
    """TestHyperNodeGradientForSubJobFn_NoSubJobPolicyRespectsHardTopology: a hard tier-1 sub-job
    asking 20 cpu where each zone has 16 gets no eviction gradient, not the root."""
    from caldera.framework.resource import Resource
    from caldera.framework.topology import GradientRequest

    names = ["node-a-1", "node-a-2", "node-d-1", "node-d-2"]
    tree = {"zone-a": (1, names[:2]), "zone-d": (1, names[2:]), "region": (2, ["zone-a", "zone-d"])}
    snap = scenario.cluster(nodes=[build_node(n, res("8", "8Gi")) for n in names])
    snap.hypernodes = hypernodes(tree)
    ssn = opened(snap)
    try:
        topo, _ = ssn.report.topology
        request = GradientRequest(topo, ssn.table, topo.cluster, 1, None, Resource(20_000), evict=True)
        assert ssn.hypernode_gradients(request) == []
    finally:
        close_session(ssn)


# -- TestBatchNodeOrderFn ------------------------------------------------------------------------
CUSTOM = {
    "weight": 10,
    "hypernode.binpack.cpu": 1,
    "hypernode.binpack.memory": 4,
    "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
    "hypernode.binpack.resources.nvidia.com/gpu": 2,
    "hypernode.binpack.resources.example.com/foo": 3,
    "hypernode.binpack.normal-pod.enable": True,
    "hypernode.binpack.normal-pod.fading": 0,
}
#: each leaf's nodes (cpu, memory) as in every case; the foo devices where a case has them
LEAF_SHAPES = {
    "s3": ("2", "4G", "8"),
    "s4": ("4", "4G", "8"),
    "s5": ("2", "8G", "16"),
    "s6": ("4", "8G", "16"),
}
#: name → (arguments, nodes have foo, the pending pod asks foo, running pods' nodes, expected)
BATCH_CASES = {
    "score empty nodes for single task with no network topology and no hypernode-level binpacking": (
        {"hypernode.binpack.normal-pod.enable": False},
        False,
        False,
        [],
        {},
    ),
    "score empty nodes for single task with no network topology and default plugin arguments": (
        {},
        False,
        False,
        [],
        {"s3": 25.8, "s4": 21.6, "s5": 19.9, "s6": 15.7},
    ),
    "score empty nodes for single task with no network topology and customized plugin arguments": (
        CUSTOM,
        True,
        True,
        [],
        {"s3": 500.0, "s4": 468.75, "s5": 281.3, "s6": 250.0},
    ),
    "score non-empty nodes for single task with no network topology and customized plugin arguments": (
        CUSTOM,
        True,
        True,
        ["s3-n1", "s3-n2"],
        {"s3": 0.0, "s4": 468.8, "s5": 281.3, "s6": 250.0},
    ),
}


def plugin_node_scores(ssn, task) -> dict[str, float]:
    """What the session's node-order parts give ``task`` on every node (the plugin is the only one
    in the conf); empty when no part applies to it (Go: an empty score map)."""
    local, other = ssn.split_scores(task)
    if not local and not other:
        return {}
    rows = ssn.table.all_rows
    total = sum((fn(task, rows) for fn in local + other), np.zeros(len(rows)))
    return dict(zip(ssn.table.names, total.tolist(), strict=True))


@pytest.mark.parametrize("name", list(BATCH_CASES))
def test_batch_node_order_fn(name):
    args, foo_nodes, foo_pod, running, expected = BATCH_CASES[name]
    nodes = []
    for leaf, (cpu, mem, foo) in LEAF_SHAPES.items():
        extra = {FOO: foo} if foo_nodes else {}
        nodes += [build_node(f"{leaf}-n{j}", res(cpu, mem, pods="10", **extra)) for j in (1, 2)]
    ask = res("2", "4G", **({FOO: "8"} if foo_pod else {}))
    pods = [build_pod("ns1", "p1", "", "Pending", ask, "pg1")]
    pods += [build_pod("ns1", f"p{i}", n, "Running", ask, "pg1") for i, n in enumerate(running, start=2)]
    pg = scenario.podgroup_dict(
        "pg1", min_member=1, queue="q1", namespace="ns1", phase="Inqueue", uid="ns1-pg1"
    )
    pg["metadata"]["creationTimestamp"] = T0
    snap = scenario.cluster(
        nodes=nodes, pods=pods, podgroups=[convert(scenario.PodGroup, pg)], queues=[build_queue("q1", 1)]
    )
    snap.hypernodes = hypernodes(THREE_TIERS)
    ssn = opened(snap, args)
    try:
        task = next(t for t in ssn.jobs["ns1/pg1"].tasks.values() if t.name == "p1")
        got = plugin_node_scores(ssn, task)
    finally:
        close_session(ssn)
    want = {f"{leaf}-n{j}": score for leaf, score in expected.items() for j in (1, 2)}
    assert set(got) == set(want)
    for node, score in want.items():
        assert abs(got[node] - score) <= EPS, (node, got[node], score)


# -- Test_batchNodeOrderFnForNormalPods -----------------------------------------------------------
def test_batch_node_order_fn_for_normal_pods():
    """2000 nodes of 100 cpu, 8000 memory and 10 foo, each half used; HyperNodes of tiers 1-4
    (200, 40, 5 and 1 of them) holding node i in their (i mod count)-th; a pod asking half a node
    scores 0.515375 on every node (fading 1: the mean of 0.55, 0.51, 0.50125 and 0.50025)."""
    counts = [200, 40, 5, 1]
    names = [f"node-{i}" for i in range(2000)]
    table = NodeTable(len(names))
    half = Resource(50_000, 4000, scalars={FOO: 5})
    for name in names:
        row = table.add_row(name)
        table.write_node(
            row, Resource(100_000, 8000, scalars={FOO: 10}), half, half, Resource(), Resource(), True, False
        )
    tree: dict[str, tuple[int, list[str]]] = {}
    for tier, count in enumerate(counts, start=1):
        for j in range(count):
            if tier == 1:
                members = [n for i, n in enumerate(names) if i % count == j]
            else:  # the HyperNodes of the tier below whose index is j modulo this tier's count
                members = [f"hn-{tier - 1}-{k}" for k in range(counts[tier - 2]) if k % count == j]
            tree[f"hn-{tier}-{j}"] = (tier, members)
    node_list = [SimpleNamespace(name=n, row=i, labels={}) for i, n in enumerate(names)]
    topo = build_topology(node_list, (), hypernodes(tree))
    assert topo.tiers == [1, 2, 3, 4]
    arguments = _arguments(
        {
            "weight": 10,
            "hypernode.binpack.cpu": 5,
            "hypernode.binpack.memory": 5,
            "hypernode.binpack.resources": FOO,
            f"hypernode.binpack.resources.{FOO}": 5,
            "hypernode.binpack.normal-pod.enable": True,
            "hypernode.binpack.normal-pod.fading": 1,
        }
    )
    plugin = NetworkTopologyAwarePlugin(arguments)
    scorer = NormalPodBinpack(topo, table, plugin.weights, plugin.fading, tiers=range(1, 5))
    task = SimpleNamespace(resreq=Resource(50_000, 4000, scalars={FOO: 5}))
    got = scorer.scores(task, table.all_rows)
    assert len(got) == 2000
    assert np.abs(got - 0.515375).max() <= EPS
