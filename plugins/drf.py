"""drf: dominant resource fairness between jobs: the job with the smallest dominant share goes
first, and a job may preempt another only while its share stays at or below the other's."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from caldera.framework.model import ALLOCATED_STATUSES, JobInfo, TaskInfo, TaskStatus
from caldera.framework.plugin import Plugin
from caldera.framework.resource import Resource
from caldera.plugins.helpers import safe_sub, share

if TYPE_CHECKING:
    from caldera.framework.session import Event, Session

PERMIT = 1
SHARE_DELTA = 0.000001


class DrfPlugin(Plugin):
    name: ClassVar[str] = "drf"

    def on_session_open(self, ssn: Session) -> None:
        from caldera.framework.session import EventHandler

        self.total = ssn.total_resource
        self.allocated: dict[str, Resource] = {}
        self.shares: dict[str, float] = {}
        for job in ssn.jobs.values():
            alloc = Resource()
            for t in job.tasks_in(*ALLOCATED_STATUSES, TaskStatus.PIPELINED):
                alloc.add(t.resreq)
            self.allocated[job.uid] = alloc
            self.shares[job.uid] = share(alloc, self.total)

        def job_order(left: JobInfo, right: JobInfo) -> int:
            ls, rs = self.shares.get(left.uid, 0.0), self.shares.get(right.uid, 0.0)
            if ls == rs:
                return 0
            return -1 if ls < rs else 1

        def preemptable(preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            mine = self.allocated.get(preemptor.job, Resource()).clone().add(preemptor.resreq)
            ls = share(mine, self.total)
            out = []
            for t in preemptees:
                theirs = self.allocated.get(t.job)
                rs = share(safe_sub(theirs, t.resreq), self.total) if theirs is not None else 0.0
                if ls < rs or abs(ls - rs) <= SHARE_DELTA:
                    out.append(t)
            return out, PERMIT

        def on_allocate(event: Event) -> None:
            self._change(event.task, add=True)

        def on_deallocate(event: Event) -> None:
            self._change(event.task, add=False)

        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_preemptable_fn(self.name, preemptable)
        ssn.add_event_handler(EventHandler(allocate=on_allocate, deallocate=on_deallocate))

    def _change(self, task: TaskInfo, add: bool) -> None:
        alloc = self.allocated.get(task.job)
        if alloc is None:
            return
        if add:
            alloc.add(task.resreq)
        else:
            self.allocated[task.job] = alloc = safe_sub(alloc, task.resreq)
        self.shares[task.job] = share(alloc, self.total)

    def on_session_close(self, ssn: Session) -> None:
        # For the binary's volcano_job_share and volcano_namespace_share gauges.
        ssn.report.job_shares = self.shares
        by_namespace: dict[str, Resource] = {}
        for uid, alloc in self.allocated.items():
            job = ssn.jobs.get(uid)
            if job is None or alloc.is_empty():
                continue
            ns = by_namespace.get(job.namespace)
            if ns is None:
                by_namespace[job.namespace] = alloc.clone()
            else:
                ns.add(alloc)
        ssn.report.namespace_shares = {ns: share(a, self.total) for ns, a in by_namespace.items()}
