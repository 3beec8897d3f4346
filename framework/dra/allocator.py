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

Not yet supported (their slices or devices are skipped, as an allocator with those features off does):
partitionable devices (``sharedCounters``/``consumesCounters``, ``perDeviceNodeSelection``), device
taints and tolerations, binding conditions, consumable capacity, and the device configuration copied
into the allocation result (``devices.config``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

import msgspec

from caldera.framework.dra.cel import CelCache, CelError, DeviceContext
from caldera.framework.dra.objects import (
    ALL,
    ALLOCATION_RESULTS_MAX_SIZE,
    EXACT_COUNT,
    AllocationResult,
    Device,
    DeviceAllocationResult,
    DeviceAttribute,
    DeviceClass,
    DeviceRequestAllocationResult,
    DeviceSelector,
    ResourceClaim,
    ResourceSlice,
)
from caldera.framework.objects import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm

DeviceID = tuple[str, str, str]  # driver, pool, device
_content_encoder = msgspec.json.Encoder()


def device_label(device_id: DeviceID) -> str:
    return "/".join(device_id)


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

    @property
    def content(self) -> bytes:
        """What a CEL expression sees of the device, encoded: its driver, attributes and capacity."""
        if not self._content:
            self._content = _content_encoder.encode(
                (self.id[0], self.device.attributes, self.device.capacity)
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
    #: (slice, its devices) for slices that serve several nodes (nodeSelector, allNodes)
    shared: list[tuple[ResourceSlice, list[InventoryDevice]]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.driver}/{self.name}"

    def devices_for(self, node_name: str, labels: Mapping[str, str]) -> list[InventoryDevice]:
        """The pool's devices reachable from the node, in slice and device order."""
        out = list(self.devices_by_node.get(node_name, ()))
        for slice_, devices in self.shared:
            spec = slice_.spec
            if spec.all_nodes or (
                spec.node_selector is not None
                and node_selector_matches(spec.node_selector, node_name, labels)
            ):
                out.extend(devices)
        return out


class Inventory:
    """All devices published by ResourceSlices, by pool and by node (``GatherPools`` for every node)."""

    def __init__(self, slices: Iterable[ResourceSlice], cel: CelCache | None = None) -> None:
        self.cel = cel if cel is not None else CelCache()
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
        for pool in self.pools:
            self._index(pool)
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
        out.sort(key=lambda pd: (pd[0].driver, pd[0].name))
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

    @staticmethod
    def _index(pool: Pool) -> None:
        pool.incomplete = len(pool.slices) != pool.slices[0].spec.pool.resource_slice_count
        seen: set[str] = set()
        for slice_ in pool.slices:
            for device in slice_.spec.devices:
                if device.name in seen and not pool.invalid_reason:
                    pool.invalid_reason = f"duplicate device name {device.name}"
                seen.add(device.name)
            spec = slice_.spec
            devices = [InventoryDevice((pool.driver, pool.name, d.name), d, slice_) for d in spec.devices]
            if spec.node_name:
                pool.devices_by_node.setdefault(spec.node_name, []).extend(devices)
            elif spec.all_nodes or spec.node_selector is not None:
                pool.shared.append((slice_, devices))
            # perDeviceNodeSelection (partitionable devices) and unknown future kinds: skipped

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
    """

    def __init__(self, allocated: Iterable[DeviceID] = ()) -> None:
        self._allocated = set(allocated)
        self._freed: set[DeviceID] = set()
        self._taken: dict[DeviceID, str] = {}
        self._log: list[DeviceID] = []

    def in_use(self, device_id: DeviceID) -> bool:
        return (device_id in self._allocated and device_id not in self._freed) or device_id in self._taken

    def free(self, result: AllocationResult) -> None:
        """An allocated claim is released in this cycle (the last pod reserving it is evicted): its
        devices may be handed out again."""
        for r in result.devices.results:
            device_id = (r.driver, r.pool, r.device)
            if not r.admin_access and device_id in self._allocated:
                self._freed.add(device_id)

    def unfree(self, result: AllocationResult) -> list[DeviceID]:
        """The release is undone: the claim holds its devices again. Returns the devices that a claim
        of this cycle took meanwhile (none when statements are undone newest first)."""
        clash = []
        for r in result.devices.results:
            device_id = (r.driver, r.pool, r.device)
            if device_id in self._freed:
                self._freed.discard(device_id)
                if device_id in self._taken:
                    clash.append(device_id)
        return clash

    def holder(self, device_id: DeviceID) -> str | None:
        """The claim that took the device in this cycle, or None."""
        return self._taken.get(device_id)

    def take(self, result: AllocationResult, claim: str) -> None:
        """Mark a new allocation's devices in use (admin-access results use a device without owning it)."""
        for r in result.devices.results:
            device_id = (r.driver, r.pool, r.device)
            if r.admin_access or self.in_use(device_id):
                continue
            self._taken[device_id] = claim
            self._log.append(device_id)

    def release(self, result: AllocationResult) -> None:
        """Give back the devices ``take`` marked for this allocation (out of stack order: a claim
        whose last user in the session left)."""
        gone = set()
        for r in result.devices.results:
            device_id = (r.driver, r.pool, r.device)
            if not r.admin_access and device_id in self._taken:
                del self._taken[device_id]
                gone.add(device_id)
        if gone:
            self._log = [d for d in self._log if d not in gone]

    def in_use_of(self, devices: AbstractSet[DeviceID]) -> AbstractSet[DeviceID]:
        """Those of the devices that are in use (set operations: no loop over them in Python): as
        :meth:`in_use` answers each, so devices an eviction released (``free``) are not."""
        allocated = devices & self._allocated
        if self._freed:
            allocated -= self._freed
        return allocated | (devices & self._taken.keys())

    def mark(self) -> int:
        return len(self._log)

    def rollback(self, mark: int) -> None:
        while len(self._log) > mark:
            del self._taken[self._log.pop()]


# --- the allocation --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Features:
    """The DRA features the allocator honours (kube-scheduler's feature gates; both on by default)."""

    admin_access: bool = True
    prioritized_list: bool = True


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


class _ClaimError(Exception):
    pass


class _NotHere(Exception):
    """Not on this node for now (a pool being updated or invalid), though the claims are fine."""


class _TooMany(Exception):
    """``errAllocationResultMaxSizeExceeded``: backtrack further, another subrequest may need fewer."""


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

    @property
    def num(self) -> int:
        return len(self.all_devices) if self.all_devices is not None else self.count


class _MatchAttribute:
    """``matchAttributeConstraint``: every device of the named requests has the same value."""

    __slots__ = ("attribute", "n", "requests", "value")

    def __init__(self, attribute: str, requests: Sequence[str]) -> None:
        self.attribute = attribute
        self.requests = set(requests)
        self.value: DeviceAttribute | None = None
        self.n = 0

    def applies(self, req: _Request) -> bool:
        return not self.requests or req.base in self.requests or (bool(req.sub) and req.name in self.requests)

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
        self, claims: Sequence[ResourceClaim], node_name: str, node_labels: Mapping[str, str]
    ) -> Outcome:
        """Allocate all of a pod's unallocated claims together on one node (``Allocator.Allocate``)."""
        self._errors = {}
        search = _Search(self, list(claims), node_name, node_labels)
        try:
            done = search.run()
        except _ClaimError as exc:
            return Outcome(None, str(exc), claim_error=True, cel_errors=list(self._errors.values()))
        except _NotHere as exc:
            return Outcome(None, str(exc), cel_errors=list(self._errors.values()))
        if not done:
            return Outcome(None, search.why_not(), cel_errors=list(self._errors.values()))
        return Outcome(search.results(), cel_errors=list(self._errors.values()))

    # used by the search -----------------------------------------------------------------------------
    def selectable(
        self, claim: ResourceClaim, key: tuple[int, int], req: _Request, dev: InventoryDevice
    ) -> bool:
        """``isSelectable``: the class's selectors, then the request's; cached across nodes."""
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
        self, owner: Allocator, claims: list[ResourceClaim], node_name: str, node_labels: Mapping[str, str]
    ) -> None:
        self.owner = owner
        self.claims = claims
        self.node_name = node_name
        self.node_devices = owner.inventory.devices_for(node_name, node_labels)
        # per claim, per request: the alternatives (one for `exactly`, the subrequests for firstAvailable)
        self.requests: list[list[list[_Request]]] = []
        self.constraints: list[list[_MatchAttribute]] = []
        self.selected_sub: dict[tuple[int, int], int] = {}
        self.allocating: dict[DeviceID, set[int]] = {}
        self.picked: list[list[tuple[_Request, InventoryDevice]]] = [[] for _ in claims]

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
        req = _Request(name, base, sub, device_class, class_name, selectors, mode, count, bool(admin_access))
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
            req.all_devices.extend(d for d in devices if self.owner.selectable(claim, key, req, d))
        return req

    def _claim_constraints(self, claim: ResourceClaim) -> list[_MatchAttribute]:
        out = []
        for i, constraint in enumerate(claim.spec.devices.constraints):
            if constraint.match_attribute is None:
                raise _ClaimError(
                    f"claim {_name(claim)}, constraint #{i}: empty constraint (unsupported constraint type?)"
                )
            out.append(_MatchAttribute(constraint.match_attribute, constraint.requests))
        return out

    # the search -------------------------------------------------------------------------------------
    def _in_use(self, device_id: DeviceID) -> bool:
        return self.owner.ledger.in_use(device_id) or bool(self.allocating.get(device_id))

    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool) -> bool:
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
        claim = self.claims[ci]
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
        for pool, devices in self.node_devices:
            if pool.incomplete or pool.invalid_reason:
                continue
            for dev in devices:
                if req.admin:
                    if ci in self.allocating.get(dev.id, ()):
                        continue
                elif self._in_use(dev.id):
                    continue
                if not self.owner.selectable(claim, (ri, si), req, dev):
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

    def _take(self, ci: int, req: _Request, dev: InventoryDevice, must: bool) -> bool:
        """``allocateDevice``: availability, then the claim's constraints; recorded when all pass."""
        if req.admin:
            if ci in self.allocating.get(dev.id, ()):
                return False
        elif self._in_use(dev.id):
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
                return False
        self.allocating.setdefault(dev.id, set()).add(ci)
        self.picked[ci].append((req, dev))
        return True

    def _release(self, ci: int, req: _Request, dev: InventoryDevice) -> None:
        for constraint in self.constraints[ci]:
            constraint.remove(req)
        self.allocating[dev.id].discard(ci)
        self.picked[ci].pop()

    # answers ----------------------------------------------------------------------------------------
    def results(self) -> list[AllocationResult]:
        return [allocation_of([(req.name, req.admin, dev) for req, dev in picked]) for picked in self.picked]

    def why_not(self) -> str:
        """The first request that lacks free devices on the node, counted; else the constraints."""
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
        return (
            f"claims {', '.join(_name(c) for c in self.claims)}: devices exist but not in a combination that satisfies the requests and constraints"
            + pool_trouble(self.node_devices)
        )


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


def allocation_of(picked: Sequence[tuple[str, bool, InventoryDevice]]) -> AllocationResult:
    """One claim's allocation result from its (request, admin access, device) picks, in order."""
    return AllocationResult(
        devices=DeviceAllocationResult(
            results=[
                DeviceRequestAllocationResult(
                    request=request,
                    driver=dev.id[0],
                    pool=dev.id[1],
                    device=dev.id[2],
                    admin_access=True if admin else None,
                )
                for request, admin, dev in picked
            ]
        ),
        node_selector=_node_selector([dev for _, _, dev in picked]),
    )


def _name(claim: ResourceClaim) -> str:
    meta = claim.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


def _node_selector(devices: Sequence[InventoryDevice]) -> NodeSelector | None:
    """``createNodeSelector``: a node-local device pins the claim to its node; otherwise the union of
    the slices' one-term selectors; None when every device is reachable from everywhere."""
    expressions: list[NodeSelectorRequirement] = []
    fields: list[NodeSelectorRequirement] = []
    for dev in devices:
        spec = dev.slice.spec
        if spec.node_name:
            return NodeSelector(
                node_selector_terms=[
                    NodeSelectorTerm(
                        match_fields=[
                            NodeSelectorRequirement(
                                key="metadata.name", operator="In", values=[spec.node_name]
                            )
                        ]
                    )
                ]
            )
        if spec.node_selector is not None and len(spec.node_selector.node_selector_terms) == 1:
            term = spec.node_selector.node_selector_terms[0]
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
