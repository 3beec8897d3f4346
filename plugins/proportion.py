"""proportion: queues share the cluster by weight, within their capability, above their guarantee.

Each cycle every queue's deserved share is found by water-filling: the remaining capacity is
offered to the unsatisfied queues in proportion to their weights, capped by what each queue
asks for (its pending + allocated requests) and by its real capability, and raised to its
guarantee. Queues then go in order of allocated/deserved, a queue at its deserved share is
overused, a task may be placed only while its queue stays within its share, jobs are let in
while their minimum fits the queue's real capability, and overused queues give back resources
to queues below their share (reclaim).

Unlike Volcano's plugin this one never stops the scheduler:
- guarantees that add up to more than the cluster are scaled down proportionally, per resource,
  for the cycle (log line, ``ssn.report.queue_guarantee_scaled`` and a Queue event);
- a cluster whose total is zero or not known yet (nodes not synced) gives every queue an empty
  deserved share (``ssn.report.cluster_empty``) and nothing is let in;
- every subtraction is floored at zero; none can raise out of the cycle.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from caldera.framework.model import JobInfo, QueueInfo, TaskInfo, TaskStatus
from caldera.framework.plugin import Plugin
from caldera.framework.quantity import format_quantity
from caldera.framework.resource import MIN_RESOURCE, Resource
from caldera.plugins.helpers import exact_range, safe_sub

if TYPE_CHECKING:
    from caldera.framework.result import Event
    from caldera.framework.session import Session

from caldera.framework.carry import carry_user, job_generation
from caldera.framework.result import QueueShare

log = logging.getLogger("caldera.plugins.proportion")

PERMIT = 1
REJECT = -1

_last_scaled: frozenset[str] = frozenset()


def dims_of(res: Resource) -> list[str]:
    """The share dimensions a request actually asks for."""
    return [name for name, value in res.items() if value > 0]


def queue_share(allocated: Resource, deserved: Resource) -> float:
    best = 0.0
    for name, want in deserved.items():
        have = allocated.get(name)
        if want > MIN_RESOURCE:
            best = max(best, have / want)
        elif have > MIN_RESOURCE:
            best = max(best, 1.0)
    return best


def capability_of(queue: QueueInfo) -> Resource | None:
    """The queue's capability; cpu or memory left out of it is unlimited (as Volcano reads it)."""
    cap = queue.capability
    if cap is None:
        return None
    cap = cap.clone()
    if cap.cpu <= 0:
        cap.cpu = float("inf")
    if cap.memory <= 0:
        cap.memory = float("inf")
    return cap


class QueueAttr:
    __slots__ = (
        "allocated",
        "capability",
        "deserved",
        "guarantee",
        "inqueue",
        "name",
        "real_capability",
        "request",
        "share",
        "weight",
    )

    def __init__(self, queue: QueueInfo) -> None:
        self.name = queue.name
        self.weight = queue.weight
        self.capability = capability_of(queue)
        self.guarantee = queue.guarantee.clone() if queue.guarantee is not None else Resource()
        self.real_capability = Resource()
        self.deserved = Resource()
        self.allocated = Resource()
        self.request = Resource()
        self.inqueue = Resource()
        self.share = 0.0

    def update_share(self) -> None:
        self.share = queue_share(self.allocated, self.deserved)


def scale_guarantees(attrs: dict[str, QueueAttr], total: Resource) -> dict[str, dict[str, float]]:
    """Scale guarantees down, per dimension, so that they add up to at most the cluster's total.
    Returns queue → dimension → factor applied, for the queues that were scaled."""
    summed = Resource()
    for attr in attrs.values():
        summed.add(attr.guarantee)
    factors: dict[str, float] = {}
    for name, value in summed.items():
        cap = total.get(name)
        if value > cap + MIN_RESOURCE and value > 0:
            factors[name] = cap / value
    if summed.pods > total.pods + MIN_RESOURCE and summed.pods > 0:
        factors["pods"] = total.pods / summed.pods
    scaled: dict[str, dict[str, float]] = {}
    if not factors:
        return scaled
    for attr in attrs.values():
        for name, factor in factors.items():
            have = attr.guarantee.get(name)
            if have > 0:
                attr.guarantee.set(name, have * factor)
                scaled.setdefault(attr.name, {})[name] = factor
    return scaled


def water_fill(attrs: dict[str, QueueAttr], total: Resource) -> None:
    """Volcano's deserved-share loop, with subtraction floored at zero and a bounded number of rounds."""
    remaining = total.clone()
    met: set[str] = set()
    for _ in range(4 * len(attrs) + 16):
        weight = sum(a.weight for n, a in attrs.items() if n not in met)
        if weight <= 0:
            break
        before = remaining.clone()
        increased = Resource()
        decreased = Resource()
        for name, attr in attrs.items():
            if name in met:
                continue
            old = attr.deserved.clone()
            attr.deserved.add(remaining.clone().multiply(attr.weight / weight))
            attr.deserved.min_dimension(attr.real_capability, "infinity")
            attr.deserved.min_dimension(attr.request, "zero")
            # Volcano's MinDimensionResource caps every scalar, ``pods`` included (a pod's request
            # carries pods: 1, GetPodResourceRequest in pkg/scheduler/api/pod_info.go); without
            # this a queue's deserved pod count stays far above its request and it is never overused
            if attr.real_capability.pods > 0:
                attr.deserved.pods = min(attr.deserved.pods, attr.real_capability.pods)
            attr.deserved.pods = min(attr.deserved.pods, attr.request.pods)
            attr.deserved.set_max(attr.guarantee)
            attr.update_share()
            if attr.request.less_equal(attr.deserved, "zero") or attr.deserved == old:
                met.add(name)
            up, down = attr.deserved.diff(old)
            increased.add(up)
            decreased.add(down)
        remaining = safe_sub(remaining, increased).add(decreased)
        if remaining.is_empty() or remaining == before:
            break


class _JobPart:
    """What one job adds to its queue's sums, and the generation of the job copy it was read from
    (``framework.carry.job_generation``)."""

    __slots__ = ("allocated", "inqueue", "queue", "request", "token")

    def __init__(self, job: JobInfo) -> None:
        self.token = job_generation(job)
        self.queue = job.queue
        # job.allocated sums the job's allocated statuses (kept by the job): O(jobs), not O(tasks).
        self.allocated = job.allocated.clone()
        request = job.allocated.clone()
        for task in job.tasks_in(TaskStatus.PENDING):
            request.add(task.resreq)
        self.request = request
        self.inqueue: Resource | None = None
        if job.phase == "Inqueue" and job.min_resources is not None:
            self.inqueue = safe_sub(job.min_resources, job.allocated)


class QueueSums:
    """Proportion's sums at a session's open (``framework.carry``): each job's part, by uid, and
    each queue's (allocated, request, inqueue) summed over its jobs' parts, and its number of jobs."""

    __slots__ = ("counts", "parts", "seq", "sums")

    def __init__(
        self,
        parts: dict[str, _JobPart],
        sums: dict[str, tuple[Resource, Resource, Resource]],
        counts: dict[str, int],
        seq: int,
    ) -> None:
        self.parts = parts
        self.sums = sums
        self.counts = counts
        #: the snapshot the parts were read from
        self.seq = seq


carry_user(QueueSums, "proportion: each queue's allocated, requested and inqueue sums, by job part")


def _put(sums: tuple[Resource, Resource, Resource], part: _JobPart) -> None:
    sums[0].add(part.allocated)
    sums[1].add(part.request)
    if part.inqueue is not None:
        sums[2].add(part.inqueue)


def _take(sums: tuple[Resource, Resource, Resource], part: _JobPart) -> None:
    # exact (EXACT_BELOW): the part is in the sum, so nothing goes below zero
    sums[0].sub(part.allocated)
    sums[1].sub(part.request)
    if part.inqueue is not None:
        sums[2].sub(part.inqueue)


def _settle(sums: dict[str, tuple[Resource, Resource, Resource]]) -> bool:
    """Drop scalar dimensions summed to zero (a sum afresh and a sum kept agree on which dimensions
    exist); whether every figure is still in the exact range."""
    exact = True
    for triple in sums.values():
        for total in triple:
            if total.scalars:
                for name in [n for n, v in total.scalars.items() if v == 0.0]:
                    del total.scalars[name]
            if not exact_range(total):
                exact = False
    return exact


def sum_queue_jobs(ssn: Session, attrs: dict[str, QueueAttr], key: type[QueueSums]) -> dict[str, int]:
    """Each queue's allocated, requested and inqueue resources, summed over its jobs (set on its
    attributes); returns each queue's number of jobs. ``key`` is the caller's carry key (each plugin
    keeps its own sums: proportion and capacity may both run).

    Last cycle's sums are kept (``framework.carry``) with each job's part in them: a job copy
    of the same generation (``framework.carry.job_generation``) keeps its part, a changed job's
    old part is taken out and its new one put in, a job gone has its part taken out. When this
    session's snapshot follows the last one's, only the jobs it names as changed are looked at
    (``Session.jobs_changed_since``); otherwise every job's generation is. The figures are whole numbers
    (``EXACT_BELOW``), so the sums equal those made afresh over every job, which is what the
    first cycle does and any cycle whose figures leave the exact range."""
    carried = ssn.carry.carried(key)
    previous = carried if type(carried) is key else None
    jobs = ssn.jobs
    parts: dict[str, _JobPart] = {}
    sums: dict[str, tuple[Resource, Resource, Resource]] = {}
    counts: dict[str, int] = {}
    if previous is not None:
        counts = {name: previous.counts.get(name, 0) for name in attrs}
        for name in attrs:
            kept = previous.sums.get(name)
            sums[name] = (
                (kept[0].clone(), kept[1].clone(), kept[2].clone())
                if kept is not None
                else (Resource(), Resource(), Resource())
            )
        old_parts = previous.parts
        changed = ssn.jobs_changed_since(previous.seq)
        if changed is not None and attrs.keys() == previous.sums.keys():
            # Only the jobs named as changed since the last snapshot (the same queues: every
            # job the parts leave out is still out).
            parts = dict(old_parts)
            redo: Iterable[str] = changed | (old_parts.keys() - jobs.keys())
        else:
            redo = itertools.chain(jobs.keys(), old_parts.keys() - jobs.keys())
        for uid in redo:
            job = jobs.get(uid)
            old = old_parts.get(uid)
            if job is not None and job.queue in attrs:
                if (
                    old is not None
                    and old.queue == job.queue
                    and old.token is not None
                    and old.token == job_generation(job)
                ):
                    parts[uid] = old
                    continue
                parts[uid] = part = _JobPart(job)
                _put(sums[job.queue], part)
                counts[job.queue] += 1
            else:
                parts.pop(uid, None)
            if old is not None and old.queue in sums:
                _take(sums[old.queue], old)
                counts[old.queue] -= 1
        if not _settle(sums):
            previous = None
    if previous is None:
        parts = {}
        sums = {name: (Resource(), Resource(), Resource()) for name in attrs}
        counts = dict.fromkeys(attrs, 0)
        for job in jobs.values():
            if job.queue in attrs:
                parts[job.uid] = part = _JobPart(job)
                _put(sums[job.queue], part)
                counts[job.queue] += 1
        if not _settle(sums):
            parts = {}  # beyond the exact range: every cycle sums afresh, in job order
    for name, attr in attrs.items():
        allocated, request, inqueue = sums[name]
        attr.allocated, attr.request, attr.inqueue = allocated.clone(), request.clone(), inqueue.clone()
    if parts or not ssn.jobs:
        ssn.carry.keep(key, key(parts, sums, counts, ssn.snapshot.seq))
    return counts


class ProportionPlugin(Plugin):
    name: ClassVar[str] = "proportion"

    def on_session_open(self, ssn: Session) -> None:
        from caldera.framework.session import EventHandler

        global _last_scaled
        self.ssn = ssn
        total = ssn.total_resource.clone()
        self.total = total
        attrs: dict[str, QueueAttr] = {q.name: QueueAttr(q) for q in ssn.queues.values()}
        self.attrs = attrs
        #: (queue, request) -> allocatable's answer, while no queue's allocation has moved
        self._answers: dict[tuple[object, ...], bool] = {}
        sum_queue_jobs(ssn, attrs, QueueSums)

        self.cluster_known = not total.is_empty()
        ssn.report.cluster_empty = not self.cluster_known
        scaled: dict[str, dict[str, float]] = {}
        if self.cluster_known:
            scaled = scale_guarantees(attrs, total)
            summed = Resource()
            for attr in attrs.values():
                summed.add(attr.guarantee)
            for attr in attrs.values():
                real = safe_sub(total, summed).add(attr.guarantee)
                if attr.capability is not None:
                    real.min_dimension(attr.capability, "infinity")
                attr.real_capability = real
            water_fill(attrs, total)
        else:
            log.debug("cluster total is zero or not known yet: no queue has a deserved share this cycle")
        for attr in attrs.values():
            attr.update_share()
        self._report_scaling(scaled)
        _last_scaled = frozenset(scaled)

        ssn.add_queue_order_fn(self.name, self.queue_order)
        ssn.add_overused_fn(self.name, self.overused)
        ssn.add_allocatable_fn(self.name, self.allocatable)
        ssn.add_queue_state_fn(self.name, self.queue_state)
        ssn.declare_allocatable_by_request(self.name)
        ssn.add_preemptive_fn(self.name, self.allocatable)
        ssn.add_reclaimable_fn(self.name, self.reclaimable)
        ssn.add_job_enqueueable_fn(self.name, self.enqueueable)
        ssn.add_job_enqueued_fn(self.name, self.enqueued)
        ssn.add_event_handler(EventHandler(allocate=self._on_allocate, deallocate=self._on_deallocate))
        ssn.add_queue_figures_fn(self.queue_figures)

    def _report_scaling(self, scaled: dict[str, dict[str, float]]) -> None:
        ssn = self.ssn
        ssn.report.queue_guarantee_scaled = scaled
        if not scaled:
            return
        dims = sorted({d for f in scaled.values() for d in f})
        summary = ", ".join(f"{d} x{min(f.get(d, 1.0) for f in scaled.values()):.3f}" for d in dims)
        line = (
            f"queue guarantees exceed the cluster's capacity; scaled down for this cycle ({summary}) "
            f"for queues {', '.join(sorted(scaled))}"
        )
        if frozenset(scaled) != _last_scaled:
            log.warning(line)
        else:
            log.debug(line)
        events = ssn.report.events
        for qname, factors in sorted(scaled.items()):
            attr = self.attrs[qname]
            parts = ", ".join(
                f"{d} to {format_quantity(attr.guarantee.get(d), d)} (x{f:.3f})"
                for d, f in sorted(factors.items())
            )
            events.append(
                (
                    "Queue",
                    qname,
                    "GuaranteeScaled",
                    f"guarantees of all queues exceed the cluster's capacity; guarantee scaled down: {parts}",
                )
            )

    # -- callbacks ---------------------------------------------------------------------------------
    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        # Volcano's proportion QueueOrderFn: higher spec.priority first, then the lower share
        if left.priority != right.priority:
            return -1 if left.priority > right.priority else 1
        la, ra = self.attrs.get(left.name), self.attrs.get(right.name)
        ls = la.share if la else 0.0
        rs = ra.share if ra else 0.0
        if ls == rs:
            return 0
        return -1 if ls < rs else 1

    def overused(self, queue: QueueInfo) -> bool:
        attr = self.attrs.get(queue.name)
        if attr is None:
            return False
        return attr.deserved.less_equal(attr.allocated, "zero")

    def queue_state(self, queue: QueueInfo) -> object:
        """What ``allocatable`` and ``overused`` answer from for the queue (Session.queue_state)."""
        attr = self.attrs.get(queue.name)
        if attr is None:
            return None
        return (self.cluster_known, attr.deserved.to_dict(), attr.allocated.to_dict())

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        attr = self.attrs.get(queue.name)
        if attr is None:
            return True
        if not self.cluster_known:
            return False
        # The answer depends on the queue's figures and the task's request only: asked once per
        # request shape until the figures move (``_change``), not once per pod of a backlog.
        req = task.resreq
        key = (queue.name, req.cpu, req.memory, req.pods, tuple(req.scalars.items()) if req.scalars else ())
        answer = self._answers.get(key)
        if answer is None:
            future = attr.allocated.clone().add(req)
            answer = self._answers[key] = future.less_equal_in(attr.deserved, dims_of(req))
        return answer

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        """A reclaimee is a victim while its queue's allocation (less the victims already chosen)
        is not within its deserved share. Volcano: the ReclaimableFn of
        pkg/scheduler/plugins/proportion/proportion.go; the queue may end below its deserved
        share, as there."""
        victims: list[TaskInfo] = []
        left: dict[str, Resource] = {}
        for t in reclaimees:
            job = self.ssn.jobs.get(t.job)
            if job is None:
                continue
            attr = self.attrs.get(job.queue)
            if attr is None:
                continue
            allocated = left.get(job.queue)
            if allocated is None:
                allocated = left[job.queue] = attr.allocated.clone()
            if not allocated.less_equal(attr.deserved, "zero"):
                left[job.queue] = safe_sub(allocated, t.resreq)
                victims.append(t)
        return victims, PERMIT

    def enqueueable(self, job: JobInfo) -> int:
        attr = self.attrs.get(job.queue)
        need = job.min_resources
        if attr is None or need is None or need.is_empty():
            return PERMIT
        if not self.cluster_known:
            job.job_fit_error = "queue resource quota insufficient: the cluster's capacity is not known yet"
            return REJECT
        future = need.clone().add(attr.allocated).add(attr.inqueue)
        if future.less_equal_in(attr.real_capability, dims_of(need)):
            return PERMIT
        job.job_fit_error = "queue resource quota insufficient"
        return REJECT

    def enqueued(self, job: JobInfo) -> None:
        attr = self.attrs.get(job.queue)
        if attr is not None and job.min_resources is not None:
            attr.inqueue.add(job.min_resources)

    def _on_allocate(self, event: Event) -> None:
        self._change(event.task, True)

    def _on_deallocate(self, event: Event) -> None:
        self._change(event.task, False)

    def _change(self, task: TaskInfo, add: bool) -> None:
        job = self.ssn.jobs.get(task.job)
        attr = self.attrs.get(job.queue) if job is not None else None
        if attr is None:
            return
        self._answers.clear()
        if add:
            attr.allocated.add(task.resreq)
        else:
            attr.allocated = safe_sub(attr.allocated, task.resreq)
        attr.update_share()

    def on_session_close(self, ssn: Session) -> None:
        ssn.report.queue_shares = self.queue_figures(ssn.report.queue_shares)

    def queue_figures(self, earlier: dict[str, QueueShare]) -> dict[str, QueueShare]:
        """The queue figures for the queue metrics, as they stand (``earlier``: those of the plugins
        before this one in the conf). With capacity also in the conf (both set the same
        gauges in Volcano), the plugin later in the conf wins, as in Volcano where each sets them at
        session open and on every allocate and deallocate event, in conf order; but capacity's
        capability, real capability and overused stay, which proportion never sets in Volcano
        (capacity sets overused at session close, after proportion's ``OverusedFn`` calls)."""
        shares: dict[str, QueueShare] = {}
        for name, a in self.attrs.items():
            share = shares[name] = QueueShare(
                deserved=a.deserved.to_dict(),
                allocated=a.allocated.to_dict(),
                share=a.share,
                request=a.request.to_dict(),
                inqueue=a.inqueue.to_dict(),
                weight=a.weight,
                real_capability=a.real_capability.to_dict(),
                overused=a.deserved.less_equal(a.allocated, "zero"),
            )
            before = earlier.get(name)
            if before is not None and before.real_capacity is not None:
                share.capability, share.real_capacity = before.capability, before.real_capacity
                share.overused = before.overused
        return shares
