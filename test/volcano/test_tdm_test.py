"""Volcano's pkg/scheduler/plugins/tdm/tdm_test.go, ported as data.

Test_parseRevocableZone: nine windows, the seconds each spans or that it does not parse.
Test_TDM: which of five nodes (n1, n2 in zone rz1 open all day, n3, n4 in no zone, n5 in rz2 open
00:00-00:01) pass the predicate for a pod that may use revocable nodes and for one that may not, and
the tdm score on each.
Test_TDM_victimsFn: how many pods ``VictimTasks`` gives when rz1's window is closed (or open all day),
by the jobs' disruption budgets.

Volcano's tests read the wall clock: the "0:00-0:01" window is closed except in that minute. Here
the plugin's clock (``tdm.with_clock``) is set to noon, local time, so each case means what it was
written to mean; the evict period's ``time.Sleep`` is the clock moved on by it. The sessions of one
test share the standing state of one scheduler (``Session.standing``), where tdm keeps Volcano's
``lastEvictAt``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from types import SimpleNamespace

import pytest

from caldera.config.conf import parse_conf
from caldera.framework.model import TaskStatus
from caldera.framework.session import open_session
from caldera.hack import scenario
from caldera.plugins import tdm
from volcano.port import REGISTRY, build_node, build_pod, build_podgroup, build_queue, res

NOON = datetime(2026, 3, 2, 12, 0).astimezone()
RZ = "volcano.sh/revocable-zone"
PREEMPTABLE = "volcano.sh/preemptable"
MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
MIN_AVAILABLE = "volcano.sh/jdb-min-available"


@pytest.fixture
def scheduler():
    """One scheduler: its tdm's clock (``now``) at noon, its standing state with no victim search
    made yet."""
    return SimpleNamespace(now=lambda: NOON, standing={})


@pytest.mark.parametrize(
    ("case", "rz", "delta", "err"),
    [
        (0, "00:00_01:00", 0, True),
        (1, "00:00-01:00", 60 * 60, False),
        (2, "0:00-23:59", 23 * 60 * 60 + 59 * 60, False),
        (3, "0:00", 0, True),
        (4, "1:00-0:00", 23 * 60 * 60, False),
        (5, "1:0-0:0", 0, True),
        (6, "   1:00-0:00    ", 23 * 60 * 60, False),
        (7, "23:59-23:59", 24 * 60 * 60, False),
        (8, "63:59-23:59", 0, True),
    ],
)
def test_parse_revocable_zone(case, rz, delta, err):
    """Test_parseRevocableZone, case ``case``."""
    if err:
        with pytest.raises(ValueError):
            tdm.parse_revocable_zone(rz, NOON)
        return
    start, end = tdm.parse_revocable_zone(rz, NOON)
    assert end.timestamp() - start.timestamp() == delta
    assert start.date() == NOON.date()


def nodes():
    alloc = res("16", "64Gi", pods="10")
    return [
        build_node("n1", alloc, {RZ: "rz1"}),
        build_node("n2", alloc, {RZ: "rz1"}),
        build_node("n3", alloc, {}),
        build_node("n4", alloc, {}),
        build_node("n5", alloc, {RZ: "rz2"}),
    ]


def tdm_conf(arguments, switches=""):
    args = "".join(f"      {k}: {v!r}\n" for k, v in arguments.items())
    return f'actions: "allocate"\ntiers:\n- plugins:\n  - name: tdm\n{switches}    arguments:\n{args}'


def session(scheduler, conf, pods, podgroups, queues, node_list):
    """A session of ``scheduler``: its tdm reads ``scheduler.now``, its standing state is kept."""
    parsed = parse_conf(conf, REGISTRY)
    snap = scenario.cluster(nodes=node_list, pods=pods, podgroups=podgroups, queues=queues)
    plugins = {**REGISTRY.plugins, "tdm": tdm.with_clock(lambda: scheduler.now())}
    return open_session(snap, parsed.tiers, plugins, parsed.configurations, standing=scheduler.standing)


@pytest.mark.parametrize(
    ("case", "name", "annotations", "passing", "scores"),
    [
        (
            0,
            "preemptable task rz available",
            {RZ: "*"},
            {"n1", "n2", "n3", "n4"},
            {"n1": 100, "n2": 100, "n3": 0, "n4": 0},
        ),
        (1, "not preemptable task", {}, {"n3", "n4"}, {"n3": 0, "n4": 0}),
        (
            2,
            "preemptable task and multiple rz",
            {RZ: "*"},
            {"n1", "n2", "n3", "n4"},
            {"n1": 100, "n2": 100, "n3": 0, "n4": 0},
        ),
    ],
)
def test_tdm(scheduler, case, name, annotations, passing, scores):
    """Test_TDM, case ``case`` (``name``): rz1 "0:00-0:00" (all day), rz2 "0:00-0:01" (closed at noon)."""
    conf = tdm_conf(
        {"tdm.revocable-zone.rz1": "0:00-0:00", "tdm.revocable-zone.rz2": "0:00-0:01"},
        "    enableNodeOrder: true\n    enablePredicate: true\n",
    )
    p = build_pod("c1", f"p{case + 1}", "", "Pending", res("1", "1Gi"), "pg1", annotations=annotations)
    pg = build_podgroup("pg1", "c1", "c1", 0, None, "Pending")
    ssn = session(scheduler, conf, [p], [pg], [build_queue("c1", 1)], nodes())
    (task,) = ssn.jobs["c1/pg1"].tasks.values()
    found = {n.name for n in ssn.node_list if ssn.predicate(task, n) is None}
    assert found == passing, name
    rows = [i for i, n in enumerate(ssn.node_list) if n.name in passing]
    import numpy as np

    got = ssn.placement.node_scores(task, np.array(rows))
    assert {ssn.node_list[r].name: float(s) for r, s in zip(rows, got, strict=True)} == scores


def preemptable_pods():
    """p1..p5 of job c1/pg1 on n1 (p1-p3 preemptable, p4-p5 not), p6..p10 of c2/pg2 on n2, all
    Running: Test_TDM_victimsFn's pods."""
    out = []
    for i in range(1, 11):
        ns, group, node = ("c1", "pg1", "n1") if i <= 5 else ("c2", "pg2", "n2")
        value = "false" if i in (4, 5) else "true"
        out.append(
            build_pod(ns, f"p{i}", node, "Running", res("1", "1Gi"), group, annotations={PREEMPTABLE: value})
        )
    return out


@pytest.mark.parametrize(
    ("case", "budgets", "window", "period", "want"),
    [
        (0, {"pg1": {MAX_UNAVAILABLE: "30%"}}, "0:00-0:01", "100ms", 2),
        (1, {"pg1": {MAX_UNAVAILABLE: "30%"}}, "0:00-0:00", "100ms", 0),
        (2, {"pg1": {MAX_UNAVAILABLE: "99%"}}, "0:00-0:01", "1s", 3),
        (3, {"pg2": {MAX_UNAVAILABLE: "50%"}}, "0:00-0:01", "1s", 3),
        (4, {"pg2": {MAX_UNAVAILABLE: "50%"}, "pg1": {MAX_UNAVAILABLE: "90%"}}, "0:00-0:01", "1s", 6),
        (5, {"pg2": {MAX_UNAVAILABLE: "3"}}, "0:00-0:01", "1s", 3),
        (6, {"pg2": {MIN_AVAILABLE: "3"}}, "0:00-0:01", "1s", 2),
        (7, {"pg2": {MIN_AVAILABLE: "30%"}}, "0:00-0:01", "1s", 3),
        (8, {"pg2": {MIN_AVAILABLE: "2"}, "pg1": {MAX_UNAVAILABLE: "3"}}, "0:00-0:01", "1s", 6),
    ],
)
def test_tdm_victims_fn(scheduler, case, budgets, window, period, want):
    """Test_TDM_victimsFn, case ``case``: the jobs named in ``budgets`` (with those annotations),
    their pods and nodes; rz1's window ``window``; after the evict period, VictimTasks."""
    groups = {"pg1": ("c1", "n1"), "pg2": ("c2", "n2")}
    podgroups = [
        build_podgroup(g, groups[g][0], groups[g][0], 0, None, "Running", annotations=a)
        for g, a in budgets.items()
    ]
    pods = [
        p for p in preemptable_pods() if p.metadata.annotations["scheduling.k8s.io/group-name"] in budgets
    ]
    node_list = [build_node(groups[g][1], res("16", "64Gi", pods="10"), {RZ: "rz1"}) for g in sorted(budgets)]
    queues = [build_queue(groups[g][0], 1) for g in budgets]
    conf = tdm_conf({"tdm.revocable-zone.rz1": window, "tdm.evict.period": period})
    # the test sleeps for the period before asking; the last search was at start
    scheduler.standing[tdm.LastEvict] = tdm.LastEvict(NOON.timestamp() - tdm.parse_duration(period))
    ssn = session(scheduler, conf, pods, podgroups, queues, node_list)
    victims = ssn.victim_tasks([])
    assert len(victims) == want
    assert all(v.preemptable and v.status == TaskStatus.RUNNING for v in victims)


def test_victims_are_searched_at_most_once_per_evict_period(scheduler):
    """``victimsFn``'s ``lastEvictAt``: a second session within the period finds none, one after it
    finds them again (the period is the scheduler's, as Volcano's package-level variable is its process's)."""
    conf = tdm_conf({"tdm.revocable-zone.rz1": "0:00-0:01", "tdm.evict.period": "1m"})
    pods = preemptable_pods()[5:]
    pg = build_podgroup("pg2", "c2", "c2", 0, None, "Running", annotations={MAX_UNAVAILABLE: "2"})
    node_list = [build_node("n2", res("16", "64Gi", pods="10"), {RZ: "rz1"})]

    def victims_at(at):
        scheduler.now = lambda: at
        return len(session(scheduler, conf, pods, [pg], [build_queue("c2", 1)], node_list).victim_tasks([]))

    assert victims_at(NOON) == 2
    assert victims_at(NOON + timedelta(seconds=59)) == 0
    assert victims_at(NOON + timedelta(seconds=61)) == 2
