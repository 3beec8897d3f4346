"""allocate: queues in queue order, jobs in job order, tasks in task order; each task goes to the
best-scoring node among those that pass every predicate. A job's placements go through one
statement: committed once the job is ready (gang), kept in the session when it is only
pipelined, otherwise discarded. A job that became ready with tasks left goes back into its
queue, so that queues and jobs take turns (drf, proportion).

Per task the work is vectorised over node rows: static predicates are cached per pod template,
dynamic predicates, resource fit and scores are numpy operations; a reason is computed only on
failure (``job.fit_errors`` per task and ``job.job_fit_error`` in kube-scheduler's words).

``allocate_job(ssn, job, rows)`` places one whole job on a subset of node rows, for the
topology-aware allocate.
"""

from __future__ import annotations

import time
from typing import ClassVar

import numpy as np

from caldera.actions.helpers import (
    OrderedHeap,
    explain,
    fit_mask,
    job_considered,
    job_valid,
    pending_tasks,
)
from caldera.actions.topology import allocate_topology_job
from caldera.framework.model import JobInfo, QueueInfo, TaskInfo, TaskStatus
from caldera.framework.plugin import Action
from caldera.framework.session import Session
from caldera.framework.statement import Statement


class _Stats:
    __slots__ = ("pipelined", "placed", "tasks")

    def __init__(self) -> None:
        self.tasks = 0
        self.placed = 0
        self.pipelined = 0


def place_tasks(
    ssn: Session,
    job: JobInfo,
    queue: QueueInfo,
    tasks: list[TaskInfo],
    stmt: Statement,
    rows: np.ndarray | None = None,
    stop_when_ready: bool = False,
    stats: _Stats | None = None,
) -> bool:
    """Place ``tasks`` (consumed from the front) through ``stmt``. Returns False when a task could
    not be placed (its reason is recorded on the job); True when all were placed or the job became
    ready with tasks left (``stop_when_ready``)."""
    node_list = ssn.node_list
    table = ssn.table
    unfit = ssn.unfit_templates
    while tasks:
        task = tasks[0]
        if stats is not None:
            stats.tasks += 1
        if not ssn.allocatable(queue, task):
            message = f"queue {queue.name} is at its share for task {task.name}"
            cand = ssn.feasible_rows(task, rows)
            if not len(cand) or not fit_mask(ssn, task, cand).any():
                message = f"{explain(ssn, task, rows)} ({message})"
            job.fit_errors[task.uid] = message
            job.job_fit_error = message
            return False
        reason = ssn.pre_predicate(task)
        if reason:
            job.fit_errors[task.uid] = reason
            job.job_fit_error = reason
            return False
        # A pod template that fitted nowhere fits nowhere until some node changes: an unschedulable
        # backlog of identical pods costs one evaluation per cycle, not one per pod.
        cached = unfit.get(task.template) if rows is None and task.template else None
        if cached is not None and cached[0] == table.version:
            job.fit_errors[task.uid] = cached[1]
            job.job_fit_error = cached[1]
            return False
        choice = ssn.best_placement(task, rows)
        if choice is None:
            message = explain(ssn, task, rows)
            if rows is None and task.template:
                unfit[task.template] = (table.version, message)
            job.fit_errors[task.uid] = message
            job.job_fit_error = message
            return False
        best, now = choice
        if now:
            stmt.allocate(task, node_list[best].name)
            if stats is not None:
                stats.placed += 1
        else:
            stmt.pipeline(task, node_list[best].name)
            if stats is not None:
                stats.pipelined += 1
        tasks.pop(0)
        if stop_when_ready and tasks and ssn.job_ready(job):
            return True
    return True


def allocate_job(ssn: Session, job: JobInfo, rows: np.ndarray | None = None) -> Statement | None:
    """Place all of a job's pending tasks (with requests) on ``rows`` (default: every node). Returns
    the statement, not yet committed, when the job is then ready or pipelined; otherwise undoes
    everything and returns None."""
    queue = ssn.queues.get(job.queue)
    if queue is None:
        return None
    tasks = pending_tasks(ssn, job)
    stmt = ssn.statement()
    place_tasks(ssn, job, queue, tasks, stmt, rows)
    if len(stmt) and (ssn.job_ready(job) or ssn.job_pipelined(job)):
        return stmt
    stmt.discard()
    return None


class AllocateAction(Action):
    name: ClassVar[str] = "allocate"

    def execute(self, ssn: Session) -> None:
        started = time.perf_counter()
        stats = _Stats()
        by_queue: dict[str, list[JobInfo]] = {}
        queues: dict[str, QueueInfo] = {}
        todo: dict[str, list[TaskInfo]] = {}
        for job in ssn.jobs.values():
            if not job.count(TaskStatus.PENDING):
                continue
            queue = job_considered(ssn, job)
            if queue is None or not job_valid(ssn, job):
                continue
            if all(t.best_effort for t in job.tasks_in(TaskStatus.PENDING)):
                continue  # only best-effort pods left: backfill's
            by_queue.setdefault(queue.name, []).append(job)
            queues[queue.name] = queue
        job_heaps = {name: OrderedHeap(ssn.job_key, jobs) for name, jobs in by_queue.items()}
        queue_heap = OrderedHeap(ssn.queue_key, queues.values())
        while queue_heap:
            queue = queue_heap.pop()
            if ssn.overused(queue):
                continue
            jobs = job_heaps[queue.name]
            if not jobs:
                continue
            job = jobs.pop()
            # network topology: a topology-bound gang is placed inside one node group (actions/topology.py)
            if allocate_topology_job(ssn, job, allocate_job):
                if jobs:
                    queue_heap.push(queue)
                continue
            # Sorted on the job's first turn only: jobs of an overused queue are never sorted at all.
            tasks = todo.get(job.uid)
            if tasks is None:
                tasks = todo[job.uid] = pending_tasks(ssn, job)
            stmt = ssn.statement()
            ok = place_tasks(ssn, job, queue, tasks, stmt, stop_when_ready=True, stats=stats)
            if ssn.job_ready(job):
                stmt.commit()
                if ok and tasks:
                    jobs.push(job)
            elif not ssn.job_pipelined(job):
                stmt.discard()
            if jobs:
                queue_heap.push(queue)
        ssn.report.allocate_stats = {
            "tasks": stats.tasks,
            "placed": stats.placed,
            "pipelined": stats.pipelined,
            "seconds": time.perf_counter() - started,
        }
