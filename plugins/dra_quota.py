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
design (``docs/design/capacity-dra-support.md``) is the capacity plugin's.

With ``capacity.DRAConsumableCapacityEnable`` (default true, as Volcano reads it from the
DRAConsumableCapacity feature gate), ``<dimension>.deviceclass/<class>`` keys cap a consumable capacity
of the class's devices: a request's ``capacity.requests[<dimension>]`` times its ``count`` is the
logical amount it takes (the design's "a request for two devices with 8Gi of memory each consumes 16Gi";
``buildTaskDRAInfo``, ``addDRAResource``), summed per queue like device counts; a dimension a request
asks for that the queue's capability for the class does not name refuses it (``checkDRAAllocatable``:
"dimension not in capability"). Inside, a dimension is counted under the key
``<dimension>.deviceclass/<class>`` beside the class's device count.
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


CAPACITY_SEPARATOR = "." + DEVICE_CLASS_PREFIX


def dimension_key(dimension: str, device_class: str) -> str:
    """The key a consumable capacity dimension of a class is counted under (its queue key)."""
    return f"{dimension}{CAPACITY_SEPARATOR}{device_class}"


def _class_of(key: str) -> str:
    return key.split(CAPACITY_SEPARATOR, 1)[1] if CAPACITY_SEPARATOR in key else key


def quota_name(key: str) -> str:
    """The queue resource name of a count key."""
    return key if CAPACITY_SEPARATOR in key else f"{DEVICE_CLASS_PREFIX}{key}"


def device_class_quota(resources: Mapping[str, str | int | float], consumable: bool = True) -> Counts:
    """``deviceclass/<class>: N`` entries of a queue's resource list, and with ``consumable``
    ``<dimension>.deviceclass/<class>: Q`` ones (``parseDRAResourceList``)."""
    out: Counts = {}
    for name, quantity in resources.items():
        index = name.find(CAPACITY_SEPARATOR)
        if index > 0:
            if not consumable or not name[index + len(CAPACITY_SEPARATOR) :]:
                continue
            key = name
        elif name.startswith(DEVICE_CLASS_PREFIX):
            key = name[len(DEVICE_CLASS_PREFIX) :]
            if not key:
                continue
        else:
            continue
        try:
            out[key] = int(parse_quantity(str(quantity)))
        except (QuantityError, ValueError, ArithmeticError):
            continue
    return out


def claim_devices(claim: ResourceClaim, consumable: bool = False) -> Counts:
    """Devices per class the claim asks for, and with ``consumable`` the capacity each dimension
    takes (request times count) (``buildTaskDRAInfo``, ``addDRAResource``)."""
    out: Counts = {}
    for request in claim.spec.devices.requests:
        exactly = request.exactly
        if request.first_available or exactly is None or exactly.allocation_mode != EXACT_COUNT:
            continue
        if exactly.device_class_name:
            count = exactly.count or 1
            out[exactly.device_class_name] = out.get(exactly.device_class_name, 0) + count
            if consumable and exactly.capacity is not None:
                for dimension, value in exactly.capacity.requests.items():
                    try:
                        amount = int(parse_quantity(str(value)).to_integral_value(rounding="ROUND_CEILING"))
                    except (QuantityError, ValueError, ArithmeticError):
                        continue
                    key = dimension_key(dimension, exactly.device_class_name)
                    out[key] = out.get(key, 0) + amount * count
    return out


def _add(into: Counts, counts: Mapping[str, int], sign: int = 1) -> None:
    for device_class, n in counts.items():
        into[device_class] = into.get(device_class, 0) + sign * n


class DraQuota:
    """Per queue: the device quota, the devices held (claims referenced) and let in."""

    def __init__(
        self, ssn: Session, view: DraView, chain: Callable[[str], list[str]], consumable: bool = True
    ) -> None:
        self.view = view
        self.chain = chain
        self.consumable = consumable
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
                    quota = device_class_quota(resources, consumable)
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
                counts = claim_devices(claim, self.consumable) if claim is not None else {}
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
        limited = {_class_of(k) for k in cap}
        for key, n in request.items():
            if key not in cap and CAPACITY_SEPARATOR in key and _class_of(key) in limited and n > 0:
                # checkDRAAllocatable: a dimension the class's capability does not name
                return f"queue {queue} device quota insufficient: {quota_name(key)} requested, but the queue's capability does not name it"
            limit = cap.get(key, 0)
            if limit <= 0 or n <= 0:
                continue
            used = held.get(key, 0) + waiting.get(key, 0)
            if used + n > limit:
                return (
                    f"queue {queue} device quota insufficient: {quota_name(key)} "
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
