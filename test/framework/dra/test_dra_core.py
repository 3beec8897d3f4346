"""The DRA core beyond the ported allocator cases: decoding, the CEL environment, the cycle's ledger,
and one inventory serving many nodes."""

from __future__ import annotations

import json

import pytest

from caldera.framework.dra.allocator import Allocator, DeviceLedger, Inventory
from caldera.framework.dra.cel import CelCache, DeviceContext
from caldera.framework.dra.objects import (
    AllocationResult,
    Device,
    DeviceAllocationResult,
    DeviceAttribute,
    DeviceCapacity,
    DeviceClass,
    DeviceRequestAllocationResult,
    ResourceClaim,
    ResourceSlice,
)
from caldera.framework.objects import ObjectError, Pod, decode

GPU_CLASS = b'{"metadata":{"name":"gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == \\"gpu.example.com\\""}}]}}'


def gpu_slice(node: str, n: int, pool: str = "", generation: int = 1, count: int = 1) -> ResourceSlice:
    devices = ",".join(
        f'{{"name":"gpu-{i}","attributes":{{"model":{{"string":"a100"}},"numa":{{"int":{i % 2}}}}},'
        f'"capacity":{{"memory":{{"value":"40Gi"}}}}}}'
        for i in range(n)
    )
    raw = (
        f'{{"metadata":{{"name":"{node}-gpu"}},"spec":{{"driver":"gpu.example.com","nodeName":"{node}",'
        f'"pool":{{"name":"{pool or node}","generation":{generation},"resourceSliceCount":{count}}},"devices":[{devices}]}}}}'
    )
    return decode(ResourceSlice, raw)


def gpu_claim(name: str, count: int = 1, selector: str = "") -> ResourceClaim:
    selectors = f',"selectors":[{{"cel":{{"expression":{json.dumps(selector)}}}}}]' if selector else ""
    raw = (
        f'{{"metadata":{{"name":"{name}","namespace":"default"}},"spec":{{"devices":{{"requests":'
        f'[{{"name":"gpu","exactly":{{"deviceClassName":"gpu","count":{count}{selectors}}}}}]}}}}}}'
    )
    return decode(ResourceClaim, raw)


def allocator(slices: list[ResourceSlice], ledger: DeviceLedger | None = None) -> Allocator:
    return Allocator(Inventory(slices), {"gpu": decode(DeviceClass, GPU_CLASS)}, ledger or DeviceLedger())


def test_a_malformed_claim_is_an_object_error_naming_it() -> None:
    with pytest.raises(ObjectError, match=r"malformed ResourceClaim default/c0: .*count"):
        decode(
            ResourceClaim,
            b'{"metadata":{"name":"c0","namespace":"default"},"spec":{"devices":{"requests":[{"name":"r","exactly":{"count":"two"}}]}}}',
        )


def test_pod_claims_and_their_statuses_are_read() -> None:
    pod = decode(
        Pod,
        b'{"metadata":{"name":"p"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"t"},'
        b'{"name":"shared","resourceClaimName":"c"}]},"status":{"resourceClaimStatuses":[{"name":"gpu","resourceClaimName":"p-gpu-x1"}]}}',
    )
    assert [
        (c.name, c.resource_claim_name, c.resource_claim_template_name) for c in pod.spec.resource_claims
    ] == [
        ("gpu", None, "t"),
        ("shared", "c", None),
    ]
    assert pod.status.resource_claim_statuses[0].resource_claim_name == "p-gpu-x1"


def _ctx() -> DeviceContext:
    device = Device(
        name="gpu-0",
        attributes={
            "model": DeviceAttribute(string_value="a100"),
            "vendor.example.com/fw": DeviceAttribute(version_value="1.10.0"),
        },
        capacity={"memory": DeviceCapacity(value="40Gi")},
    )
    return DeviceContext("gpu.example.com", "node-1", device)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.attributes["gpu.example.com"].model == "a100"', True),
        ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("32Gi"))', True),
        ('device.capacity["gpu.example.com"].memory == quantity("40960Mi")', True),
        ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("40Gi"))', False),
        # 1.10.0 > 1.9.0 as versions, though not as strings
        ('device.attributes["vendor.example.com"].fw.isGreaterThan(semver("1.9.0"))', True),
        ('device.attributes["vendor.example.com"].fw.minor() == 10', True),
        ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
        ('isSemver("1.0") || isQuantity("ten")', False),
    ],
)
def test_the_kubernetes_functions_answer_as_documented(expression: str, expected: bool) -> None:
    assert CelCache().get(expression).matches(_ctx()) is expected


@pytest.mark.parametrize(
    ("expression", "kind", "text"),
    [
        ("device.driver == ", "compile", "Syntax error"),
        ('device.attributes["gpu.example.com"].cores > 4', "runtime", "cores"),
        ("device.driver", "runtime", "must evaluate to bool"),
        ('quantity("lots") == quantity("1")', "runtime", "invalid quantity"),
    ],
)
def test_a_bad_expression_is_a_typed_error_not_an_exception(expression: str, kind: str, text: str) -> None:
    answer = CelCache().get(expression).matches(_ctx())
    assert not isinstance(answer, bool)
    assert answer.kind == kind and text in answer.message and answer.expression == expression


def test_an_expression_compiles_once() -> None:
    cache = CelCache()
    assert cache.get("true") is cache.get("true")
    assert len(cache) == 1


def test_one_inventory_serves_each_node_its_own_devices() -> None:
    alloc = allocator([gpu_slice("node-1", 2), gpu_slice("node-2", 1)])
    claims = [gpu_claim("c0", 2)]
    on1 = alloc.allocate(claims, "node-1", {})
    on2 = alloc.allocate(claims, "node-2", {})
    assert on1.allocations is not None
    assert [(r.pool, r.device) for r in on1.allocations[0].devices.results] == [
        ("node-1", "gpu-0"),
        ("node-1", "gpu-1"),
    ]
    assert on2.allocations is None
    assert (
        on2.reason == "no free device of class gpu for claim default/c0 request gpu: 1 devices, 0 allocated"
    )
    assert alloc.allocate(claims, "node-3", {}).reason.endswith("0 devices, 0 allocated")


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    old = gpu_slice("node-1", 4, pool="p", generation=1)
    new = gpu_slice("node-1", 1, pool="p", generation=2)
    outcome = allocator([new, old]).allocate([gpu_claim("c0", 2)], "node-1", {})
    assert outcome.allocations is None and "1 devices" in outcome.reason


def test_devices_taken_in_the_cycle_are_released_by_a_rollback() -> None:
    ledger = DeviceLedger()
    alloc = allocator([gpu_slice("node-1", 2)], ledger)
    mark = ledger.mark()
    first = alloc.allocate([gpu_claim("c0", 2)], "node-1", {})
    assert first.allocations is not None
    ledger.take(first.allocations[0], "default/c0")
    assert ledger.holder(("gpu.example.com", "node-1", "gpu-0")) == "default/c0"
    # a second gang in the same cycle finds both devices taken
    second = alloc.allocate([gpu_claim("c1")], "node-1", {})
    assert second.allocations is None and "2 devices, 2 allocated" in second.reason
    ledger.rollback(mark)  # the first gang was discarded
    assert alloc.allocate([gpu_claim("c1")], "node-1", {}).allocations is not None


def test_devices_of_allocated_claims_are_unavailable() -> None:
    ledger = DeviceLedger([("gpu.example.com", "node-1", "gpu-0")])
    outcome = allocator([gpu_slice("node-1", 2)], ledger).allocate([gpu_claim("c0")], "node-1", {})
    assert outcome.allocations is not None
    assert outcome.allocations[0].devices.results[0].device == "gpu-1"


def test_devices_of_a_claim_released_by_an_eviction_are_free_until_the_eviction_is_undone() -> None:
    held = ("gpu.example.com", "node-1", "gpu-0")
    ledger = DeviceLedger([held])
    alloc = allocator([gpu_slice("node-1", 1)], ledger)
    assert alloc.allocate([gpu_claim("c0")], "node-1", {}).allocations is None
    victim = AllocationResult(
        devices=DeviceAllocationResult(
            results=[
                DeviceRequestAllocationResult(request="req", driver=held[0], pool=held[1], device=held[2])
            ]
        )
    )
    ledger.free(victim)
    outcome = alloc.allocate([gpu_claim("c0")], "node-1", {})
    assert outcome.allocations is not None
    ledger.take(outcome.allocations[0], "default/c0")
    assert ledger.in_use(held) and ledger.holder(held) == "default/c0"
    # undone newest first: the preemptor's take, then the eviction
    ledger.release(outcome.allocations[0])
    assert not ledger.in_use(held)
    assert ledger.unfree(victim) == []
    assert ledger.in_use(held) and ledger.holder(held) is None


def test_a_selector_failing_on_a_device_skips_that_device_and_is_reported() -> None:
    claim = gpu_claim(
        "c0",
        1,
        'device.attributes["gpu.example.com"].numa == 1 && device.attributes["gpu.example.com"].nvlink',
    )
    outcome = allocator([gpu_slice("node-1", 2)]).allocate([claim], "node-1", {})
    assert outcome.allocations is None
    assert [e.kind for e in outcome.cel_errors] == ["runtime"]
    assert "gpu.example.com/node-1/gpu-1" in str(outcome.cel_errors[0])


def test_a_claim_for_a_missing_class_is_the_claims_fault() -> None:
    raw = b'{"metadata":{"name":"c0"},"spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"tpu"}}]}}}'
    outcome = allocator([gpu_slice("node-1", 1)]).allocate([decode(ResourceClaim, raw)], "node-1", {})
    assert outcome.claim_error and "could not retrieve device class tpu" in outcome.reason


def test_a_share_of_a_device_holds_capacity_not_the_device() -> None:
    """allocateddevices.go foreachAllocatedDevice: a result with a shareID is a share (its consumed
    capacity summed per device), not a device the claim holds alone."""
    from decimal import Decimal

    from caldera.framework.dra.objects import (
        AllocationResult,
        DeviceAllocationResult,
        DeviceRequestAllocationResult,
        ResourceClaim,
        ResourceClaimStatus,
    )
    from caldera.framework.dra.view import allocated_devices, shared_consumption

    def claim(share: str | None, cores: str) -> ResourceClaim:
        result = DeviceRequestAllocationResult(
            request="r",
            driver="d",
            pool="p",
            device="gpu-0",
            share_id=share,
            consumed_capacity={"cores": cores},
        )
        return ResourceClaim(
            status=ResourceClaimStatus(
                allocation=AllocationResult(devices=DeviceAllocationResult(results=[result]))
            )
        )

    claims = {"ns/a": claim("s1", "40"), "ns/b": claim("s2", "30")}
    assert allocated_devices(claims) == {}
    assert shared_consumption(claims) == {("d", "p", "gpu-0"): {"cores": Decimal(70)}}
    assert allocated_devices({"ns/c": claim(None, "0")}) == {("d", "p", "gpu-0"): "ns/c"}
