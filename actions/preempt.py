"""preempt: within a queue, a starving job takes resources from lower-ordered tasks that the
plugins' preemptable votes select (priority, gang, drf, conformance). Victims must be marked
preemptable (``volcano.sh/preemptable: "true"``), as in Volcano. A job's evictions are committed
only when its whole placement is then possible (pipelined); otherwise everything is undone.
Then, inside each starving job, higher-priority tasks may preempt the job's own lower ones."""

from __future__ import annotations

from typing import ClassVar

from caldera.actions.helpers import (
    EVICTABLE_STATUSES,
    OrderedHeap,
    evict_and_pipeline,
    job_considered,
    job_valid,
    pending_tasks,
)
from caldera.framework.model import JobInfo, QueueInfo, TaskInfo, TaskStatus
from caldera.framework.plugin import Action
from caldera.framework.session import Session


def starving_jobs(ssn: Session) -> dict[str, list[JobInfo]]:
    by_queue: dict[str, list[JobInfo]] = {}
    for job in ssn.jobs.values():
        if not job.count(TaskStatus.PENDING):
            continue
        queue = job_considered(ssn, job)
        if queue is None or not job_valid(ssn, job) or not ssn.job_starving(job):
            continue
        by_queue.setdefault(queue.name, []).append(job)
    return by_queue


class PreemptAction(Action):
    name: ClassVar[str] = "preempt"

    def execute(self, ssn: Session) -> None:
        by_queue = starving_jobs(ssn)
        for qname, jobs in by_queue.items():
            queue = ssn.queues[qname]
            heap = OrderedHeap(ssn.job_key, jobs)
            todo = {j.uid: pending_tasks(ssn, j) for j in jobs}
            while heap:
                job = heap.pop()
                tasks = todo[job.uid]
                # a preemptor job's turn is one attempt (volcano_total_preemption_attempts)
                ssn.report.preempt_attempts += 1
                stmt = ssn.statement()
                assigned = False
                while tasks and ssn.job_starving(job):
                    task = tasks[0]
                    if not ssn.preemptive(queue, task):
                        break
                    if not evict_and_pipeline(
                        ssn,
                        stmt,
                        task,
                        _other_job_in(ssn, queue, task),
                        ssn.preemptable,
                        "preempt",
                        # free room without victims is a plain allocation: only within the queue's share
                        without_eviction=ssn.allocatable(queue, task),
                    ):
                        break
                    tasks.pop(0)
                    assigned = True
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()
                    continue
                if assigned and tasks:
                    heap.push(job)
            # Preemption between the tasks of one job: higher-priority tasks first.
            for job in jobs:
                tasks = [t for t in todo[job.uid] if t.status == TaskStatus.PENDING]
                for task in tasks:
                    if not ssn.job_starving(job):
                        break
                    stmt = ssn.statement()
                    if evict_and_pipeline(
                        ssn,
                        stmt,
                        task,
                        _same_job(task),
                        ssn.preemptable,
                        "preempt",
                        without_eviction=ssn.allocatable(ssn.queues[job.queue], task),
                    ):
                        stmt.commit()
                    else:
                        stmt.discard()
                        break


def _evictable(task: TaskInfo) -> bool:
    return task.status in EVICTABLE_STATUSES and not task.best_effort and task.preemptable


def _other_job_in(ssn: Session, queue: QueueInfo, preemptor: TaskInfo):  # type: ignore[no-untyped-def]
    def candidate(task: TaskInfo) -> bool:
        if not _evictable(task) or task.job == preemptor.job:
            return False
        job = ssn.jobs.get(task.job)
        return job is not None and job.queue == queue.name

    return candidate


def _same_job(preemptor: TaskInfo):  # type: ignore[no-untyped-def]
    def candidate(task: TaskInfo) -> bool:
        return _evictable(task) and task.job == preemptor.job and task.priority < preemptor.priority

    return candidate
