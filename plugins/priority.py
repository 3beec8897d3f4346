"""priority: jobs by their PodGroup's priority class, tasks by pod priority, and preemption of
lower-priority work (Volcano's priority plugin)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from caldera.framework.callbacks import GANG_RECLAIM, EvictionContext
from caldera.framework.model import JobInfo, TaskInfo
from caldera.framework.plugin import Plugin

if TYPE_CHECKING:
    from caldera.framework.session import Session

PERMIT = 1


class PriorityPlugin(Plugin):
    name: ClassVar[str] = "priority"

    def on_session_open(self, ssn: Session) -> None:
        def job_order(left: JobInfo, right: JobInfo) -> int:
            if left.priority == right.priority:
                return 0
            return -1 if left.priority > right.priority else 1

        def task_order(left: TaskInfo, right: TaskInfo) -> int:
            if left.priority == right.priority:
                return 0
            return -1 if left.priority > right.priority else 1

        def preemptable(preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            jobs = ssn.jobs
            mine = jobs.get(preemptor.job)
            victims = []
            for t in preemptees:
                if t.job == preemptor.job:
                    if t.priority < preemptor.priority:
                        victims.append(t)
                    continue
                theirs = jobs.get(t.job)
                their_priority = theirs.priority if theirs is not None else t.priority
                if mine is not None and their_priority < mine.priority:
                    victims.append(t)
            return victims, PERMIT

        def job_starving(job: JobInfo) -> bool:
            return job.ready_task_num() + job.waiting_task_num() < job.valid_task_num()

        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_task_order_fn(self.name, task_order)
        ssn.add_preemptable_fn(self.name, preemptable)

        def unified_evictable(ctx: EvictionContext, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            # Volcano priority.go AddUnifiedEvictableFn: reclaim is the queues' fairness, not
            # priority's; in gangpreempt a victim's job must be of lower priority than the preemptor's
            if ctx.kind == GANG_RECLAIM:
                return candidates, PERMIT
            jobs = ssn.jobs
            victims = []
            for t in candidates:
                theirs = jobs.get(t.job)
                if theirs is not None and theirs.priority < ctx.job.priority:
                    victims.append(t)
            return victims, PERMIT

        ssn.add_unified_evictable_fn(self.name, unified_evictable)
        ssn.add_job_starving_fn(self.name, job_starving)
