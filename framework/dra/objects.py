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


#: ``AllocationConfigSourceClass`` / ``AllocationConfigSourceClaim``: where a configuration in an
#: allocation result came from
FROM_CLASS = "FromClass"
FROM_CLAIM = "FromClaim"
_NO_PARAMETERS = msgspec.Raw(b"null")


class OpaqueDeviceConfiguration(_Base, frozen=True):
    """A driver's own configuration (``opaque``): the scheduler copies it into the allocation result,
    where the driver's kubelet plugin reads it; its parameters are carried as the JSON they came as."""

    driver: str = ""
    parameters: msgspec.Raw = _NO_PARAMETERS

    def __post_init__(self) -> None:
        if self.parameters is not _NO_PARAMETERS:
            # a decoded Raw refers to the whole input it came in (a watch chunk, a list page): a copy
            # of its own keeps the claim from holding that buffer
            msgspec.structs.force_setattr(self, "parameters", self.parameters.copy())


class DeviceClassConfiguration(_Base, frozen=True):
    #: None: a configuration of a kind this version does not know
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClassSpec(_Base, frozen=True):
    selectors: list[DeviceSelector] = []
    config: list[DeviceClassConfiguration] = []


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


class CapacityRequestPolicyRange(_Base, frozen=True):
    min: Quantity | None = None
    max: Quantity | None = None
    step: Quantity | None = None


class CapacityRequestPolicy(_Base, frozen=True):
    """How a request consumes a capacity of a device that allows multiple allocations."""

    default: Quantity | None = None
    valid_values: list[Quantity] = []
    valid_range: CapacityRequestPolicyRange | None = None


class DeviceCapacity(_Base, frozen=True):
    value: Quantity = "0"
    request_policy: CapacityRequestPolicy | None = None


class Counter(_Base, frozen=True):
    value: Quantity = "0"


class CounterSet(_Base, frozen=True):
    """``sharedCounters`` of a ResourceSlice: counters the pool's devices consume from."""

    name: str = ""
    counters: dict[str, Counter] = {}


class DeviceCounterConsumption(_Base, frozen=True):
    counter_set: str = ""
    counters: dict[str, Counter] = {}


#: DeviceTaint effects; consumers treat unknown ones like None (types.go ``DeviceTaintEffect``)
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"


class DeviceTaint(_Base, frozen=True):
    key: str = ""
    value: str = ""
    effect: str = ""


class Device(_Base, frozen=True):
    name: str = ""
    attributes: dict[str, DeviceAttribute] = {}
    capacity: dict[str, DeviceCapacity] = {}
    consumes_counters: list[DeviceCounterConsumption] = []
    #: per-device node selection (the slice's ``perDeviceNodeSelection``)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    taints: list[DeviceTaint] = []
    binds_to_node: bool | None = None
    binding_conditions: list[str] = []
    binding_failure_conditions: list[str] = []
    allow_multiple_allocations: bool | None = None

    @property
    def advanced(self) -> bool:
        """Whether the device uses a feature beyond plain exclusive allocation (counters, taints,
        binding conditions, sharing, its own node selection)."""
        return bool(
            self.consumes_counters
            or self.taints
            or self.binding_conditions
            or self.binds_to_node
            or self.allow_multiple_allocations
            or self.node_name
            or self.node_selector is not None
            or self.all_nodes
        )


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
    #: only in a slice without devices (types.go: "Only one of Devices and SharedCounters")
    shared_counters: list[CounterSet] = []


class ResourceSlice(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: ResourceSliceSpec = ResourceSliceSpec()


# --- ResourceClaim ----------------------------------------------------------------------------------
class DeviceToleration(_Base, frozen=True):
    key: str = ""
    #: "Equal" (the default) or "Exists"
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class CapacityRequirements(_Base, frozen=True):
    requests: dict[str, Quantity] = {}


class ExactDeviceRequest(_Base, frozen=True):
    device_class_name: str = ""
    selectors: list[DeviceSelector] = []
    allocation_mode: str = EXACT_COUNT
    count: int = 1
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] = []
    capacity: CapacityRequirements | None = None


class DeviceSubRequest(_Base, frozen=True):
    name: str = ""
    device_class_name: str = ""
    selectors: list[DeviceSelector] = []
    allocation_mode: str = EXACT_COUNT
    count: int = 1
    tolerations: list[DeviceToleration] = []
    capacity: CapacityRequirements | None = None


class DeviceRequest(_Base, frozen=True):
    """Exactly one of ``exactly`` and ``first_available`` is set (the API server checks it)."""

    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] = []


class DeviceConstraint(_Base, frozen=True):
    requests: list[str] = []
    #: a fully qualified attribute name (``domain/id``); None with ``distinct_attribute`` None: a
    #: constraint of an unknown kind
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaimConfiguration(_Base, frozen=True):
    #: the requests (``request`` or ``request/subrequest``) it is for; none: all of them
    requests: list[str] = []
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClaim(_Base, frozen=True):
    requests: list[DeviceRequest] = []
    constraints: list[DeviceConstraint] = []
    config: list[DeviceClaimConfiguration] = []


class ResourceClaimSpec(_Base, frozen=True):
    devices: DeviceClaim = DeviceClaim()


class DeviceRequestAllocationResult(_Base, frozen=True):
    #: the request's name, or ``request/subrequest`` for a ``firstAvailable`` request
    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] = []
    binding_conditions: list[str] = []
    binding_failure_conditions: list[str] = []
    #: one share of a device that allows multiple allocations (a UUID)
    share_id: str | None = None
    consumed_capacity: dict[str, Quantity] = {}


class DeviceAllocationConfiguration(_Base, frozen=True):
    """A configuration copied into the allocation result: from the class (``FROM_CLASS``, for the
    requests that used the class) or from the claim (``FROM_CLAIM``, for the requests it names)."""

    source: str = ""
    requests: list[str] = []
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceAllocationResult(_Base, frozen=True):
    results: list[DeviceRequestAllocationResult] = []
    config: list[DeviceAllocationConfiguration] = []


class AllocationResult(_Base, frozen=True):
    devices: DeviceAllocationResult = DeviceAllocationResult()
    node_selector: NodeSelector | None = None
    #: set by kube-scheduler's PreBind when devices have binding conditions (the binding timeout
    #: counts from it)
    allocation_timestamp: str | None = None


class ResourceClaimConsumerReference(_Base, frozen=True):
    api_group: str = ""
    resource: str = ""
    name: str = ""
    uid: str = ""


class Condition(_Base, frozen=True):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""


class AllocatedDeviceStatus(_Base, frozen=True):
    """``status.devices[]``: written by the driver; its conditions answer binding conditions."""

    driver: str = ""
    pool: str = ""
    device: str = ""
    share_id: str | None = None
    conditions: list[Condition] = []


class ResourceClaimStatus(_Base, frozen=True):
    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] = []
    devices: list[AllocatedDeviceStatus] = []


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
