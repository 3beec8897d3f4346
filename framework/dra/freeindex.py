"""Free matching devices per node, counted: the structured allocator's answer for the commonest claim
(one request for ``count`` devices of a class) as one array lookup per node.

For a claim with a single ``exactly`` request in ``ExactCount`` mode, no constraints and no admin
access, the allocator's depth-first search (``allocateOne`` in ``staging/src/k8s.io/dynamic-resource-
allocation/structured/internal/stable/allocator_stable.go``) never backtracks: a device either matches
the class's and the request's selectors or not, nothing ties one pick to another, so it takes the first
``count`` free matching devices in pool and slice order and fails exactly when fewer are free. That is
what :class:`FreeIndex` answers, with the same picks:

* :func:`simple_shape` says whether a claim is such a one (else the full allocator runs), keyed by what
  decides its devices: the class, the selector expressions (the class's first, then the request's, as
  ``isSelectable`` evaluates them), the count, and the request's name (it goes into the result);
* the matching devices of each node are found once per inventory and shape (:meth:`Inventory.
  cel_matches` answers each expression once per device), in the order the allocator walks them
  (``Inventory.devices_for``: pools by driver and name, devices in slice order; pools being updated or
  invalid skipped, as the search skips them);
* :class:`FreeIndex` is a session's: the free count per node row, from the devices in use in its
  :class:`DeviceLedger`; :meth:`FreeIndex.refresh` recounts a node whose devices were taken or given back.

The fast path stands aside (``None``) where the search could answer differently or must report
something: slices serving several nodes (``nodeSelector``, ``allNodes``) in the inventory, devices using
partitionable counters, taints, binding conditions, sharing or their own node selection
(``Inventory.advanced``), a request with tolerations or capacity requests, an unknown
class, a selector that is not CEL, does not compile, or fails on some device (the full allocator names
the error in an Event).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import msgspec
import numpy as np

from caldera.framework.dra.allocator import (
    DeviceID,
    DeviceLedger,
    Inventory,
    InventoryDevice,
    allocation_config,
    allocation_of,
    no_free_device,
    pool_trouble,
)
from caldera.framework.dra.cel import CelError
from caldera.framework.dra.objects import (
    ALLOCATION_RESULTS_MAX_SIZE,
    EXACT_COUNT,
    AllocationResult,
    DeviceClass,
    ResourceClaim,
)

_key_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class Shape:
    """What decides a simple claim's devices."""

    class_name: str
    #: the class's selector expressions, then the request's
    expressions: tuple[str, ...]
    count: int
    request: str


def simple_shape(
    claim: ResourceClaim, classes: Mapping[str, DeviceClass], inventory: Inventory
) -> Shape | None:
    """The claim's shape when the counting fast path answers for it as the allocator would, else None."""
    if inventory.has_shared_slices or inventory.advanced:
        return None
    devices = claim.spec.devices
    if len(devices.requests) != 1 or devices.constraints:
        return None
    request = devices.requests[0]
    exactly = request.exactly
    if exactly is None or request.first_available:
        return None
    if exactly.allocation_mode != EXACT_COUNT or exactly.admin_access is not None:
        return None
    if exactly.capacity is not None or exactly.tolerations:
        return None
    if not 1 <= exactly.count <= ALLOCATION_RESULTS_MAX_SIZE or not exactly.device_class_name:
        return None
    device_class = classes.get(exactly.device_class_name)
    if device_class is None:
        return None
    expressions = []
    for selector in (*device_class.spec.selectors, *exactly.selectors):
        if selector.cel is None or inventory.cel.get(selector.cel.expression).error is not None:
            return None
        expressions.append(selector.cel.expression)
    return Shape(exactly.device_class_name, tuple(expressions), exactly.count, request.name)


@dataclass(slots=True, eq=False)
class ShapeDevices:
    """The devices matching a shape's selectors, per node in the allocator's order (an inventory's)."""

    by_node: dict[str, list[InventoryDevice]]
    node_of: dict[DeviceID, str]
    #: laid out on a session's node rows (``rows``), kept for the last node list asked about
    _rows: tuple[tuple[str, ...], _Rows] | None = None

    def rows(self, node_names: Sequence[str]) -> _Rows:
        names = tuple(node_names)
        if self._rows is None or self._rows[0] != names:
            row_of = {name: row for row, name in enumerate(names)}
            matching = [self.by_node.get(n, []) for n in names]
            self._rows = (
                names,
                _Rows(
                    row_of,
                    matching,
                    np.array([len(m) for m in matching], dtype=np.int64),
                    {d: row_of[n] for d, n in self.node_of.items() if n in row_of},
                ),
            )
        return self._rows[1]


@dataclass(slots=True, eq=False)
class _Rows:
    row_of: dict[str, int]
    matching: list[list[InventoryDevice]]
    counts: np.ndarray
    #: each matching device's row
    device_rows: dict[DeviceID, int]


def shape_devices(inventory: Inventory, expressions: tuple[str, ...]) -> ShapeDevices | None:
    """Every node's devices that match all the expressions; None when one fails on some device. Found
    once per inventory."""
    key = (shape_devices, expressions)
    if key not in inventory.derived:
        inventory.derived[key] = _shape_devices(inventory, expressions)
    got = inventory.derived[key]
    assert got is None or isinstance(got, ShapeDevices)
    return got


def _shape_devices(inventory: Inventory, expressions: tuple[str, ...]) -> ShapeDevices | None:
    by_node: dict[str, list[InventoryDevice]] = {}
    node_of: dict[DeviceID, str] = {}
    # the inventory's pools are in (driver, name) order and a node's devices of a pool in slice
    # order: walking them so appends each node's devices in Inventory.devices_for's order
    for pool in inventory.pools:
        if pool.incomplete or pool.invalid_reason:
            continue
        for node_name, devices in pool.devices_by_node.items():
            matching = None
            for dev in devices:
                for expression in expressions:
                    answer = inventory.cel_matches(expression, dev)
                    if isinstance(answer, CelError):
                        return None
                    if not answer:
                        break
                else:
                    if matching is None:
                        matching = by_node.setdefault(node_name, [])
                    matching.append(dev)
                    node_of[dev.id] = node_name
    return ShapeDevices(by_node, node_of)


class FreeIndex:
    """One session's free matching devices per node row for one shape (see the module's docstring)."""

    def __init__(
        self, shape: Shape, devices: ShapeDevices, node_names: Sequence[str], ledger: DeviceLedger
    ) -> None:
        self.shape = shape
        #: the shape as bytes: tasks whose claims have equal shapes get equal answers
        self.key = _key_encoder.encode((shape.class_name, shape.expressions, shape.count, shape.request))
        self.ledger = ledger
        self._devices = devices
        self._node_names = node_names
        laid = devices.rows(node_names)
        self._device_rows = laid.device_rows
        self._matching = laid.matching
        self.free = laid.counts.copy()
        in_use = ledger.in_use_among(laid.device_rows)
        if in_use:
            self.free -= np.bincount(in_use, minlength=len(self.free))

    def fits(self, rows: np.ndarray) -> np.ndarray:
        """Per row, whether the allocator finds devices for a claim of this shape there."""
        return self.free[rows] >= self.shape.count

    def pick(
        self, row: int, claim: ResourceClaim, classes: Mapping[str, DeviceClass]
    ) -> AllocationResult | None:
        """The allocation the allocator makes for ``claim`` (of this shape) on the row's node: the
        first ``count`` free matching devices, with the configurations of its class and its own;
        None when there are fewer."""
        picked: list[tuple[str, bool, InventoryDevice]] = []
        in_use = self.ledger.in_use
        shape = self.shape
        for dev in self._matching[row]:
            if not in_use(dev.id):
                picked.append((shape.request, False, dev))
                if len(picked) == shape.count:
                    config = allocation_config(claim, [(shape.request, classes.get(shape.class_name))])
                    return allocation_of(picked, config=config)
        return None

    def why_not(self, row: int, claim: str, inventory: Inventory) -> str:
        """The allocator's reason for failing the claim (``namespace/name``) on the row's node ("" when
        it fits there)."""
        free = int(self.free[row])
        if free >= self.shape.count:
            return ""
        matching = len(self._matching[row])
        shape = self.shape
        return no_free_device(
            shape.class_name, claim, shape.request, matching, matching - free
        ) + pool_trouble(inventory.devices_for(self._node_names[row], {}))

    def refresh(self, device_id: DeviceID) -> None:
        """The device was taken or given back: recount its node."""
        row = self._device_rows.get(device_id)
        if row is not None:
            self.free[row] = self.ledger.free_among(self._matching[row])
