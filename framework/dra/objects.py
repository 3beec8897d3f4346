"""Lean views of the ``resource.k8s.io/v1`` kinds the allocator reads, decoded with msgspec.

Field names follow ``staging/src/k8s.io/api/resource/v1/types.go`` (kubernetes/kubernetes); only what the
structured allocator uses is declared, everything else on the wire is ignored. Decode with
:func:`caldera.framework.objects.decode`: a malformed object raises ``ObjectError`` naming it.

Defaults are the API server's (``allocationMode: ExactCount``, ``count: 1``), so an object built in a
test without them reads as the stored object would.
"""

from __future__ import annotations

import msgspec

from caldera.framework.objects import NodeSelector, ObjectMeta, Quantity, _Base

#: ``resourceapi.AllocationResultsMaxSize``: at most this many devices in one claim's allocation.
ALLOCATION_RESULTS_MAX_SIZE = 32

EXACT_COUNT = "ExactCount"
ALL = "All"


# --- DeviceClass ------------------------------------------------------------------------------------
class CELDeviceSelector(_Base, frozen=True):
    expression: str = ""


class DeviceSelector(_Base, frozen=True):
    #: None: a selector of a kind this version does not know (the allocator refuses the request)
    cel: CELDeviceSelector | None = None


class DeviceClassSpec(_Base, frozen=True):
    selectors: list[DeviceSelector] = []


class DeviceClass(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: DeviceClassSpec = DeviceClassSpec()


# --- ResourceSlice ----------------------------------------------------------------------------------
class DeviceAttribute(_Base, frozen=True):
    """Exactly one of the four is set (``int``, ``bool``, ``string``, ``version`` on the wire)."""

    int_value: int | None = msgspec.field(default=None, name="int")
    bool_value: bool | None = msgspec.field(default=None, name="bool")
    string_value: str | None = msgspec.field(default=None, name="string")
    version_value: str | None = msgspec.field(default=None, name="version")

    def value(self) -> object:
        """The one value set, or None for an attribute of a type this version does not know."""
        for value in (self.int_value, self.bool_value, self.string_value, self.version_value):
            if value is not None:
                return value
        return None


class DeviceCapacity(_Base, frozen=True):
    value: Quantity = "0"


class Device(_Base, frozen=True):
    name: str = ""
    attributes: dict[str, DeviceAttribute] = {}
    capacity: dict[str, DeviceCapacity] = {}


class ResourcePool(_Base, frozen=True):
    name: str = ""
    generation: int = 0
    resource_slice_count: int = 0


class ResourceSliceSpec(_Base, frozen=True):
    driver: str = ""
    pool: ResourcePool = ResourcePool()
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: list[Device] = []


class ResourceSlice(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: ResourceSliceSpec = ResourceSliceSpec()


# --- ResourceClaim ----------------------------------------------------------------------------------
class ExactDeviceRequest(_Base, frozen=True):
    device_class_name: str = ""
    selectors: list[DeviceSelector] = []
    allocation_mode: str = EXACT_COUNT
    count: int = 1
    admin_access: bool | None = None


class DeviceSubRequest(_Base, frozen=True):
    name: str = ""
    device_class_name: str = ""
    selectors: list[DeviceSelector] = []
    allocation_mode: str = EXACT_COUNT
    count: int = 1


class DeviceRequest(_Base, frozen=True):
    """Exactly one of ``exactly`` and ``first_available`` is set (the API server checks it)."""

    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] = []


class DeviceConstraint(_Base, frozen=True):
    requests: list[str] = []
    #: a fully qualified attribute name (``domain/id``); None: a constraint of an unknown kind
    match_attribute: str | None = None


class DeviceClaim(_Base, frozen=True):
    requests: list[DeviceRequest] = []
    constraints: list[DeviceConstraint] = []


class ResourceClaimSpec(_Base, frozen=True):
    devices: DeviceClaim = DeviceClaim()


class DeviceRequestAllocationResult(_Base, frozen=True):
    #: the request's name, or ``request/subrequest`` for a ``firstAvailable`` request
    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None


class DeviceAllocationResult(_Base, frozen=True):
    results: list[DeviceRequestAllocationResult] = []


class AllocationResult(_Base, frozen=True):
    devices: DeviceAllocationResult = DeviceAllocationResult()
    node_selector: NodeSelector | None = None


class ResourceClaimConsumerReference(_Base, frozen=True):
    api_group: str = ""
    resource: str = ""
    name: str = ""
    uid: str = ""


class ResourceClaimStatus(_Base, frozen=True):
    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] = []


class ResourceClaim(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: ResourceClaimSpec = ResourceClaimSpec()
    status: ResourceClaimStatus = ResourceClaimStatus()


class ResourceClaimTemplateSpec(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: ResourceClaimSpec = ResourceClaimSpec()


class ResourceClaimTemplate(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: ResourceClaimTemplateSpec = ResourceClaimTemplateSpec()
