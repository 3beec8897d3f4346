"""reclaim: across queues, a queue below its deserved share takes back resources from overused,
reclaimable queues, through the plugins' reclaimable votes (proportion, capacity, gang,
conformance). Victims must be marked preemptable, as in Volcano. A job's evictions are committed
only when its placement is then possible (pipelined)."""

from __future__ import annotations

from typing import ClassVar

from caldera.actions.helpers import EVICTABLE_STATUSES, OrderedHeap, evict_and_pipeline, pending_tasks
from caldera.actions.preempt import starving_jobs
from caldera.framework.model import TaskInfo
from caldera.framework.plugin import Action
from caldera.framework.session import Session


class ReclaimAction(Action):
    name: ClassVar[str] = "reclaim"

    def execute(self, ssn: Session) -> None:
        by_queue = starving_jobs(ssn)
        heaps = {name: OrderedHeap(ssn.job_key, jobs) for name, jobs in by_queue.items()}
        todo = {j.uid: pending_tasks(ssn, j) for jobs in by_queue.values() for j in jobs}
        queue_heap = OrderedHeap(ssn.queue_key, (ssn.queues[n] for n in by_queue))
        while queue_heap:
            queue = queue_heap.pop()
            if ssn.overused(queue):
                continue
            jobs = heaps[queue.name]
            if not jobs:
                continue
            job = jobs.pop()
            tasks = todo[job.uid]
            stmt = ssn.statement()
            assigned = False
            while tasks and ssn.job_starving(job):
                task = tasks[0]
                if not ssn.preemptive(queue, task):
                    break

                def candidate(t: TaskInfo, mine: str = queue.name) -> bool:
                    if t.status not in EVICTABLE_STATUSES or t.best_effort or not t.preemptable:
                        return False
                    other = ssn.jobs.get(t.job)
                    if other is None or other.queue == mine:
                        return False
                    q = ssn.queues.get(other.queue)
                    return q is not None and q.reclaimable

                if not evict_and_pipeline(
                    ssn,
                    stmt,
                    task,
                    candidate,
                    ssn.reclaimable,
                    "reclaim",
                    without_eviction=ssn.allocatable(queue, task),
                ):
                    break
                tasks.pop(0)
                assigned = True
            if ssn.job_pipelined(job):
                stmt.commit()
                if assigned and tasks:
                    jobs.push(job)
            else:
                stmt.discard()
            if jobs:
                queue_heap.push(queue)
