"""The structured allocator's shared test cases, ported as data.

Source: ``TestAllocator`` in ``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/
allocatortesting/allocator_testing.go`` (kubernetes/kubernetes), run there against every allocator
variant. Each :class:`Case` names its Go case. The helpers build the same objects as the Go helpers
(``claimWithRequest``, ``sliceWithOneDevice``, ``class``...): a class selects its driver by CEL, a slice
holds one pool of generation 1 unless told otherwise, nodes carry ``region`` and ``planet`` labels.

Where Go returns an error, Caldera returns no allocation with the error as the reason (``claim_error``
when the claims themselves are at fault). Where Go aborts on a CEL error, Caldera counts the device as
not matching and reports the typed error (the issue's rule: a bad expression never stops the scheduler).

The cases on partitionable devices, per-device node selection, device taints, binding conditions and
consumable capacity are in ``test_allocator_features.py``. The cases with device configurations
(``with-class-device-config*``, ``claim-with-device-config``, ``prioritized-list-{device,class}-config``)
also compare the configurations copied into the result (``Case.config``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest

from caldera.framework.dra.allocator import Allocator, DeviceLedger, Features, Inventory
from caldera.framework.dra.objects import (
    ALL,
    AllocationResult,
    CELDeviceSelector,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceClaim,
    DeviceClaimConfiguration,
    DeviceClass,
    DeviceClassConfiguration,
    DeviceClassSpec,
    DeviceConstraint,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    ExactDeviceRequest,
    OpaqueDeviceConfiguration,
    ResourceClaim,
    ResourceClaimSpec,
    ResourcePool,
    ResourceSlice,
    ResourceSliceSpec,
)
from caldera.framework.objects import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectMeta

NODE1, NODE2, REGION1, REGION2 = "node-1", "node-2", "region-1", "region-2"
CLASS_A, CLASS_B, DRIVER_A, DRIVER_B = "class-a", "class-b", "driver-a", "driver-b"
POOL1, POOL2, POOL3, POOL4 = "pool-1", "pool-2", "pool-3", "pool-4"
REQ0, REQ1, REQ2 = "req-0", "req-1", "req-2"
SUB0, SUB1 = "subReq-0", "subReq-1"
CLAIM0, CLAIM1 = "claim-0", "claim-1"
SLICE1, SLICE2 = "slice-1", "slice-2"
DEV1, DEV2, DEV3 = "device-1", "device-2", "device-3"
ALL_NODES = object()
INT_ATTR, VERSION_ATTR = f"{DRIVER_A}/numa", f"{DRIVER_A}/driverVersion"
STRING_ATTR, BOOL_ATTR = f"{DRIVER_A}/stringAttribute", f"{DRIVER_A}/boolAttribute"


# --- builders (the Go helpers) ---------------------------------------------------------------------
def node(name: str, region: str) -> tuple[str, dict[str, str]]:
    return name, {"region": region, "planet": "earth"}


def cel(expression: str) -> DeviceSelector:
    return DeviceSelector(cel=CELDeviceSelector(expression=expression))


def mem_at_least(q: str) -> DeviceSelector:
    return cel(f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{q}")) >= 0')


def device_class(name: str, driver: str, expression: str | None = None) -> DeviceClass:
    expr = expression if expression is not None else f'device.driver == "{driver}"'
    return DeviceClass(metadata=ObjectMeta(name=name), spec=DeviceClassSpec(selectors=[cel(expr)]))


def opaque(driver: str, attribute: str) -> OpaqueDeviceConfiguration:
    """``deviceConfiguration``: parameters ``{attribute: attribute + "Value"}``."""
    return OpaqueDeviceConfiguration(
        driver=driver, parameters=msgspec.Raw(f'{{"{attribute}":"{attribute}Value"}}'.encode())
    )


def class_with_config(name: str, driver: str, attribute: str) -> DeviceClass:
    """``classWithConfig``."""
    plain = device_class(name, driver)
    config = [DeviceClassConfiguration(opaque=opaque(driver, attribute))]
    return msgspec.structs.replace(plain, spec=msgspec.structs.replace(plain.spec, config=config))


def with_config(claim_: ResourceClaim, *configs: tuple[list[str], str, str]) -> ResourceClaim:
    """The claim with configurations ``(requests, driver, attribute)`` (``deviceClaimConfig``)."""
    config = [DeviceClaimConfiguration(requests=r, opaque=opaque(d, a)) for r, d, a in configs]
    devices = msgspec.structs.replace(claim_.spec.devices, config=config)
    return msgspec.structs.replace(claim_, spec=ResourceClaimSpec(devices=devices))


def request(
    name: str,
    cls: str,
    count: int = 1,
    *selectors: DeviceSelector,
    mode: str = "ExactCount",
    admin: bool | None = None,
) -> DeviceRequest:
    return DeviceRequest(
        name=name,
        exactly=ExactDeviceRequest(
            device_class_name=cls,
            count=count,
            allocation_mode=mode,
            selectors=list(selectors),
            admin_access=admin,
        ),
    )


def all_request(name: str, cls: str, admin: bool | None = None) -> DeviceRequest:
    return request(name, cls, 0, mode=ALL, admin=admin)


def sub(
    name: str, cls: str, count: int = 1, *selectors: DeviceSelector, mode: str = "ExactCount"
) -> DeviceSubRequest:
    return DeviceSubRequest(
        name=name, device_class_name=cls, count=count, allocation_mode=mode, selectors=list(selectors)
    )


def first_available(name: str, *subs: DeviceSubRequest) -> DeviceRequest:
    return DeviceRequest(name=name, first_available=list(subs))


def claim(
    name: str, *requests: DeviceRequest, constraints: list[DeviceConstraint] | None = None
) -> ResourceClaim:
    return ResourceClaim(
        metadata=ObjectMeta(name=name),
        spec=ResourceClaimSpec(devices=DeviceClaim(requests=list(requests), constraints=constraints or [])),
    )


def match(attribute: str | None, *requests: str) -> DeviceConstraint:
    return DeviceConstraint(match_attribute=attribute, requests=list(requests))


def device(
    name: str, capacity: dict[str, str] | None = None, attributes: dict[str, DeviceAttribute] | None = None
) -> Device:
    return Device(
        name=name,
        capacity={k: DeviceCapacity(value=v) for k, v in (capacity or {}).items()},
        attributes=attributes or {},
    )


def a_int(v: int) -> DeviceAttribute:
    return DeviceAttribute(int_value=v)


def a_str(v: str) -> DeviceAttribute:
    return DeviceAttribute(string_value=v)


def a_bool(v: bool) -> DeviceAttribute:
    return DeviceAttribute(bool_value=v)


def a_ver(v: str) -> DeviceAttribute:
    return DeviceAttribute(version_value=v)


def label_selector(key: str, *values: str) -> NodeSelector:
    return NodeSelector(
        node_selector_terms=[
            NodeSelectorTerm(
                match_expressions=[NodeSelectorRequirement(key=key, operator="In", values=list(values))]
            )
        ]
    )


def local_selector(node_name: str) -> NodeSelector:
    return NodeSelector(
        node_selector_terms=[
            NodeSelectorTerm(
                match_fields=[NodeSelectorRequirement(key="metadata.name", operator="In", values=[node_name])]
            )
        ]
    )


def slice_(
    name: str, where: Any, pool: str, driver: str, *devices: Device, count: int = 1, generation: int = 1
) -> ResourceSlice:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": ResourcePool(name=pool, generation=generation, resource_slice_count=count),
        "devices": list(devices),
    }
    if where is ALL_NODES:
        spec["all_nodes"] = True
    elif isinstance(where, NodeSelector):
        spec["node_selector"] = where
    else:
        spec["node_name"] = where
    return ResourceSlice(metadata=ObjectMeta(name=name), spec=ResourceSliceSpec(**spec))


def one_device(name: str, where: Any, pool: str, driver: str, **kw: int) -> ResourceSlice:
    return slice_(name, where, pool, driver, device(DEV1), **kw)


def many_devices(name: str, where: Any, pool: str, driver: str, n: int) -> ResourceSlice:
    return slice_(name, where, pool, driver, *(device(f"device-{i}") for i in range(n)))


# expected results: per claim (node selector or None, [(request, driver, pool, device, admin)])
def result(selector: NodeSelector | None, *devices: tuple[str, str, str, str, bool]) -> tuple[Any, list[Any]]:
    return selector, list(devices)


def r(req: str, driver: str, pool: str, dev: str, admin: bool = False) -> tuple[str, str, str, str, bool]:
    return req, driver, pool, dev, admin


@dataclass
class Case:
    go_case: str  # the case's name in TestAllocator
    claims: list[ResourceClaim] = field(default_factory=list)
    classes: list[DeviceClass] = field(default_factory=list)
    slices: list[ResourceSlice] = field(default_factory=list)
    node: tuple[str, dict[str, str]] = (NODE1, {"region": REGION1, "planet": "earth"})
    allocated: list[tuple[str, str, str]] = field(default_factory=list)
    features: Features = field(default_factory=Features)
    #: per claim, or None: no allocation on this node
    expect: list[tuple[Any, list[Any]]] | None = None
    #: a substring of the reason (Go's error); with claim_error when the claims are at fault
    reason: str = ""
    claim_error: bool = False
    #: a substring of a reported CEL error
    cel_error: str = ""
    go_test: str = "TestAllocator"
    #: per claim, the configurations of its result: (source, requests, driver, attribute); None: none
    config: list[list[tuple[str, list[str], str, str]]] | None = None


CA = device_class(CLASS_A, DRIVER_A)
CB = device_class(CLASS_B, DRIVER_B)
L1 = local_selector(NODE1)
TWO_DEVS = slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1), device(DEV2))
MEM_1_2 = slice_(
    SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, {"memory": "1Gi"}), device(DEV2, {"memory": "2Gi"})
)
MEM_2_1 = slice_(
    SLICE1, NODE1, POOL1, DRIVER_A, device(DEV2, {"memory": "2Gi"}), device(DEV1, {"memory": "1Gi"})
)
ALL_ATTRS = {
    "driverVersion": a_ver("1.0.0"),
    "numa": a_int(1),
    "stringAttribute": a_str("stringAttributeValue"),
    "boolAttribute": a_bool(True),
}


def two_with(attr: str, v1: DeviceAttribute, v2: DeviceAttribute) -> ResourceSlice:
    return slice_(
        SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, None, {attr: v1}), device(DEV2, None, {attr: v2})
    )


def _ver_mem(name: str, mem: str, ver: str) -> Device:
    return device(name, {"memory": mem}, {"driverVersion": a_ver(ver)})


CASES = [
    Case("empty", expect=[]),
    Case(
        "simple",
        [claim(CLAIM0, request(REQ0, CLASS_A))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1))],
    ),
    Case(
        "other-node",
        [claim(CLAIM0, request(REQ0, CLASS_A))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_B), one_device(SLICE2, NODE2, POOL2, DRIVER_A)],
        node=node(NODE2, REGION2),
        expect=[result(local_selector(NODE2), r(REQ0, DRIVER_A, POOL2, DEV1))],
    ),
    Case(
        "small-and-large",
        [
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 1, mem_at_least("1Gi")),
                request(REQ1, CLASS_A, 1, mem_at_least("2Gi")),
            )
        ],
        [CA],
        [MEM_1_2],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1), r(REQ1, DRIVER_A, POOL1, DEV2))],
    ),
    Case(
        "small-and-large-backtrack-requests",
        [
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 1, mem_at_least("1Gi")),
                request(REQ1, CLASS_A, 1, mem_at_least("2Gi")),
            )
        ],
        [CA],
        [MEM_2_1],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1), r(REQ1, DRIVER_A, POOL1, DEV2))],
    ),
    Case(
        "small-and-large-backtrack-claims",
        [
            claim(CLAIM0, request(REQ0, CLASS_A, 1, mem_at_least("1Gi"))),
            claim(CLAIM1, request(REQ1, CLASS_A, 1, mem_at_least("2Gi"))),
        ],
        [CA],
        [MEM_2_1],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1)), result(L1, r(REQ1, DRIVER_A, POOL1, DEV2))],
    ),
    Case(
        "devices-split-across-different-slices",
        [claim(CLAIM0, request(REQ0, CLASS_A, 2))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A), one_device(SLICE2, NODE1, POOL2, DRIVER_A)],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1), r(REQ0, DRIVER_A, POOL2, DEV1))],
    ),
    Case(
        "obsolete-slice",
        [claim(CLAIM0, request(REQ0, CLASS_A))],
        [CA],
        [
            slice_("slice-1-obsolete", NODE1, POOL1, DRIVER_A, device(DEV1), count=2),
            slice_("slice-1-obsolete", NODE1, POOL1, DRIVER_A, device(DEV2), count=2, generation=2),
        ],
        expect=None,
        reason="no free device of class class-a",
    ),
    Case(
        "duplicate-slice",
        [claim(CLAIM0, request(REQ0, CLASS_A))],
        [CA],
        [
            one_device(SLICE1, NODE1, POOL1, DRIVER_A, count=2),
            one_device(SLICE1 + "-2", NODE1, POOL1, DRIVER_A, count=2),
        ],
        reason="invalid resource pools were encountered",
    ),
    Case("no-slices", [claim(CLAIM0, request(REQ0, CLASS_A))], [CA], [], reason="0 devices, 0 allocated"),
    Case(
        "not-enough-suitable-devices",
        [claim(CLAIM0, request(REQ0, CLASS_A)), claim(CLAIM0, request(REQ1, CLASS_A))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        reason="devices exist but not in a combination",
    ),
    Case(
        "no-classes",
        [claim(CLAIM0, request(REQ0, CLASS_A))],
        [],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        reason="could not retrieve device class class-a",
        claim_error=True,
    ),
    Case(
        "unknown-class",
        [claim(CLAIM0, request(REQ0, "unknown-class"))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        reason="could not retrieve device class unknown-class",
        claim_error=True,
    ),
    Case(
        "empty-class",
        [claim(CLAIM0, request(REQ0, ""))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        reason="claim claim-0, request req-0: missing device class name (unsupported request type?)",
        claim_error=True,
    ),
    Case("no-claims-to-allocate", [], [CA], [one_device(SLICE1, NODE1, POOL1, DRIVER_A)], expect=[]),
    Case(
        "all-devices-single",
        [claim(CLAIM0, all_request(REQ0, CLASS_A))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1))],
    ),
    Case(
        "all-devices-many",
        [claim(CLAIM0, all_request(REQ0, CLASS_A))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A), one_device(SLICE1, NODE1, POOL2, DRIVER_A)],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1), r(REQ0, DRIVER_A, POOL2, DEV1))],
    ),
    Case(
        "all-devices-of-the-incomplete-pool",
        [claim(CLAIM0, all_request(REQ0, CLASS_A))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A, count=2)],
        reason="claim claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being updated",
    ),
    Case(
        "all-devices-plus-another",
        [claim(CLAIM0, all_request(REQ0, CLASS_A)), claim(CLAIM1, request(REQ0, CLASS_B))],
        [CA, CB],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A), one_device(SLICE1, NODE1, POOL1, DRIVER_B)],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1)), result(L1, r(REQ0, DRIVER_B, POOL1, DEV1))],
    ),
    Case(
        "all-devices-plus-another-reversed",
        [claim(CLAIM1, request(REQ0, CLASS_B)), claim(CLAIM0, all_request(REQ0, CLASS_A))],
        [CA, CB],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A), one_device(SLICE1, NODE1, POOL1, DRIVER_B)],
        expect=[result(L1, r(REQ0, DRIVER_B, POOL1, DEV1)), result(L1, r(REQ0, DRIVER_A, POOL1, DEV1))],
    ),
    Case(
        "all-devices-many-plus-another",
        [claim(CLAIM0, all_request(REQ0, CLASS_A)), claim(CLAIM1, request(REQ0, CLASS_B))],
        [CA, CB],
        [TWO_DEVS, one_device(SLICE1, NODE1, POOL1, DRIVER_B)],
        expect=[
            result(L1, r(REQ0, DRIVER_A, POOL1, DEV1), r(REQ0, DRIVER_A, POOL1, DEV2)),
            result(L1, r(REQ0, DRIVER_B, POOL1, DEV1)),
        ],
    ),
    Case(
        "all-devices-many-plus-another-reversed",
        [claim(CLAIM1, request(REQ0, CLASS_B)), claim(CLAIM0, all_request(REQ0, CLASS_A))],
        [CA, CB],
        [TWO_DEVS, one_device(SLICE1, NODE1, POOL1, DRIVER_B)],
        expect=[
            result(L1, r(REQ0, DRIVER_B, POOL1, DEV1)),
            result(L1, r(REQ0, DRIVER_A, POOL1, DEV1), r(REQ0, DRIVER_A, POOL1, DEV2)),
        ],
    ),
    Case(
        "all-devices-no-solution",
        [claim(CLAIM1, request(REQ0, CLASS_A)), claim(CLAIM0, all_request(REQ0, CLASS_A))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=None,
    ),
    Case(
        "all-devices-no-solution-reversed",
        [claim(CLAIM0, all_request(REQ0, CLASS_A)), claim(CLAIM1, request(REQ0, CLASS_A))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=None,
    ),
    Case(
        "all-devices-slice-without-devices",
        [claim(CLAIM0, all_request(REQ0, CLASS_A))],
        [CA],
        [slice_(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=None,
    ),
    Case("all-devices-no-slices", [claim(CLAIM0, all_request(REQ0, CLASS_A))], [CA], [], expect=None),
    Case(
        "all-devices-some-allocated",
        [claim(CLAIM0, all_request(REQ0, CLASS_A))],
        [CA],
        [TWO_DEVS],
        allocated=[(DRIVER_A, POOL1, DEV1)],
        expect=None,
    ),
    Case(
        "all-devices-some-allocated-admin-access",
        [claim(CLAIM0, all_request(REQ0, CLASS_A, admin=True))],
        [CA],
        [TWO_DEVS],
        allocated=[(DRIVER_A, POOL1, DEV1)],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1, True), r(REQ0, DRIVER_A, POOL1, DEV2, True))],
    ),
    Case(
        "all-devices-some-allocating-admin-access",
        [claim(CLAIM0, request(REQ0, CLASS_A, admin=True), all_request(REQ1, CLASS_A, admin=True))],
        [CA],
        [TWO_DEVS],
        expect=None,
    ),
    Case(
        "count-devices-some-allocated-admin-access",
        [claim(CLAIM0, request(REQ0, CLASS_A, 2, admin=True))],
        [CA],
        [TWO_DEVS],
        allocated=[(DRIVER_A, POOL1, DEV1)],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1, True), r(REQ0, DRIVER_A, POOL1, DEV2, True))],
    ),
    Case(
        "separate-claims-share-device-admin-access",
        [
            claim(CLAIM0, request(REQ0, CLASS_A, admin=True)),
            claim(CLAIM1, request(REQ0, CLASS_A, admin=True)),
        ],
        [CA],
        [TWO_DEVS],
        expect=[
            result(L1, r(REQ0, DRIVER_A, POOL1, DEV1, True)),
            result(L1, r(REQ0, DRIVER_A, POOL1, DEV1, True)),
        ],
    ),
    Case(
        "admin-access-claims-device-allocating-for-non-admin-access",
        [claim(CLAIM0, request(REQ0, CLASS_A)), claim(CLAIM1, request(REQ0, CLASS_A, admin=True))],
        [CA],
        [TWO_DEVS],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1)), result(L1, r(REQ0, DRIVER_A, POOL1, DEV1, True))],
    ),
    Case(
        "all-devices-slice-without-devices-prioritized-list",
        [claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_A, 0, mode=ALL), sub(SUB1, CLASS_B)))],
        [CA, CB],
        [slice_(SLICE1, NODE1, POOL1, DRIVER_A), one_device(SLICE2, NODE1, POOL2, DRIVER_B)],
        expect=[result(L1, r(f"{REQ0}/{SUB1}", DRIVER_B, POOL2, DEV1))],
    ),
    Case(
        "all-devices-no-slices-prioritized-list",
        [claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_A, 0, mode=ALL), sub(SUB1, CLASS_B)))],
        [CA, CB],
        [one_device(SLICE2, NODE1, POOL2, DRIVER_B)],
        expect=[result(L1, r(f"{REQ0}/{SUB1}", DRIVER_B, POOL2, DEV1))],
    ),
    Case(
        "all-devices-some-allocated-prioritized-list",
        [claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_A, 0, mode=ALL), sub(SUB1, CLASS_B)))],
        [CA, CB],
        [TWO_DEVS, one_device(SLICE2, NODE1, POOL2, DRIVER_B)],
        allocated=[(DRIVER_A, POOL1, DEV1)],
        expect=[result(L1, r(f"{REQ0}/{SUB1}", DRIVER_B, POOL2, DEV1))],
    ),
    Case(
        "network-attached-device",
        [claim(CLAIM0, request(REQ0, CLASS_A))],
        [CA],
        [one_device(SLICE1, label_selector("region", REGION1), POOL1, DRIVER_A)],
        expect=[result(label_selector("region", REGION1), r(REQ0, DRIVER_A, POOL1, DEV1))],
    ),
    Case(
        "unsuccessful-allocation-network-attached-device",
        [claim(CLAIM0, request(REQ0, CLASS_A))],
        [CA],
        [one_device(SLICE1, label_selector("region", REGION1), POOL1, DRIVER_A)],
        node=node(NODE2, REGION2),
        expect=None,
    ),
    Case(
        "many-network-attached-devices",
        [claim(CLAIM0, request(REQ0, CLASS_A, 4))],
        [CA],
        [
            one_device(SLICE1, label_selector("region", REGION1), POOL1, DRIVER_A),
            one_device(SLICE1, ALL_NODES, POOL2, DRIVER_A),
            one_device(SLICE1, label_selector("planet", "earth"), POOL3, DRIVER_A),
            one_device(SLICE1, local_selector(NODE1), POOL4, DRIVER_A),
        ],
        expect=[
            result(
                NodeSelector(
                    node_selector_terms=[
                        NodeSelectorTerm(
                            match_expressions=[
                                NodeSelectorRequirement(key="region", operator="In", values=[REGION1]),
                                NodeSelectorRequirement(key="planet", operator="In", values=["earth"]),
                            ],
                            match_fields=[
                                NodeSelectorRequirement(key="metadata.name", operator="In", values=[NODE1])
                            ],
                        )
                    ]
                ),
                r(REQ0, DRIVER_A, POOL1, DEV1),
                r(REQ0, DRIVER_A, POOL2, DEV1),
                r(REQ0, DRIVER_A, POOL3, DEV1),
                r(REQ0, DRIVER_A, POOL4, DEV1),
            )
        ],
    ),
    Case(
        "local-and-network-attached-devices",
        [claim(CLAIM0, request(REQ0, CLASS_A, 2))],
        [CA],
        [
            one_device(SLICE1, label_selector("region", REGION1), POOL1, DRIVER_A),
            one_device(SLICE1, NODE1, POOL2, DRIVER_A),
        ],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1), r(REQ0, DRIVER_A, POOL2, DEV1))],
    ),
    Case(
        "several-different-drivers",
        [claim(CLAIM0, request(REQ0, CLASS_A)), claim(CLAIM0, request(REQ0, CLASS_B))],
        [CA, CB],
        [TWO_DEVS, one_device(SLICE1, NODE1, POOL1, DRIVER_B)],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1)), result(L1, r(REQ0, DRIVER_B, POOL1, DEV1))],
    ),
    Case(
        "already-allocated-devices",
        [claim(CLAIM0, request(REQ0, CLASS_A))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        allocated=[(DRIVER_A, POOL1, DEV1), (DRIVER_A, POOL1, DEV2)],
        reason="1 devices, 1 allocated",
    ),
    Case(
        "admin-access-disabled",
        [claim(CLAIM0, request(REQ0, CLASS_A, admin=True))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        features=Features(admin_access=False),
        claim_error=True,
        reason="claim claim-0, request req-0: admin access is requested, but the feature is disabled",
    ),
    Case(
        "admin-access-enabled",
        [claim(CLAIM0, request(REQ0, CLASS_A, admin=True))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        allocated=[(DRIVER_A, POOL1, DEV1), (DRIVER_A, POOL1, DEV2)],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1, True))],
    ),
    Case(
        "with-constraint",
        [
            claim(
                CLAIM0,
                request(REQ0, CLASS_A),
                request(REQ1, CLASS_A),
                constraints=[match(INT_ATTR), match(VERSION_ATTR), match(STRING_ATTR), match(BOOL_ATTR)],
            )
        ],
        [CA],
        [
            slice_(
                SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, None, ALL_ATTRS), device(DEV2, None, ALL_ATTRS)
            )
        ],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1), r(REQ1, DRIVER_A, POOL1, DEV2))],
    ),
    Case(
        "with-constraint-non-existent-attribute",
        [claim(CLAIM0, request(REQ0, CLASS_A), constraints=[match(f"{DRIVER_A}/NonExistentAttribute")])],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=None,
    ),
    Case(
        "with-constraint-not-matching-int-attribute",
        [claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=[match(INT_ATTR)])],
        [CA, CB],
        [two_with("numa", a_int(1), a_int(2))],
        expect=None,
    ),
    Case(
        "with-constraint-not-matching-int-attribute-all-devices",
        [claim(CLAIM0, all_request(REQ0, CLASS_A), constraints=[match(INT_ATTR)])],
        [CA, CB],
        [two_with("numa", a_int(1), a_int(2))],
        claim_error=True,
        reason="claim claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied",
    ),
    Case(
        "with-constraint-not-matching-string-attribute",
        [claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=[match(STRING_ATTR)])],
        [CA, CB],
        [two_with("stringAttribute", a_str("stringAttributeValue"), a_str("stringAttributeValue2"))],
        expect=None,
    ),
    Case(
        "with-constraint-not-matching-bool-attribute",
        [claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=[match(BOOL_ATTR)])],
        [CA, CB],
        [two_with("boolAttribute", a_bool(True), a_bool(False))],
        expect=None,
    ),
    Case(
        "with-constraint-not-matching-version-attribute",
        [claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=[match(VERSION_ATTR)])],
        [CA, CB],
        [two_with("driverVersion", a_ver("1.0.0"), a_ver("2.0.0"))],
        expect=None,
    ),
    Case(
        "with-constraint-for-request",
        [
            claim(
                CLAIM0,
                request(REQ0, CLASS_A),
                request(REQ1, CLASS_A),
                constraints=[match(VERSION_ATTR, REQ0)],
            )
        ],
        [CA, CB],
        [two_with("driverVersion", a_ver("1.0.0"), a_ver("2.0.0"))],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1), r(REQ1, DRIVER_A, POOL1, DEV2))],
    ),
    Case(
        "with-constraint-for-request-retry",
        [
            claim(
                CLAIM0,
                request(REQ0, CLASS_A),
                request(REQ1, CLASS_A),
                constraints=[match(VERSION_ATTR, REQ0), match(STRING_ATTR)],
            )
        ],
        [CA, CB],
        [
            slice_(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEV1, None, {"driverVersion": a_ver("1.0.0"), "stringAttribute": a_str("a")}),
                device(DEV2, None, {"driverVersion": a_ver("2.0.0"), "stringAttribute": a_str("b")}),
                device(DEV3, None, {"driverVersion": a_ver("3.0.0"), "stringAttribute": a_str("b")}),
            )
        ],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV2), r(REQ1, DRIVER_A, POOL1, DEV3))],
    ),
    Case(
        "unknown-selector",
        [claim(CLAIM0, request(REQ0, CLASS_A, 1, DeviceSelector()))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        claim_error=True,
        reason="CEL expression empty (unsupported selector type?)",
    ),
    Case(
        "unknown-allocation-mode",
        [claim(CLAIM0, request(REQ0, CLASS_A, mode="future-mode"))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        claim_error=True,
        reason="unsupported count mode future-mode",
    ),
    Case(
        "unknown-constraint",
        [claim(CLAIM0, request(REQ0, CLASS_A), constraints=[match(None)])],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        claim_error=True,
        reason="empty constraint (unsupported constraint type?)",
    ),
    Case(
        "invalid-CEL-one-device",
        [claim(CLAIM0, request(REQ0, CLASS_A, 1, cel("noSuchVar")))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        cel_error="noSuchVar",
    ),
    Case(
        "invalid-CEL-one-device-class",
        [claim(CLAIM0, request(REQ0, CLASS_A))],
        [device_class(CLASS_A, DRIVER_A, "noSuchVar")],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        cel_error="noSuchVar",
    ),
    Case(
        "invalid-CEL-all-devices",
        [claim(CLAIM0, request(REQ0, CLASS_A, 0, cel("noSuchVar"), mode=ALL))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        cel_error="noSuchVar",
    ),
    Case(
        "too-many-devices-single-request",
        [claim(CLAIM0, request(REQ0, CLASS_A, 500))],
        [CA],
        claim_error=True,
        reason="exceeds the claim limit",
    ),
    Case(
        "many-devices-okay",
        [claim(CLAIM0, request(REQ0, CLASS_A, 32))],
        [CA],
        [many_devices(SLICE1, NODE1, POOL1, DRIVER_A, 32)],
        expect=[result(L1, *(r(REQ0, DRIVER_A, POOL1, f"device-{i}") for i in range(32)))],
    ),
    Case(
        "too-many-devices-total",
        [claim(CLAIM0, request(REQ0, CLASS_A, 32), request(REQ1, CLASS_A))],
        [CA],
        [many_devices(SLICE1, NODE1, POOL1, DRIVER_A, 33)],
        claim_error=True,
        reason="exceeds the claim limit",
    ),
    Case(
        "prioritized-list-first-unavailable",
        [claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_B), sub(SUB1, CLASS_A)))],
        [CA, CB],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=[result(L1, r(f"{REQ0}/{SUB1}", DRIVER_A, POOL1, DEV1))],
    ),
    Case(
        "prioritized-list-non-available",
        [claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_B, 2), sub(SUB1, CLASS_A, 2)))],
        [CA, CB],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A), one_device(SLICE2, NODE1, POOL2, DRIVER_B)],
        expect=None,
    ),
    Case(
        "prioritized-list-subrequests-with-expressions",
        [
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 1, mem_at_least("1Gi")),
                first_available(
                    REQ1,
                    sub(SUB0, CLASS_A, 1, mem_at_least("4Gi")),
                    sub(SUB1, CLASS_A, 2, mem_at_least("2Gi")),
                ),
            )
        ],
        [CA],
        [
            slice_(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEV1, {"memory": "2Gi"}),
                device(DEV2, {"memory": "2Gi"}),
                device(DEV3, {"memory": "1Gi"}),
            )
        ],
        expect=[
            result(
                L1,
                r(REQ0, DRIVER_A, POOL1, DEV3),
                r(f"{REQ1}/{SUB1}", DRIVER_A, POOL1, DEV1),
                r(f"{REQ1}/{SUB1}", DRIVER_A, POOL1, DEV2),
            )
        ],
    ),
    Case(
        "prioritized-list-subrequests-with-constraints-ref-parent-request",
        [
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 1, mem_at_least("8Gi")),
                first_available(
                    REQ1,
                    sub(SUB0, CLASS_A, 1, mem_at_least("2Gi")),
                    sub(SUB1, CLASS_A, 1, mem_at_least("1Gi")),
                ),
                constraints=[match(VERSION_ATTR, REQ0, REQ1)],
            )
        ],
        [CA],
        [
            slice_(SLICE1, NODE1, POOL1, DRIVER_A, _ver_mem(DEV1, "8Gi", "1.0.0")),
            slice_(
                SLICE2, NODE1, POOL2, DRIVER_A, _ver_mem(DEV2, "2Gi", "2.0.0"), _ver_mem(DEV3, "1Gi", "1.0.0")
            ),
        ],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1), r(f"{REQ1}/{SUB1}", DRIVER_A, POOL2, DEV3))],
    ),
    Case(
        "prioritized-list-subrequests-with-constraints-ref-sub-request",
        [
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 1, mem_at_least("8Gi")),
                first_available(
                    REQ1,
                    sub(SUB0, CLASS_A, 1, mem_at_least("2Gi")),
                    sub(SUB1, CLASS_A, 1, mem_at_least("1Gi")),
                ),
                constraints=[match(VERSION_ATTR, REQ0, f"{REQ1}/{SUB0}")],
            )
        ],
        [CA],
        [
            slice_(SLICE1, NODE1, POOL1, DRIVER_A, _ver_mem(DEV1, "8Gi", "1.0.0")),
            slice_(SLICE2, NODE1, POOL2, DRIVER_A, _ver_mem(DEV2, "2Gi", "2.0.0")),
        ],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1), r(f"{REQ1}/{SUB1}", DRIVER_A, POOL2, DEV2))],
    ),
    Case(
        "prioritized-list-subrequests-with-allocation-mode-all",
        [claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_A, 0, mode=ALL), sub(SUB1, CLASS_A)))],
        [CA],
        [TWO_DEVS],
        allocated=[(DRIVER_A, POOL1, DEV1)],
        expect=[result(L1, r(f"{REQ0}/{SUB1}", DRIVER_A, POOL1, DEV2))],
    ),
    Case(
        "prioritized-list-allocation-mode-all-multiple-requests",
        [
            claim(
                CLAIM0,
                request(REQ0, CLASS_A),
                first_available(REQ1, sub(SUB0, CLASS_A, 0, mode=ALL), sub(SUB1, CLASS_A)),
            )
        ],
        [CA],
        [TWO_DEVS],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1), r(f"{REQ1}/{SUB1}", DRIVER_A, POOL1, DEV2))],
    ),
    Case(
        "prioritized-list-disabled",
        [claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_A)))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        features=Features(prioritized_list=False),
        claim_error=True,
        reason="claim claim-0, request req-0: has subrequests, but the DRAPrioritizedList feature is disabled",
    ),
    Case(
        "prioritized-list-multi-request",
        [
            claim(
                CLAIM0,
                request(REQ1, CLASS_A, 1, mem_at_least("8Gi")),
                first_available(
                    REQ0,
                    sub(SUB0, CLASS_A, 1, mem_at_least("8Gi")),
                    sub(SUB1, CLASS_A, 1, mem_at_least("4Gi")),
                ),
            )
        ],
        [CA],
        [
            slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, {"memory": "8Gi"})),
            slice_(SLICE2, NODE1, POOL2, DRIVER_A, device(DEV2, {"memory": "4Gi"})),
        ],
        expect=[result(L1, r(REQ1, DRIVER_A, POOL1, DEV1), r(f"{REQ0}/{SUB1}", DRIVER_A, POOL2, DEV2))],
    ),
    Case(
        "prioritized-list-with-backtracking",
        [
            claim(
                CLAIM0,
                first_available(
                    REQ0,
                    sub(SUB0, CLASS_A, 1, mem_at_least("8Gi")),
                    sub(SUB1, CLASS_A, 1, mem_at_least("4Gi")),
                ),
                request(REQ1, CLASS_A, 1, mem_at_least("8Gi")),
            )
        ],
        [CA],
        [
            slice_(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, {"memory": "8Gi"})),
            slice_(SLICE2, NODE1, POOL2, DRIVER_A, device(DEV2, {"memory": "4Gi"})),
        ],
        expect=[result(L1, r(f"{REQ0}/{SUB1}", DRIVER_A, POOL2, DEV2), r(REQ1, DRIVER_A, POOL1, DEV1))],
    ),
    Case(
        "with-class-device-config",
        [claim(CLAIM0, request(REQ0, CLASS_A))],
        [class_with_config(CLASS_A, DRIVER_A, "classAttribute")],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1))],
        config=[[("FromClass", [REQ0], DRIVER_A, "classAttribute")]],
    ),
    Case(
        "with-class-device-config-with-multiple-request-and-configs",
        [claim(CLAIM0, request(REQ0, CLASS_A), request(REQ1, CLASS_A), request(REQ2, CLASS_B))],
        [
            class_with_config(CLASS_A, DRIVER_A, "classAttribute-A"),
            class_with_config(CLASS_B, DRIVER_B, "classAttribute-B"),
        ],
        [many_devices(SLICE1, NODE1, POOL1, DRIVER_A, 2), one_device(SLICE2, NODE1, POOL1, DRIVER_B)],
        expect=[
            result(
                L1,
                r(REQ0, DRIVER_A, POOL1, "device-0"),
                r(REQ1, DRIVER_A, POOL1, DEV1),
                r(REQ2, DRIVER_B, POOL1, DEV1),
            )
        ],
        config=[
            [
                ("FromClass", [REQ0, REQ1], DRIVER_A, "classAttribute-A"),
                ("FromClass", [REQ2], DRIVER_B, "classAttribute-B"),
            ]
        ],
    ),
    Case(
        "claim-with-device-config",
        [with_config(claim(CLAIM0, request(REQ0, CLASS_A)), ([], DRIVER_A, "deviceAttribute"))],
        [CA],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=[result(L1, r(REQ0, DRIVER_A, POOL1, DEV1))],
        config=[[("FromClaim", [], DRIVER_A, "deviceAttribute")]],
    ),
    Case(
        "prioritized-list-device-config",
        [
            with_config(
                claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_A, 1), sub(SUB1, CLASS_B, 2))),
                ([f"{REQ0}/{SUB0}"], DRIVER_A, "foo"),
                ([f"{REQ0}/{SUB1}"], DRIVER_B, "bar"),
            )
        ],
        [CA, CB],
        [slice_(SLICE1, NODE1, POOL1, DRIVER_B, device(DEV1), device(DEV2))],
        expect=[
            result(L1, r(f"{REQ0}/{SUB1}", DRIVER_B, POOL1, DEV1), r(f"{REQ0}/{SUB1}", DRIVER_B, POOL1, DEV2))
        ],
        config=[[("FromClaim", [f"{REQ0}/{SUB1}"], DRIVER_B, "bar")]],
    ),
    Case(
        "prioritized-list-class-config",
        [claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_A, 2), sub(SUB1, CLASS_B, 2)))],
        [class_with_config(CLASS_A, DRIVER_A, "foo"), class_with_config(CLASS_B, DRIVER_B, "bar")],
        [
            slice_(SLICE1, NODE1, POOL1, DRIVER_B, device(DEV1), device(DEV2)),
            slice_(SLICE2, NODE1, POOL2, DRIVER_A, device(DEV3)),
        ],
        expect=[
            result(L1, r(f"{REQ0}/{SUB1}", DRIVER_B, POOL1, DEV1), r(f"{REQ0}/{SUB1}", DRIVER_B, POOL1, DEV2))
        ],
        config=[[("FromClass", [f"{REQ0}/{SUB1}"], DRIVER_B, "bar")]],
    ),
    Case(
        "prioritized-list-too-many-in-first-subrequest",
        [claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_B, 500), sub(SUB1, CLASS_A)))],
        [CA, CB],
        [one_device(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=[result(L1, r(f"{REQ0}/{SUB1}", DRIVER_A, POOL1, DEV1))],
    ),
]


def _selector_key(selector: NodeSelector | None) -> Any:
    if selector is None:
        return None
    return sorted(
        (
            sorted((r.key, r.operator, tuple(sorted(r.values))) for r in term.match_expressions),
            sorted((r.key, r.operator, tuple(sorted(r.values))) for r in term.match_fields),
        )
        for term in selector.node_selector_terms
    )


def _actual(result_: AllocationResult) -> tuple[Any, list[Any]]:
    devices = sorted(
        (d.request, d.driver, d.pool, d.device, bool(d.admin_access)) for d in result_.devices.results
    )
    return _selector_key(result_.node_selector), devices


def _config(result_: AllocationResult) -> list[tuple[str, list[str], str, str]]:
    """The result's configurations as (source, requests, driver, attribute) of ``{attribute: ...Value}``."""
    out = []
    for c in result_.devices.config:
        assert c.opaque is not None
        (attribute,) = msgspec.json.decode(c.opaque.parameters)
        assert msgspec.json.decode(c.opaque.parameters) == {attribute: f"{attribute}Value"}
        out.append((c.source, c.requests, c.opaque.driver, attribute))
    return out


@pytest.mark.parametrize("case", [pytest.param(c, id=c.go_case) for c in CASES])
def test_allocator_case(case: Case) -> None:
    """One ported case of TestAllocator (the Go test and case name are ``case.go_test``/``case.go_case``)."""
    inventory = Inventory(case.slices)
    allocator = Allocator(
        inventory, {c.metadata.name: c for c in case.classes}, DeviceLedger(case.allocated), case.features
    )
    outcome = allocator.allocate(case.claims, *case.node)
    if case.expect is not None:
        assert outcome.allocations is not None, outcome.reason
        assert [_actual(a) for a in outcome.allocations] == [
            (_selector_key(sel), sorted(devs)) for sel, devs in case.expect
        ]
        assert [_config(a) for a in outcome.allocations] == (
            case.config if case.config is not None else [[] for _ in case.expect]
        )
    else:
        assert outcome.allocations is None
    if case.reason:
        assert case.reason in outcome.reason
    assert outcome.claim_error == case.claim_error
    if case.cel_error:
        assert any(case.cel_error in str(e) for e in outcome.cel_errors), outcome.cel_errors
    else:
        assert outcome.cel_errors == []
