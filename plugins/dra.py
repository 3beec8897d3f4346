"""Dynamic Resource Allocation in the session: the predicates plugin's ``dra`` part.

Feasibility as kube-scheduler's dynamicresources plugin decides it (``pkg/scheduler/framework/plugins/
dynamicresources/dynamicresources.go`` in kubernetes/kubernetes): ``PreFilter`` finds the pod's claims
(a claim that does not exist yet, or a template claim not named in the pod's status, makes the pod
unschedulable for now; so does a claim being deleted or reserved for the maximum number of
consumers); ``Filter`` accepts a node when every allocated claim's ``allocation.nodeSelector`` matches
it, no allocated claim's devices report a binding failure or are past their binding timeout
(``binding_blocked``: such a claim is unavailable on every node, kube-scheduler's TestPlugin/bound-claim-
with-failed-binding), and the structured allocator (``framework/dra/allocator.py``) finds devices for all unallocated
claims there together. Volcano runs that plugin from its predicates plugin behind
``predicate.DynamicResourceAllocationEnable`` (``pkg/scheduler/plugins/predicates/predicates.go``);
Caldera's default is true. With it false a pod with claims is refused everywhere with a reason: it is
never bound without its devices.

The devices handed out in a session live in one :class:`DeviceLedger` over the devices allocated
claims hold. The allocate event of a statement allocates the task's unallocated claims on its node
(``Reserve``) and the deallocate event releases them (``Unreserve``), so a discarded gang gives its
devices back and two gangs never get the same device. A claim shared by several pods is allocated
once, by the first, and only reserved for the others. What a task got goes to the binder with its
placement (``ssn.task_claims`` -> ``Placement.claims``), as ``PreBind`` writes it.

A claim of a ``scheduling.k8s.io/v1alpha2`` PodGroup (KEP-5729; ``group_claim_keys`` in
``framework/dra/view.py``) is such a shared claim: the first pod of the group placed in the gang's
statement allocates it, the others are placed only where its allocation's node selector reaches (one
node for node-local devices), and discarding the gang gives its devices back. It is reserved for the
PodGroup rather than for each pod (``ClaimAllocation.consumer``), so it counts as reserved for every
pod of the group and never fills up; a claim made from a template for the group must be owned by the
PodGroup (as a pod's own template claim by the pod).

Pods without claims pay nothing: the predicate is registered with ``applies=`` and only when the
snapshot has DRA objects or pods with claims exist.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from caldera.framework.callbacks import EventHandler
from caldera.framework.dra.allocator import (
    CLAIM_TIMEOUTS,
    TIMED_OUT,
    Allocator,
    DeviceLedger,
    Inventory,
    Outcome,
    node_selector_matches,
)
from caldera.framework.dra.cel import CelError
from caldera.framework.dra.freeindex import FreeIndex, shape_devices, simple_shape
from caldera.framework.dra.objects import AllocationResult, ResourceClaim
from caldera.framework.dra.view import (
    RESERVED_FOR_MAX_SIZE,
    ClaimAllocation,
    Consumer,
    DraView,
    binding_blocked,
    group_claim_keys,
    is_for_pod,
    pod_claims,
    reserved_for,
    template_claims,
)
from caldera.framework.model import NodeInfo, TaskInfo, TaskStatus
from caldera.framework.result import Event

if TYPE_CHECKING:
    from caldera.framework.session import Session

log = logging.getLogger("caldera.dra")

R_DISABLED = (
    "pod uses ResourceClaims but dynamic resource allocation is disabled "
    "(predicates: predicate.DynamicResourceAllocationEnable: false)"
)
#: the Event reason on a claim whose selector expression fails
CEL_EVENT_REASON = "FailedResourceClaimSelector"

#: CEL errors logged so far (a log line each, not one per cycle); bounded
_logged: set[tuple[str, str, str]] = set()


def has_claims(task: TaskInfo) -> bool:
    return bool(task.pod.spec.resource_claims)


_spec_encoder = msgspec.json.Encoder()
#: the ``Session.node_memo`` key of ``DraPart.device_rows``'s (inventory, rows)
_DEVICE_ROWS = "dra.device_rows"


@dataclass(slots=True, eq=False)
class _Fit:
    """The allocator's answers for one claim spec, per node row, and the device epoch of each."""

    mask: np.ndarray
    epoch: np.ndarray
    shared: int
    #: the allocations found per row (equal specs, equal devices in use: equal allocations)
    results: list[list[AllocationResult] | None]
    #: the nodes whose search for these claims ran out of steps this session (``CLAIM_TIMEOUTS``)
    timeouts: int = 0


#: one claim of a task as the session's view decides it (``DraPart._claim_checks``): its key, the
#: claim, why it cannot be used at all, its allocation in the view, why that cannot be reserved
_Check = tuple[str, ResourceClaim | None, str, AllocationResult | None, str]


@dataclass(slots=True)
class _Plan:
    """A task's claims as the session stands: those allocated (with their node selectors) and those
    to allocate; or why no node will do."""

    keys: list[str]
    claims: list[ResourceClaim]
    allocated: list[tuple[str, AllocationResult]]
    unallocated: list[ResourceClaim]
    reason: str = ""


class DraPart:
    """The ``dra`` predicate of the predicates plugin (see the module's docstring)."""

    def __init__(self, ssn: Session, plugin: str, enabled: bool, filter_timeout: int | None = None) -> None:
        self.ssn = ssn
        self.enabled = enabled
        #: how a node's search is bounded: ``SEARCH_STEPS`` steps, or the conf's
        #: ``dynamicresources.filterTimeoutSeconds`` (kube-scheduler's filterTimeout: seconds per node,
        #: 0 for none)
        self._bound: dict[str, int | None] = (
            {} if filter_timeout is None else {"steps": None, "seconds": filter_timeout or None}
        )
        #: the session's wall clock: a claim's binding timeout counts from its allocationTimestamp
        self.now = time.time()
        view = ssn.snapshot.dra
        self.view: DraView = view if view is not None else DraView(Inventory(()), {}, {}, frozenset())
        self.ledger = DeviceLedger(self.view.allocated, self.view.consumed)
        self.allocator = Allocator(self.view.inventory, self.view.classes, self.ledger)
        #: claims allocated in this session: key -> (allocation, the uids of the tasks using it)
        self.session_allocs: dict[str, tuple[AllocationResult, list[str]]] = {}
        #: per task uid: the claims it allocated here (released on deallocate)
        self.allocated_by: dict[str, list[str]] = {}
        self.reported: set[tuple[str, str]] = set()
        self._device_rows: np.ndarray | None = None
        #: the allocator's answers per claim spec (``_unallocated_fit``), and the device epochs
        self._spec_keys: dict[tuple[str, ...], bytes] = {}
        self._fits: dict[bytes, _Fit] = {}
        self._epoch = np.zeros(len(ssn.node_list), dtype=np.int64)
        self._shared_epoch = 0
        #: the counting fast path per claim (framework/dra/freeindex.py): its index, None where the
        #: full allocator answers; the same per claim spec (the claims of one template); indexes by shape
        self._fast: dict[str, FreeIndex | None] = {}
        self._fast_by_spec: dict[bytes, FreeIndex | None] = {}
        self._indexes: dict[object, FreeIndex | None] = {}
        #: per task uid: its one claim and the index that answers for it while the session has not
        #: allocated that claim (``_counted``)
        self._counted_by: dict[str, tuple[str, FreeIndex | None]] = {}
        #: per task uid: what the view decides of its claims (``_claim_checks``)
        self._checks: dict[str, tuple[list[str], str, list[_Check]]] = {}
        #: per task uid: the keys of its claims that are its PodGroup's, and that PodGroup
        self._group_keys: dict[str, tuple[frozenset[str], Consumer | None]] = {}
        #: the first selector error met for each claim this session (named in its reasons)
        self.claim_cel: dict[str, CelError] = {}
        #: tasks evicted in this session, and the allocated claims their evictions release (key ->
        #: allocation): no pod that is not evicted reserves them any more
        self.evicted: set[str] = set()
        self.released: dict[str, AllocationResult] = {}
        #: per allocated claim: the tasks placed in this session that will reserve it
        self.reservers: dict[str, set[str]] = {}
        if enabled:
            # what evictions cannot change (the claims exist, allocated ones reach the node, the node
            # reaches devices at all), and the allocator's answer over the devices free now, which
            # evictions change: preempt and reclaim pick nodes by the first and dry-run the second.
            # Both are node-local for a task the counts answer for (``node_local``)
            ssn.add_bulk_predicate_fn(
                plugin, self.passes, self.explain, part="dra", applies=has_claims, local=self.node_local
            )
            ssn.add_bulk_predicate_fn(
                plugin,
                self.devices_pass,
                _nothing_more,
                part="dra-devices",
                applies=has_claims,
                local=self.node_local,
                releasable=True,
            )
            ssn.add_event_handler(EventHandler(allocate=self._on_allocate, deallocate=self._on_deallocate))
        # What the predicate reads of a task's claims, for what is cached per template: whether it
        # has any, and the shape of its claim when the counts answer for it
        ssn.add_template_qualifier(f"{plugin}.dra", self._qualifier, claims=True)
        if not enabled:
            ssn.add_bulk_predicate_fn(
                plugin,
                lambda task, rows: np.zeros(len(rows), dtype=bool),
                lambda task, rows: {R_DISABLED: np.ones(len(rows), dtype=bool)},
                part="dra",
                local=True,
                applies=has_claims,
            )

    # -- the plan ------------------------------------------------------------------------------------
    def group_of(self, task: TaskInfo) -> tuple[frozenset[str], Consumer | None]:
        """The task's claims that its native PodGroup shares with it, and the PodGroup as their
        consumer (KEP-5729); nothing for a pod of a Volcano PodGroup."""
        got = self._group_keys.get(task.uid)
        if got is None:
            job = self.ssn.jobs.get(task.job)
            group = job.native if job is not None else None
            keys = group_claim_keys(task.pod, group)
            consumer = None
            if keys and group is not None:
                meta = group.metadata
                consumer = Consumer("scheduling.k8s.io", "podgroups", meta.name, meta.uid)
            got = self._group_keys[task.uid] = (keys, consumer)
        return got

    def plan(self, task: TaskInfo) -> _Plan:
        """The task's claims as the session stands (``_Plan``): what the view decides of them is
        found once per task (``_claim_checks``); what moves in the session (claims it allocated,
        claims its evictions release) is read on each call."""
        keys, reason, checks = self._claim_checks(task)
        plan = _Plan(keys, [], [], [])
        if reason:
            plan.reason = reason
            return plan
        released = self.released
        session_allocs = self.session_allocs
        for key, claim, before, allocation, after in checks:
            if before:
                plan.reason = before
                return plan
            if key in released:
                plan.reason = f"ResourceClaim {key} is being released: the pods reserving it are evicted"
                return plan
            assert claim is not None  # (a missing claim has its reason)
            plan.claims.append(claim)
            if allocation is not None:
                if after:
                    plan.reason = after
                    return plan
                plan.allocated.append((key, allocation))
            elif key in session_allocs:
                plan.allocated.append((key, session_allocs[key][0]))
            else:
                plan.unallocated.append(claim)
        return plan

    def _claim_checks(self, task: TaskInfo) -> tuple[list[str], str, list[_Check]]:
        """What the session's view decides of the task's claims, in ``spec.resourceClaims`` order
        (found once per task: neither the pod nor the view changes in a session): the claims' keys,
        or why the pod waits for them; then per claim up to the first that fails: the claim (None
        where it is missing), why it cannot be used whatever the session does (kube-scheduler's
        PreFilter: missing, being deleted, a template's claim that is not the pod's own, nor its
        PodGroup's), its allocation in the view, and why that allocation cannot be reserved for the
        pod (``reservedFor`` full). :meth:`plan` lays the session's moves over it."""
        got = self._checks.get(task.uid)
        if got is not None:
            return got
        keys, reason = pod_claims(task.pod)
        checks: list[_Check] = []
        got = self._checks[task.uid] = (keys, reason, checks)
        if reason:
            return got
        claims = self.view.claims
        templated = template_claims(task.pod) if task.pod.status.resource_claim_statuses else frozenset()
        shared, group = self.group_of(task)
        for key in keys:
            claim = claims.get(key)
            before = ""
            if claim is None:
                before = f"waiting for ResourceClaim {key} to be created"
            elif claim.metadata.deletion_timestamp:
                before = f"ResourceClaim {key} is being deleted"
            consumer = task.uid
            if claim is not None and not before:
                if group is not None and key in shared:
                    consumer = group.uid
                    if key in templated and not is_for_pod(claim, group.uid):
                        before = (
                            f"ResourceClaim {key} was not created for PodGroup {task.namespace}/{group.name}"
                        )
                elif key in templated and not is_for_pod(claim, task.uid):
                    # kube-scheduler's PreFilter: a template's claim must be the pod's own
                    before = f"ResourceClaim {key} was not created for pod {task.key} (pod is not owner)"
            if before or claim is None:
                checks.append((key, claim, before, None, ""))
                break
            allocation = claim.status.allocation
            after = ""
            if allocation is not None:
                status = claim.status
                if not reserved_for(claim, consumer) and len(status.reserved_for) >= RESERVED_FOR_MAX_SIZE:
                    after = (
                        f"ResourceClaim {key} is in use by {len(status.reserved_for)} pods, the most allowed"
                    )
                else:
                    blocked = binding_blocked(claim, self.now)
                    if blocked:
                        # Filter: "resourceclaim not available on the node", on every node alike
                        after = f"ResourceClaim {key} is not available: {blocked}"
            checks.append((key, claim, "", allocation, after))
            if after:
                break
        return got

    def _on_node(self, plan: _Plan, node: NodeInfo) -> str:
        """Why the task's claims cannot be had on the node ("" when they can)."""
        return self._selectors_fail(plan, node) or (
            self._allocator_fails(plan, node) if plan.unallocated else ""
        )

    @staticmethod
    def _selectors_fail(plan: _Plan, node: NodeInfo) -> str:
        """Why an allocated claim's devices cannot be reached from the node ("" when they can)."""
        for key, allocation in plan.allocated:
            selector = allocation.node_selector
            if selector is not None and not node_selector_matches(selector, node.name, node.labels):
                return f"node(s) could not reach the devices allocated to ResourceClaim {key}"
        return ""

    def _allocate(self, plan: _Plan, node: NodeInfo) -> Outcome:
        """The allocator's answer for the unallocated claims on the node; selector errors reported.
        Once the search for claims of one spec ran out of steps on ``CLAIM_TIMEOUTS`` nodes in a
        session, a node's answer is ``TIMED_OUT`` without a search, as kube-scheduler's ``Filter``
        answers a node whose search outlasts its ``filterTimeout``."""
        fit = self._fit(plan)
        if fit.timeouts >= CLAIM_TIMEOUTS:
            return Outcome(None, TIMED_OUT, timed_out=True)
        outcome = self.allocator.allocate(plan.unallocated, node.name, node.labels, **self._bound)
        fit.timeouts += outcome.timed_out
        if outcome.cel_errors:
            self._report_cel(plan.unallocated, outcome.cel_errors)
        return outcome

    def _cel_failed(self, plan: _Plan) -> CelError | None:
        """The selector error met this session for one of the plan's claims to allocate, if any."""
        if not self.claim_cel:
            return None
        for claim in plan.unallocated:
            error = self.claim_cel.get(f"{claim.metadata.namespace}/{claim.metadata.name}")
            if error is not None:
                return error
        return None

    def _allocator_fails(self, plan: _Plan, node: NodeInfo) -> str:
        """Why the allocator finds no devices for the unallocated claims on the node ("" if it does)."""
        outcome = self._allocate(plan, node)
        failed = self._cel_failed(plan)
        if failed is not None and outcome.allocations is not None:
            return f"the claim's selectors fail on some device: {failed}"
        if outcome.allocations is None:
            # a selector that failed is the user's to fix: name it (the allocator reports an error
            # once per claim and device, the session remembers it per claim)
            for claim in plan.unallocated:
                error = self.claim_cel.get(f"{claim.metadata.namespace}/{claim.metadata.name}")
                if error is not None:
                    return f"{outcome.reason}; {error}"
            return outcome.reason
        return ""

    # -- the predicate -------------------------------------------------------------------------------
    def device_rows(self) -> np.ndarray:
        """Per node row, whether any device is reachable from the node (read-only). It depends on
        the nodes' names and labels and on the inventory alone: kept across sessions while both
        stand (``Session.node_memo`` for the nodes, with the inventory it was found for)."""
        if self._device_rows is None:
            inventory = self.view.inventory
            kept = self.ssn.node_memo(_DEVICE_ROWS, lambda: None)
            if kept is not None and kept[0] is inventory:
                self._device_rows = kept[1]
            else:
                rows = np.array(
                    [bool(inventory.devices_for(n.name, n.labels)) for n in self.ssn.node_list], dtype=bool
                )
                rows.flags.writeable = False
                self.ssn.node_memo_replace(_DEVICE_ROWS, (inventory, rows))
                self._device_rows = rows
        return self._device_rows

    def _candidates(self, plan: _Plan, rows: np.ndarray) -> np.ndarray:
        """The rows worth asking the allocator about: with claims to allocate, only nodes that reach
        a device at all (the others fail alike)."""
        if not all(c.spec.devices.requests for c in plan.unallocated):
            return np.ones(len(rows), dtype=bool)  # (a claim without requests fits anywhere)
        return self.device_rows()[rows]

    def passes(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """The claims exist and may be used, allocated ones reach the node, and the node reaches a
        device at all when there are claims to allocate (``devices_pass`` asks the allocator)."""
        if self._counted(task) is not None:
            # (one claim to allocate, usable, with requests: what the plan would say, without it)
            return self.device_rows()[rows]
        plan = self.plan(task)
        if plan.reason:
            return np.zeros(len(rows), dtype=bool)
        node_list = self.ssn.node_list
        out = self._candidates(plan, rows).copy() if plan.unallocated else np.ones(len(rows), dtype=bool)
        if plan.allocated:
            for i in np.flatnonzero(out).tolist():
                out[i] = not self._selectors_fail(plan, node_list[int(rows[i])])
        return out

    def devices_pass(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """The allocator finds devices for the unallocated claims among those free now. A selector
        that fails at run time on any device makes the claim unschedulable everywhere, as a Filter
        error aborts the pod's cycle in kube-scheduler (``dynamicresources.go`` Filter; the
        "CEL-runtime-error-for-one-of-two-nodes" case of its TestPlugin): a broken selector is the
        user's to fix, not a reason to land on whichever node it happens not to trip on."""
        fast = self._counted(task)
        if fast is not None and not self.claim_cel:
            return fast.fits(rows)  # what the plan's one claim to allocate gets below
        plan = self.plan(task)
        if plan.reason:
            return np.zeros(len(rows), dtype=bool)
        if not plan.unallocated:
            return np.ones(len(rows), dtype=bool)
        out = self._unallocated_fit(plan, rows)
        if self._cel_failed(plan) is not None:
            return np.zeros(len(rows), dtype=bool)
        return out

    def _fast_index(self, plan: _Plan) -> FreeIndex | None:
        """The counting index that answers for the plan's one unallocated claim, or None."""
        if len(plan.unallocated) != 1:
            return None
        claim = plan.unallocated[0]
        key = f"{claim.metadata.namespace}/{claim.metadata.name}"
        if key in self._fast:
            return self._fast[key]
        # Claims made from one template have equal specs (a claim's spec never changes): the shape is
        # found once per spec, the others' is a lookup
        spec = _spec_encoder.encode(claim.spec)
        if spec in self._fast_by_spec:
            index = self._fast[key] = self._fast_by_spec[spec]
            return index
        view = self.view
        shape = simple_shape(claim, view.classes, view.inventory)
        index = None
        if shape is not None:
            if shape in self._indexes:
                index = self._indexes[shape]
            else:
                devices = shape_devices(view.inventory, shape.expressions)
                if devices is not None:
                    index = FreeIndex(shape, devices, [n.name for n in self.ssn.node_list], self.ledger)
                self._indexes[shape] = index
        self._fast[key] = self._fast_by_spec[spec] = index
        return index

    def _counted(self, task: TaskInfo) -> FreeIndex | None:
        """The free-device index that alone answers for the task on each node: its claims are one
        claim to allocate that the counts answer for (none allocated already, whose node selectors
        would count too). What :meth:`plan` says, with what the view decides kept per task: only
        the session's own allocations move."""
        got = self._counted_by.get(task.uid)
        if got is None:
            index = None
            plan = self.plan(task)
            if not plan.reason and len(plan.keys) == 1 and plan.keys[0] not in self.session_allocs:
                if plan.unallocated:  # (else allocated in the view: stays so this session)
                    index = self._fast_index(plan)
            elif not plan.reason and len(plan.keys) == 1:
                claim = self.view.claims[plan.keys[0]]
                if claim.status.allocation is None:  # allocated in this session only: may be released
                    index = self._fast_index(_Plan(plan.keys, [claim], [], [claim]))
            got = self._counted_by[task.uid] = (plan.keys[0] if len(plan.keys) == 1 else "", index)
        key, index = got
        if index is None or key in self.session_allocs:
            return None
        return index

    def node_local(self, task: TaskInfo) -> bool:
        """Whether a node's answer for the task depends on that node alone: with the counts, it
        changes only when a task is placed on or taken off the node (which the placement engine
        sees as that row changed); the full allocator's answers are cached by device epochs."""
        return self._counted(task) is not None

    def _qualifier(self, task: TaskInfo) -> bytes:
        if not task.pod.spec.resource_claims:
            return b""
        index = self._counted(task) if self.enabled else None
        return b"claims:" + index.key if index is not None else b"claims"

    def _fit(self, plan: _Plan) -> _Fit:
        """The answers kept for the plan's unallocated claims' specs (see ``_unallocated_fit``)."""
        names = tuple(f"{c.metadata.namespace}/{c.metadata.name}" for c in plan.unallocated)
        key = self._spec_keys.get(names)
        if key is None:
            key = self._spec_keys[names] = _spec_encoder.encode([c.spec for c in plan.unallocated])
        fit = self._fits.get(key)
        if fit is None or fit.shared != self._shared_epoch:
            n = len(self.ssn.node_list)
            fit = self._fits[key] = _Fit(
                np.zeros(n, dtype=bool), np.full(n, -1, dtype=np.int64), self._shared_epoch, [None] * n
            )
        return fit

    def _unallocated_fit(self, plan: _Plan, rows: np.ndarray) -> np.ndarray:
        """Whether the allocator finds devices for the plan's unallocated claims, per row. Claims with
        equal specs get equal answers on a node while the devices in use there stand still, so the
        answers are kept per spec and node row, with the row's device epoch (moved by every take and
        release of a device of that node; a device of a slice serving several nodes moves them all):
        only rows whose devices changed are asked again."""
        fast = self._fast_index(plan)
        if fast is not None:
            return fast.fits(rows)
        fit = self._fit(plan)
        candidates = self._candidates(plan, rows)
        if not candidates.all():
            rows_ = rows[candidates]
        else:
            rows_ = rows
        epoch = self._epoch
        stale = rows_[fit.epoch[rows_] != epoch[rows_]]
        if len(stale):
            node_list = self.ssn.node_list
            for row in stale.tolist():
                allocations = self._allocate(plan, node_list[row]).allocations
                fit.mask[row] = allocations is not None
                fit.results[row] = allocations
                fit.epoch[row] = epoch[row]
        return fit.mask[rows] & candidates

    def explain(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        plan = self.plan(task)
        if plan.reason:
            return {plan.reason: np.ones(len(rows), dtype=bool)}
        out: dict[str, np.ndarray] = {}
        node_list = self.ssn.node_list
        fast = self._fast_index(plan)
        for i, row in enumerate(rows.tolist()):
            if fast is not None:
                claim = plan.unallocated[0]
                reason = self._selectors_fail(plan, node_list[row]) or fast.why_not(
                    row, f"{claim.metadata.namespace}/{claim.metadata.name}", self.view.inventory
                )
            else:
                reason = self._on_node(plan, node_list[row])
            if reason:
                mask = out.get(reason)
                if mask is None:
                    mask = out[reason] = np.zeros(len(rows), dtype=bool)
                mask[i] = True
        return out

    def _report_cel(self, claims: list[ResourceClaim], errors: list[CelError]) -> None:
        """One Event per claim and failing expression each session (the recorder coalesces repeats),
        and one log line per claim and expression for as long as the process runs."""
        for claim in claims:
            key = f"{claim.metadata.namespace}/{claim.metadata.name}"
            for error in errors:
                if not _uses(claim, error.expression, self.view):
                    continue
                self.claim_cel.setdefault(key, error)
                if (key, error.expression) in self.reported:
                    continue
                self.reported.add((key, error.expression))
                message = f"selector {error.expression!r} cannot be evaluated ({error.kind} error): {error.message}; the pods using this claim cannot be scheduled on devices it rules out"
                self.ssn.report.events.append(("ResourceClaim", key, CEL_EVENT_REASON, message))
                token = (claim.metadata.uid, error.expression, error.message)
                if token not in _logged:
                    if len(_logged) > 10_000:
                        _logged.clear()
                    _logged.add(token)
                    log.warning("ResourceClaim %s: %s", key, message)

    # -- the statement's events ----------------------------------------------------------------------
    def _on_allocate(self, event: Event) -> None:
        task = event.task
        if not has_claims(task):
            return
        if task.uid in self.evicted:
            self._eviction_undone(task)
            return
        node = self.ssn.nodes.get(task.node_name)
        counted = self._counted(task) if node is not None else None
        if counted is not None and node is not None:
            self._allocate_counted(task, node, counted)
            return
        plan = self.plan(task)
        if plan.reason or node is None:
            return  # no claims for the placement: the binder refuses to bind it
        results: list[AllocationResult] = []
        fast = self._fast_index(plan) if plan.unallocated else None
        if fast is not None:
            picked = fast.pick(node.row, plan.unallocated[0], self.view.classes)
            if picked is None:
                log.warning("%s placed on %s, where its claim has too few free devices", task.key, node.name)
                return
            results = [picked]
        elif plan.unallocated:
            fit = self._fit(plan)
            row = node.row
            kept = fit.results[row] if fit.epoch[row] == self._epoch[row] else None
            if kept is not None:
                results = kept  # what the predicate found on this node, which stands still since
            else:
                outcome = self._allocate(plan, node)
                if outcome.allocations is None:
                    log.warning(
                        "%s placed on %s, where its claims cannot be allocated: %s",
                        task.key,
                        node.name,
                        outcome.reason,
                    )
                    return
                results = outcome.allocations
        mine: list[str] = []
        fresh: dict[str, AllocationResult] = {}
        for claim, result in zip(plan.unallocated, results, strict=True):
            key = f"{claim.metadata.namespace}/{claim.metadata.name}"
            self.ledger.take(result, key)
            self._moved(result)
            self.session_allocs[key] = (result, [task.uid])
            fresh[key] = result
            mine.append(key)
        out: list[ClaimAllocation] = []
        shared, group = self.group_of(task)
        for key, claim in zip(plan.keys, plan.claims, strict=True):
            if key in fresh:
                allocation, new = fresh[key], True
            elif claim.status.allocation is not None:
                allocation, new = claim.status.allocation, False
                self.reservers.setdefault(key, set()).add(task.uid)
            else:
                allocation, users = self.session_allocs[key]
                users.append(task.uid)
                new = True
            out.append(
                ClaimAllocation(
                    claim.metadata.namespace,
                    claim.metadata.name,
                    claim.metadata.uid,
                    allocation,
                    new,
                    group if key in shared else None,
                )
            )
        self.allocated_by[task.uid] = mine
        self.ssn.task_claims[task.uid] = out

    def _allocate_counted(self, task: TaskInfo, node: NodeInfo, index: FreeIndex) -> None:
        """:meth:`_on_allocate` for a task whose one claim the counts answer for (``_counted``): its
        plan is that claim to allocate, nothing else (no reason, none allocated), so the general
        path comes down to the index's pick, taken, and the claim's one ``ClaimAllocation``."""
        key = self._counted_by[task.uid][0]
        claim = self.view.claims[key]
        picked = index.pick(node.row, claim, self.view.classes)
        if picked is None:
            log.warning("%s placed on %s, where its claim has too few free devices", task.key, node.name)
            return
        self.ledger.take(picked, key)
        self._moved(picked)
        self.session_allocs[key] = (picked, [task.uid])
        meta = claim.metadata
        shared, group = self.group_of(task)
        self.allocated_by[task.uid] = [key]
        self.ssn.task_claims[task.uid] = [
            ClaimAllocation(
                meta.namespace, meta.name, meta.uid, picked, True, group if key in shared else None
            )
        ]

    def _on_deallocate(self, event: Event) -> None:
        task = event.task
        if task.status == TaskStatus.RELEASING and has_claims(task):
            self._evicted(task)
            return
        claims = self.ssn.task_claims.pop(task.uid, None)
        if claims is None:
            return
        self.allocated_by.pop(task.uid, None)
        for ca in claims:
            users_ = self.reservers.get(ca.key)
            if users_ is not None:
                users_.discard(task.uid)
            entry = self.session_allocs.get(ca.key)
            if entry is None:
                continue
            allocation, users = entry
            if task.uid in users:
                users.remove(task.uid)
            if not users:
                # the last pod using the claim left: its devices are free again this session
                del self.session_allocs[ca.key]
                self.ledger.release(allocation)
                self._moved(allocation)

    # -- evictions -----------------------------------------------------------------------------------
    def _still_reserved(self, key: str, claim: ResourceClaim) -> bool:
        """Whether a consumer that is not evicted (a pod or other object in ``reservedFor``, or a pod
        placed in this session) keeps the claim."""
        evicted = self.evicted
        return any(ref.uid not in evicted for ref in claim.status.reserved_for) or any(
            uid not in evicted for uid in self.reservers.get(key, ())
        )

    def _evicted(self, task: TaskInfo) -> None:
        """A running pod is evicted in the statement: each of its allocated claims that no other pod
        reserves is released, as the resourceclaim controller does once the pod is gone
        (``pkg/controller/resourceclaim/controller.go`` ``syncClaim``: reservations of pods that
        no longer run are removed, and a claim reserved by no one is deallocated); its devices are
        free for the rest of the dry run. A claim shared with a pod that stays keeps its devices."""
        self.evicted.add(task.uid)
        keys, _ = pod_claims(task.pod)
        for key in keys:
            claim = self.view.claims.get(key)
            if claim is None or claim.status.allocation is None or key in self.released:
                continue
            if self._still_reserved(key, claim):
                continue
            self.released[key] = claim.status.allocation
            self.ledger.free(claim.status.allocation)
            self._moved(claim.status.allocation)

    def _eviction_undone(self, task: TaskInfo) -> None:
        """The statement that evicted the pod is discarded: its released claims hold their devices again."""
        self.evicted.discard(task.uid)
        keys, _ = pod_claims(task.pod)
        for key in keys:
            allocation = self.released.get(key)
            claim = self.view.claims.get(key)
            if allocation is None or claim is None or not self._still_reserved(key, claim):
                continue
            del self.released[key]
            clash = self.ledger.unfree(allocation)
            if clash:
                log.warning("ResourceClaim %s held again while devices %s are handed out", key, clash)
            self._moved(allocation)

    def _moved(self, allocation: AllocationResult) -> None:
        """Devices of this allocation were taken or given back: the nodes that reach them answer anew."""
        inventory = self.view.inventory
        nodes = self.ssn.nodes
        indexes = [i for i in self._indexes.values() if i is not None]
        # (an answer of the full allocator's kept before is what a move makes stale: with none kept,
        # the epochs need not move, every answer to come is asked afresh)
        epochs = bool(self._fits)
        for r in allocation.devices.results:
            for index in indexes:
                index.refresh((r.driver, r.pool, r.device))
            if not epochs:
                continue
            name = inventory.node_of((r.driver, r.pool, r.device))
            node = nodes.get(name) if name is not None else None
            if node is not None:
                self._epoch[node.row] += 1
            else:
                self._shared_epoch += 1


def _nothing_more(task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
    """``dra-devices`` explains nothing itself: the ``dra`` part's explanation names every reason."""
    return {}


def _uses(claim: ResourceClaim, expression: str, view: DraView) -> bool:
    """Whether the claim's requests, or the classes they name, carry the expression."""
    for request in claim.spec.devices.requests:
        subs = [request.exactly] if request.exactly is not None else list(request.first_available)
        for sub in subs:
            if sub is None:
                continue
            selectors = list(sub.selectors)
            device_class = view.classes.get(sub.device_class_name)
            if device_class is not None:
                selectors.extend(device_class.spec.selectors)
            if any(s.cel is not None and s.cel.expression == expression for s in selectors):
                return True
    return False
