"""Volcano's pkg/scheduler/framework/statement_test.go, ported as data.

TestAllocateAutoRollbackOnError and TestPipelineAutoRollbackOnError: an operation that succeeds is
recorded with the task on its node; one that fails (a node not in the session, a job not in the
session) records nothing and leaves the task Pending on no node. Caldera raises ``StatementError``
for those two faults where Volcano returns an error. The same rollback is what follows an event
handler's ``Event.Err`` in Volcano's Statement.Allocate / Pipeline; the cases marked "(Event.Err)"
are that path, which statement_test.go has no case for (Caldera's ``allocate`` / ``pipeline`` return
the reason). TestDiscardReversesOperations: discarding a pipeline, an allocation or an eviction gives
the task back its status (Pending on no node; Running)."""

from __future__ import annotations

import pytest

from caldera.framework.model import TaskStatus
from caldera.framework.session import EventHandler, Session
from caldera.framework.statement import StatementError
from caldera.hack.scenario import cluster, node, pod, podgroup, queue


def new_test_session() -> Session:
    """statement_test.go newTestSession: node n1 (4 cpu, 8Gi, 10 pods), pod ns1/p1 (1 cpu, 1Gi,
    task spec worker) of PodGroup pg1 (min 1, Inqueue) in queue q1."""
    snap = cluster(
        nodes=[node("n1", cpu="4", memory="8Gi", pods="10")],
        queues=[queue("q1")],
        podgroups=[podgroup("pg1", namespace="ns1", min_member=1, queue="q1", phase="Inqueue")],
        pods=[
            pod(
                "p1",
                namespace="ns1",
                cpu="1",
                memory="1Gi",
                group="pg1",
                labels={"volcano.sh/task-spec": "worker"},
            )
        ],
    )
    return Session(snap, tiers=[])


def refusing(ssn: Session) -> None:
    ssn.add_event_handler(EventHandler(allocate=lambda e: setattr(e, "err", "refused"), can_fail=True))


ROLLBACK = [
    # (Go test, case, operation, fault)
    ("TestAllocateAutoRollbackOnError", "successful allocate records operation", "allocate", None),
    (
        "TestAllocateAutoRollbackOnError",
        "allocate to missing node returns error and rolls back",
        "allocate",
        "node",
    ),
    (
        "TestAllocateAutoRollbackOnError",
        "allocate with missing job returns error and rolls back",
        "allocate",
        "job",
    ),
    ("(Event.Err)", "allocate refused by an event handler rolls back", "allocate", "handler"),
    ("TestPipelineAutoRollbackOnError", "successful pipeline records operation", "pipeline", None),
    (
        "TestPipelineAutoRollbackOnError",
        "pipeline to missing node returns error and rolls back",
        "pipeline",
        "node",
    ),
    (
        "TestPipelineAutoRollbackOnError",
        "pipeline to missing job returns error and rolls back",
        "pipeline",
        "job",
    ),
    ("(Event.Err)", "pipeline refused by an event handler rolls back", "pipeline", "handler"),
]


@pytest.mark.parametrize(
    ("go_test", "case", "op", "fault"), ROLLBACK, ids=[f"{t}: {c}" for t, c, _, _ in ROLLBACK]
)
def test_auto_rollback_on_error(go_test, case, op, fault):
    ssn = new_test_session()
    job = next(iter(ssn.jobs.values()))
    task = next(iter(job.tasks.values()))
    stmt = ssn.statement()
    target = "n1"
    if fault == "node":
        del ssn.nodes["n1"]
        target = "nonexistent-node"
    elif fault == "job":
        del ssn.jobs[task.job]
    elif fault == "handler":
        refusing(ssn)
    place = stmt.allocate if op == "allocate" else stmt.pipeline
    if fault in ("node", "job"):
        with pytest.raises(StatementError):
            place(task, target)
    else:
        assert (place(task, target) is None) is (fault is None)
    if fault is None:
        assert len(stmt) == 1 and stmt.operations[0].op.value == op
        assert task.node_name == "n1"
        return
    assert len(stmt) == 0
    assert task.status == TaskStatus.PENDING
    assert task.node_name == ""
    assert task.uid in job.tasks  # the job still knows the task


DISCARD = [
    ("discard reverses pipeline operation", "pipeline", TaskStatus.PIPELINED, TaskStatus.PENDING),
    ("discard reverses allocate operation", "allocate", TaskStatus.ALLOCATED, TaskStatus.PENDING),
    ("discard reverses evict operation", "evict", TaskStatus.RELEASING, TaskStatus.RUNNING),
]


@pytest.mark.parametrize(("case", "op", "during", "after"), DISCARD, ids=[d[0] for d in DISCARD])
def test_discard_reverses_operations(case, op, during, after):
    """TestDiscardReversesOperations."""
    ssn = new_test_session()
    job = next(iter(ssn.jobs.values()))
    task = next(iter(job.tasks.values()))
    stmt = ssn.statement()
    if op == "evict":
        # first allocated so it is on the node, then Running, then evicted
        ssn.statement().allocate(task, "n1")
        job.update_task_status(task, TaskStatus.RUNNING)
        stmt.evict(task, "test-reclaim")
    else:
        getattr(stmt, op)(task, "n1")
    assert task.status == during
    stmt.discard()
    assert task.status == after
    if after == TaskStatus.PENDING:
        assert task.node_name == ""
