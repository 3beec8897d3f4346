"""The structured allocator of Dynamic Resource Allocation, as kube-scheduler runs it per node.

Semantics from ``staging/src/k8s.io/dynamic-resource-allocation/structured/`` (kubernetes/kubernetes):
``internal/stable/pools_stable.go`` (``GatherPools``, ``addSlice``, ``poolIsInvalid``, ``nodeMatches``)
and ``internal/stable/allocator_stable.go`` (``Allocate``, ``validateDeviceRequest``, ``allocateOne``,
``isSelectable``, ``selectorsMatch``, ``allocateDevice``, ``matchAttributeConstraint``,
``lookupAttribute``, ``createNodeSelector``). The search is the same exhaustive depth-first search with
backtracking that stops at the first full solution, so the same devices are picked.

Built for a scheduler that asks for many nodes in one cycle:

* :class:`Inventory` is built once from the ResourceSlices (only the newest generation of each pool
  counts; a pool with fewer slices than ``resourceSliceCount`` is incomplete; duplicate device names
  make it invalid), and indexes the devices by node for node-local slices; slices for several nodes
  (``nodeSelector``, ``allNodes``) are matched against a node's labels once per node. It caches every
  (expression, device) CEL answer for as long as it lives.
* :class:`Allocator` is one cycle's: it caches whether a device matches a request (class and request
  selectors) across all the nodes it is asked about.
* :class:`DeviceLedger` holds the devices in use: those of claims already allocated, plus those handed
  out in this cycle, with :meth:`DeviceLedger.mark` / :meth:`DeviceLedger.rollback` so a statement that
  is discarded (a gang that does not fit) releases what it took.

The features of the ``experimental`` variant (``internal/experimental/allocator_experimental.go``,
``pools_experimental.go``, ``consumable_capacity.go``), each behind a :class:`Features` switch that is on
by default as in kube-scheduler 1.36:

* partitionable devices: a pool's ``sharedCounters`` (slices without devices) and the devices'
  ``consumesCounters``; a device is allocatable only while the counters of its pool's counter sets, less
  what allocated devices and the devices picked in this search consume, still cover it
  (``checkAvailableCounters``); ``perDeviceNodeSelection`` (each device names its node(s));
* device taints: a device with a ``NoSchedule``/``NoExecute`` taint that the request does not tolerate
  is not allocated (``taintPreventsAllocation``, ``resourceclaim.ToleratesTaint``); the request's
  tolerations are copied into the result;
* binding conditions: copied into the result; devices with them are tried last (pools, and slices in a
  pool, with binding conditions after the others: ``GatherPools``); ``bindsToNode`` pins the claim to
  the node; with the feature off such devices are not selectable (``isSelectable``);
* consumable capacity: a device with ``allowMultipleAllocations`` is shared by several claims, each
  consuming its request (``capacity.requests``, rounded up by the capacity's ``requestPolicy``) until
  the capacity is used up (``CmpRequestOverCapacity``); each share gets a ``shareID``;
  ``distinctAttribute`` constraints.

The configurations of the classes and the claim are copied into the allocation result
(:func:`allocation_config`), where the drivers read them. Not supported: list attributes, compatibility
groups, derived attributes.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import msgspec

from caldera.framework.dra.capacity import (
    CapacityError,
    Consumed,
    add_consumed,
    consumed_from_request,
    fits_capacity,
    quantity_text,
    request_amounts,
    sub_consumed,
)
from caldera.framework.dra.cel import CelCache, CelError, DeviceContext
from caldera.framework.dra.objects import (
    ALL,
    ALLOCATION_RESULTS_MAX_SIZE,
    EXACT_COUNT,
    FROM_CLAIM,
    FROM_CLASS,
    NO_EXECUTE,
    NO_SCHEDULE,
    AllocationResult,
    Device,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceAttribute,
    DeviceClass,
    DeviceRequestAllocationResult,
    DeviceSelector,
    DeviceTaint,
    DeviceToleration,
    ResourceClaim,
    ResourceSlice,
)
from caldera.framework.objects import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from caldera.framework.quantity import QuantityError, parse_quantity

DeviceID = tuple[str, str, str]  # driver, pool, device
_content_encoder = msgspec.json.Encoder()


def device_label(device_id: DeviceID) -> str:
    return "/".join(device_id)


def _slice_has_binding_conditions(slice_: ResourceSlice) -> bool:
    """``hasBindingConditions`` (pools_experimental.go)."""
    return any(d.binding_conditions for d in slice_.spec.devices)


def _quantity(value: str | int | float) -> Decimal:
    try:
        return parse_quantity(value)
    except QuantityError:
        return Decimal(0)


def tolerates(toleration: DeviceToleration, taint: DeviceTaint) -> bool:
    """``resourceclaim.ToleratesTaint`` (k8s.io/dynamic-resource-allocation/resourceclaim)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def taint_prevents_allocation(device: Device, tolerations: Sequence[DeviceToleration]) -> bool:
    """``taintPreventsAllocation``: a NoSchedule or NoExecute taint no toleration matches; other
    effects (None, unknown ones) are ignored."""
    for taint in device.taints:
        if taint.effect in (NO_SCHEDULE, NO_EXECUTE) and not any(tolerates(t, taint) for t in tolerations):
            return True
    return False


# --- node selection --------------------------------------------------------------------------------
def _requirement_matches(req: NodeSelectorRequirement, values: Mapping[str, str]) -> bool:
    op = req.operator
    if op == "Exists":
        return req.key in values
    if op == "DoesNotExist":
        return req.key not in values
    value = values.get(req.key)
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op in ("Gt", "Lt") and value is not None and len(req.values) == 1:
        try:
            have, want = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def node_selector_matches(selector: NodeSelector, node_name: str, labels: Mapping[str, str]) -> bool:
    """A core/v1 NodeSelector: the terms are ORed, a term's requirements ANDed; an empty term matches
    nothing (``nodeaffinity.NewNodeSelector``); ``matchFields`` knows ``metadata.name``."""
    fields = {"metadata.name": node_name}
    for term in selector.node_selector_terms:
        if not term.match_expressions and not term.match_fields:
            continue
        if all(_requirement_matches(r, labels) for r in term.match_expressions) and all(
            _requirement_matches(r, fields) for r in term.match_fields
        ):
            return True
    return False


# --- inventory -------------------------------------------------------------------------------------
@dataclass(slots=True, eq=False)
class InventoryDevice:
    id: DeviceID
    device: Device
    slice: ResourceSlice
    _context: DeviceContext | None = None
    _content: bytes = b""
    pool: Pool | None = None

    @property
    def shareable(self) -> bool:
        return bool(self.device.allow_multiple_allocations)

    @property
    def node_name(self) -> str | None:
        """The node the device is local to (its slice's, or its own with ``perDeviceNodeSelection``)."""
        return (
            self.device.node_name if self.slice.spec.per_device_node_selection else self.slice.spec.node_name
        )

    @property
    def node_selector(self) -> NodeSelector | None:
        spec = self.slice.spec
        return self.device.node_selector if spec.per_device_node_selection else spec.node_selector

    @property
    def content(self) -> bytes:
        """What a CEL expression sees of the device, encoded: its driver, attributes and capacity."""
        if not self._content:
            self._content = _content_encoder.encode(
                (
                    self.id[0],
                    self.device.attributes,
                    self.device.capacity,
                    self.device.allow_multiple_allocations,
                )
            )
        return self._content

    @property
    def context(self) -> DeviceContext:
        if self._context is None:
            self._context = DeviceContext(self.id[0], self.id[1], self.device)
        return self._context


@dataclass(slots=True, eq=False)
class Pool:
    driver: str
    name: str
    generation: int
    slices: list[ResourceSlice] = field(default_factory=list)
    incomplete: bool = False
    invalid_reason: str = ""
    devices_by_node: dict[str, list[InventoryDevice]] = field(default_factory=dict)
    #: (all nodes?, node selector, devices) for devices that serve several nodes: a slice's
    #: ``nodeSelector``/``allNodes``, or one device's under ``perDeviceNodeSelection``
    shared: list[tuple[bool, NodeSelector | None, list[InventoryDevice]]] = field(default_factory=list)
    #: ``sharedCounters`` of the pool's counter slices: set -> counter -> value
    counter_sets: dict[str, dict[str, Decimal]] = field(default_factory=dict)
    #: some device of the pool has binding conditions (such pools are tried last: ``GatherPools``)
    binding_conditions: bool = False
    #: every device of the pool, for the counters they consume
    all_devices: list[InventoryDevice] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.driver}/{self.name}"

    def devices_for(self, node_name: str, labels: Mapping[str, str]) -> list[InventoryDevice]:
        """The pool's devices reachable from the node, in slice and device order."""
        out = list(self.devices_by_node.get(node_name, ()))
        for all_nodes, selector, devices in self.shared:
            if all_nodes or (selector is not None and node_selector_matches(selector, node_name, labels)):
                out.extend(devices)
        if self.binding_conditions:
            # slices with binding conditions after the others (GatherPools), stable otherwise
            out.sort(key=lambda d: bool(_slice_has_binding_conditions(d.slice)))
        return out


class Inventory:
    """All devices published by ResourceSlices, by pool and by node (``GatherPools`` for every node)."""

    def __init__(
        self, slices: Iterable[ResourceSlice], cel: CelCache | None = None, partitionable: bool = True
    ) -> None:
        self.cel = cel if cel is not None else CelCache()
        #: DRAPartitionableDevices: off, slices with counters or per-device node selection are
        #: skipped (``GatherPools``)
        self.partitionable = partitionable
        self._cel_answers: dict[tuple[str, bytes], bool] = {}
        self._cel_errors: dict[tuple[str, DeviceID], CelError] = {}
        newest: dict[tuple[str, str], Pool] = {}
        for slice_ in slices:
            spec = slice_.spec
            key = (spec.driver, spec.pool.name)
            pool = newest.get(key)
            if pool is None or spec.pool.generation > pool.generation:
                # addSlice: a newer generation replaces every slice of the older one
                pool = newest[key] = Pool(spec.driver, spec.pool.name, spec.pool.generation)
            elif spec.pool.generation < pool.generation:
                continue  # out-dated
            pool.slices.append(slice_)
        self.pools: list[Pool] = [newest[k] for k in sorted(newest)]
        self._pools_by_node: dict[str, list[Pool]] = {}
        self._shared_pools: list[Pool] = []
        self._node_of: dict[DeviceID, str] | None = None
        #: what users derive from the inventory and keep as long as it lives (framework/dra/freeindex.py)
        self.derived: dict[object, object] = {}
        #: some pool uses a feature beyond plain exclusive devices (the counting fast path stands aside)
        self.advanced = False
        for pool in self.pools:
            self._index(pool)
            if pool.counter_sets or any(d.device.advanced for d in pool.all_devices):
                self.advanced = True
            for node_name in pool.devices_by_node:
                self._pools_by_node.setdefault(node_name, []).append(pool)
            if pool.shared:
                self._shared_pools.append(pool)

    def devices_for(
        self, node_name: str, labels: Mapping[str, str]
    ) -> list[tuple[Pool, list[InventoryDevice]]]:
        """Each pool with devices reachable from the node, and those devices (``GatherPools``); only
        the node's own pools and the pools of shared slices are looked at."""
        candidates = {id(p): p for p in self._pools_by_node.get(node_name, ())}
        candidates.update((id(p), p) for p in self._shared_pools)
        out = [(p, p.devices_for(node_name, labels)) for p in candidates.values()]
        out = [(p, devices) for p, devices in out if devices]
        out.sort(key=lambda pd: (pd[0].binding_conditions, pd[0].driver, pd[0].name))
        return out

    @property
    def has_shared_slices(self) -> bool:
        """Whether some slice serves several nodes (``nodeSelector``, ``allNodes``)."""
        return bool(self._shared_pools)

    def node_names(self) -> list[str]:
        """The nodes with node-local devices."""
        return list(self._pools_by_node)

    def node_of(self, device_id: DeviceID) -> str | None:
        """The node of a node-local device; None for a device of a slice serving several nodes (or
        one not in the inventory). Indexed on first use."""
        if self._node_of is None:
            self._node_of = {
                d.id: node_name
                for pool in self.pools
                for node_name, devices in pool.devices_by_node.items()
                for d in devices
            }
        return self._node_of.get(device_id)

    def _index(self, pool: Pool) -> None:
        """``buildPool``: device names unique, counter sets unique and every consumed counter defined
        (else the pool is invalid), devices indexed by the node(s) they serve."""
        pool.incomplete = len(pool.slices) != pool.slices[0].spec.pool.resource_slice_count
        seen: set[str] = set()
        # device slices without binding conditions first (GatherPools orders them after the others)
        ordered = sorted(pool.slices, key=_slice_has_binding_conditions)
        for slice_ in ordered:
            spec = slice_.spec
            if not self.partitionable and (
                spec.per_device_node_selection is not None or spec.shared_counters
            ):
                # skipped (GatherPools), though counted for completeness (checkSlicesInPool)
                continue
            if spec.shared_counters:
                for counter_set in spec.shared_counters:
                    if counter_set.name in pool.counter_sets and not pool.invalid_reason:
                        pool.invalid_reason = f"duplicate counter set name {counter_set.name}"
                    pool.counter_sets[counter_set.name] = {
                        name: _quantity(c.value) for name, c in counter_set.counters.items()
                    }
                continue
            for device in spec.devices:
                if device.name in seen and not pool.invalid_reason:
                    pool.invalid_reason = f"duplicate device name {device.name}"
                seen.add(device.name)
            devices = [
                InventoryDevice((pool.driver, pool.name, d.name), d, slice_, pool=pool) for d in spec.devices
            ]
            pool.all_devices.extend(devices)
            if any(d.binding_conditions for d in spec.devices):
                pool.binding_conditions = True
            if spec.node_name:
                pool.devices_by_node.setdefault(spec.node_name, []).extend(devices)
            elif spec.all_nodes or spec.node_selector is not None:
                pool.shared.append((bool(spec.all_nodes), spec.node_selector, devices))
            elif spec.per_device_node_selection:
                for dev in devices:
                    d = dev.device
                    if d.node_name:
                        pool.devices_by_node.setdefault(d.node_name, []).append(dev)
                    elif d.all_nodes or d.node_selector is not None:
                        pool.shared.append((bool(d.all_nodes), d.node_selector, [dev]))
            # unknown future kinds of node selection: skipped (GatherPools)
        if self.partitionable and not pool.invalid_reason:
            # validateDeviceCounterConsumption
            for dev in pool.all_devices:
                for use in dev.device.consumes_counters:
                    defined = pool.counter_sets.get(use.counter_set)
                    if defined is None:
                        pool.invalid_reason = f"counter set {use.counter_set} not found"
                        break
                    missing = [n for n in use.counters if n not in defined]
                    if missing:
                        pool.invalid_reason = (
                            f"counter {missing[0]} not found in counter set {use.counter_set}"
                        )
                        break
                if pool.invalid_reason:
                    break

    def cel_matches(self, expression: str, device: InventoryDevice) -> bool | CelError:
        """One selector on one device, compiled once and answered once per device content: what the
        expression sees of a device (``cel.device_variable``: driver, attributes, capacity) decides
        the answer, so devices alike (the same model without per-device attributes) share it. An
        error is kept per device (it names the device)."""
        answer = self._cel_answers.get((expression, device.content))
        if answer is not None:
            return answer
        error = self._cel_errors.get((expression, device.id))
        if error is not None:
            return error
        got = self.cel.get(expression).matches(device.context)
        if isinstance(got, CelError):
            self._cel_errors[(expression, device.id)] = got
        else:
            self._cel_answers[(expression, device.content)] = got
        return got


# --- devices in use --------------------------------------------------------------------------------
class DeviceLedger:
    """Devices in use: by allocated claims (``allocated``), and those handed out during this cycle.

    The cycle's allocations form a stack: :meth:`mark` returns a point to come back to and
    :meth:`rollback` releases everything taken since, so a session can scope them to a statement.
    Devices of allocated claims that an eviction in the cycle would release are :meth:`free` (and
    held again by :meth:`unfree` when the eviction is undone).

    Devices that allow multiple allocations are not held by a claim: each share (a result with a
    ``shareID``) consumes capacity instead, summed per device (``consumed``, the allocated state's
    ``AggregatedCapacity`` in kube-scheduler's ``allocateddevices.go``) and by :meth:`capacity_in_use`.
    """

    def __init__(
        self,
        allocated: Iterable[DeviceID] = (),
        consumed: Mapping[DeviceID, Mapping[str, Decimal]] | None = None,
    ) -> None:
        # a set (a view's, which never changes) is read in place: the ledger never writes to it
        self._allocated: AbstractSet[DeviceID] = (
            allocated if isinstance(allocated, AbstractSet) else frozenset(allocated)
        )
        self._freed: set[DeviceID] = set()
        self._taken: dict[DeviceID, str] = {}
        self._log: list[DeviceID | _Share] = []
        self._consumed: dict[DeviceID, Consumed] = {d: dict(c) for d, c in (consumed or {}).items()}

    def in_use(self, device_id: DeviceID) -> bool:
        return (device_id in self._allocated and device_id not in self._freed) or device_id in self._taken

    def free_among(self, devices: Sequence[InventoryDevice]) -> int:
        """How many of the devices are not :meth:`in_use` (its test, inlined: a free index recounts
        a node's devices after each move)."""
        allocated, freed, taken = self._allocated, self._freed, self._taken
        used = 0
        for dev in devices:
            device_id = dev.id
            if (device_id in allocated and device_id not in freed) or device_id in taken:
                used += 1
        return len(devices) - used

    def capacity_in_use(self, device_id: DeviceID) -> Consumed | None:
        """What the shares of a device that allows multiple allocations consume (None: no share)."""
        return self._consumed.get(device_id)

    def free(self, result: AllocationResult) -> None:
        """An allocated claim is released in this cycle (the last pod reserving it is evicted): its
        devices may be handed out again."""
        for r in result.devices.results:
            device_id = (r.driver, r.pool, r.device)
            if r.share_id is not None:
                self._unshare(device_id, _parsed(r.consumed_capacity))
            elif not r.admin_access and device_id in self._allocated:
                self._freed.add(device_id)

    def unfree(self, result: AllocationResult) -> list[DeviceID]:
        """The release is undone: the claim holds its devices again. Returns the devices that a claim
        of this cycle took meanwhile (none when statements are undone newest first)."""
        clash = []
        for r in result.devices.results:
            device_id = (r.driver, r.pool, r.device)
            if r.share_id is not None:
                add_consumed(self._consumed.setdefault(device_id, {}), _parsed(r.consumed_capacity))
                continue
            if device_id in self._freed:
                self._freed.discard(device_id)
                if device_id in self._taken:
                    clash.append(device_id)
        return clash

    def _unshare(self, device_id: DeviceID, amounts: Mapping[str, Decimal]) -> None:
        held = self._consumed.get(device_id)
        if held is None:
            return
        sub_consumed(held, amounts)
        if all(v <= 0 for v in held.values()):
            del self._consumed[device_id]

    def holder(self, device_id: DeviceID) -> str | None:
        """The claim that took the device in this cycle, or None."""
        return self._taken.get(device_id)

    def take(self, result: AllocationResult, claim: str) -> None:
        """Mark a new allocation's devices in use (admin-access results use a device without owning it;
        a share consumes capacity)."""
        for r in result.devices.results:
            device_id = (r.driver, r.pool, r.device)
            if r.share_id is not None:
                share = _Share(device_id, r.share_id, _parsed(r.consumed_capacity))
                add_consumed(self._consumed.setdefault(device_id, {}), share.amounts)
                self._log.append(share)
                continue
            if r.admin_access or self.in_use(device_id):
                continue
            self._taken[device_id] = claim
            self._log.append(device_id)

    def release(self, result: AllocationResult) -> None:
        """Give back the devices ``take`` marked for this allocation (out of stack order: a claim
        whose last user in the session left)."""
        gone: set[DeviceID] = set()
        shares: set[str] = set()
        for r in result.devices.results:
            device_id = (r.driver, r.pool, r.device)
            if r.share_id is not None:
                shares.add(r.share_id)
            elif not r.admin_access and device_id in self._taken:
                del self._taken[device_id]
                gone.add(device_id)
        if shares:
            for entry in self._log:
                if isinstance(entry, _Share) and entry.share_id in shares:
                    self._unshare(entry.device_id, entry.amounts)
        if gone or shares:
            self._log = [
                e for e in self._log if not (e in gone if not isinstance(e, _Share) else e.share_id in shares)
            ]

    def in_use_among(self, devices: Mapping[DeviceID, int]) -> list[int]:
        """The values (a free index's rows) of those of ``devices`` that are in use, one per device,
        as :meth:`in_use` answers each (devices an eviction released are not). It walks the smaller
        side, the devices asked about or those the ledger holds: one lookup each, where set
        operations over the devices asked about hashed each of them three times."""
        allocated, freed, taken = self._allocated, self._freed, self._taken
        if len(devices) <= len(allocated) + len(taken):
            in_use = self.in_use
            return [row for device, row in devices.items() if in_use(device)]
        out = []
        for device in allocated:
            row = devices.get(device)
            if row is not None and device not in freed:
                out.append(row)
        for device in taken:
            row = devices.get(device)
            if row is not None and (device not in allocated or device in freed):
                out.append(row)  # (one held in both is counted once, above)
        return out

    def mark(self) -> int:
        return len(self._log)

    def rollback(self, mark: int) -> None:
        while len(self._log) > mark:
            entry = self._log.pop()
            if isinstance(entry, _Share):
                self._unshare(entry.device_id, entry.amounts)
            else:
                del self._taken[entry]


@dataclass(frozen=True, slots=True)
class _Share:
    """One share of a device that allows multiple allocations, handed out in this cycle."""

    device_id: DeviceID
    share_id: str
    amounts: Mapping[str, Decimal]


def _parsed(consumed: Mapping[str, str | int | float]) -> Consumed:
    return {name: _quantity(value) for name, value in consumed.items()}


# --- the allocation --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Features:
    """The DRA features the allocator honours (kube-scheduler's feature gates, ``internal.Features``;
    all on by default as in 1.36)."""

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    #: DRADeviceBindingConditions (with DRAResourceClaimDeviceStatus)
    device_binding: bool = True
    consumable_capacity: bool = True


@dataclass(slots=True)
class Outcome:
    """The answer for a pod's claims on one node.

    ``allocations``: one AllocationResult per claim, in the claims' order; None when they cannot all be
    allocated there, with ``reason``. ``claim_error``: the claims themselves are at fault (an unknown
    DeviceClass, a request the allocator cannot serve): no node will do. ``cel_errors``: selector
    expressions that did not compile or failed on a device (that device counted as not matching)."""

    allocations: list[AllocationResult] | None
    reason: str = ""
    claim_error: bool = False
    cel_errors: list[CelError] = field(default_factory=list)
    #: ``allocateOne`` calls the search made, and whether it stopped at the steps it was given
    steps: int = 0
    timed_out: bool = False


class _ClaimError(Exception):
    pass


class _NotHere(Exception):
    """Not on this node for now (a pool being updated or invalid), though the claims are fine."""


class _TooMany(Exception):
    """``errAllocationResultMaxSizeExceeded``: backtrack further, another subrequest may need fewer."""


class _OutOfSteps(Exception):
    """The search made as many steps as it was given (``Allocator.allocate``'s ``steps``)."""


#: The search is exhaustive, and a pod's claims can make it take factorial time: nine devices asked
#: with a ``matchAttribute`` constraint from a node of eight try every ordering of the eight
#: (109,601 ``allocateOne`` calls, 0.5 s here; a node of nine: 4.7 s). Past ``PRUNE_AFTER`` steps,
#: each request's device loop first counts the devices it could still take (free, selected, of the
#: value its ``matchAttribute`` constraints hold so far) and gives up the branch when they are fewer
#: than it still needs: a branch with no solution, so the first solution found is the one the full
#: search finds, and searches of a few steps pay nothing for it.
PRUNE_AFTER = 64
#: What the counts cannot see (several requests under one constraint, distinct attributes) can still
#: take that long. kube-scheduler bounds the search by time (``filterTimeout``, 10 s by default:
#: ``Filter`` in dynamicresources.go, which then answers "timed out trying to allocate devices" for
#: the node); Caldera by a count of steps (``allocateOne`` calls), so that an answer is the same on
#: every run: this many on one node (about 0.1 s)...
SEARCH_STEPS = 20_000
#: ...and, in a session, after this many nodes timed out for claims of one spec, the others answer
#: the same without a search (DraPart): a cluster of equal nodes would time out on every node.
CLAIM_TIMEOUTS = 5
TIMED_OUT = "timed out trying to allocate devices"


@dataclass(slots=True, eq=False)
class _Request:
    name: str  # request, or request/subrequest
    base: str
    sub: str
    device_class: DeviceClass
    class_name: str
    selectors: list[DeviceSelector]
    mode: str
    count: int
    admin: bool
    all_devices: list[InventoryDevice] | None = None
    tolerations: list[DeviceToleration] = field(default_factory=list)
    #: ``capacity.requests``, parsed (None: none named)
    capacity: dict[str, Decimal] | None = None

    @property
    def num(self) -> int:
        return len(self.all_devices) if self.all_devices is not None else self.count


class _AttributeConstraint:
    """A constraint on one attribute over the devices of the named requests (all when none named)."""

    __slots__ = ("attribute", "requests")

    def __init__(self, attribute: str, requests: Sequence[str]) -> None:
        self.attribute = attribute
        self.requests = set(requests)

    def applies(self, req: _Request) -> bool:
        return not self.requests or req.base in self.requests or (bool(req.sub) and req.name in self.requests)


class _MatchAttribute(_AttributeConstraint):
    """``matchAttributeConstraint``: every device of the named requests has the same value."""

    __slots__ = ("n", "value")

    def __init__(self, attribute: str, requests: Sequence[str]) -> None:
        super().__init__(attribute, requests)
        self.value: DeviceAttribute | None = None
        self.n = 0

    def add(self, req: _Request, dev: InventoryDevice) -> bool:
        if not self.applies(req):
            return True
        attr = lookup_attribute(dev, self.attribute)
        if attr is None:
            return False
        if self.n == 0:
            self.value, self.n = attr, 1
            return True
        if attr.value() is None or not _same_attribute(attr, self.value):
            return False
        self.n += 1
        return True

    def remove(self, req: _Request) -> None:
        if self.applies(req):
            self.n -= 1

    def admits(self, dev: InventoryDevice) -> bool:
        """Whether :meth:`add` would take the device now (for a request it applies to)."""
        attr = lookup_attribute(dev, self.attribute)
        if attr is None:
            return False
        return self.n == 0 or (attr.value() is not None and _same_attribute(attr, self.value))


class _DistinctAttribute(_AttributeConstraint):
    """``distinctAttributeConstraint`` (experimental/constraint.go): every device of the named
    requests has the attribute, each with a value no other such device has."""

    __slots__ = ("values",)

    def __init__(self, attribute: str, requests: Sequence[str]) -> None:
        super().__init__(attribute, requests)
        self.values: list[tuple[object, ...]] = []

    def add(self, req: _Request, dev: InventoryDevice) -> bool:
        if not self.applies(req):
            return True
        attr = lookup_attribute(dev, self.attribute)
        if attr is None or attr.value() is None:
            return False
        key = (attr.int_value, attr.bool_value, attr.string_value, attr.version_value)
        if key in self.values:
            return False
        self.values.append(key)
        return True

    def remove(self, req: _Request) -> None:
        if self.applies(req) and self.values:
            self.values.pop()


def _same_attribute(a: DeviceAttribute, b: DeviceAttribute | None) -> bool:
    # same type and value; versions compare as strings (semver requires their minimal form)
    return b is not None and (a.int_value, a.bool_value, a.string_value, a.version_value) == (
        b.int_value,
        b.bool_value,
        b.string_value,
        b.version_value,
    )


def lookup_attribute(dev: InventoryDevice, name: str) -> DeviceAttribute | None:
    """``lookupAttribute``: the fully qualified name, or its id when the domain is the driver's."""
    attrs = dev.device.attributes
    if name in attrs:
        return attrs[name]
    domain, sep, ident = name.partition("/")
    if not sep or domain != dev.id[0]:
        return None
    return attrs.get(ident)


@dataclass(slots=True)
class _Pick:
    """A device picked for a request in the search, and what it took."""

    req: _Request
    dev: InventoryDevice
    #: a share of a device allowing multiple allocations: what it consumes, and its shareID
    consumed: Consumed | None
    share_id: str | None
    #: the device's counters were counted as consumed
    counted: bool


@dataclass(frozen=True, slots=True)
class _Extra:
    """What a result carries beyond the device: the request's tolerations, a share, binding conditions."""

    tolerations: list[DeviceToleration]
    share_id: str | None = None
    consumed: Consumed | None = None
    binding: bool = True


class Allocator:
    """One cycle's allocator: the inventory, the classes, the devices in use, and caches over nodes."""

    def __init__(
        self,
        inventory: Inventory,
        classes: Mapping[str, DeviceClass],
        ledger: DeviceLedger,
        features: Features = Features(),
    ) -> None:
        self.inventory = inventory
        self.classes = classes
        self.ledger = ledger
        self.features = features
        self._matches: dict[tuple[int, int, int, DeviceID], bool] = {}
        self._pinned: dict[int, ResourceClaim] = {}  # keeps the id() keys of _matches unique
        self._errors: dict[tuple[str, str, str], CelError] = {}

    # public -----------------------------------------------------------------------------------------
    def allocate(
        self,
        claims: Sequence[ResourceClaim],
        node_name: str,
        node_labels: Mapping[str, str],
        steps: int | None = SEARCH_STEPS,
        seconds: float | None = None,
    ) -> Outcome:
        """Allocate all of a pod's unallocated claims together on one node (``Allocator.Allocate``),
        in at most ``steps`` steps of the search (None: no such bound) and, with ``seconds``, within
        that time (kube-scheduler's ``filterTimeout``, checked every 256 steps): beyond, no
        allocation, with the request that lacks devices there if one does, else ``TIMED_OUT``."""
        self._errors = {}
        search = _Search(
            self, list(claims), node_name, node_labels, sys.maxsize if steps is None else steps, seconds
        )
        try:
            done = search.run()
        except _ClaimError as exc:
            return Outcome(
                None, str(exc), claim_error=True, cel_errors=list(self._errors.values()), steps=search.steps
            )
        except _NotHere as exc:
            return Outcome(None, str(exc), cel_errors=list(self._errors.values()), steps=search.steps)
        except _OutOfSteps:
            reason = search.lacking() or TIMED_OUT
            errors = list(self._errors.values())
            return Outcome(None, reason, cel_errors=errors, steps=search.steps, timed_out=True)
        if not done:
            return Outcome(None, search.why_not(), cel_errors=list(self._errors.values()), steps=search.steps)
        return Outcome(search.results(), cel_errors=list(self._errors.values()), steps=search.steps)

    # used by the search -----------------------------------------------------------------------------
    def selectable(
        self, claim: ResourceClaim, key: tuple[int, int], req: _Request, dev: InventoryDevice
    ) -> bool:
        """``isSelectable``: the class's selectors, then the request's; cached across nodes."""
        if dev.device.binding_conditions and not self.features.device_binding:
            return False
        mkey = (id(claim), key[0], key[1], dev.id)
        answer = self._matches.get(mkey)
        if answer is None:
            self._pinned[id(claim)] = claim
            answer = self._matches[mkey] = self._all_match(
                req.device_class.spec.selectors, dev
            ) and self._all_match(req.selectors, dev)
        return answer

    def _all_match(self, selectors: Sequence[DeviceSelector], dev: InventoryDevice) -> bool:
        for selector in selectors:
            assert selector.cel is not None  # validated before the search
            answer = self.inventory.cel_matches(selector.cel.expression, dev)
            if isinstance(answer, CelError):
                self._errors.setdefault((answer.expression, answer.kind, answer.message), answer)
                return False
            if not answer:
                return False
        return True

    def record_compile_errors(self, selectors: Sequence[DeviceSelector]) -> None:
        for selector in selectors:
            if selector.cel is not None:
                err = self.inventory.cel.get(selector.cel.expression).error
                if err is not None:
                    self._errors.setdefault((err.expression, err.kind, err.message), err)


class _Search:
    """One ``Allocate`` call: validation (``validateDeviceRequest``) and ``allocateOne``'s search."""

    def __init__(
        self,
        owner: Allocator,
        claims: list[ResourceClaim],
        node_name: str,
        node_labels: Mapping[str, str],
        steps: int = SEARCH_STEPS,
        seconds: float | None = None,
    ) -> None:
        self.owner = owner
        self.claims = claims
        #: ``allocateOne`` calls made, how many are allowed, and until when (monotonic clock)
        self.steps = 0
        self.max_steps = steps
        self.deadline = time.monotonic() + seconds if seconds else None
        self.node_name = node_name
        self.node_devices = owner.inventory.devices_for(node_name, node_labels)
        # per claim, per request: the alternatives (one for `exactly`, the subrequests for firstAvailable)
        self.requests: list[list[list[_Request]]] = []
        self.constraints: list[list[_MatchAttribute | _DistinctAttribute]] = []
        self.selected_sub: dict[tuple[int, int], int] = {}
        self.allocating: dict[DeviceID, set[int]] = {}
        self.picked: list[list[_Pick]] = [[] for _ in claims]
        #: capacity consumed by the shares picked in this search (``allocatingCapacity``)
        self.allocating_capacity: dict[DeviceID, Consumed] = {}
        #: counters consumed by the devices picked in this search, per pool and set (``consumedCounters``)
        self.consumed_counters: dict[int, dict[str, dict[str, Decimal]]] = {}
        #: counters available per pool: its counter sets less what allocated devices consume
        self.available_counters: dict[int, dict[str, dict[str, Decimal]]] = {}

    # validation -------------------------------------------------------------------------------------
    def run(self) -> bool:
        for ci, claim in enumerate(self.claims):
            self.requests.append(self._claim_requests(ci, claim))
            self.constraints.append(self._claim_constraints(claim))
        if not self.claims:
            return True
        return self._one(0, 0, 0, 0, False)

    def _claim_requests(self, ci: int, claim: ResourceClaim) -> list[list[_Request]]:
        out: list[list[_Request]] = []
        min_devices = 0
        for ri, request in enumerate(claim.spec.devices.requests):
            if not self.owner.features.consumable_capacity:
                # Allocate: capacity requests need DRAConsumableCapacity
                if request.exactly is not None and request.exactly.capacity is not None:
                    raise _ClaimError(
                        f"claim {_name(claim)}, request {request.name}: has capacity requests, "
                        "but the DRAConsumableCapacity feature is disabled"
                    )
                for sub in request.first_available:
                    if sub.capacity is not None:
                        raise _ClaimError(
                            f"claim {_name(claim)}, subrequest {sub.name}: has capacity requests, "
                            "but the DRAConsumableCapacity feature is disabled"
                        )
            if request.first_available:
                if not self.owner.features.prioritized_list:
                    raise _ClaimError(
                        f"claim {_name(claim)}, request {request.name}: has subrequests, "
                        "but the DRAPrioritizedList feature is disabled"
                    )
                alts = [
                    self._request(
                        (ri, si),
                        claim,
                        f"{request.name}/{sub.name}",
                        request.name,
                        sub.name,
                        sub.device_class_name,
                        sub.selectors,
                        sub.allocation_mode,
                        sub.count,
                        None,
                        sub.tolerations,
                        sub.capacity.requests if sub.capacity is not None else None,
                    )
                    for si, sub in enumerate(request.first_available)
                ]
                min_devices += min(a.num for a in alts)
            elif request.exactly is not None:
                ex = request.exactly
                alts = [
                    self._request(
                        (ri, 0),
                        claim,
                        request.name,
                        request.name,
                        "",
                        ex.device_class_name,
                        ex.selectors,
                        ex.allocation_mode,
                        ex.count,
                        ex.admin_access,
                        ex.tolerations,
                        ex.capacity.requests if ex.capacity is not None else None,
                    )
                ]
                min_devices += alts[0].num
            else:
                raise _ClaimError(
                    f"claim {_name(claim)}, request {request.name}: neither exactly nor firstAvailable "
                    "(unsupported request type?)"
                )
            out.append(alts)
        if min_devices > ALLOCATION_RESULTS_MAX_SIZE:
            raise _ClaimError(
                f"claim {_name(claim)}: number of requested devices {min_devices} exceeds the claim limit "
                f"of {ALLOCATION_RESULTS_MAX_SIZE}"
            )
        return out

    def _request(
        self,
        key: tuple[int, int],
        claim: ResourceClaim,
        name: str,
        base: str,
        sub: str,
        class_name: str,
        selectors: list[DeviceSelector],
        mode: str,
        count: int,
        admin_access: bool | None,
        tolerations: list[DeviceToleration],
        capacity: Mapping[str, str | int | float] | None,
    ) -> _Request:
        where = f"claim {_name(claim)}, request {name}"
        for i, selector in enumerate(selectors):
            if selector.cel is None:
                raise _ClaimError(
                    f"{where}, selector #{i}: CEL expression empty (unsupported selector type?)"
                )
        if admin_access is not None and not self.owner.features.admin_access:
            raise _ClaimError(f"{where}: admin access is requested, but the feature is disabled")
        if not class_name:
            raise _ClaimError(f"{where}: missing device class name (unsupported request type?)")
        device_class = self.owner.classes.get(class_name)
        if device_class is None:
            raise _ClaimError(f"{where}: could not retrieve device class {class_name}: not found")
        for i, selector in enumerate(device_class.spec.selectors):
            if selector.cel is None:
                raise _ClaimError(
                    f"class {class_name}, selector #{i}: CEL expression empty (unsupported selector type?)"
                )
        self.owner.record_compile_errors(device_class.spec.selectors)
        self.owner.record_compile_errors(selectors)
        req = _Request(
            name,
            base,
            sub,
            device_class,
            class_name,
            selectors,
            mode,
            count,
            bool(admin_access),
            tolerations=list(tolerations),
            capacity=request_amounts(capacity),
        )
        if mode == EXACT_COUNT:
            return req
        if mode != ALL:
            raise _ClaimError(f"{where}: unsupported count mode {mode}")
        # "All": which devices is known up front; an incomplete or invalid pool means not now.
        req.all_devices = []
        for pool, devices in self.node_devices:
            if pool.incomplete:
                raise _NotHere(
                    f"{where}: asks for all devices, but resource pool {pool.label} is currently being updated"
                )
            if pool.invalid_reason:
                raise _NotHere(
                    f"{where}: asks for all devices, but resource pool {pool.label} is currently invalid"
                )
            req.all_devices.extend(
                d
                for d in devices
                if self.owner.selectable(claim, key, req, d) and self._capacity_fits(req, d)
            )
        return req

    def _claim_constraints(self, claim: ResourceClaim) -> list[_MatchAttribute | _DistinctAttribute]:
        out: list[_MatchAttribute | _DistinctAttribute] = []
        for i, constraint in enumerate(claim.spec.devices.constraints):
            if constraint.match_attribute is not None:
                out.append(_MatchAttribute(constraint.match_attribute, constraint.requests))
            elif constraint.distinct_attribute is not None:
                out.append(_DistinctAttribute(constraint.distinct_attribute, constraint.requests))
            else:
                raise _ClaimError(
                    f"claim {_name(claim)}, constraint #{i}: empty constraint (unsupported constraint type?)"
                )
        return out

    # the search -------------------------------------------------------------------------------------
    def _in_use(self, device_id: DeviceID) -> bool:
        return self.owner.ledger.in_use(device_id) or bool(self.allocating.get(device_id))

    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool) -> bool:
        if self.steps >= self.max_steps:
            raise _OutOfSteps
        self.steps += 1
        if self.deadline is not None and not self.steps & 255 and time.monotonic() > self.deadline:
            raise _OutOfSteps
        if ci >= len(self.claims):
            return True
        claim_reqs = self.requests[ci]
        if ri >= len(claim_reqs):
            try:
                return self._one(ci + 1, 0, 0, 0, False)
            except _TooMany:
                return False
        alts = claim_reqs[ri]
        if not in_sub and self.claims[ci].spec.devices.requests[ri].first_available:
            all_too_many = True
            for sub_index in range(len(alts)):
                try:
                    ok = self._one(ci, ri, sub_index, di, True)
                except _TooMany:
                    continue
                all_too_many = False
                if ok:
                    self.selected_sub[(ci, ri)] = sub_index
                    return True
            if all_too_many:
                raise _TooMany
            return False
        req = alts[si]
        if req.all_devices is not None and not req.all_devices:
            return False
        if di >= req.num:
            return self._one(ci, ri + 1, 0, 0, False)
        if len(self.picked[ci]) + req.num - di > ALLOCATION_RESULTS_MAX_SIZE:
            raise _TooMany
        if req.all_devices is not None:
            dev = req.all_devices[di]
            if not self._take(ci, req, dev, must=True):
                return False
            try:
                ok = self._one(ci, ri, si, di + 1, in_sub)
            except _TooMany:
                self._release(ci, req, dev)
                raise
            if not ok:
                self._release(ci, req, dev)
            return ok
        if self.steps > PRUNE_AFTER and self._too_few(ci, ri, si, req, req.num - di):
            return False
        for dev in self._open_to(ci, ri, si, req):
            if not self._capacity_fits(req, dev):
                continue
            if not self._take(ci, req, dev, must=False):
                continue
            try:
                ok = self._one(ci, ri, si, di + 1, in_sub)
            except _TooMany:
                self._release(ci, req, dev)
                raise
            if ok:
                return True
            self._release(ci, req, dev)
        return False

    def _open_to(self, ci: int, ri: int, si: int, req: _Request) -> Iterator[InventoryDevice]:
        """The node's devices, in the allocator's order, that the request may still take: free (for
        admin access, not taken for this claim already) and selected by its class and its own."""
        claim = self.claims[ci]
        selectable = self.owner.selectable
        for pool, devices in self.node_devices:
            if pool.incomplete or pool.invalid_reason:
                continue
            for dev in devices:
                if req.admin:
                    if ci in self.allocating.get(dev.id, ()):
                        continue
                elif self._in_use(dev.id):
                    continue
                if selectable(claim, (ri, si), req, dev):
                    yield dev

    def _too_few(self, ci: int, ri: int, si: int, req: _Request, need: int) -> bool:
        """Whether fewer than ``need`` devices the request may still take (``_open_to``) are of the
        value each ``matchAttribute`` constraint on the request holds so far: the device loop takes
        each at most once, so the branch has no solution (``PRUNE_AFTER``)."""
        held = [c for c in self.constraints[ci] if isinstance(c, _MatchAttribute) and c.applies(req)]
        found = 0
        for dev in self._open_to(ci, ri, si, req):
            if any(not c.admits(dev) for c in held):
                continue
            found += 1
            if found >= need:
                return any(self._group_too_few(ci, ri, si, req, need, c) for c in held)
        return True

    def _group_too_few(
        self, ci: int, ri: int, si: int, req: _Request, need: int, held: _MatchAttribute
    ) -> bool:
        """Whether this request and the later requests of the claim under ``held`` cannot all get their
        devices (each at least its fewest alternative's, 0 for an alternative the constraint spares):
        they need as many distinct devices of one value of the attribute (the value held, once
        there is one), each selected by one of them. Not asked when one of them has admin access
        (which may take devices in use) or when the claim's results could grow past their most."""
        later: list[tuple[int, list[_Request]]] = []
        extra = 0
        most = len(self.picked[ci]) + need
        for rj in range(ri + 1, len(self.requests[ci])):
            alts = self.requests[ci][rj]
            most += max(a.num for a in alts)
            fewest = min(a.num if held.applies(a) else 0 for a in alts)
            if fewest:
                if any(a.admin for a in alts):
                    return False
                later.append((rj, alts))
                extra += fewest
        if not extra or req.admin or most > ALLOCATION_RESULTS_MAX_SIZE:
            # (past the size a result may have, a later request stops the search otherwise:
            # ``errAllocationResultMaxSizeExceeded``, left to the search itself)
            return False
        claim = self.claims[ci]
        total = need + extra
        by_value: dict[tuple[object, ...], int] = {}
        for pool, devices in self.node_devices:
            if pool.incomplete or pool.invalid_reason:
                continue
            for dev in devices:
                if self._in_use(dev.id) or not held.admits(dev):
                    continue
                if not self.owner.selectable(claim, (ri, si), req, dev) and not any(
                    self.owner.selectable(claim, (rj, sj), a, dev)
                    for rj, alts in later
                    for sj, a in enumerate(alts)
                ):
                    continue
                attr = lookup_attribute(dev, held.attribute)
                assert attr is not None  # (admits)
                key = (attr.int_value, attr.bool_value, attr.string_value, attr.version_value)
                by_value[key] = by_value.get(key, 0) + 1
                if by_value[key] >= total:
                    return False
        return True

    def _shared(self, dev: InventoryDevice) -> bool:
        return self.owner.features.consumable_capacity and dev.shareable

    def _capacity_fits(self, req: _Request, dev: InventoryDevice) -> bool:
        """``CmpRequestOverCapacity`` with the feature on: the request's capacity fits what the device
        has left (a request naming a capacity the device lacks: the device is skipped)."""
        if not self.owner.features.consumable_capacity:
            return True
        if req.capacity is None and not dev.device.capacity:
            return True
        try:
            return fits_capacity(
                self.owner.ledger.capacity_in_use(dev.id),
                req.capacity,
                dev.device.capacity,
                self.allocating_capacity.get(dev.id),
            )
        except CapacityError:
            return False

    def _take(self, ci: int, req: _Request, dev: InventoryDevice, must: bool) -> bool:
        """``allocateDevice``: availability, counters, taints, then the claim's constraints, then
        capacity; recorded when all pass."""
        shared = self._shared(dev)
        if req.admin:
            if not shared and ci in self.allocating.get(dev.id, ()):
                return False
        elif self._in_use(dev.id):
            return False
        features = self.owner.features
        consumes = dev.device.consumes_counters
        if consumes and not features.partitionable_devices:
            return False
        counted = False
        if consumes and not (shared and self._capacity_in_use(dev.id)):
            if not self._take_counters(dev):
                return False
            counted = True
        if features.device_taints and taint_prevents_allocation(dev.device, req.tolerations):
            if counted:
                self._give_counters(dev)
            return False
        constraints = self.constraints[ci]
        for i, constraint in enumerate(constraints):
            if not constraint.add(req, dev):
                if must:
                    raise _ClaimError(
                        f"claim {_name(self.claims[ci])}, request {req.name}: cannot add device "
                        f"{device_label(dev.id)} because a claim constraint would not be satisfied"
                    )
                for earlier in constraints[:i]:
                    earlier.remove(req)
                if counted:
                    self._give_counters(dev)
                return False
        consumed: Consumed | None = None
        share_id: str | None = None
        if features.consumable_capacity:
            if not self._capacity_fits(req, dev):
                for constraint in constraints:
                    constraint.remove(req)
                if counted:
                    self._give_counters(dev)
                return False
            if shared:
                consumed = consumed_from_request(req.capacity, dev.device.capacity)
                share_id = str(uuid.uuid4())
                add_consumed(self.allocating_capacity.setdefault(dev.id, {}), consumed)
        if not shared:
            self.allocating.setdefault(dev.id, set()).add(ci)
        self.picked[ci].append(_Pick(req, dev, consumed, share_id, counted))
        return True

    def _release(self, ci: int, req: _Request, dev: InventoryDevice) -> None:
        for constraint in self.constraints[ci]:
            constraint.remove(req)
        pick = self.picked[ci].pop()
        if pick.consumed is not None:
            sub_consumed(self.allocating_capacity[dev.id], pick.consumed)
            if all(v <= 0 for v in self.allocating_capacity[dev.id].values()):
                del self.allocating_capacity[dev.id]
        else:
            self.allocating[dev.id].discard(ci)
        if pick.counted:
            self._give_counters(dev)

    def _capacity_in_use(self, device_id: DeviceID) -> bool:
        """``deviceCapacityInUse``: some share of the device is allocated or being allocated."""
        return (
            self.owner.ledger.capacity_in_use(device_id) is not None or device_id in self.allocating_capacity
        )

    def _available(self, pool: Pool) -> dict[str, dict[str, Decimal]]:
        """The pool's counters less what its allocated (dedicated) devices consume; computed once
        per search (``checkAvailableCounters``)."""
        got = self.available_counters.get(id(pool))
        if got is None:
            got = {name: dict(counters) for name, counters in pool.counter_sets.items()}
            in_use = self.owner.ledger.in_use
            for d in pool.all_devices:
                if d.device.consumes_counters and in_use(d.id):
                    for use in d.device.consumes_counters:
                        counters = got.get(use.counter_set, {})
                        for name, c in use.counters.items():
                            if name in counters:
                                counters[name] -= _quantity(c.value)
            self.available_counters[id(pool)] = got
        return got

    def _take_counters(self, dev: InventoryDevice) -> bool:
        pool = dev.pool
        if pool is None:
            return False
        available = self._available(pool)
        consumed = self.consumed_counters.setdefault(id(pool), {})
        for use in dev.device.consumes_counters:
            into = consumed.setdefault(use.counter_set, {})
            for name, c in use.counters.items():
                into[name] = into.get(name, Decimal(0)) + _quantity(c.value)
        for set_name, counters in available.items():
            used = consumed.get(set_name, {})
            for name, value in counters.items():
                if value < used.get(name, Decimal(0)):
                    self._give_counters(dev)
                    return False
        return True

    def _give_counters(self, dev: InventoryDevice) -> None:
        """``deallocateCountersForDevice``."""
        if dev.pool is None:
            return
        consumed = self.consumed_counters.get(id(dev.pool), {})
        for use in dev.device.consumes_counters:
            into = consumed.get(use.counter_set, {})
            for name, c in use.counters.items():
                into[name] = into.get(name, Decimal(0)) - _quantity(c.value)

    # answers ----------------------------------------------------------------------------------------
    def results(self) -> list[AllocationResult]:
        binding = self.owner.features.device_binding
        return [
            allocation_of(
                [(p.req.name, p.req.admin, p.dev) for p in picked],
                self.node_name,
                extras=[_Extra(p.req.tolerations, p.share_id, p.consumed, binding) for p in picked],
                config=allocation_config(claim, self._chosen(ci)),
            )
            for ci, (claim, picked) in enumerate(zip(self.claims, self.picked, strict=True))
        ]

    def _chosen(self, ci: int) -> list[tuple[str, DeviceClass | None]]:
        """Per request of the claim, in order: its name in the results (``request/subrequest`` for the
        subrequest picked) and the class it used."""
        out: list[tuple[str, DeviceClass | None]] = []
        for ri, alts in enumerate(self.requests[ci]):
            req = alts[self.selected_sub.get((ci, ri), 0)] if len(alts) > 1 else alts[0]
            out.append((req.name, req.device_class))
        return out

    def why_not(self) -> str:
        """The first request that lacks free devices on the node, counted; else the constraints."""
        return self.lacking() or (
            f"claims {', '.join(_name(c) for c in self.claims)}: devices exist but not in a combination that satisfies the requests and constraints"
            + pool_trouble(self.node_devices)
        )

    def lacking(self) -> str:
        """The first request that lacks free devices on the node, counted ("" when none does)."""
        for ci, claim in enumerate(self.claims):
            for ri, alts in enumerate(self.requests[ci]):
                req = alts[-1] if len(alts) > 1 else alts[0]
                si = len(alts) - 1 if len(alts) > 1 else 0
                matching = [
                    d
                    for pool, devices in self.node_devices
                    if not pool.incomplete and not pool.invalid_reason
                    for d in devices
                    if self.owner.selectable(claim, (ri, si), req, d)
                ]
                in_use = sum(1 for d in matching if self.owner.ledger.in_use(d.id))
                if req.admin:
                    in_use = 0
                if len(matching) - in_use < max(req.num, 1):
                    return no_free_device(
                        req.class_name, _name(claim), req.name, len(matching), in_use
                    ) + pool_trouble(self.node_devices)
        return ""


def no_free_device(class_name: str, claim: str, request: str, matching: int, in_use: int) -> str:
    """Why a request finds too few devices on a node: how many match, how many of those are in use."""
    return (
        f"no free device of class {class_name} for claim {claim} request {request}: "
        f"{matching} devices, {in_use} allocated"
    )


def pool_trouble(node_devices: Iterable[tuple[Pool, object]]) -> str:
    """The first pool of a node's that is invalid or being updated, said after a reason ("" if none)."""
    for pool, _ in node_devices:
        if pool.invalid_reason:
            return f" (invalid resource pools were encountered: {pool.label}: {pool.invalid_reason})"
        if pool.incomplete:
            return f" (resource pool {pool.label} is incomplete: being updated)"
    return ""


def allocation_config(
    claim: ResourceClaim, chosen: Sequence[tuple[str, DeviceClass | None]]
) -> list[DeviceAllocationConfiguration]:
    """The configurations the allocation result carries for the drivers (``Allocate``'s "Populate
    configs", ``allocator_experimental.go``). ``chosen``: per request of the claim, in order, the name
    its results carry (``request/subrequest`` for a ``firstAvailable`` request) and the class it used.
    A class's configurations come once, in the order the requests first use the class, each naming
    every request that used it; then each configuration of the claim: once when it names no request
    (it is for all of them), else once per request it names, by the request's or the picked
    subrequest's name, each time with the requests it names."""
    devices = claim.spec.devices
    if not devices.config and not any(c is not None and c.spec.config for _, c in chosen):
        return []
    out: list[DeviceAllocationConfiguration] = []
    by_class: dict[str, range] = {}
    for name, device_class in chosen:
        if device_class is None:
            continue
        at = by_class.get(device_class.metadata.name)
        if at is not None:
            for i in at:
                out[i].requests.append(name)  # (a list of this result's own)
            continue
        start = len(out)
        out += [
            DeviceAllocationConfiguration(source=FROM_CLASS, requests=[name], opaque=config.opaque)
            for config in device_class.spec.config
        ]
        by_class[device_class.metadata.name] = range(start, len(out))
    for config in devices.config:
        if not config.requests:
            out.append(DeviceAllocationConfiguration(source=FROM_CLAIM, opaque=config.opaque))
            continue
        for request, (name, _) in zip(devices.requests, chosen, strict=True):
            if request.name in config.requests or (request.first_available and name in config.requests):
                out.append(
                    DeviceAllocationConfiguration(
                        source=FROM_CLAIM, requests=list(config.requests), opaque=config.opaque
                    )
                )
    return out


def allocation_of(
    picked: Sequence[tuple[str, bool, InventoryDevice]],
    node_name: str = "",
    extras: Sequence[_Extra] | None = None,
    config: list[DeviceAllocationConfiguration] | None = None,
) -> AllocationResult:
    """One claim's allocation result from its (request, admin access, device) picks, in order; with
    ``extras``, each result also carries the request's tolerations, the binding conditions of the
    device and, for a share, its shareID and consumed capacity (``Allocate``'s result loop);
    ``config``: what :func:`allocation_config` found for the claim."""
    results = []
    for i, (request, admin, dev) in enumerate(picked):
        extra = extras[i] if extras is not None else None
        driver, pool, device = dev.id
        what: dict[str, Any] = {
            "request": request,
            "driver": driver,
            "pool": pool,
            "device": device,
            "admin_access": True if admin else None,
        }
        if extra is not None:
            binding = extra.binding
            what.update(
                tolerations=list(extra.tolerations),
                binding_conditions=list(dev.device.binding_conditions) if binding else [],
                binding_failure_conditions=list(dev.device.binding_failure_conditions) if binding else [],
                share_id=extra.share_id,
                consumed_capacity={k: quantity_text(v) for k, v in (extra.consumed or {}).items()},
            )
        results.append(DeviceRequestAllocationResult(**what))
    return AllocationResult(
        devices=DeviceAllocationResult(results=results, config=config or []),
        node_selector=_node_selector([dev for _, _, dev in picked], node_name),
    )


def _name(claim: ResourceClaim) -> str:
    meta = claim.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


def _node_selector(devices: Sequence[InventoryDevice], node_name: str = "") -> NodeSelector | None:
    """``createNodeSelector``: a node-local device (its slice's node, or its own under
    ``perDeviceNodeSelection``) or one that ``bindsToNode`` pins the claim to the node allocated on;
    otherwise the union of the one-term selectors; None when every device is reachable from
    everywhere."""
    expressions: list[NodeSelectorRequirement] = []
    fields: list[NodeSelectorRequirement] = []
    for dev in devices:
        local = dev.node_name
        if local or dev.device.binds_to_node:
            return NodeSelector(
                node_selector_terms=[
                    NodeSelectorTerm(
                        match_fields=[
                            NodeSelectorRequirement(
                                key="metadata.name", operator="In", values=[node_name or local or ""]
                            )
                        ]
                    )
                ]
            )
        selector = dev.node_selector
        if selector is not None and len(selector.node_selector_terms) == 1:
            term = selector.node_selector_terms[0]
            _add_new(term.match_fields, fields)
            _add_new(term.match_expressions, expressions)
    if not expressions and not fields:
        return None
    return NodeSelector(
        node_selector_terms=[NodeSelectorTerm(match_expressions=expressions, match_fields=fields)]
    )


def _add_new(source: Iterable[NodeSelectorRequirement], into: list[NodeSelectorRequirement]) -> None:
    for req in source:
        if not any(
            r.key == req.key and r.operator == req.operator and set(r.values) == set(req.values) for r in into
        ):
            into.append(req)
