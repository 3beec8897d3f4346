"""gangreclaim: Volcano 1.15's whole-gang reclaim (pkg/scheduler/actions/gangreclaim/gangreclaim.go).

Across queues, a starving job of a queue that is not overused, and whose queue may reclaim for all
its pending pods together (``Preemptive`` over their summed request), takes room at once from
running, preemptable pods of other, reclaimable queues (``selectDomainBundles``) whose PodGroup is
not marked unpreemptable, in bundles that never leave a victim gang partly running; victim queues
in victim queue order (``queueLessFn``). The rest is shared with gangpreempt
(``actions/gang_eviction.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from caldera.actions.gang_eviction import Bundle, GangEvictionAction, decided
from caldera.framework.callbacks import GANG_RECLAIM
from caldera.framework.model import JobInfo, QueueInfo, TaskInfo, TaskStatus
from caldera.framework.resource import Resource
from caldera.framework.session import Session


class GangReclaimAction(GangEvictionAction):
    name: ClassVar[str] = "gangreclaim"
    kind: ClassVar[str] = GANG_RECLAIM

    def queue_may_act(self, ssn: Session, queue: QueueInfo) -> bool:
        return not ssn.overused(queue)

    def job_may_act(self, ssn: Session, queue: QueueInfo, pending: list[TaskInfo]) -> bool:
        # Volcano asks Preemptive once for the whole list (the plugins sum its requests); Caldera's
        # preemptive functions read one task's request: they are asked for the sum as one request
        probe = pending[0].clone()
        total = Resource()
        for t in pending:
            total.add(t.resreq)
        probe.resreq = total
        probe.init_resreq = total.clone()
        return ssn.preemptive(queue, probe)

    def is_candidate(self, ssn: Session, job: JobInfo, task: TaskInfo, victim: JobInfo) -> bool:
        if task.status != TaskStatus.RUNNING or victim.queue == job.queue:
            return False
        q = ssn.queues.get(victim.queue)
        return q is not None and q.reclaimable

    def victim_first(self, ssn: Session, job: JobInfo) -> Callable[[Bundle, Bundle], int]:
        mine = ssn.queues.get(job.queue)

        def less(left: QueueInfo, right: QueueInfo) -> bool:
            if mine is None:
                return ssn.queue_order(left, right)
            return ssn.victim_queue_order(left, right, mine)

        def first(a: Bundle, b: Bundle) -> int:
            lq, rq = ssn.queues.get(a.job.queue), ssn.queues.get(b.job.queue)
            if lq is None or rq is None or lq.name == rq.name:
                return 0
            return decided(less(lq, rq), less(rq, lq))

        return first
