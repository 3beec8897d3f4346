"""capacity: queues with an explicit ``deserved`` share, a ``capability`` ceiling and a ``guarantee``
floor, optionally in a hierarchy (``spec.parent``; the root queue is ``root``).

A task may be placed while its queue and every ancestor stay within their real capability; a
queue may preempt within its deserved share; queues above their deserved share give back
resources (reclaim); jobs are let in while their minimum fits the queue's real capability.
Guarantees above the cluster's capacity are scaled down as in proportion; no arithmetic raises.
With ``capacity.DynamicResourceAllocationEnable`` (default true), ``deviceclass/<class>`` keys of a
queue's capability cap the DRA devices its pods' claims hold, and its deserved and guarantee keys
count as dimensions in reclaim (plugins/dra_quota.py).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, ClassVar

from caldera.framework.callbacks import GANG_RECLAIM, EvictionContext
from caldera.framework.carry import carry_user
from caldera.framework.model import JobInfo, QueueInfo, TaskInfo
from caldera.framework.plugin import Plugin, unsupported
from caldera.framework.resource import MIN_RESOURCE, Resource
from caldera.framework.result import QueueShare
from caldera.plugins.dra_quota import DraQuota, quota_name
from caldera.plugins.helpers import safe_sub
from caldera.plugins.proportion import QueueAttr, QueueSums, dims_of, scale_guarantees, sum_queue_jobs

if TYPE_CHECKING:
    from caldera.framework.result import Event
    from caldera.framework.session import Session

PERMIT = 1
REJECT = -1
ROOT = "root"
#: what Volcano's capacity exports for a capability dimension it takes as unlimited: cpu or memory
#: left out of a capability (``math.MaxFloat64``), a root queue's scalars (``math.MaxInt64``)
MAX_FLOAT = sys.float_info.max
MAX_INT = float(2**63 - 1)


class CapacitySums(QueueSums):
    """capacity's own sums (``framework.carry``), apart from proportion's: both plugins may run."""

    __slots__ = ()


carry_user(CapacitySums, "capacity: each queue's allocated, requested and inqueue sums, by job part")


def capacity_share(allocated: Resource, deserved: Resource) -> float:
    """A queue's share: its allocated over its deserved, on the dimensions it deserves, the largest;
    a queue that deserves nothing is best-effort and has share 1 (goes after every queue below its
    deserved share). Volcano: ``updateQueueAttrShare`` of pkg/scheduler/plugins/capacity/capacity.go
    (``Resource.ResourceNames``: the dimensions at ``minResource`` or above)."""
    if deserved.is_empty():
        return 1.0
    return max((allocated.get(n) / want for n, want in deserved.items() if want >= MIN_RESOURCE), default=0.0)


class CapacityPlugin(Plugin):
    name: ClassVar[str] = "capacity"
    arguments_schema: ClassVar[dict[str, type]] = {
        # also set by the plugin option ``enableHierarchy: true`` (config/conf.py), as Volcano reads it
        "enableHierarchy": bool,
        # Volcano's (pkg/scheduler/plugins/capacity/capacity.go)
        "ancestorReclaimLevel": unsupported(int, "reclaim between ancestor queues is not implemented"),
        # queue quota of DRA devices, deviceclass/<class> keys (plugins/dra_quota.py); default true,
        # as Volcano's (the DynamicResourceAllocation feature gate, on since Kubernetes 1.34)
        "capacity.DynamicResourceAllocationEnable": bool,
        # quota of consumable device capacity, <dimension>.deviceclass/<class> keys (plugins/dra_quota.py);
        # default true, as Volcano's (the DRAConsumableCapacity feature gate, beta and on in 1.36)
        "capacity.DRAConsumableCapacityEnable": bool,
    }

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
        # Each queue's allocated (tasks in allocated statuses), request (those and the pending ones)
        # and inqueue (an Inqueue job's minimum less what it has allocated), summed over its jobs
        # and, in a hierarchy, added to every ancestor's. Volcano: ``buildQueueAttrs`` and
        # ``buildHierarchicalQueueAttrs`` of pkg/scheduler/plugins/capacity/capacity.go. The sums
        # are kept from cycle to cycle, as proportion's: only changed jobs are read again.
        self.job_counts = sum_queue_jobs(ssn, attrs, CapacitySums)
        if self.parent:
            own = [
                (name, a.allocated.clone(), a.request.clone(), a.inqueue.clone())
                for name, a in attrs.items()
                if self.job_counts.get(name) and name in self.parent
            ]
            for name, allocated, request, inqueue in own:
                for ancestor in self.chain(name)[1:]:
                    attr = attrs[ancestor]
                    attr.allocated.add(allocated)
                    attr.request.add(request)
                    attr.inqueue.add(inqueue)

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
            attr.share = capacity_share(attr.allocated, attr.deserved)

        self.dra: DraQuota | None = None
        if ssn.snapshot.dra is not None and self.arguments.bool(
            "capacity.DynamicResourceAllocationEnable", True
        ):
            quota = DraQuota(
                ssn,
                ssn.snapshot.dra,
                self.chain,
                consumable=self.arguments.bool("capacity.DRAConsumableCapacityEnable", True),
            )
            self.dra = quota if quota.active else None

        ssn.add_queue_order_fn(self.name, self.queue_order)
        self.parents_of: set[str] = set(self.parent.values())
        if hierarchy:
            ssn.add_victim_queue_order_fn(self.name, self.victim_queue_order)
        ssn.add_allocatable_fn(self.name, self.allocatable)
        ssn.add_preemptive_fn(self.name, self.preemptive)
        ssn.add_reclaimable_fn(self.name, self.reclaimable)
        ssn.add_unified_evictable_fn(self.name, self.unified_evictable)
        ssn.add_job_enqueueable_fn(self.name, self.enqueueable)
        ssn.add_job_enqueued_fn(self.name, self.enqueued)
        ssn.add_event_handler(EventHandler(allocate=self._on_allocate, deallocate=self._on_deallocate))
        ssn.add_queue_figures_fn(lambda _earlier: self.queue_figures(ssn))

    def on_session_close(self, ssn: Session) -> None:
        ssn.report.queue_shares = self.queue_figures(ssn)

    def queue_figures(self, ssn: Session) -> dict[str, QueueShare]:
        """Every queue's figures for the queue metrics, as Volcano's capacity sets them
        (pkg/scheduler/plugins/capacity/capacity.go, ``metrics.UpdateQueue*``): deserved, allocated,
        request, inqueue, capability and real capability of every queue, share, and overused as a
        share above 1 (``OnSessionClose``). The figures are the session's last: allocated and share
        as the allocate and deallocate events leave them (Volcano updates its leaf queue's gauges
        there, and an ancestor's at the next session's open), inqueue with the jobs let in during
        the session (Volcano's at open), as proportion reports them. Without a hierarchy, a queue
        with no job has no attributes in Volcano: its deserved is its spec's and its capability
        series is its spec's, where it has one."""
        capability = self.exported_capability(ssn)
        shares: dict[str, QueueShare] = {}
        for name, queue in ssn.queues.items():
            a = self.attrs.get(name)
            if a is None:
                continue
            bare = not self.hierarchy and not self.job_counts.get(name)
            deserved = (queue.deserved.to_dict() if queue.deserved is not None else {}) if bare else None
            real = a.real_capability.to_dict()
            shares[name] = QueueShare(
                deserved=deserved if deserved is not None else a.deserved.to_dict(),
                allocated=a.allocated.to_dict(),
                request=a.request.to_dict(),
                inqueue=a.inqueue.to_dict(),
                real_capability=real,
                share=a.share,
                weight=a.weight,
                overused=a.share > 1,
                capability=None if bare else capability.get(name),
                real_capacity=real,
            )
        return shares

    def exported_capability(self, ssn: Session) -> dict[str, dict[str, float]]:
        """Each queue's capability as Volcano's capacity exports it (``volcano_queue_capacity_*``).
        Without a hierarchy (``buildQueueAttrs``): the spec's, cpu or memory left out of it at
        ``MaxFloat64``; none: zero. In a hierarchy (``newQueueAttr``, ``checkHierarchicalQueue``):
        the root's, or unlimited (cpu and memory at ``MaxFloat64``, every scalar the cluster has at
        ``MaxInt64``); a child's cpu, memory or scalar left out of its spec is its parent's."""
        out: dict[str, dict[str, float]] = {}
        for name in self._top_down() if self.hierarchy else self.attrs:
            queue = ssn.queues.get(name)
            spec = queue.capability if queue is not None else None
            cap = {k: v for k, v in spec.to_dict().items() if k != "pods"} if spec is not None else {}
            parent = out.get(self.parent[name]) if self.hierarchy and name in self.parent else None
            if not self.hierarchy:
                if spec is not None:
                    for k in ("cpu", "memory"):
                        if cap[k] <= 0:
                            cap[k] = MAX_FLOAT
            elif parent is None:
                if not cap or all(v < MIN_RESOURCE for v in cap.values()):
                    cap = {"cpu": MAX_FLOAT, "memory": MAX_FLOAT}
                    cap.update(dict.fromkeys(ssn.total_resource.scalars, MAX_INT))
            else:
                for k, v in parent.items():
                    if k not in cap or (k in ("cpu", "memory") and cap[k] <= 0):
                        cap[k] = v
            out[name] = cap
        return out

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
        """Volcano's capacity QueueOrderFn: higher spec.priority first, then the lower share, then a
        queue with a deserved share before one without (``compareShareWithDeserved``)."""
        if left.priority != right.priority:
            return -1 if left.priority > right.priority else 1
        la, ra = self.attrs.get(left.name), self.attrs.get(right.name)
        ls = la.share if la else 0.0
        rs = ra.share if ra else 0.0
        if ls == rs:
            lhas = la is not None and not la.deserved.is_empty()
            rhas = ra is not None and not ra.deserved.is_empty()
            if lhas == rhas:
                return 0
            return -1 if lhas else 1
        return -1 if ls < rs else 1

    def ancestors(self, name: str) -> list[str]:
        """The queue's ancestors, root first."""
        return list(reversed(self.chain(name)[1:]))

    def victim_queue_order(self, left: QueueInfo, right: QueueInfo, preemptor: QueueInfo) -> int:
        """Victims of the queue that shares the deeper ancestor with the preemptor's go first.
        Volcano: the VictimQueueOrderFn and ``getQueueLevel`` of pkg/scheduler/plugins/capacity/capacity.go."""
        mine = self.ancestors(preemptor.name)

        def level(name: str) -> int:
            out = 0
            for i, (a, b) in enumerate(zip(self.ancestors(name), mine, strict=False)):
                if a != b:
                    break
                out = i
            return out

        ll, rl = level(left.name), level(right.name)
        if ll == rl:
            return 0
        return -1 if ll > rl else 1

    def is_leaf(self, name: str) -> bool:
        """In hierarchical mode only leaf queues take jobs (Volcano's ``isLeafQueue``)."""
        return not self.hierarchy or name not in self.parents_of

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if queue.name not in self.attrs:
            return True
        if not self.is_leaf(queue.name):
            return False
        dims = dims_of(task.resreq)
        for name in self.chain(queue.name):
            attr = self.attrs[name]
            if not attr.allocated.clone().add(task.resreq).less_equal_in(attr.real_capability, dims):
                return False
        return self.dra is None or self.dra.allocatable(queue, task)

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """May the queue reclaim for this task? Its future use must stay within its real capability
        and be within its deserved share on at least one requested dimension that either side has.
        Volcano: the PreemptiveFn of pkg/scheduler/plugins/capacity/capacity.go
        (``LessEqualPartlyWithDimensionZeroFiltered``)."""
        attr = self.attrs.get(queue.name)
        if attr is None:
            return True
        # devices (deviceclass/<class>) are dimensions too: within the device capability, and within
        # the deserved devices of a class the task asks for counts as a dimension within deserved
        devices_fit, devices_within = (
            self.dra.may_reclaim(queue.name, task) if self.dra is not None else (True, False)
        )
        if not devices_fit:
            return False
        dims = dims_of(task.resreq)
        future = attr.allocated.clone().add(task.resreq)
        if not future.less_equal_in(attr.real_capability, dims):
            return False
        deserved = attr.deserved
        relevant = [n for n in dims if not (future.get(n) < MIN_RESOURCE and deserved.get(n) < MIN_RESOURCE)]
        return devices_within or any(future.get(n) <= deserved.get(n) + MIN_RESOURCE for n in relevant)

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        """Volcano's capacity ReclaimableFn: a reclaimee sharing no requested dimension with the
        reclaimer is skipped; its queue must keep its guarantee without it; it is a victim when it
        asks for nothing its queue deserves ("immediate victim"), or when its queue's allocation
        (less the victims already chosen) is over deserved on a dimension the reclaimee uses and
        the queue deserves (``GreaterPartlyWithRelevantDimensions``)."""
        wanted = set(dims_of(reclaimer.init_resreq))
        if self.dra is not None and reclaimer.pod.spec.resource_claims:
            wanted.update(quota_name(c) for _, counts in self.dra.task_claims(reclaimer) for c in counts)
        return self._reclaimees(wanted, reclaimees), PERMIT

    def unified_evictable(
        self, ctx: EvictionContext, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        """Volcano capacity.go AddUnifiedEvictableFn: gangpreempt is not capacity's to filter (all
        permitted); for gangreclaim the guarantee and deserved checks of ``reclaimable``, without
        its shared-dimension skip (``shouldSkipReclaimee`` is not asked there)."""
        if ctx.kind != GANG_RECLAIM:
            return candidates, PERMIT
        return self._reclaimees(None, candidates), PERMIT

    def _reclaimees(self, wanted: set[str] | None, reclaimees: list[TaskInfo]) -> list[TaskInfo]:
        """Devices count as dimensions (``deviceclass/<class>``): a reclaimee's are the devices its
        eviction gives back to its queue (claims no other pod of the queue holds); the queue keeps its
        device guarantee of each class the reclaimee gives back; a queue over its deserved devices of
        such a class makes the reclaimee a victim (Volcano's DRA quota user guide, how_to_use_dra_quota.md:
        deserved is "beyond it may be reclaimed", guarantee "cannot be preempted")."""
        victims: list[TaskInfo] = []
        left: dict[str, Resource] = {}
        dra = self.dra
        devices_left: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
        for t in reclaimees:
            job = self.ssn.jobs.get(t.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if job is None or attr is None:
                continue
            uses = dims_of(t.resreq)
            freed: dict[str, int] = {}
            state = None
            if dra is not None and job.queue in dra.tracked:
                state = devices_left.get(job.queue)
                if state is None:
                    state = devices_left[job.queue] = dra.reclaim_state(job.queue)
                freed = {c: n for c, n in dra.freed_by(state, t).items() if n > 0}
            if (
                wanted is not None
                and not wanted.intersection(uses)
                and not wanted.intersection(quota_name(c) for c in freed)
            ):
                continue
            allocated = left.get(job.queue)
            if allocated is None:
                allocated = left[job.queue] = attr.allocated.clone()
            without = safe_sub(allocated, t.resreq)
            if not attr.guarantee.less_equal(without, "zero"):
                continue
            held = state[0] if state is not None else {}
            if dra is not None and freed:
                guarantee = dra.guarantee.get(job.queue, {})
                if any(held.get(c, 0) - n < guarantee[c] for c, n in freed.items() if c in guarantee):
                    continue
            deserved = attr.deserved
            deserved_dims = set(dims_of(deserved))
            deserved_devices = dra.deserved.get(job.queue, {}) if dra is not None else {}
            covered_devices = [c for c in freed if c in deserved_devices]
            if deserved_dims.intersection(uses) or covered_devices:
                relevant = [
                    n
                    for n in uses
                    if (n in deserved.scalars) or (n in ("cpu", "memory") and deserved.get(n) >= MIN_RESOURCE)
                ]
                over = any(allocated.get(n) > deserved.get(n) + MIN_RESOURCE for n in relevant) or any(
                    held.get(c, 0) > deserved_devices[c] for c in covered_devices
                )
                if not over:
                    continue
            left[job.queue] = without
            if dra is not None and state is not None:
                dra.take_away(state, t)
            victims.append(t)
        return victims

    def enqueueable(self, job: JobInfo) -> int:
        need = job.min_resources
        if job.queue in self.attrs and not self.is_leaf(job.queue):
            job.job_fit_error = f"queue {job.queue} is not a leaf queue"
            return REJECT
        if job.queue in self.attrs and self.dra is not None:
            why = self.dra.enqueue_refusal(job)
            if why:
                job.job_fit_error = why
                return REJECT
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
        if job.queue in self.attrs and self.dra is not None:
            self.dra.enqueued(job)
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
        if self.dra is not None:
            self.dra.change(job.queue, task, add)
        for name in self.chain(job.queue):
            attr = self.attrs[name]
            if add:
                attr.allocated.add(task.resreq)
            else:
                attr.allocated = safe_sub(attr.allocated, task.resreq)
            attr.share = capacity_share(attr.allocated, attr.deserved)
