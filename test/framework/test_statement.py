"""A statement commits a whole decision or leaves the session exactly as it was."""

import numpy as np
import pytest

from caldera.cache.store import ClusterCache
from caldera.config.conf import parse_conf
from caldera.framework.model import TaskStatus
from caldera.framework.session import EventHandler, Session, open_session
from caldera.framework.statement import StatementError
from caldera.hack.scenario import cluster, gang, load, node, pod, podgroup
from caldera.scheduler.registry import builtin_registry


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


def test_a_handler_that_refuses_undoes_that_one_operation_and_the_effects_before_it(ssn):
    """Volcano's Statement.Allocate / Pipeline (pkg/scheduler/framework/statement.go) roll an
    operation back when an event handler sets Event.Err; the operations before it stand."""
    calls: list[str] = []
    shares: list[float] = []
    ssn.add_event_handler(
        EventHandler(
            allocate=lambda e: shares.append(e.task.resreq.cpu),
            deallocate=lambda e: shares.append(-e.task.resreq.cpu),
        )
    )

    def gate(e):
        calls.append(f"allocate {e.task.name} on {e.task.node_name}")
        if e.task.name == "train-1":
            e.err = "no licence left"

    ssn.add_event_handler(
        EventHandler(
            allocate=gate,
            deallocate=lambda e: calls.append(f"deallocate {e.task.name} from {e.task.node_name}"),
            can_fail=True,
            plugin="licences",
        )
    )
    ssn.add_event_handler(EventHandler(allocate=lambda e: calls.append(f"after {e.task.name}")))
    job = ssn.jobs["default/train"]
    t0, t1, t2 = sorted(job.tasks.values(), key=lambda t: t.name)
    stmt = ssn.statement()
    assert stmt.allocate(t0, "n1") is None
    before = figures(ssn)
    spent = sum(shares)
    refused = stmt.pipeline(t1, "n2")
    assert refused == "pipeline of task train-1 on node n2 refused by licences: no licence left"
    assert_same(figures(ssn), before)
    assert sum(shares) == spent  # the handler that ran before the refusal was told it is undone
    assert t1.status == TaskStatus.PENDING and t1.node_name == ""
    assert job.fit_errors[t1.uid] == refused
    assert len(stmt) == 1
    # the refusing handler hears its deallocate, still on the node; a handler after it is not asked
    assert calls == [
        "allocate train-0 on n1",
        "after train-0",
        "allocate train-1 on n2",
        "deallocate train-1 from n2",
    ]
    assert stmt.allocate(t2, "n2") is None
    stmt.commit()
    assert [(p.task.name, p.node) for p in ssn.placements] == [("train-0", "n1"), ("train-2", "n2")]


def test_an_error_set_by_a_handler_not_declared_fallible_changes_nothing(ssn):
    """Only handlers declared ``can_fail`` are checked (the events of other sessions cost no check)."""
    ssn.add_event_handler(EventHandler(allocate=lambda e: setattr(e, "err", "ignored")))
    assert not ssn.fallible_events
    task = sorted(ssn.jobs["default/train"].tasks.values(), key=lambda t: t.name)[0]
    assert ssn.statement().allocate(task, "n1") is None
    assert task.status == TaskStatus.ALLOCATED


def test_a_pod_on_a_node_the_session_lacks_is_evicted_and_its_eviction_undone():
    # "gone" was deleted while web-1 is still bound there (until the pod garbage collector removes it)
    pods = [
        pod(f"web-{i}", cpu="1", memory="1Gi", group="web", node_name=n, phase="Running")
        for i, n in enumerate(("n1", "gone"))
    ]
    snap = cluster(nodes=[node("n1", cpu="4")], pods=pods, podgroups=[podgroup("web", min_member=2)])
    ssn = Session(snap, tiers=[])
    deallocated: list[str] = []
    ssn.add_event_handler(EventHandler(deallocate=lambda e: deallocated.append(e.task.name)))
    before = figures(ssn)
    web = ssn.jobs["default/web"]
    stmt = ssn.statement()
    for task in sorted(web.tasks.values(), key=lambda t: t.name):
        stmt.evict(task, "preempted")
    assert web.count(TaskStatus.RELEASING) == 2 and deallocated == ["web-0", "web-1"]
    assert ssn.nodes["n1"].releasing.cpu == 1000
    stmt.discard()
    assert_same(figures(ssn), before)
    stmt = ssn.statement()
    stmt.evict(next(t for t in web.tasks.values() if t.node_name == "gone"), "preempted")
    stmt.commit()
    assert [(e.task.name, e.reason) for e in ssn.evictions] == [("web-1", "preempted")]


#: every built-in plugin but the two queue plugins (one of which each conf below adds) and the
#: extender (it needs a server)
EVERY_PLUGIN = (
    "binpack, cdp, deviceshare, drf, network-topology-aware, nodegroup, nodeorder, numa-aware, overcommit, pdb,"
    " predicates, rescheduling, resource-strategy-fit, resourcequota, sla, task-topology, tdm, usage"
).split(", ")


@pytest.mark.parametrize("queue_plugin", ["proportion", "capacity"])
def test_every_plugin_takes_the_eviction_of_a_pod_whose_node_is_gone_and_its_undoing(queue_plugin):
    registry = builtin_registry()
    tier2 = "".join(f"  - name: {p}\n" for p in (*EVERY_PLUGIN, queue_plugin))
    conf = parse_conf(
        "actions: allocate\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n"
        f"- plugins:\n{tier2}",
        registry,
    )
    pods = [
        pod(f"web-{i}", cpu="1", group="web", node_name=n, phase="Running")
        for i, n in enumerate(("n1", "gone"))
    ]
    cache = load(
        ClusterCache(),
        nodes=[node("n1", cpu="4")],
        pods=pods,
        podgroups=[podgroup("web", min_member=2, phase="Running")],
    )
    ssn = open_session(cache.snapshot(), conf.tiers, registry.plugins, conf.configurations)
    before = figures(ssn)
    stmt = ssn.statement()
    for task in sorted(ssn.jobs["default/web"].tasks.values(), key=lambda t: t.name):
        stmt.evict(task, "preempted")
    assert ssn.jobs["default/web"].count(TaskStatus.RELEASING) == 2
    stmt.discard()
    assert_same(figures(ssn), before)
