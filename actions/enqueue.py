"""enqueue: PodGroups move from Pending to Inqueue when the plugins' enqueueable votes allow it
(queue capacity, overcommit, sla); only Inqueue jobs are considered by allocate."""

from __future__ import annotations

from typing import ClassVar

from caldera.actions.helpers import OrderedHeap
from caldera.framework.model import JobInfo, QueueInfo
from caldera.framework.plugin import Action
from caldera.framework.session import Session

INQUEUE = "Inqueue"


class EnqueueAction(Action):
    name: ClassVar[str] = "enqueue"

    def execute(self, ssn: Session) -> None:
        ssn.enqueue_ran = True
        by_queue: dict[str, list[JobInfo]] = {}
        queues: dict[str, QueueInfo] = {}
        for job in ssn.jobs.values():
            if job.phase != "Pending":
                continue
            queue = ssn.queues.get(job.queue)
            if queue is None or not queue.is_open:
                job.job_fit_error = (
                    f"queue {job.queue} is not open" if queue else f"queue {job.queue} not found"
                )
                continue
            by_queue.setdefault(queue.name, []).append(job)
            queues[queue.name] = queue
        heaps = {name: OrderedHeap(ssn.job_key, jobs) for name, jobs in by_queue.items()}
        queue_heap = OrderedHeap(ssn.queue_key, queues.values())
        while queue_heap:
            queue = queue_heap.pop()
            jobs = heaps[queue.name]
            if not jobs:
                continue
            job = jobs.pop()
            if job.min_resources is None or job.min_resources.is_empty() or ssn.job_enqueueable(job):
                ssn.job_enqueued(job)
                job.phase = INQUEUE
                job.job_fit_error = ""
            queue_heap.push(queue)
