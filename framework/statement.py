"""A Statement: the operations of one decision (usually a whole gang), committed or discarded together.

Every operation changes the session at once (task status, node usage, plugin share figures
through event handlers), so later predicates see it; ``discard`` undoes them in reverse order
and leaves the session exactly as it was; ``commit`` hands placements and evictions over to
the session's result, for the binder and the evictor.

An event handler that can fail (the extender's ``allocateFuncVerb``) may refuse an allocation or a
pipeline: that one operation is undone at once and ``allocate`` / ``pipeline`` return the reason
(Volcano's ``Statement.Allocate`` / ``Pipeline`` returning an error). Without such a handler the
events are fired without any check.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from caldera.framework.model import NodeInfo, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from caldera.framework.session import Session


class Op(enum.Enum):
    ALLOCATE = "allocate"
    PIPELINE = "pipeline"
    EVICT = "evict"


@dataclass
class Operation:
    op: Op
    task: TaskInfo
    node: str
    previous_status: TaskStatus
    previous_node: str
    reason: str = ""


class StatementError(RuntimeError):
    """An operation that cannot apply (unknown node, task not in its job); the session is unchanged."""


class Statement:
    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.operations: list[Operation] = []
        self.closed = False

    def __len__(self) -> int:
        return len(self.operations)

    def _node(self, name: str) -> NodeInfo:
        node = self.ssn.nodes.get(name)
        if node is None:
            raise StatementError(f"node {name!r} is not in the session")
        return node

    def _place(self, task: TaskInfo, node_name: str, status: TaskStatus, op: Op) -> str | None:
        node = self._node(node_name)
        job = self.ssn.jobs.get(task.job)
        if job is None or job.tasks.get(task.uid) is not task:
            raise StatementError(f"task {task.key} is not a task of job {task.job!r} in this session")
        if task.pod.spec.scheduling_gates:
            # The last line of defence: whatever an action decided, a gated pod takes no room.
            raise StatementError(f"task {task.key} has scheduling gates and cannot be placed")
        record = Operation(op, task, node_name, task.status, task.node_name)
        job.update_task_status(task, status)
        task.node_name = node_name
        node.add_task(task)
        self.operations.append(record)
        ssn = self.ssn
        if not ssn.fallible_events:
            ssn._fire(True, task)
            return None
        refused = ssn._fire_fallible(task)
        if refused is None:
            return None
        # An event handler refused: undo this one operation as Volcano's Statement.Allocate /
        # Pipeline roll back through unallocate / unPipeline (pkg/scheduler/framework/statement.go)
        message, ran = refused
        self.operations.pop()
        node.remove_task(task)
        job.update_task_status(task, record.previous_status)
        ssn._fire_undo(task, ran)
        task.node_name = record.previous_node
        verb = "allocation" if op is Op.ALLOCATE else "pipeline"
        reason = f"{verb} of task {task.name} on node {node_name} {message}"
        job.fit_errors[task.uid] = reason
        return reason

    def allocate(self, task: TaskInfo, node_name: str) -> str | None:
        """Place a pending task on a node, to be bound when the statement commits. Returns None, or
        why an event handler refused it (``EventHandler.can_fail``, Volcano's ``Event.Err``): then
        the statement and the session are as before the call, the reason is the task's fit error,
        and the caller takes it as "does not fit there" (Volcano's allocate does not try the task
        again this cycle: ``allocateResourcesForTasks`` goes on with the next task)."""
        return self._place(task, node_name, TaskStatus.ALLOCATED, Op.ALLOCATE)

    def pipeline(self, task: TaskInfo, node_name: str) -> str | None:
        """Reserve a node for a task whose resources are still being released there. Returns None,
        or why an event handler refused it, as ``allocate``."""
        return self._place(task, node_name, TaskStatus.PIPELINED, Op.PIPELINE)

    def evict(self, task: TaskInfo, reason: str) -> None:
        """Mark a running task as releasing; it is evicted when the statement commits.

        A task whose node is not in the session (the node was deleted while its pods are still
        bound there, until the pod garbage collector removes them) is evicted all the same, with no
        node to account it on: Volcano's ``Statement.Evict`` (pkg/scheduler/framework/statement.go)
        updates the job and skips a node it does not find. A gang taken whole takes such a pod too."""
        node = self.ssn.nodes.get(task.node_name)
        job = self.ssn.jobs.get(task.job)
        record = Operation(Op.EVICT, task, task.node_name, task.status, task.node_name, reason)
        if node is not None:
            node.remove_task(task)
        if job is not None and job.tasks.get(task.uid) is task:
            job.update_task_status(task, TaskStatus.RELEASING)
        else:
            task.status = TaskStatus.RELEASING
        if node is not None:
            node.add_task(task)
        self.operations.append(record)
        self.ssn._fire(False, task)

    def _undo(self, record: Operation) -> None:
        task = record.task
        # (an eviction's node may be missing from the session: see ``evict``; a placement's never is)
        node = self.ssn.nodes.get(record.node)
        job = self.ssn.jobs.get(task.job)
        if node is not None:
            node.remove_task(task)
        if job is not None and job.tasks.get(task.uid) is task:
            job.update_task_status(task, record.previous_status)
        else:
            task.status = record.previous_status
        if record.op is Op.EVICT:
            task.node_name = record.previous_node
            if node is not None:
                node.add_task(task)
            self.ssn._fire(True, task)
        else:
            # handlers learn which node the task leaves (per-node and per-domain counts)
            self.ssn._fire(False, task)
            task.node_name = record.previous_node

    def discard(self) -> None:
        """Undo every operation, newest first; the session is left exactly as before."""
        if self.closed:
            return
        for record in reversed(self.operations):
            self._undo(record)
        self.operations.clear()
        self.closed = True

    def commit(self) -> None:
        """Hand allocations to the binder and evictions to the evictor (pipelines stay in the session)."""
        if self.closed:
            return
        from caldera.framework.result import Eviction, Placement

        for record in self.operations:
            if record.op is Op.ALLOCATE:
                annotations = self.ssn.task_annotations.get(record.task.uid)
                claims = self.ssn.task_claims.get(record.task.uid) if self.ssn.task_claims else None
                numa = self.ssn.task_numa.get(record.task.uid) if self.ssn.task_numa else None
                self.ssn.placements.append(
                    Placement(
                        record.task,
                        record.node,
                        dict(annotations) if annotations else {},
                        list(claims) if claims is not None else None,
                        numa,
                    )
                )
            elif record.op is Op.EVICT:
                self.ssn.evictions.append(Eviction(record.task, record.reason))
        self.operations.clear()
        self.closed = True
        self.ssn.placements_committed()

    def merge(self, other: Statement) -> None:
        """Take over another statement's operations (a sub-decision folded into this one)."""
        self.operations.extend(other.operations)
        other.operations = []
        other.closed = True
