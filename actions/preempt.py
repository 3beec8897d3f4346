"""preempt: within a queue, a starving job takes resources from other jobs' tasks that the plugins'
preemptable votes select (priority, gang, drf, conformance); then, inside each starving job,
higher-priority tasks may take the room of the job's own lower ones.

As Volcano's ``Action.Execute`` in pkg/scheduler/actions/preempt/preempt.go:
- a pod is a victim unless marked ``volcano.sh/preemptable: "false"`` (``GetPodPreemptable``);
- a pod with ``preemptionPolicy: Never`` evicts nothing (``taskEligibleToPreempt``);
- a best-effort preemptor may not evict pods with requests; best-effort pods may be victims;
- on a node, victims are evicted lowest first until the preemptor fits the node *and* its queue
  allows it (``preemptorFitsOnNode``); a node where it still would not fit is left untouched;
- a job's turn goes through all of its pending tasks (a task that finds no node does not end the
  turn), and its evictions are committed only when the whole job is then pipelined: nothing is
  evicted for a preemptor gang that still cannot start.
Caldera adds (Volcano 1.15's gang-aware eviction): a victim gang loses its surplus first, and a
task it cannot spare takes the whole gang (``helpers.whole_gang``), never leaving it partly running.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from caldera.actions.helpers import (
    EVICTABLE_STATUSES,
    OrderedHeap,
    evict_and_pipeline,
    job_considered,
    job_valid,
    preemption_allowed,
)
from caldera.framework.model import JobInfo, QueueInfo, TaskInfo, TaskStatus
from caldera.framework.plugin import Action, unsupported
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


def preemptor_tasks(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    """All of the job's pending tasks (best-effort ones too, as Volcano), in task order."""
    tasks = list(job.tasks_in(TaskStatus.PENDING))
    if len(tasks) > 1:
        tasks.sort(key=ssn.task_key)
    return tasks


class PreemptAction(Action):
    name: ClassVar[str] = "preempt"
    # Volcano's conf.EnablePredicateErrCacheKey: Caldera always caches a pod template's failures per cycle
    arguments_schema: ClassVar[dict[str, type]] = {
        "predicateErrorCacheEnable": unsupported(
            bool, "predicate failures are always cached per pod template", True
        ),
        # Volcano's topology-aware preemption (pkg/scheduler/actions/preempt/preempt.go) is not implemented
        "enableTopologyAwarePreemption": unsupported(
            bool, "topology-aware preemption is not implemented", False
        ),
        "topologyAwarePreemptWorkerNum": unsupported(int, "topology-aware preemption is not implemented"),
        "minCandidateNodesPercentage": unsupported(int, "topology-aware preemption is not implemented"),
        "minCandidateNodesAbsolute": unsupported(int, "topology-aware preemption is not implemented"),
        "maxCandidateNodesAbsolute": unsupported(int, "topology-aware preemption is not implemented"),
    }

    def execute(self, ssn: Session) -> None:
        by_queue = starving_jobs(ssn)
        queue_heap = OrderedHeap(ssn.queue_key, (ssn.queues[n] for n in by_queue))
        while queue_heap:
            queue = queue_heap.pop()
            jobs = by_queue[queue.name]
            heap = OrderedHeap(ssn.job_key, jobs)
            # Preemption between jobs of the queue.
            while heap:
                job = heap.pop()
                tasks = preemptor_tasks(ssn, job)
                # a preemptor job's turn is one attempt (volcano_total_preemption_attempts)
                ssn.report.preempt_attempts += 1
                stmt = ssn.statement()
                # a failed attempt changes nothing: an identical pod would fail the same way until
                # some attempt succeeds (keeps a large unplaceable job's turn cheap)
                failed: set[tuple[bytes, int, bool, bool]] = set()
                for task in tasks:
                    if not ssn.job_starving(job):
                        break
                    shape = (
                        ssn.placement_key(task),
                        task.priority,
                        task.best_effort,
                        preemption_allowed(task),
                    )
                    if task.template and shape in failed:
                        continue
                    # (Volcano's preempt does not ask PreemptiveFn: only reclaim does)
                    if evict_and_pipeline(
                        ssn,
                        stmt,
                        task,
                        _other_job_in(ssn, queue, task),
                        ssn.preemptable,
                        "preempt",
                        # free room without victims is a plain allocation: only within the queue's
                        # share; a best-effort pod that fits is backfill's (pipelining it here would
                        # keep it from backfill)
                        without_eviction=not task.best_effort and ssn.allocatable(queue, task),
                        queue=queue,
                        whole_needs_priority=True,
                    ):
                        failed.clear()
                    else:
                        failed.add(shape)
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()
            # Preemption between the tasks of one job: higher-priority tasks first.
            for job in jobs:
                for task in preemptor_tasks(ssn, job):
                    stmt = ssn.statement()
                    if evict_and_pipeline(
                        ssn,
                        stmt,
                        task,
                        _same_job(task),
                        ssn.preemptable,
                        "preempt",
                        without_eviction=not task.best_effort and ssn.allocatable(queue, task),
                        queue=queue,
                        whole_needs_priority=True,
                    ):
                        stmt.commit()
                    else:
                        stmt.discard()
                        break


def _may_evict(preemptor: TaskInfo, task: TaskInfo) -> bool:
    # Volcano's filter in preempt.go Execute: PreemptableStatus, "BestEffort pod is not supported
    # to preempt unBestEffort pod", task.Preemptable.
    if task.status not in EVICTABLE_STATUSES or not task.preemptable:
        return False
    return not (preemptor.best_effort and not task.best_effort)


def _other_job_in(ssn: Session, queue: QueueInfo, preemptor: TaskInfo) -> Callable[[TaskInfo], bool]:
    def candidate(task: TaskInfo) -> bool:
        if task.job == preemptor.job or not _may_evict(preemptor, task):
            return False
        job = ssn.jobs.get(task.job)
        return job is not None and job.queue == queue.name

    return candidate


def _same_job(preemptor: TaskInfo) -> Callable[[TaskInfo], bool]:
    def candidate(task: TaskInfo) -> bool:
        # the plugins' votes decide; the priority guard keeps a job without a priority plugin
        # from trading its own tasks back and forth
        return (
            task.job == preemptor.job and _may_evict(preemptor, task) and task.priority < preemptor.priority
        )

    return candidate
