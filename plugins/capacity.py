"""capacity: queues with an explicit ``deserved`` share, a ``capability`` ceiling and a ``guarantee``
floor, optionally in a hierarchy (``spec.parent``; the root queue is ``root``).

A task may be placed while its queue and every ancestor stay within their real capability; a
queue may preempt within its deserved share; queues above their deserved share give back
resources (reclaim); jobs are let in while their minimum fits the queue's real capability.
Guarantees above the cluster's capacity are scaled down as in proportion; no arithmetic raises.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from caldera.framework.model import ALLOCATED_STATUSES, JobInfo, QueueInfo, TaskInfo
from caldera.framework.plugin import Plugin
from caldera.framework.resource import Resource
from caldera.plugins.helpers import safe_sub
from caldera.plugins.proportion import QueueAttr, dims_of, queue_share, scale_guarantees

if TYPE_CHECKING:
    from caldera.framework.session import Event, Session

PERMIT = 1
REJECT = -1
ROOT = "root"


class CapacityPlugin(Plugin):
    name: ClassVar[str] = "capacity"
    arguments_schema: ClassVar[dict[str, type]] = {"enableHierarchy": bool}

    def on_session_open(self, ssn: Session) -> None:
        from caldera.framework.session import EventHandler

        self.ssn = ssn
        total = ssn.total_resource.clone()
        self.cluster_known = not total.is_empty()
        hierarchy = self.arguments.bool("enableHierarchy", False) or any(
            q.parent for q in ssn.queues.values()
        )
        self.hierarchy = hierarchy
        attrs: dict[str, QueueAttr] = {}
        self.parent: dict[str, str] = {}
        for q in ssn.queues.values():
            attr = QueueAttr(q)
            attr.deserved = q.deserved.clone() if q.deserved is not None else Resource()
            attrs[q.name] = attr
        if hierarchy:
            if ROOT not in attrs:
                attrs[ROOT] = QueueAttr(QueueInfo(ROOT))
            for q in ssn.queues.values():
                if q.name != ROOT:
                    parent = q.parent or ROOT
                    self.parent[q.name] = parent if parent in attrs else ROOT
        self.attrs = attrs
        for job in ssn.jobs.values():
            if job.queue not in attrs:
                continue
            alloc = Resource()
            for task in job.tasks_in(*ALLOCATED_STATUSES):
                alloc.add(task.resreq)
            inq = (
                safe_sub(job.min_resources, job.allocated)
                if job.phase == "Inqueue" and job.min_resources is not None
                else Resource()
            )
            for name in self.chain(job.queue):
                attrs[name].allocated.add(alloc)
                attrs[name].inqueue.add(inq)

        # Guarantees are checked among siblings (top level: against the cluster).
        scaled = (
            scale_guarantees({n: a for n, a in attrs.items() if n not in self.parent and n != ROOT}, total)
            if self.cluster_known
            else {}
        )
        ssn.report.queue_guarantee_scaled.update(scaled)
        for name in self._top_down():
            attr = attrs[name]
            parent_name = self.parent.get(name)
            if parent_name is None:
                siblings = [a for n, a in attrs.items() if n not in self.parent]
                base = total
            else:
                siblings = [attrs[n] for n, p in self.parent.items() if p == parent_name]
                base = attrs[parent_name].real_capability
            summed = Resource()
            for s in siblings:
                summed.add(s.guarantee)
            real = safe_sub(base, summed).add(attr.guarantee)
            real.min_dimension(base, "infinity")
            if attr.capability is not None:
                real.min_dimension(attr.capability, "infinity")
            attr.real_capability = real if self.cluster_known else Resource()
            attr.deserved.set_max(attr.guarantee)
            attr.deserved.min_dimension(attr.real_capability, "infinity")
            attr.update_share()

        ssn.add_queue_order_fn(self.name, self.queue_order)
        ssn.add_allocatable_fn(self.name, self.allocatable)
        ssn.add_preemptive_fn(self.name, self.preemptive)
        ssn.add_reclaimable_fn(self.name, self.reclaimable)
        ssn.add_job_enqueueable_fn(self.name, self.enqueueable)
        ssn.add_job_enqueued_fn(self.name, self.enqueued)
        ssn.add_event_handler(EventHandler(allocate=self._on_allocate, deallocate=self._on_deallocate))

    def chain(self, name: str) -> list[str]:
        """The queue and its ancestors, leaf first."""
        out = [name]
        seen = {name}
        while name in self.parent:
            name = self.parent[name]
            if name in seen:
                break
            seen.add(name)
            out.append(name)
        return out

    def _top_down(self) -> list[str]:
        return sorted(self.attrs, key=lambda n: len(self.chain(n)))

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        la, ra = self.attrs.get(left.name), self.attrs.get(right.name)
        ls = la.share if la else 0.0
        rs = ra.share if ra else 0.0
        if ls == rs:
            return 0
        return -1 if ls < rs else 1

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if queue.name not in self.attrs:
            return True
        dims = dims_of(task.resreq)
        for name in self.chain(queue.name):
            attr = self.attrs[name]
            if not attr.allocated.clone().add(task.resreq).less_equal_in(attr.real_capability, dims):
                return False
        return True

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        attr = self.attrs.get(queue.name)
        if attr is None:
            return True
        return attr.allocated.clone().add(task.resreq).less_equal_in(attr.deserved, dims_of(task.resreq))

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        victims: list[TaskInfo] = []
        left: dict[str, Resource] = {}
        for t in reclaimees:
            job = self.ssn.jobs.get(t.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if job is None or attr is None:
                continue
            allocated = left.get(job.queue)
            if allocated is None:
                allocated = left[job.queue] = attr.allocated.clone()
            if allocated.less_equal(attr.deserved, "infinity"):
                continue
            left[job.queue] = safe_sub(allocated, t.resreq)
            victims.append(t)
        return victims, PERMIT

    def enqueueable(self, job: JobInfo) -> int:
        need = job.min_resources
        if job.queue not in self.attrs or need is None or need.is_empty():
            return PERMIT
        for name in self.chain(job.queue):
            attr = self.attrs[name]
            future = need.clone().add(attr.allocated).add(attr.inqueue)
            if not future.less_equal_in(attr.real_capability, dims_of(need)):
                job.job_fit_error = f"queue {name} resource quota insufficient"
                return REJECT
        return PERMIT

    def enqueued(self, job: JobInfo) -> None:
        if job.queue in self.attrs and job.min_resources is not None:
            for name in self.chain(job.queue):
                self.attrs[name].inqueue.add(job.min_resources)

    def _on_allocate(self, event: Event) -> None:
        self._change(event.task, True)

    def _on_deallocate(self, event: Event) -> None:
        self._change(event.task, False)

    def _change(self, task: TaskInfo, add: bool) -> None:
        job = self.ssn.jobs.get(task.job)
        if job is None or job.queue not in self.attrs:
            return
        for name in self.chain(job.queue):
            attr = self.attrs[name]
            if add:
                attr.allocated.add(task.resreq)
            else:
                attr.allocated = safe_sub(attr.allocated, task.resreq)
            attr.share = queue_share(attr.allocated, attr.deserved)
