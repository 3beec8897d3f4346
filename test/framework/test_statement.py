"""A statement commits a whole decision or leaves the session exactly as it was."""

import numpy as np
import pytest

from caldera.framework.model import TaskStatus
from caldera.framework.session import EventHandler, Session
from caldera.framework.statement import StatementError
from caldera.hack.scenario import cluster, gang, node, pod


def figures(ssn: Session):
    """Every number a later decision could read: nodes (objects and table), jobs, tasks, queues."""
    nodes = {
        n.name: (
            n.idle.to_dict(),
            n.used.to_dict(),
            n.releasing.to_dict(),
            n.pipelined.to_dict(),
            sorted(n.tasks),
        )
        for n in ssn.nodes.values()
    }
    table = {name: getattr(ssn.table, name).copy() for name in ("idle", "used", "releasing", "pipelined")}
    jobs = {
        j.uid: (
            j.allocated.to_dict(),
            j.total_request.to_dict(),
            {s: sorted(b) for s, b in j.by_status.items() if b},
            {t.uid: (t.status, t.node_name) for t in j.tasks.values()},
            j.ready_task_num(),
            j.waiting_task_num(),
        )
        for j in ssn.jobs.values()
    }
    queues = {q.name: (q.weight, q.state) for q in ssn.queues.values()}
    return nodes, table, jobs, queues


def assert_same(a, b):
    nodes_a, table_a, jobs_a, queues_a = a
    nodes_b, table_b, jobs_b, queues_b = b
    assert nodes_a == nodes_b
    for name in table_a:
        np.testing.assert_array_equal(table_a[name], table_b[name])
    assert jobs_a == jobs_b
    assert queues_a == queues_b


@pytest.fixture
def ssn():
    pg, pods = gang("train", 3, cpu="2", memory="4Gi")
    running = pod("web-0", cpu="1", memory="1Gi", group="web", node_name="n2", phase="Running")
    from caldera.hack.scenario import podgroup

    snap = cluster(
        nodes=[node("n1", cpu="4", memory="16Gi"), node("n2", cpu="4", memory="16Gi")],
        pods=[*pods, running],
        podgroups=[pg, podgroup("web", min_member=1)],
    )
    return Session(snap, tiers=[])


def test_discard_restores_every_figure_exactly(ssn):
    shares: list[float] = []
    ssn.add_event_handler(
        EventHandler(
            allocate=lambda e: shares.append(e.task.resreq.cpu),
            deallocate=lambda e: shares.append(-e.task.resreq.cpu),
        )
    )
    before = figures(ssn)
    job = ssn.jobs["default/train"]
    web = ssn.jobs["default/web"]
    stmt = ssn.statement()
    tasks = sorted(job.tasks.values(), key=lambda t: t.name)
    stmt.allocate(tasks[0], "n1")
    stmt.allocate(tasks[1], "n1")
    stmt.pipeline(tasks[2], "n2")
    stmt.evict(next(iter(web.tasks.values())), "preempted")
    during = figures(ssn)
    assert during != before
    assert ssn.nodes["n1"].idle.cpu == 0
    assert ssn.table.idle[ssn.nodes["n1"].row, 0] == 0
    assert ssn.nodes["n2"].releasing.cpu == 1000
    assert ssn.nodes["n2"].pipelined.cpu == 2000
    assert job.count(TaskStatus.ALLOCATED) == 2
    stmt.discard()
    assert_same(figures(ssn), before)
    assert sum(shares) == 0  # plugins saw every operation undone
    assert ssn.placements == [] and ssn.evictions == []


def test_commit_hands_over_allocations_and_evictions(ssn):
    job = ssn.jobs["default/train"]
    web = ssn.jobs["default/web"]
    stmt = ssn.statement()
    t0, t1, t2 = sorted(job.tasks.values(), key=lambda t: t.name)
    stmt.allocate(t0, "n1")
    stmt.allocate(t1, "n1")
    stmt.pipeline(t2, "n2")
    victim = next(iter(web.tasks.values()))
    stmt.evict(victim, "preempted")
    stmt.commit()
    assert [(p.task.name, p.node) for p in ssn.placements] == [("train-0", "n1"), ("train-1", "n1")]
    assert [(e.task.name, e.reason) for e in ssn.evictions] == [("web-0", "preempted")]
    assert t2.status == TaskStatus.PIPELINED  # pipelines stay in the session
    stmt.discard()  # a closed statement cannot be undone any more
    assert t0.status == TaskStatus.ALLOCATED


def test_operations_on_unknown_nodes_or_foreign_tasks_leave_session_unchanged(ssn):
    before = figures(ssn)
    job = ssn.jobs["default/train"]
    task = next(iter(job.tasks.values()))
    stmt = ssn.statement()
    with pytest.raises(StatementError):
        stmt.allocate(task, "no-such-node")
    with pytest.raises(StatementError):
        stmt.allocate(task.clone(), "n1")
    assert_same(figures(ssn), before)


def test_discard_of_nested_decisions_in_reverse_order(ssn):
    before = figures(ssn)
    job = ssn.jobs["default/train"]
    t0, t1, _ = sorted(job.tasks.values(), key=lambda t: t.name)
    outer = ssn.statement()
    outer.allocate(t0, "n1")
    inner = ssn.statement()
    inner.allocate(t1, "n2")
    outer.merge(inner)
    outer.discard()
    assert_same(figures(ssn), before)
