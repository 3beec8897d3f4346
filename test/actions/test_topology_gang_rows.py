"""The per-shape rows of the topology-aware allocate (``_GangRows``), kept for a session and brought up
to date through the node table's write log, always give what a fresh computation gives: the same
per-row figures and per-group sums, the same chosen group, the same trials, the best group by a dry
run of every group."""

import random
import types
from unittest import mock

import numpy as np
import pytest

from caldera.actions import topology as topology_module
from caldera.actions.allocate import allocate_job
from caldera.actions.topology import (
    _KEPT,
    _Gang,
    _GangRows,
    _group_of,
    _Room,
    _TierSums,
    allocate_in_topology,
)
from caldera.framework.model import TaskStatus
from caldera.framework.topology import Segments
from caldera.hack.bench_hypernodes import LEAF_LABEL, leaf_name, tree
from caldera.hack.scenario import cluster, pod, podgroup
from test.actions.test_topology_allocate import _exhaustive_best, _session, conf, gang_pods

HARD1 = {"mode": "hard", "highestTierAllowed": 1}
HARD2 = {"mode": "hard", "highestTierAllowed": 2}


def _fresh():
    """Within it, no gang's rows are kept: each is computed afresh over every row (the yardstick)."""
    return mock.patch.object(topology_module, "_shape_key", lambda ssn, gang: None)


def _outcome(decision):
    if decision is None:
        return None
    stmt = decision.statement
    return (
        (decision.group.tier, decision.group.name) if decision.group is not None else None,
        sorted((op.task.name, op.node) for op in stmt.operations) if stmt is not None else [],
        [(t.group.name, t.outcome, t.bound, t.score, t.placed, t.detail, t.deficit) for t in decision.trials],
        decision.reason,
    )


def _assert_rows_as_fresh(ssn, job):
    """The kept rows of the job's shape, brought up to date, equal rows made afresh, and so do the
    per-group sums of every tier kept with them (exact floats, not approximately)."""
    gang = _Gang(ssn, job)
    kept = _GangRows.of(ssn, gang)
    assert kept.kept
    fresh = _GangRows(ssn, gang, ssn.memo(_Room, _Room).of(ssn.table), kept=False)
    assert np.array_equal(kept.usable, fresh.usable)
    assert np.array_equal(kept.packed, fresh.packed)  # room if usable, room if schedulable, slots
    for sums in kept.sums.values():
        again = _TierSums(sums.segments, fresh)
        assert np.array_equal(sums.packed, again.packed)
        for ranking in sums.rankings.values():
            anew = again.ranking(ranking.vectors, ranking.spread, ranking.scored)
            assert np.array_equal(ranking.short, anew.short)
            assert np.array_equal(ranking.pruned, anew.pruned)
            assert np.array_equal(ranking.bounds, anew.bounds)


def _scenario(seed: int):
    """64 nodes of 32 cpu (leaves of 4, spines of 4 leaves) with random room taken; gangs of four
    shapes: 4-cpu pods at tier 1, the same pods kept to one leaf by a node selector or to two leaves
    by node affinity, and gangs that need a spine; and a few single pods of no gang."""
    rng = random.Random(seed)
    nodes, hypernodes, _ = tree(64, leaf=4, spine=4)
    # running pods of this scheduler (one may be evicted between gangs)
    fillers = [
        pod(
            f"fill-{n.metadata.name}", cpu=str(used), node_name=n.metadata.name, phase="Running", group="fill"
        )
        for n in nodes
        if (used := rng.choice([0, 0, 0, 8, 16, 28, 32]))
    ]
    groups, pods, order = [podgroup("fill", min_member=1)], [], []
    for j in range(14):
        kind = rng.choice(["plain", "plain", "selector", "affinity", "spine"])
        name = f"{kind}-{j}"
        if kind == "spine":
            pg, ps = gang_pods(name, rng.choice([20, 24]), "4", HARD2)
        else:
            pg, ps = gang_pods(name, rng.randint(2, 3), "4", HARD1)
            if kind == "selector":  # a node selector: the nodes of one leaf
                selected = {LEAF_LABEL: leaf_name(3)}
                ps = [pod(p.metadata.name, cpu="4", group=name, node_selector=selected) for p in ps]
            if kind == "affinity":
                leaves = {leaf_name(1), leaf_name(2)}
                selector = {"key": LEAF_LABEL, "operator": "In", "values": sorted(leaves)}
                affinity = {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [selector]}]
                        }
                    }
                }
                ps = [pod(p.metadata.name, cpu="4", group=name, affinity=affinity) for p in ps]
        groups.append(pg)
        pods.extend(ps)
        order.append(("gang", f"default/{name}"))
        if j % 4 == 1:  # a node changes between gangs: a running pod on it goes
            order.append(("evict", rng.choice(fillers).metadata.name))
        if j % 4 == 3:  # or a pod of no gang is put on one
            order.append(("bind", f"single-{j}", rng.choice(nodes).metadata.name))
            groups.append(podgroup(f"single-{j}", min_member=1))
            pods.append(pod(f"single-{j}", cpu="2", group=f"single-{j}"))
    snap = cluster(nodes=nodes, pods=fillers + pods, podgroups=groups)
    snap.hypernodes = {hn.metadata.name: hn for hn in hypernodes}
    return snap, order


def _task(ssn, name):
    return next(t for job in ssn.jobs.values() for t in job.tasks.values() if t.name == name)


def _step(ssn, step):
    """One step of the scenario on one session; the decision's outcome for a gang."""
    if step[0] == "evict":
        stmt = ssn.statement()
        stmt.evict(_task(ssn, step[1]), "test")
        stmt.commit()
        return None
    if step[0] == "bind":
        stmt = ssn.statement()
        stmt.allocate(_task(ssn, step[1]), step[2])
        stmt.commit()
        return None
    job = ssn.jobs[step[1]]
    decision = allocate_in_topology(ssn, job, allocate_job)
    outcome = _outcome(decision)
    if decision is not None and decision.statement is not None:
        decision.statement.commit()
    return outcome


@pytest.mark.parametrize("seed", range(6))
def test_kept_rows_decide_as_rows_made_afresh_gang_after_gang(seed):
    """Two sessions of one cluster take the same steps (gangs of four shapes, a node's running pod
    evicted, a pod of no gang bound to a node), one keeping each shape's rows, one computing them
    afresh for every gang: every decision, trial and reason is the same, the kept rows equal fresh
    ones before every gang, and the group chosen is the best of dry runs of every group."""
    snap, order = _scenario(seed)
    kept_ssn = _session(snap, conf(keys=()))
    fresh_ssn = _session(_scenario(seed)[0], conf(keys=()))  # (a session works on its snapshot's objects)
    refreshed = []
    refresh = _GangRows.refresh

    def counting(self, ssn, gang):
        behind = ssn.table.version - self.version
        done = refresh(self, ssn, gang)
        refreshed.append((behind, done))
        return done

    placed = 0
    for step in order:
        if step[0] == "gang":
            job = kept_ssn.jobs[step[1]]
            if job.count(TaskStatus.PENDING):
                with mock.patch.object(_GangRows, "refresh", counting):
                    _assert_rows_as_fresh(kept_ssn, job)
            with _fresh():
                fresh_job = fresh_ssn.jobs[step[1]]
                expected = None
                for tier in (1, 2):
                    if tier <= (2 if step[1].startswith("default/spine") else 1):
                        best = _exhaustive_best(fresh_ssn, fresh_job, tier)
                        if best is not None:
                            expected = (tier, best)
                            break
        with mock.patch.object(_GangRows, "refresh", counting):
            got = _step(kept_ssn, step)
        with _fresh():
            want = _step(fresh_ssn, step)
        assert got == want, (seed, step)
        if step[0] == "gang":
            assert (got[0] if got else None) == expected, (seed, step)
            placed += bool(got and got[0])
    assert placed  # the scenario places gangs
    # the kept rows were brought up to date from the write log (not only made afresh)
    assert any(behind > 0 and done for behind, done in refreshed), refreshed


@pytest.mark.parametrize("overlapping", [False, True], ids=["groups", "overlapping groups"])
def test_the_group_sums_of_changed_rows_are_the_floats_of_a_full_pass(overlapping):
    """Fractional room (no sum exact in floating point) on rows of groups laid out of row order, some
    rows in no group (and, for overlapping HyperNodes of one tier, some in two groups): re-summing
    only the groups of changed rows gives, bit for bit, the sums of a full pass over every group."""
    rng = np.random.default_rng(3)
    n, width = 200, 4
    perm = rng.permutation(n)[:180]
    cuts = np.sort(rng.choice(np.arange(1, 180), size=24, replace=False))
    parts = np.split(perm, cuts)
    if overlapping:
        parts.append(np.concatenate([parts[0][:2], parts[5][:3]]))
    groups = [
        types.SimpleNamespace(rows=np.sort(part).astype(np.intp), size=len(part), name=f"{i:02d}")
        for i, part in enumerate(parts)
    ]
    segments = Segments.of(groups)  # type: ignore[arg-type]
    rows = types.SimpleNamespace(
        packed=np.hstack(
            [rng.random((n, width)) * 1e3, rng.random((n, width)) * 1e6, np.floor(rng.random((n, 1)) * 9)]
        ),
        usable=np.ones(n, dtype=bool),
        width=width,
    )
    ssn = types.SimpleNamespace(memo=lambda key, build: build(), table=types.SimpleNamespace(rows=n))
    group_of = _group_of(ssn, segments)  # type: ignore[arg-type]
    assert (group_of is None) == overlapping
    sums = _TierSums(segments, rows, True, group_of)  # type: ignore[arg-type]
    for _ in range(20):
        changed = np.unique(rng.choice(n, size=rng.integers(1, 6)))
        rows.packed[changed, : 2 * width] = rng.random((len(changed), 2 * width)) * 1e4
        rows.packed[changed, 2 * width] = np.floor(rng.random(len(changed)) * 9)
        sums.refresh(rows, changed)  # type: ignore[arg-type]
        full = _TierSums(segments, rows)  # type: ignore[arg-type]
        assert np.array_equal(sums.packed, full.packed)


def test_a_session_keeps_the_rows_of_its_most_recent_shapes_only():
    """Gangs of as many shapes as pods have cpu requests: the session keeps the rows of the last
    ``_KEPT`` shapes (each is arrays over every row), and a shape seen again is made afresh."""
    nodes, hypernodes, _ = tree(16, leaf=4, spine=2)
    groups, pods = [], []
    for j in range(_KEPT + 4):
        pg, ps = gang_pods(f"g{j}", 2, f"{100 + j}m", HARD1)
        groups.append(pg)
        pods.extend(ps)
    snap = cluster(nodes=nodes, pods=pods, podgroups=groups)
    snap.hypernodes = {hn.metadata.name: hn for hn in hypernodes}
    ssn = _session(snap, conf(keys=()))
    made = []
    for j in range(_KEPT + 4):
        made.append(_GangRows.of(ssn, _Gang(ssn, ssn.jobs[f"default/g{j}"])))
    kept = ssn.memo(_GangRows, dict)
    assert len(kept) == _KEPT
    assert list(kept.values()) == made[4:]
    again = _GangRows.of(ssn, _Gang(ssn, ssn.jobs["default/g0"]))
    assert again is not made[0] and again.kept


def test_a_gang_whose_predicates_are_not_node_local_keeps_no_rows():
    """Required anti-affinity to its own pods per leaf: one pod placed changes every node of its leaf,
    so the gang's rows are made afresh (never kept and patched from the log)."""
    nodes, hypernodes, _ = tree(16, leaf=4, spine=2)
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": LEAF_LABEL}
            ]
        }
    }
    pg, ps = gang_pods("g", 2, "4", HARD2)
    ps = [pod(p.metadata.name, cpu="4", group="g", labels={"app": "w"}, affinity=anti) for p in ps]
    snap = cluster(nodes=nodes, pods=ps, podgroups=[pg])
    snap.hypernodes = {hn.metadata.name: hn for hn in hypernodes}
    ssn = _session(snap, conf(keys=()))
    job = ssn.jobs["default/g"]
    assert not _GangRows.of(ssn, _Gang(ssn, job)).kept
    decision = allocate_in_topology(ssn, job, allocate_job)
    assert decision is not None and decision.group is not None and decision.group.tier == 2
    assert not ssn.memo(_GangRows, dict)
