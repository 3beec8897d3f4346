"""Queue quota for DRA devices, for the capacity plugin (``capacity.DynamicResourceAllocationEnable``).

As Volcano 1.15's capacity plugin counts them (``pkg/scheduler/plugins/capacity/capacity.go``:
``parseDRAResourceList``, ``checkDRAAllocatable``, ``addTaskDRAAllocated`` /
``removeTaskDRAAllocated``, the enqueue checks; ``pkg/scheduler/cache/cache.go`` ``buildTaskDRAInfo``;
``JobInfo.GetMinDRAResources`` in ``pkg/scheduler/api/job_info.go``): a queue's ``capability`` key
``deviceclass/<class>`` caps the devices of that class its running and placed pods' claims hold; a
claim's devices are its ``exactly`` requests with ``allocationMode: ExactCount`` (``count``, 1 by
default); ``firstAvailable`` and ``All`` requests are not counted (Volcano skips them with a warning).
A claim shared by several pods of a queue counts once (reference counts per queue). A job is let in
while the devices its first ``minAvailable`` pods with claims need (sorted by namespace, name, uid)
fit beside what the queue holds and has let in (like Volcano's enqueue, Caldera's asks the plugins only
about jobs with ``minResources``; allocate's check holds for every pod). A class the queue names no capability for is not
limited. The ``deserved`` and ``guarantee`` keys count in reclaim, as Volcano's DRA quota user guide
(``docs/user-guide/how_to_use_dra_quota.md``) defines them: beyond deserved devices may be reclaimed,
within the guarantee they may not (``capacity.py`` ``preemptive`` and ``_reclaimees``; Volcano 1.15's
code parses them but does not read them yet). The proportion plugin reads none of these keys: the
design (``docs/design/capacity-dra-support.md``) is the capacity plugin's. ``<dimension>.deviceclass/<class>`` keys (consumable capacity) are not read: that is
``capacity.DRAConsumableCapacityEnable``, which Caldera refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from caldera.framework.dra.objects import EXACT_COUNT, ResourceClaim
from caldera.framework.dra.view import DraView, pod_claims
from caldera.framework.model import ALLOCATED_STATUSES, JobInfo, QueueInfo, TaskInfo
from caldera.framework.quantity import QuantityError, parse_quantity

if TYPE_CHECKING:
    from caldera.framework.session import Session

DEVICE_CLASS_PREFIX = "deviceclass/"

Counts = dict[str, int]


def device_class_quota(resources: Mapping[str, str | int | float]) -> Counts:
    """``deviceclass/<class>: N`` entries of a queue's resource list (``parseDRAResourceList``)."""
    out: Counts = {}
    for name, quantity in resources.items():
        if not name.startswith(DEVICE_CLASS_PREFIX) or "." in name.split("/", 1)[0]:
            continue
        device_class = name[len(DEVICE_CLASS_PREFIX) :]
        if not device_class:
            continue
        try:
            out[device_class] = int(parse_quantity(str(quantity)))
        except (QuantityError, ValueError, ArithmeticError):
            continue
    return out


def claim_devices(claim: ResourceClaim) -> Counts:
    """Devices per class the claim asks for (``buildTaskDRAInfo``)."""
    out: Counts = {}
    for request in claim.spec.devices.requests:
        exactly = request.exactly
        if request.first_available or exactly is None or exactly.allocation_mode != EXACT_COUNT:
            continue
        if exactly.device_class_name:
            out[exactly.device_class_name] = out.get(exactly.device_class_name, 0) + (exactly.count or 1)
    return out


def _add(into: Counts, counts: Mapping[str, int], sign: int = 1) -> None:
    for device_class, n in counts.items():
        into[device_class] = into.get(device_class, 0) + sign * n


class DraQuota:
    """Per queue: the device quota, the devices held (claims referenced) and let in."""

    def __init__(self, ssn: Session, view: DraView, chain: Callable[[str], list[str]]) -> None:
        self.view = view
        self.chain = chain
        self.capability: dict[str, Counts] = {}
        self.deserved: dict[str, Counts] = {}
        self.guarantee: dict[str, Counts] = {}
        for q in ssn.queues.values():
            if q.queue is not None:
                spec = q.queue.spec
                for into, resources in (
                    (self.capability, spec.capability),
                    (self.deserved, spec.deserved),
                    (self.guarantee, spec.guarantee.resource),
                ):
                    quota = device_class_quota(resources)
                    if quota:
                        into[q.name] = quota
        #: queues whose devices are counted: those naming any device quota
        self.tracked = set(self.capability) | set(self.deserved) | set(self.guarantee)
        self.allocated: dict[str, Counts] = {}
        self.inqueue: dict[str, Counts] = {}
        self.refs: dict[str, dict[str, int]] = {}
        self._claims: dict[str, list[tuple[str, Counts]]] = {}
        for job in ssn.jobs.values():
            limited = [name for name in chain(job.queue) if name in self.tracked]
            if not limited:
                continue
            held: Counts = {}
            seen: set[str] = set()
            for task in job.tasks.values():
                if task.status in ALLOCATED_STATUSES and task.pod.spec.resource_claims:
                    for name in limited:
                        self._hold(name, task)
                    for key, counts in self.task_claims(task):
                        if key not in seen:
                            seen.add(key)
                            _add(held, counts)
            if job.phase == "Inqueue":
                # let in, not yet all placed: what it still needs stays reserved (as its resources do)
                left = {c: n - held.get(c, 0) for c, n in self.job_devices(job).items() if n > held.get(c, 0)}
                for name in limited:
                    _add(self.inqueue.setdefault(name, {}), left)

    @property
    def active(self) -> bool:
        return bool(self.tracked)

    def task_claims(self, task: TaskInfo) -> list[tuple[str, Counts]]:
        """The task's claims that ask for counted devices, with their counts."""
        got = self._claims.get(task.uid)
        if got is None:
            keys, _ = pod_claims(task.pod)
            got = []
            for key in keys:
                claim = self.view.claims.get(key)
                counts = claim_devices(claim) if claim is not None else {}
                if counts:
                    got.append((key, counts))
            self._claims[task.uid] = got
        return got

    def _incremental(self, queue: str, task: TaskInfo) -> Counts:
        refs = self.refs.get(queue, {})
        out: Counts = {}
        for key, counts in self.task_claims(task):
            if not refs.get(key):
                _add(out, counts)
        return out

    def _hold(self, queue: str, task: TaskInfo) -> Counts:
        """``addTaskDRAAllocated``: the task's claims referenced; new ones' devices held. Returns
        what was added."""
        added = self._incremental(queue, task)
        refs = self.refs.setdefault(queue, {})
        for key, _ in self.task_claims(task):
            refs[key] = refs.get(key, 0) + 1
        _add(self.allocated.setdefault(queue, {}), added)
        return added

    def _release(self, queue: str, task: TaskInfo) -> None:
        """``removeTaskDRAAllocated``: the last reference to a claim gives its devices back."""
        self.take_away((self.allocated.setdefault(queue, {}), self.refs.setdefault(queue, {})), task)

    def change(self, queue: str, task: TaskInfo, add: bool) -> None:
        if not task.pod.spec.resource_claims:
            return
        for name in self.chain(queue):
            if name in self.tracked:
                if add:
                    self._hold(name, task)
                else:
                    self._release(name, task)

    def _over(self, queue: str, request: Mapping[str, int], with_inqueue: bool) -> str:
        """Why ``request`` does not fit the queue's device quota ("" when it does)."""
        cap = self.capability.get(queue)
        if not cap:
            return ""
        held = self.allocated.get(queue, {})
        waiting = self.inqueue.get(queue, {}) if with_inqueue else {}
        for device_class, n in request.items():
            limit = cap.get(device_class, 0)
            if limit <= 0 or n <= 0:
                continue
            used = held.get(device_class, 0) + waiting.get(device_class, 0)
            if used + n > limit:
                return (
                    f"queue {queue} device quota insufficient: {DEVICE_CLASS_PREFIX}{device_class} "
                    f"{used} in use + {n} requested > {limit}"
                )
        return ""

    # -- reclaim: deserved and guarantee (the user guide's "deserved: may be reclaimed beyond it;
    # guarantee: cannot be preempted within it") ----------------------------------------------------
    def incremental(self, queue: str, task: TaskInfo) -> Counts:
        """The devices the task's claims would add to the queue (claims it references already count
        once)."""
        return self._incremental(queue, task) if task.pod.spec.resource_claims else {}

    def may_reclaim(self, queue: str, task: TaskInfo) -> tuple[bool, bool]:
        """For a reclaimer of the queue: (whether its devices stay within the queue's device
        capability, whether they stay within its deserved devices on a class it asks for); (True,
        False) when it asks for no counted device."""
        need = self.incremental(queue, task)
        if not need:
            return True, False
        if self._over(queue, need, False):
            return False, False
        deserved = self.deserved.get(queue, {})
        held = self.allocated.get(queue, {})
        within = any(held.get(c, 0) + n <= deserved.get(c, 0) for c, n in need.items())
        return True, within

    def reclaim_state(self, queue: str) -> tuple[Counts, dict[str, int]]:
        """A copy of the queue's devices held and claim references, for choosing victims."""
        return dict(self.allocated.get(queue, {})), dict(self.refs.get(queue, {}))

    def freed_by(self, state: tuple[Counts, dict[str, int]], task: TaskInfo) -> Counts:
        """The devices evicting the task gives back to the queue: its claims no other pod of the
        queue references (a shared claim stays counted while one of its pods stays)."""
        _, refs = state
        out: Counts = {}
        if task.pod.spec.resource_claims:
            for key, counts in self.task_claims(task):
                if refs.get(key, 0) <= 1:
                    _add(out, counts)
        return out

    def take_away(self, state: tuple[Counts, dict[str, int]], task: TaskInfo) -> None:
        """The task's references leave the state (a victim chosen, or the queue's own: a task removed)."""
        held, refs = state
        for key, counts in self.task_claims(task) if task.pod.spec.resource_claims else ():
            n = refs.get(key, 0)
            if n <= 1:
                refs.pop(key, None)
                _add(held, counts, -1)
            else:
                refs[key] = n - 1

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if not task.pod.spec.resource_claims:
            return True
        return not any(
            self._over(name, self._incremental(name, task), False) for name in self.chain(queue.name)
        )

    def job_devices(self, job: JobInfo) -> Counts:
        """``GetMinDRAResources``: the devices of the job's first ``minAvailable`` pods with claims
        (by namespace, name, uid); with per-role minimums, each role's first pod that many times."""
        tasks = sorted(
            (t for t in job.tasks.values() if t.pod.spec.resource_claims and self.task_claims(t)),
            key=lambda t: (t.namespace, t.name, t.uid),
        )
        out: Counts = {}
        if job.task_min_available:
            seen: set[str] = set()
            for task in tasks:
                need = job.task_min_available.get(task.role, 0)
                if need <= 0 or task.role in seen:
                    continue
                seen.add(task.role)
                for _, counts in self.task_claims(task):
                    _add(out, {c: n * need for c, n in counts.items()})
            return out
        for task in tasks[: max(0, job.min_available)]:
            for _, counts in self.task_claims(task):
                _add(out, counts)
        return out

    def enqueue_refusal(self, job: JobInfo) -> str:
        """Why the job's devices do not fit its queue (or an ancestor) now ("" when they do)."""
        need = self.job_devices(job)
        if not need:
            return ""
        for name in self.chain(job.queue):
            why = self._over(name, need, True)
            if why:
                return why
        return ""

    def enqueued(self, job: JobInfo) -> None:
        need = self.job_devices(job)
        for name in self.chain(job.queue):
            if name in self.tracked and need:
                _add(self.inqueue.setdefault(name, {}), need)
