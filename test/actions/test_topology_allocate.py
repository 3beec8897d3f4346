"""Topology-aware gang allocation: the allocate action places a topology-bound gang inside one node
group, chosen over the full predicate results of every plugin."""

import random
from typing import Any

import numpy as np
import pytest

from caldera.actions.allocate import allocate_job
from caldera.actions.topology import allocate_in_topology, job_requirement, session_topology
from caldera.config.conf import parse_conf
from caldera.framework.objects import HyperNode, convert
from caldera.framework.plugin import ArgumentError, Arguments
from caldera.framework.session import open_session
from caldera.framework.topology import CLUSTER_GROUP
from caldera.hack.scenario import cluster, node, pod, podgroup, run_session
from caldera.plugins.network_topology_aware import NetworkTopologyAwarePlugin
from caldera.scheduler.registry import builtin_registry

LEAF, SPINE = "example.com/leaf", "example.com/spine"
NO_SCHEDULE = [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]


def conf(
    default_mode: str = "", highest: int | None = None, policy: str = "", keys=(LEAF, SPINE), extra=()
) -> str:
    args = [f"topologyKeys: [{', '.join(keys)}]"] if keys else []
    args.extend(extra)
    if default_mode:
        args.append(f"defaultMode: {default_mode}")
    if highest is not None:
        args.append(f"defaultHighestTierAllowed: {highest}")
    if policy:
        args.append(f"scorePolicy: {policy}")
    arguments = "\n".join(f"      {a}" for a in args)
    return f"""actions: "allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: nodeorder
  - name: network-topology-aware
    arguments:
{arguments or "      {}"}
"""


def leaf_nodes(leaf: str, spine: str, count: int, cpu: str = "8", **kw: Any) -> list:
    return [node(f"{leaf}-n{i}", cpu=cpu, labels={LEAF: leaf, SPINE: spine}, **kw) for i in range(count)]


def gang_pods(name: str, size: int, cpu: str, topology: dict[str, Any] | None = None, min_member=None):
    pg = podgroup(name, min_member=size if min_member is None else min_member, network_topology=topology)
    return pg, [pod(f"{name}-{i}", cpu=cpu, group=name) for i in range(size)]


def filler(node_name: str, cpu: str, i: int = 0):
    """A running pod of another scheduler that holds ``cpu`` on a node."""
    return pod(f"fill-{node_name}-{i}", cpu=cpu, node_name=node_name, phase="Running", scheduler="other")


def placed(result) -> dict[str, str]:
    return {p.task.name: p.node for p in result.placements}


def leaves_of(result, snap) -> set[str]:
    return {snap.nodes[n].labels.get(LEAF, "-") for n in placed(result).values()}


HARD1 = {"mode": "hard", "highestTierAllowed": 1}


# ------------------------------------------------------------------------------------------------
def test_the_biggest_group_is_not_chosen_when_most_of_it_is_tainted():
    # leaf "big": 8 nodes, 6 tainted; leaf "small": 4 free nodes. The gang needs 4 whole nodes.
    nodes = leaf_nodes("big", "s1", 8) + leaf_nodes("small", "s1", 4)
    nodes = [
        node(n.metadata.name, labels=dict(n.metadata.labels), taints=NO_SCHEDULE) if i < 6 else n
        for i, n in enumerate(nodes)
    ]
    pg, pods = gang_pods("mpi", 4, "6", HARD1)
    snap = cluster(nodes=nodes, pods=pods, podgroups=[pg])
    _, result = run_session(snap, conf())
    assert len(result.placements) == 4
    assert leaves_of(result, snap) == {"small"}


def test_the_biggest_group_is_not_chosen_when_its_room_is_fragmented():
    # "big" has 8 x 3 = 24 idle cpu in total, more than the gang's 16, but no node can take a 4-cpu
    # pod: only a dry run with the real predicates sees it.
    nodes = leaf_nodes("big", "s1", 8) + leaf_nodes("small", "s1", 4, cpu="4")
    fillers = [filler(f"big-n{i}", "5") for i in range(8)]
    pg, pods = gang_pods("mpi", 4, "4", HARD1)
    snap = cluster(nodes=nodes, pods=fillers + pods, podgroups=[pg])
    _ssn, result = run_session(snap, conf())
    assert leaves_of(result, snap) == {"small"}
    assert len(result.placements) == 4


def test_of_two_feasible_groups_the_tighter_fit_is_chosen_every_time():
    # leaf "roomy": 4 free nodes; leaf "snug": 4 nodes with 4 of 8 cpu already used. A gang of four
    # 4-cpu pods fits either; tightest fit keeps the roomy leaf free for a bigger job.
    for seed in range(5):
        nodes = leaf_nodes("roomy", "s1", 4) + leaf_nodes("snug", "s1", 4)
        random.Random(seed).shuffle(nodes)
        fillers = [filler(f"snug-n{i}", "4") for i in range(4)]
        pg, pods = gang_pods("job", 4, "4", HARD1)
        snap = cluster(nodes=nodes, pods=fillers + pods, podgroups=[pg])
        _, result = run_session(snap, conf())
        assert leaves_of(result, snap) == {"snug"}, seed
        assert len(result.placements) == 4


def test_spread_policy_chooses_the_group_with_most_room_left():
    nodes = leaf_nodes("roomy", "s1", 4) + leaf_nodes("snug", "s1", 4)
    fillers = [filler(f"snug-n{i}", "4") for i in range(4)]
    pg, pods = gang_pods("job", 4, "4", HARD1)
    snap = cluster(nodes=nodes, pods=fillers + pods, podgroups=[pg])
    _, result = run_session(snap, conf(policy="spread"))
    assert leaves_of(result, snap) == {"roomy"}


def test_equal_groups_are_broken_by_name():
    nodes = leaf_nodes("leaf-c", "s1", 2) + leaf_nodes("leaf-a", "s1", 2) + leaf_nodes("leaf-b", "s1", 2)
    pg, pods = gang_pods("job", 2, "8", HARD1)
    snap = cluster(nodes=nodes, pods=pods, podgroups=[pg])
    _, result = run_session(snap, conf())
    assert leaves_of(result, snap) == {"leaf-a"}


def test_hard_gang_that_fits_no_group_stays_wholly_unplaced_with_a_reason():
    # two leaves of 2 x 8 cpu: 16 each; the gang needs 24 cpu.
    nodes = leaf_nodes("leaf-a", "s1", 2) + leaf_nodes("leaf-b", "s2", 2)
    fillers = [filler("leaf-b-n0", "2")]
    pg, pods = gang_pods("big", 3, "8", HARD1)
    snap = cluster(nodes=nodes, pods=fillers + pods, podgroups=[pg])
    ssn, result = run_session(snap, conf())
    assert result.placements == []
    assert all(n.used.cpu == 0 for n in ssn.nodes.values() if n.name != "leaf-b-n0")
    reason = ssn.jobs["default/big"].job_fit_error
    assert reason.startswith("hard network topology: no node group up to tier 1 can hold the gang")
    assert f"tier 1 ({LEAF}, 2 groups)" in reason
    # the closest group is the one with room for most pods: leaf-a has two of three, leaf-b one
    assert "closest: tier 1 group leaf-a: room for 2 of 3 pods, short of 8 cpu on its usable nodes" in reason


def test_hard_reason_for_a_dry_run_failure_names_the_predicates():
    # leaf-a: one tainted node and three free ones in one rack: room for three pods by resources,
    # but the pods repel each other per rack: only a dry run with every predicate sees that one fits.
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "job"}}, "topologyKey": "rack"}
            ]
        }
    }
    nodes = [node(f"leaf-a-n{i}", labels={LEAF: "leaf-a", SPINE: "s1", "rack": "r1"}) for i in range(4)]
    nodes[0] = node("leaf-a-n0", labels={LEAF: "leaf-a", SPINE: "s1", "rack": "r1"}, taints=NO_SCHEDULE)
    nodes += leaf_nodes("leaf-b", "s1", 1)
    pg = podgroup("job", min_member=3, network_topology=HARD1)
    pods = [pod(f"job-{i}", cpu="4", group="job", labels={"app": "job"}, affinity=anti) for i in range(3)]
    snap = cluster(nodes=nodes, pods=pods, podgroups=[pg])
    ssn, result = run_session(snap, conf())
    assert result.placements == []
    reason = ssn.jobs["default/job"].job_fit_error
    assert "closest: tier 1 group leaf-a: 1/3 pods placed, 0/4 nodes are available" in reason
    assert (
        "1 node(s) had untolerated taint" in reason
        and "3 node(s) didn't match pod anti-affinity rules" in reason
    )


def test_one_pod_per_node_gangs_are_pruned_by_node_count():
    # workers that repel each other per hostname: a leaf of 3 roomy nodes cannot hold 4 of them
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"role": "worker"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    nodes = leaf_nodes("three", "s1", 3, cpu="64") + leaf_nodes("four", "s1", 4)
    pg = podgroup("mpi", min_member=4, network_topology=HARD1)
    pods = [pod(f"mpi-{i}", cpu="1", group="mpi", labels={"role": "worker"}, affinity=anti) for i in range(4)]
    snap = cluster(nodes=nodes, pods=pods, podgroups=[pg])
    ssn = _session(snap, conf())
    decision = allocate_in_topology(ssn, ssn.jobs["default/mpi"], allocate_job)
    assert {t.group.name: t.outcome for t in decision.trials} == {"three": "pruned", "four": "feasible"}
    assert len({op.node for op in decision.statement.operations}) == 4


def test_soft_gang_that_fits_no_group_is_placed_cluster_wide():
    nodes = leaf_nodes("leaf-a", "s1", 2) + leaf_nodes("leaf-b", "s2", 2)
    pg, pods = gang_pods("big", 3, "8", {"mode": "soft", "highestTierAllowed": 1})
    snap = cluster(nodes=nodes, pods=pods, podgroups=[pg])
    _ssn, result = run_session(snap, conf())
    assert len(result.placements) == 3
    assert leaves_of(result, snap) == {"leaf-a", "leaf-b"}


def test_soft_gang_still_prefers_a_group_when_one_fits():
    nodes = leaf_nodes("leaf-a", "s1", 2) + leaf_nodes("leaf-b", "s2", 4)
    pg, pods = gang_pods("job", 3, "8", {"mode": "soft", "highestTierAllowed": 1})
    snap = cluster(nodes=nodes, pods=pods, podgroups=[pg])
    _, result = run_session(snap, conf())
    assert leaves_of(result, snap) == {"leaf-b"}


def test_tier_escalation_from_leaf_to_spine():
    # no leaf holds six 8-cpu pods, spine s2 (two leaves of 4) does; s1 has only 5 nodes.
    nodes = (
        leaf_nodes("l1", "s1", 3)
        + leaf_nodes("l2", "s1", 2)
        + leaf_nodes("l3", "s2", 4)
        + leaf_nodes("l4", "s2", 4)
    )
    pg, pods = gang_pods("wide", 6, "8", {"mode": "hard", "highestTierAllowed": 2})
    snap = cluster(nodes=nodes, pods=pods, podgroups=[pg])
    ssn, result = run_session(snap, conf())
    assert len(result.placements) == 6
    assert {snap.nodes[n].labels[SPINE] for n in placed(result).values()} == {"s2"}
    # the same gang limited to the leaf tier waits
    pg, pods = gang_pods("narrow", 6, "8", HARD1)
    snap = cluster(nodes=nodes, pods=pods, podgroups=[pg])
    ssn, result = run_session(snap, conf())
    assert result.placements == []
    assert "up to tier 1" in ssn.jobs["default/narrow"].job_fit_error


def test_highest_tier_above_the_widest_allows_the_whole_cluster():
    nodes = leaf_nodes("l1", "s1", 2) + leaf_nodes("l2", "s2", 2)
    pg, pods = gang_pods("all", 4, "8", {"mode": "hard", "highestTierAllowed": 3})
    snap = cluster(nodes=nodes, pods=pods, podgroups=[pg])
    _, result = run_session(snap, conf())
    assert len(result.placements) == 4


def hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> HyperNode:
    return convert(HyperNode, {"metadata": {"name": name}, "spec": {"tier": tier, "members": members}})


def test_hypernodes_and_label_tiers_give_the_same_placement():
    def objects():
        nodes = (
            leaf_nodes("l1", "s1", 3)
            + leaf_nodes("l2", "s1", 2)
            + leaf_nodes("l3", "s2", 4)
            + leaf_nodes("l4", "s2", 4)
        )
        fillers = [filler("l3-n0", "6"), filler("l4-n1", "2")]
        jobs = [
            gang_pods("a", 2, "8", HARD1),
            gang_pods("b", 6, "8", {"mode": "hard", "highestTierAllowed": 2}),
            gang_pods("c", 3, "2", HARD1),
        ]
        pods = fillers + [p for _, ps in jobs for p in ps]
        return nodes, pods, [pg for pg, _ in jobs]

    nodes, pods, pgs = objects()
    by_labels = cluster(nodes=nodes, pods=pods, podgroups=pgs)
    _, label_result = run_session(by_labels, conf())

    nodes, pods, pgs = objects()
    by_hypernodes = cluster(nodes=nodes, pods=pods, podgroups=pgs)
    node_member = {"type": "Node"}
    by_hypernodes.hypernodes = {
        "l1": hypernode("l1", 1, [{**node_member, "selector": {"regexMatch": {"pattern": "^l1-"}}}]),
        "l2": hypernode(
            "l2",
            1,
            [{**node_member, "selector": {"exactMatch": {"name": f"l2-n{i}"}}} for i in range(2)],
        ),
        "l3": hypernode(
            "l3", 1, [{**node_member, "selector": {"labelMatch": {"matchLabels": {LEAF: "l3"}}}}]
        ),
        "l4": hypernode("l4", 1, [{**node_member, "selector": {"regexMatch": {"pattern": "l4"}}}]),
        "s1": hypernode(
            "s1", 2, [{"type": "HyperNode", "selector": {"exactMatch": {"name": n}}} for n in ("l1", "l2")]
        ),
        "s2": hypernode(
            "s2", 2, [{"type": "HyperNode", "selector": {"exactMatch": {"name": n}}} for n in ("l3", "l4")]
        ),
    }
    _, hn_result = run_session(by_hypernodes, conf(keys=()))

    assert placed(label_result) == placed(hn_result)
    assert len(placed(label_result)) == 11


def test_a_restarted_pod_returns_to_its_jobs_group():
    # The job runs 3 pods on leaf "busy"; the 4th was restarted. Left to itself, tightest fit would
    # pick leaf "snug" for a fresh gang, but the job's own group is where it belongs.
    nodes = leaf_nodes("busy", "s1", 4) + leaf_nodes("snug", "s2", 1, cpu="4")
    pg = podgroup("train", min_member=4, network_topology=HARD1)
    running = [
        pod(f"train-{i}", cpu="4", group="train", node_name=f"busy-n{i}", phase="Running") for i in range(3)
    ]
    restarted = pod("train-3", cpu="4", group="train")
    snap = cluster(nodes=nodes, pods=[*running, restarted], podgroups=[pg])
    _, result = run_session(snap, conf())
    assert placed(result) == {"train-3": "busy-n3"}


def test_a_job_running_in_a_full_group_waits_rather_than_leave_it():
    nodes = leaf_nodes("busy", "s1", 2, cpu="4") + leaf_nodes("free", "s1", 4)
    pg = podgroup("train", min_member=3, network_topology=HARD1)
    running = [
        pod(f"train-{i}", cpu="4", group="train", node_name=f"busy-n{i}", phase="Running") for i in range(2)
    ]
    snap = cluster(nodes=nodes, pods=[*running, pod("train-2", cpu="4", group="train")], podgroups=[pg])
    ssn, result = run_session(snap, conf())
    assert result.placements == []
    assert "closest: tier 1 group busy" in ssn.jobs["default/train"].job_fit_error


def test_conf_default_makes_every_gang_topology_bound():
    nodes = leaf_nodes("l1", "s1", 2) + leaf_nodes("l2", "s1", 3)
    pg, pods = gang_pods("plain", 3, "8")  # no networkTopology of its own
    single = podgroup("single", min_member=1)
    snap = cluster(
        nodes=nodes, pods=[*pods, pod("single-0", cpu="1", group="single")], podgroups=[pg, single]
    )
    _, result = run_session(snap, conf(default_mode="hard"))
    got = placed(result)
    assert {snap.nodes[got[f"plain-{i}"]].labels[LEAF] for i in range(3)} == {"l2"}
    # without the default, the same gang is free to use any node
    assert "single-0" in got


def test_without_the_default_a_gang_without_topology_is_placed_as_usual():
    nodes = leaf_nodes("l1", "s1", 2) + leaf_nodes("l2", "s2", 2)
    pg, pods = gang_pods("plain", 3, "8")
    snap = cluster(nodes=nodes, pods=pods, podgroups=[pg])
    _, result = run_session(snap, conf())
    assert len(result.placements) == 3


def test_several_gangs_share_the_groups_without_overlap():
    nodes = leaf_nodes("l1", "s1", 4) + leaf_nodes("l2", "s1", 4) + leaf_nodes("l3", "s1", 2)
    jobs = [gang_pods(f"j{i}", 4, "8", HARD1) for i in range(3)]
    snap = cluster(nodes=nodes, pods=[p for _, ps in jobs for p in ps], podgroups=[pg for pg, _ in jobs])
    ssn, result = run_session(snap, conf())
    got = placed(result)
    per_job = {}
    for task, n in got.items():
        per_job.setdefault(task.split("-")[0], set()).add(snap.nodes[n].labels[LEAF])
    assert sorted(per_job.values(), key=sorted) == [{"l1"}, {"l2"}]
    assert len(got) == 8
    assert any("can hold the gang" in j.job_fit_error for j in ssn.jobs.values())


# ------------------------------------------------------------------------------------------------
# the selection itself: branch and bound gives exactly what evaluating every group gives
# ------------------------------------------------------------------------------------------------
def _session(snap, conf_text):
    registry = builtin_registry()
    c = parse_conf(conf_text, registry)
    return open_session(snap, c.tiers, registry.plugins, c.configurations)


def _exhaustive_best(ssn, job, tier, spread=False):
    """Dry-run every group of a tier with allocate's own placement; best score, ties by name."""
    topo, _ = session_topology(ssn)
    best = None
    t = ssn.table
    idle = np.maximum(t.idle[: t.rows] + t.releasing[: t.rows] - t.pipelined[: t.rows], 0)
    idle = idle * (t.ready[: t.rows] & ~t.unschedulable[: t.rows])[:, None]
    total = t.allocatable[: t.rows].sum(axis=0)
    for g in topo.groups(tier):
        stmt = allocate_job(ssn, job, g.rows)
        if stmt is None:
            continue
        placed_cpu = sum(op.task.resreq.cpu for op in stmt.operations)
        placed_mem = sum(op.task.resreq.memory for op in stmt.operations)
        stmt.discard()
        agg = idle[g.rows].sum(axis=0)
        left = (agg[0] - placed_cpu) / total[0] + (agg[1] - placed_mem) / total[1]
        score = round(left if spread else -left, 9)
        if best is None or score > best[0] or (score == best[0] and g.name < best[1]):
            best = (score, g.name)
    return best and best[1]


@pytest.mark.parametrize("policy", ["binpack", "spread"])
def test_branch_and_bound_matches_exhaustive_evaluation(policy):
    for seed in range(8):
        rng = random.Random(seed)
        nodes, fillers = [], []
        for leaf in range(8):
            for i in range(rng.randint(2, 5)):
                name = f"l{leaf}-n{i}"
                nodes.append(node(name, cpu="8", labels={LEAF: f"l{leaf}", SPINE: "s"}))
                used = rng.choice([0, 0, 2, 4, 6])
                if used:
                    fillers.append(filler(name, str(used)))
        pg, pods = gang_pods("g", rng.randint(2, 6), str(rng.choice([2, 3, 4])), HARD1)
        snap = cluster(nodes=nodes, pods=fillers + pods, podgroups=[pg])
        ssn = _session(snap, conf(policy=policy))
        job = ssn.jobs["default/g"]
        expected = _exhaustive_best(ssn, job, 1, spread=policy == "spread")
        decision = allocate_in_topology(ssn, job, allocate_job)
        got = decision.group.name if decision.group is not None else None
        assert got == expected, (seed, decision.trials)
        if decision.statement is not None:
            decision.statement.discard()


def test_groups_that_cannot_hold_the_gang_are_pruned_before_any_dry_run():
    nodes = (
        leaf_nodes("tiny", "s1", 1)
        + leaf_nodes("ok", "s1", 4)
        + leaf_nodes("tainted", "s1", 4, taints=NO_SCHEDULE)
    )
    pg, pods = gang_pods("g", 3, "8", HARD1)
    snap = cluster(nodes=nodes, pods=pods, podgroups=[pg])
    ssn = _session(snap, conf())
    decision = allocate_in_topology(ssn, ssn.jobs["default/g"], allocate_job)
    outcome = {t.group.name: t.outcome for t in decision.trials}
    assert outcome == {"tiny": "pruned", "tainted": "pruned", "ok": "feasible"}
    assert decision.group.name == "ok"


def test_the_groups_never_dry_run_are_listed_best_bound_first_then_by_name():
    """Five leaves of one 16-cpu node with 8, 0, 8, 12 and 4 cpu free, a gang of two 2-cpu pods: the
    leaf without room is pruned; the tightest fit (e, 4 free) is dry-run and wins; no other bound
    can beat it, so the rest are never dry-run and are listed tightest first (a and c, 8 free,
    by name), then d."""
    taken = {"a": 8, "b": 16, "c": 8, "d": 4, "e": 12}
    nodes = [n for leaf in taken for n in leaf_nodes(leaf, "s", 1, cpu="16")]
    fillers = [filler(f"{leaf}-n0", str(cpu)) for leaf, cpu in taken.items()]
    pg, pods = gang_pods("g", 2, "2", HARD1)
    ssn = _session(cluster(nodes=nodes, pods=fillers + pods, podgroups=[pg]), conf())
    decision = allocate_in_topology(ssn, ssn.jobs["default/g"], allocate_job)
    assert decision.group.name == "e"
    assert [(t.group.name, t.outcome) for t in decision.trials] == [
        ("b", "pruned"),
        ("e", "feasible"),
        ("a", "skipped"),
        ("c", "skipped"),
        ("d", "skipped"),
    ]
    bounds = [t.bound for t in decision.trials if t.outcome == "skipped"]
    assert bounds[0] == bounds[1] > bounds[2]


def test_no_requirement_leaves_the_job_to_the_usual_allocate():
    snap = cluster(nodes=leaf_nodes("l1", "s1", 1), pods=[pod("p", group="pg")], podgroups=[podgroup("pg")])
    ssn = _session(snap, conf())
    assert allocate_in_topology(ssn, ssn.jobs["default/pg"], allocate_job) is None


def test_without_the_plugin_hypernodes_alone_define_the_topology():
    nodes = leaf_nodes("l1", "s1", 2) + leaf_nodes("l2", "s1", 3)
    pg, pods = gang_pods("g", 3, "8", HARD1)
    snap = cluster(nodes=nodes, pods=pods, podgroups=[pg])
    snap.hypernodes = {
        name: hypernode(name, 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": f"^{name}-"}}}])
        for name in ("l1", "l2")
    }
    plain = (
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n  - name: nodeorder\n'
    )
    _, result = run_session(snap, plain)
    assert leaves_of(result, snap) == {"l2"}
    # no hypernodes and no plugin: the cluster is the only group (tier 1)
    snap = cluster(
        nodes=nodes, pods=gang_pods("h", 5, "8", HARD1)[1], podgroups=[gang_pods("h", 5, "8", HARD1)[0]]
    )
    ssn = _session(snap, plain)
    topo, _ = session_topology(ssn)
    assert topo.top_tier == 1 and topo.groups(1)[0].name == CLUSTER_GROUP


def test_requirement_from_the_job_or_the_conf_default():
    settings = NetworkTopologyAwarePlugin(
        Arguments("p", {"defaultMode": "soft", "defaultHighestTierAllowed": 2})
    ).settings
    snap = cluster(
        pods=[pod("a", group="a"), pod("b", group="b"), pod("c", group="c")],
        podgroups=[
            podgroup("a", min_member=2, network_topology={"mode": "hard"}),
            podgroup("b", min_member=2),
            podgroup("c", min_member=1),
        ],
    )
    a, b, c = (snap.jobs[f"default/{n}"] for n in "abc")
    assert job_requirement(a, settings).mode == "hard" and job_requirement(a, settings).highest_tier == 2
    assert job_requirement(b, settings).mode == "soft" and job_requirement(b, settings).from_default
    assert job_requirement(c, settings) is None  # a single pod is no gang


@pytest.mark.parametrize(
    "args",
    [{"defaultMode": "medium"}, {"defaultHighestTierAllowed": 0}, {"scorePolicy": "random"}],
)
def test_bad_plugin_argument_values_are_errors_that_name_them(args):
    with pytest.raises(ArgumentError, match=next(iter(args))):
        NetworkTopologyAwarePlugin(Arguments("p", args))


def test_across_cycles_a_pod_recreated_after_a_failure_rejoins_its_job_in_its_leaf():
    from caldera.hack.scenario import InProcessCluster

    # cycle 1: the gang takes the tightest leaf, "small" (4 nodes); "large" has 6.
    nodes = leaf_nodes("large", "s1", 6) + leaf_nodes("small", "s1", 4)
    pg, pods = gang_pods("train", 4, "8", HARD1)
    sim = InProcessCluster(conf(), nodes=nodes, podgroups=[pg], pods=pods)
    sim.cycle()
    first = sim.running_on()
    assert {n.split("-")[0] for n in first.values()} == {"small"}
    # a worker dies and its controller recreates it: the leaf still has its node free, and the
    # replacement must land there, not in the roomier leaf
    dead = next(p for p in sim.pods.values() if p.metadata.name == "train-3")
    sim.cache.delete_pod(dead)
    del sim.pods[dead.metadata.uid]
    sim.add(pods=[pod("train-3b", cpu="8", group="train")])
    sim.cycle()
    assert sim.running_on()["train-3b"] == first["train-3"]


@pytest.mark.parametrize("tier", [1, 2])
def test_over_a_hypernode_tree_the_fast_choice_is_the_exhaustive_one(tier):
    """The three-tier HyperNode tree of ``bench core --topology`` (leaves of 4 nodes here, 3 leaves a
    spine), with random room taken on the nodes: the group the vectorised pruning and branch and
    bound choose is the one a dry run of every group of the tier finds best."""
    from caldera.hack.bench_hypernodes import tree

    chosen_at = {1: 0, 2: 0}
    for seed in range(8):
        rng = random.Random(seed * 10 + tier)
        nodes, hypernodes, _ = tree(24, leaf=4, spine=3)
        fillers = [
            filler(n.metadata.name, str(used)) for n in nodes if (used := rng.choice([0, 0, 8, 16, 24, 30]))
        ]
        size = rng.randint(2, 6) * (3 if tier == 2 else 1)
        pg, pods = gang_pods("g", size, str(rng.choice([4, 8])), {"mode": "hard", "highestTierAllowed": tier})
        snap = cluster(nodes=nodes, pods=fillers + pods, podgroups=[pg])
        snap.hypernodes = {hn.metadata.name: hn for hn in hypernodes}
        ssn = _session(snap, conf(keys=()))
        job = ssn.jobs["default/g"]
        # the narrowest tier that holds the gang, and there the best group by exhaustive dry runs
        expected = None
        for t in range(1, tier + 1):
            best = _exhaustive_best(ssn, job, t)
            if best is not None:
                expected = (t, best)
                break
        decision = allocate_in_topology(ssn, job, allocate_job)
        got = (decision.group.tier, decision.group.name) if decision.group is not None else None
        assert got == expected, (seed, decision.trials)
        chosen_at[tier if expected is None else expected[0]] += 1
        if decision.statement is not None:
            decision.statement.discard()
    assert chosen_at[tier] > 0  # the seeds reach the tier under test


# ------------------------------------------------------------------------------------------------
# pods without a network topology: HyperNode bin-packing (hypernode.binpack.normal-pod.*)
# ------------------------------------------------------------------------------------------------
def normal_pod_conf(*arguments: str) -> str:
    return conf(keys=(), extra=("weight: 10", *arguments))


def two_leaves_one_in_use():
    """HyperNodes leaf-a (a0, a1) and leaf-b (b0, b1) of 8 cpu nodes under one spine; a pod of
    another scheduler holds 2 cpu on a0; four single pods of 1 cpu, without a network topology,
    wait."""
    nodes = [node(n, cpu="8") for n in ("a0", "a1", "b0", "b1")]
    pods = [filler("a0", "2")]
    pgs = []
    for i in range(4):
        pg, ps = gang_pods(f"web-{i}", 1, "1")
        pgs.append(pg)
        pods += ps
    snap = cluster(nodes=nodes, pods=pods, podgroups=pgs)
    exact = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in ("a0", "a1", "b0", "b1")]
    leaf = [{"type": "HyperNode", "selector": {"exactMatch": {"name": n}}} for n in ("leaf-a", "leaf-b")]
    snap.hypernodes = {
        "leaf-a": hypernode("leaf-a", 1, exact[:2]),
        "leaf-b": hypernode("leaf-b", 1, exact[2:]),
        "spine": hypernode("spine", 2, leaf),
    }
    return snap


def test_pods_without_topology_fill_the_hypernode_in_use_when_normal_pod_binpacking_is_on():
    on = placed(run_session(two_leaves_one_in_use(), normal_pod_conf())[1])
    assert len(on) == 4
    assert set(on.values()) <= {"a0", "a1"}  # all in leaf-a, which was in use; leaf-b left whole
    # Volcano's defaults: the same as the arguments left out
    explicit = normal_pod_conf(
        "hypernode.binpack.normal-pod.enable: true", "hypernode.binpack.normal-pod.fading: 0.8"
    )
    assert placed(run_session(two_leaves_one_in_use(), explicit)[1]) == on

    off = normal_pod_conf("hypernode.binpack.normal-pod.enable: false")
    spread = placed(run_session(two_leaves_one_in_use(), off)[1])
    assert len(spread) == 4
    assert {"b0", "b1"} <= set(spread.values())  # nodeorder's least-requested spreads them
