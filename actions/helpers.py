"""What the actions share: which jobs a cycle considers, vectorised resource fit on node rows,
kube-scheduler style explanations, ordered heaps, and the evict-then-pipeline step of preempt
and reclaim."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import numpy as np

from caldera.framework.model import JobInfo, QueueInfo, TaskInfo, TaskStatus
from caldera.framework.resource import Resource
from caldera.framework.session import Session
from caldera.framework.statement import Statement

T = TypeVar("T")

#: Statuses of tasks that may be evicted by preempt and reclaim.
EVICTABLE_STATUSES = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND})


class OrderedHeap(Generic[T]):
    """Items kept in a session order (``ssn.job_key`` ...); the order is asked again at every push.

    A sorted list rather than a binary heap: jobs mostly arrive already in order (creation time),
    which an adaptive sort checks in about n comparisons instead of n log n, and every comparison
    here walks the plugins' order functions."""

    def __init__(self, key: Callable[[T], Any], items: Iterable[T] = ()) -> None:
        self._key = key
        self._items: list[T] = sorted(items, key=key)
        self._head = 0

    def push(self, item: T) -> None:
        if self._head > 64 and self._head * 2 > len(self._items):
            del self._items[: self._head]
            self._head = 0
        bisect.insort_right(self._items, item, lo=self._head, key=self._key)

    def pop(self) -> T:
        item = self._items[self._head]
        self._head += 1
        return item

    def __len__(self) -> int:
        return len(self._items) - self._head

    def __bool__(self) -> bool:
        return self._head < len(self._items)


def job_considered(ssn: Session, job: JobInfo) -> QueueInfo | None:
    """The job's queue when this cycle may schedule the job (queue known and open; job let in by
    enqueue, or enqueue not configured, as in Volcano), else None."""
    queue = ssn.queues.get(job.queue)
    if queue is None or not queue.is_open:
        return None
    if job.phase == "Pending" and ssn.enqueue_ran:
        return None
    return queue


def gated_message(job: JobInfo) -> str:
    """``2/4 tasks in gang are waiting for scheduling gates: pod a (gates: x, y), pod b (gates: x)``."""
    gated = sorted(job.gated_tasks(), key=lambda t: t.name)
    shown = ", ".join(f"pod {t.name} (gates: {', '.join(t.gates)})" for t in gated[:5])
    more = f" and {len(gated) - 5} more" if len(gated) > 5 else ""
    return (
        f"{len(gated)}/{len(job.tasks)} tasks in gang are waiting for scheduling gates: {shown}{more}; "
        f"pod group is not ready, {job.ready_task_num()} ready, {job.min_available} minAvailable"
    )


def job_valid(ssn: Session, job: JobInfo) -> bool:
    result = ssn.job_valid(job)
    if result is not None:
        job.job_fit_error = result.message or result.reason
        return False
    # A gang that needs gated pods waits whole: nothing of it is placed, no room is taken by
    # preempt or reclaim (Volcano's actions skip ``task.SchGated`` tasks; here the gang as a whole).
    if job.waits_for_gates():
        job.job_fit_error = gated_message(job)
        return False
    return True


def pending_tasks(ssn: Session, job: JobInfo, best_effort: bool = False) -> list[TaskInfo]:
    """The job's pending tasks with (or without) requests, in task order; gated pods are left out
    (kube-scheduler's SchedulingGates PreEnqueue, Volcano's ``if task.SchGated { continue }``)."""
    tasks = [
        t
        for t in job.tasks_in(TaskStatus.PENDING)
        if t.best_effort == best_effort and not t.pod.spec.scheduling_gates
    ]
    if len(tasks) > 1:
        tasks.sort(key=ssn.task_key)
    return tasks


def fit_mask(ssn: Session, task: TaskInfo, rows: np.ndarray | None, future: bool = True) -> np.ndarray:
    """Which of ``rows`` have room for the task now (``future=False``) or once releasing pods
    are gone and pipelined ones placed (``future=True``)."""
    return ssn.table.fits(task.init_resreq, rows, future)


def resource_reasons(ssn: Session, task: TaskInfo, rows: np.ndarray) -> dict[str, int]:
    """For rows that lack room, the first missing resource, in kube-scheduler's words."""
    counts: dict[str, int] = {}
    left = np.ones(len(rows), dtype=bool)
    for reason, fails in ssn.table.shortfalls(task.init_resreq, rows).items():
        fails = fails & left
        n = int(fails.sum())
        if n:
            counts[reason] = counts.get(reason, 0) + n
        left &= ~fails
    return counts


def explain(ssn: Session, task: TaskInfo, rows: np.ndarray | None = None) -> str:
    """'0/N nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint.'"""
    rows = ssn.all_rows if rows is None else rows
    counts = ssn.explain_predicates(task, rows)
    passed = ssn.feasible_rows(task, rows)
    for reason, n in resource_reasons(ssn, task, passed).items():
        counts[reason] = counts.get(reason, 0) + n
    if not counts:
        return f"0/{len(rows)} nodes are available."
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    return f"0/{len(rows)} nodes are available: {parts}."


def ordered_rows(ssn: Session, task: TaskInfo, rows: np.ndarray) -> list[int]:
    """Rows best first by node score; ties by node name."""
    if len(rows) == 0:
        return []
    scores = ssn.node_scores(task, rows)
    rank = ssn.placement.name_rank[rows]
    order = np.lexsort((rank, -scores))
    return [int(r) for r in rows[order]]


def evictable_by_row(ssn: Session) -> dict[int, list[TaskInfo]]:
    """Per node row, its tasks that could ever be victims (running or bound, with requests, marked
    preemptable): built once per session, so a preemptor does not scan every pod of every node."""
    index = ssn.evictable_by_row
    if index is None:
        index = {}
        for node in ssn.node_list:
            tasks = [
                t
                for t in node.tasks.values()
                if t.status in EVICTABLE_STATUSES and t.preemptable and not t.best_effort
            ]
            if tasks:
                index[node.row] = tasks
        ssn.evictable_by_row = index
    return index


def evict_and_pipeline(
    ssn: Session,
    stmt: Statement,
    task: TaskInfo,
    candidate: Callable[[TaskInfo], bool],
    choose: Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]],
    reason: str,
    without_eviction: bool = True,
) -> bool:
    """Make room for ``task`` and pipeline it there. A node whose future idle already holds it
    needs no victim (taken only when ``without_eviction``: the caller says whether the task may
    simply be placed, e.g. its queue is within its share). Otherwise, on the best-scoring node where
    evicting victims (chosen by ``choose`` among the node's tasks that pass ``candidate``) makes
    room, evict the fewest, lowest-ordered first. Returns False (and changes nothing) when no node
    works."""
    index = evictable_by_row(ssn)
    if not index and not without_eviction:
        return False  # no victim anywhere and no free room to take: nothing to look at
    rows = ssn.feasible_rows(task, resources=False)
    if not len(rows):
        return False
    need = task.init_resreq
    node_list = ssn.node_list
    if without_eviction:
        free = rows[ssn.table.fits(need, rows)]
        if len(free):
            best = ssn.best_row(task, free, ssn.node_scores(task, free))
            stmt.pipeline(task, node_list[best].name)
            return True
    if not index:
        return False
    rows = rows[np.isin(rows, np.fromiter(index, dtype=np.intp, count=len(index)))]
    for r in ordered_rows(ssn, task, rows):
        node = node_list[r]
        preemptees = [t for t in index[r] if t.node_name == node.name and candidate(t)]
        if not preemptees:
            continue
        victims = keep_gangs_whole(ssn, choose(task, preemptees))
        if not victims:
            continue
        room = node.future_idle
        for v in victims:
            room.add(v.resreq)
        if not need.less_equal(room):
            continue
        victims.sort(key=ssn.task_key, reverse=True)
        for v in victims:
            if need.less_equal(node.future_idle):
                break
            stmt.evict(v, reason)
        stmt.pipeline(task, node.name)
        return True
    return False


def keep_gangs_whole(ssn: Session, victims: list[TaskInfo]) -> list[TaskInfo]:
    """Drop victims that would take a running job below its minimum member. The plugins' votes
    decide tier by tier, so a later tier (drf) may select victims an earlier one (gang) refused:
    this is the action's own guarantee that a running gang is never broken."""
    left: dict[str, int] = {}
    out = []
    for v in victims:
        job = ssn.jobs.get(v.job)
        if job is None:
            out.append(v)
            continue
        if v.job not in left:
            left[v.job] = job.ready_task_num()
        # As Volcano's gang rule: a job of min member 1 may lose its pod; a larger gang only its surplus.
        if job.min_available <= 1 or left[v.job] > job.min_available:
            left[v.job] -= 1
            out.append(v)
    return out


def resreq_of(tasks: Iterable[TaskInfo]) -> Resource:
    out = Resource()
    for t in tasks:
        out.add(t.resreq)
    return out
