"""reclaim: across queues, a queue that is not overused takes back resources from other queues whose
tasks the plugins' reclaimable votes select (proportion: the victim's queue is over its deserved
share; capacity, gang, conformance).

As Volcano's ``Action.Execute`` and ``reclaimForTask`` in pkg/scheduler/actions/reclaim/reclaim.go:
queues in queue order, an overused queue reclaims nothing; each starving job of the queue in job
order; each of its pending tasks in task order, skipping a pod with ``preemptionPolicy: Never``, one
its queue may not reclaim for (``Preemptive``) and one whose pre-predicates fail; victims are
running, preemptable pods of other, reclaimable queues, evicted lowest first until the task fits;
a job's evictions are committed only when the job is then pipelined. Victim gangs lose their
surplus first and are never left partly running (see actions/preempt.py).
"""

from __future__ import annotations

from typing import ClassVar

from caldera.actions.helpers import OrderedHeap, evict_and_pipeline, preemption_allowed
from caldera.actions.preempt import preemptor_tasks, starving_jobs
from caldera.framework.model import TaskInfo, TaskStatus
from caldera.framework.plugin import Action, unsupported
from caldera.framework.session import Session


class ReclaimAction(Action):
    name: ClassVar[str] = "reclaim"
    # Volcano's conf.EnablePredicateErrCacheKey: Caldera always caches a pod template's failures per cycle
    arguments_schema: ClassVar[dict[str, type]] = {
        "predicateErrorCacheEnable": unsupported(
            bool, "predicate failures are always cached per pod template", True
        ),
    }

    def execute(self, ssn: Session) -> None:
        by_queue = starving_jobs(ssn)
        queue_heap = OrderedHeap(ssn.queue_key, (ssn.queues[n] for n in by_queue))
        while queue_heap:
            queue = queue_heap.pop()
            if ssn.overused(queue):
                continue
            jobs = OrderedHeap(ssn.job_key, by_queue[queue.name])
            while jobs:
                job = jobs.pop()
                stmt = ssn.statement()
                # as in preempt: a failed attempt changes nothing, so an identical pod is skipped
                failed: set[tuple[bytes, int, bool, bool]] = set()
                for task in preemptor_tasks(ssn, job):
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
                    if not ssn.preemptive(queue, task):
                        continue
                    if ssn.pre_predicate(task):
                        continue

                    def candidate(t: TaskInfo, mine: str = queue.name) -> bool:
                        # Volcano reclaimForTask: Running and Preemptable, of another, reclaimable queue
                        if t.status != TaskStatus.RUNNING or not t.preemptable:
                            return False
                        other = ssn.jobs.get(t.job)
                        if other is None or other.queue == mine:
                            return False
                        q = ssn.queues.get(other.queue)
                        return q is not None and q.reclaimable

                    if evict_and_pipeline(
                        ssn,
                        stmt,
                        task,
                        candidate,
                        ssn.reclaimable,
                        "reclaim",
                        # Volcano's reclaimForTask only looks at nodes that have reclaimees
                        without_eviction=False,
                    ):
                        failed.clear()
                    else:
                        failed.add(shape)
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()
