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
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from caldera.actions.helpers import (
    FailureMemo,
    OrderedHeap,
    explain,
    fit_mask,
    job_considered,
    job_valid,
    pending_jobs,
    pending_tasks,
)
from caldera.actions.subjobs import Worksheet, allocate_for_job, organize
from caldera.actions.topology import allocate_topology_job
from caldera.framework.model import JobInfo, QueueInfo, TaskInfo, TaskStatus
from caldera.framework.plugin import Action, unsupported
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
    ready: Callable[[], bool] | None = None,
    keep_going: Callable[[], bool] | None = None,
) -> bool:
    """Place ``tasks`` (consumed from the front) through ``stmt``. A task that cannot be placed has
    its reason recorded on the job; as in Volcano's ``allocateResourcesForTasks``
    (pkg/scheduler/actions/allocate/allocate.go), allocate then goes on with the job's other tasks
    while the job can still reach its minimum (``JobInfo.need_continue_allocating``), skips a task
    whose role already failed (``TaskHasFitErrors``), and skips a task its queue cannot take now.
    Returns False when it stopped at a task that sinks the job; True when all tasks were tried or
    the job became ready with tasks left (``stop_when_ready``). For a sub-group (actions/subjobs.py)
    ``ready`` says when to stop (its sub-group is ready) and ``keep_going`` replaces the job's rule
    for going on after a task that does not fit."""
    go_on = keep_going if keep_going is not None else job.need_continue_allocating
    node_list = ssn.node_list
    table = ssn.table
    unfit = ssn.unfit_templates
    failed_roles: set[str] | None = None
    share_message = ""

    def failed(task: TaskInfo, message: str) -> bool:
        """Record the failure; True when allocate should go on with the job's next task."""
        nonlocal failed_roles
        job.fit_errors[task.uid] = message
        job.job_fit_error = message
        if task.role:
            if failed_roles is None:
                failed_roles = set()
            failed_roles.add(task.role)
        if go_on():
            tasks.pop(0)
            return True
        return False

    while tasks:
        task = tasks[0]
        if stats is not None:
            stats.tasks += 1
        if not ssn.allocatable(queue, task):
            # Volcano: "Queue is overused when considering task, ignore it" (continue)
            if not share_message:
                share_message = f"queue {queue.name} is at its share for task {task.name}"
                cand = ssn.feasible_rows(task, rows)
                if not len(cand) or not fit_mask(ssn, task, cand).any():
                    share_message = f"{explain(ssn, task, rows)} ({share_message})"
            job.fit_errors[task.uid] = share_message
            job.job_fit_error = share_message
            tasks.pop(0)
            continue
        if task.role and failed_roles is not None and task.role in failed_roles:
            message = job.fit_errors.get(task.uid) or job.job_fit_error
            job.fit_errors[task.uid] = message
            tasks.pop(0)
            continue
        reason = ssn.pre_predicate(task)
        if reason:
            if failed(task, reason):
                continue
            return False
        # A pod template that fitted nowhere fits nowhere until some node changes: an unschedulable
        # backlog of identical pods costs one evaluation per cycle, not one per pod.
        template = ssn.placement_key(task)
        cached = unfit.get(template) if rows is None and template else None
        if cached is not None and cached[0] == table.version:
            if failed(task, cached[1]):
                continue
            return False
        choice = ssn.best_placement(task, rows)
        if choice is None:
            message = explain(ssn, task, rows)
            if rows is None and template:
                unfit[template] = (table.version, message)
            if failed(task, message):
                continue
            return False
        best, now = choice
        refused = (stmt.allocate if now else stmt.pipeline)(task, node_list[best].name)
        tasks.pop(0)
        if refused is not None:
            # An event handler refused (the statement recorded why on the task): as Volcano's
            # allocateResourcesForTasks, the task is not tried again this cycle, the job goes on.
            job.job_fit_error = refused
            continue
        if stats is not None:
            if now:
                stats.placed += 1
            else:
                stats.pipelined += 1
        if stop_when_ready and tasks and ssn.job_ready(job):
            return True
        if ready is not None and ready():
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
    # Volcano's conf.EnablePredicateErrCacheKey: Caldera always caches a pod template's failures per cycle
    arguments_schema: ClassVar[dict[str, type]] = {
        "predicateErrorCacheEnable": unsupported(
            bool, "predicate failures are always cached per pod template", True
        ),
    }

    def execute(self, ssn: Session) -> None:
        started = time.perf_counter()
        stats = _Stats()
        by_queue: dict[str, list[JobInfo]] = {}
        queues: dict[str, QueueInfo] = {}
        todo: dict[str, list[TaskInfo]] = {}
        candidates: list[tuple[JobInfo, QueueInfo]] = []
        for job in pending_jobs(ssn):
            if not job.count(TaskStatus.PENDING):
                continue
            queue = job_considered(ssn, job)
            if queue is None or not job_valid(ssn, job):
                continue
            if all(t.best_effort for t in job.tasks_in(TaskStatus.PENDING)):
                continue  # only best-effort pods left: backfill's
            candidates.append((job, queue))
        # The pass the last cycle left unfinished goes on with the jobs it has not taken: without
        # this, a budget spent on the same jobs at the head of the order every cycle (a gang that
        # never fits, in a cluster that changes under it) would starve every job behind them.
        # Once every job left has had its turn, a new pass takes them all in order again.
        taken_before = ssn.pass_taken
        skipped = [job.uid for job, _ in candidates if job.uid in taken_before]
        if skipped and len(skipped) < len(candidates):
            candidates = [(job, q) for job, q in candidates if job.uid not in taken_before]
            ssn.unreached.update(skipped)  # not taken this cycle: nothing recorded against them
        else:
            taken_before, skipped = frozenset(), []
        for job, queue in candidates:
            by_queue.setdefault(queue.name, []).append(job)
            queues[queue.name] = queue
        job_heaps = {name: OrderedHeap(ssn.job_key, jobs) for name, jobs in by_queue.items()}
        queue_heap = OrderedHeap(ssn.queue_key, queues.values())
        memo = FailureMemo.of(ssn)
        taken: set[str] = set()
        unreached = 0
        sheets: dict[str, Worksheet] = {}
        while queue_heap:
            # (after one job at least: a cycle whose budget went on opening the session still moves)
            if taken and ssn.deadline is not None and ssn.out_of_time():
                # The cycle's budget is spent: the jobs not reached wait, with nothing recorded
                # against them, for the next cycle, which goes on with this pass.
                left = {job.uid for heap in job_heaps.values() for job in heap}
                unreached = len(left)
                ssn.unreached.update(left)
                ssn.report.pass_taken = taken_before | taken
                break
            queue = queue_heap.pop()
            if ssn.overused(queue):
                continue
            jobs = job_heaps[queue.name]
            if not jobs:
                continue
            job = jobs.pop()
            taken.add(job.uid)
            # sub-groups (spec.subGroupPolicy): sub-group by sub-group, each inside its own group
            if job.sub_groups is not None:
                if self._sub_groups(ssn, job, sheets) and sheets[job.uid]:
                    jobs.push(job)  # ready with pods left: its turn comes again
                if jobs:
                    queue_heap.push(queue)
                continue
            # network topology: a topology-bound gang is placed inside one node group (actions/topology.py)
            if allocate_topology_job(ssn, job, allocate_job):
                if jobs:
                    queue_heap.push(queue)
                continue
            # Last cycle's vain try of this job, when nothing it depended on changed (FailureMemo)
            tried = memo.replay(job)
            if tried is not None:
                stats.tasks += tried
                if jobs:
                    queue_heap.push(queue)
                continue
            fresh, before = memo.fresh(job), stats.tasks
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
            memo.record(job, fresh, stmt, stats.tasks - before)
            if jobs:
                queue_heap.push(queue)
        ssn.report.allocate_stats = {
            "tasks": stats.tasks,
            "placed": stats.placed,
            "pipelined": stats.pipelined,
            "replayed": memo.replayed,
            "unreached": unreached,
            "skipped": len(skipped),
            "seconds": time.perf_counter() - started,
        }

    @staticmethod
    def _sub_groups(ssn: Session, job: JobInfo, sheets: dict[str, Worksheet]) -> bool:
        """One turn of a job with sub-groups (actions/subjobs.py): its statement is committed when
        the job is ready, kept in the session when it is only pipelined (Volcano's allocate
        commits only a ready job's statement). True when committed."""
        sheet = sheets.get(job.uid)
        if sheet is None:
            sheet = sheets[job.uid] = organize(ssn, job)
        stmt = allocate_for_job(ssn, job, sheet, place_tasks)
        if stmt is not None and ssn.job_ready(job):
            stmt.commit()
            return True
        return False
