"""gangpreempt: Volcano 1.15's whole-gang preemption (pkg/scheduler/actions/gangpreempt/gangpreempt.go).

Within a queue, a starving job takes room for all its pending pods at once from jobs of the same
queue with a lower priority (``selectDomainBundles``: victims running or bound, preemptable, of
another job of the queue whose PodGroup is not marked unpreemptable, of lower job priority), in
bundles that never leave a victim gang partly running; victim jobs last in job order go first.
The rest is shared with gangreclaim (``actions/gang_eviction.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from caldera.actions.gang_eviction import Bundle, GangEvictionAction, decided
from caldera.actions.helpers import EVICTABLE_STATUSES
from caldera.framework.callbacks import GANG_PREEMPT
from caldera.framework.model import JobInfo, TaskInfo
from caldera.framework.session import Session


class GangPreemptAction(GangEvictionAction):
    name: ClassVar[str] = "gangpreempt"
    kind: ClassVar[str] = GANG_PREEMPT

    def is_candidate(self, ssn: Session, job: JobInfo, task: TaskInfo, victim: JobInfo) -> bool:
        # (Volcano drops legacy preempt's best-effort rule here: the plugins decide)
        return (
            task.status in EVICTABLE_STATUSES and victim.queue == job.queue and job.priority > victim.priority
        )

    def victim_first(self, ssn: Session, job: JobInfo) -> Callable[[Bundle, Bundle], int]:
        # SortBundlesForPreempt with ``!JobOrderFn(l, r)``: the job last in job order goes first
        def first(left: Bundle, right: Bundle) -> int:
            return decided(not ssn.job_order(left.job, right.job), not ssn.job_order(right.job, left.job))

        return first
