"""The counting fast path (framework/dra/freeindex.py) against the full structured allocator: on random
small inventories, for random one-request claims, as devices are taken and given back, both say the same
nodes fit, pick the same devices and give the same reasons; where the fast path stands aside, the claim is one it must not
answer for."""

from __future__ import annotations

import random
from types import SimpleNamespace

import msgspec
import numpy as np
import pytest

from caldera.framework.dra.allocator import Allocator, DeviceLedger, Inventory
from caldera.framework.dra.freeindex import FreeIndex, shape_devices, simple_shape
from caldera.framework.dra.objects import AllocationResult, DeviceClass, ResourceClaim, ResourceSlice
from caldera.framework.objects import decode

DRIVERS = ("a.example.com", "b.example.com")
NODES = ("n1", "n2", "n3", "n4")
CLASSES = {
    "any": "true",
    "a": 'device.driver == "a.example.com"',
    # runs on a.example.com's devices only; on the others the attribute's domain is missing: an error
    "a-x": 'device.driver == "a.example.com" && device.attributes["a.example.com"].model == "x"',
    "big": 'device.capacity[device.driver].memory.compareTo(quantity("16Gi")) >= 0',
}
REQUEST_SELECTORS = (
    "",
    "",
    'device.attributes["a.example.com"].model == "y"',  # an error on b.example.com's devices
    'device.driver.startsWith("b")',
)


def _decode(kind: type, doc: dict) -> object:
    return decode(kind, msgspec.json.encode(doc))


#: the classes that carry a driver configuration (copied into each allocation result)
CONFIGURED = {"a": {"opaque": {"driver": "a.example.com", "parameters": {"sharing": "time-slicing"}}}}


def _classes() -> dict[str, DeviceClass]:
    out = {}
    for name, expression in CLASSES.items():
        spec: dict = {"selectors": [{"cel": {"expression": expression}}]}
        if name in CONFIGURED:
            spec["config"] = [CONFIGURED[name]]
        out[name] = _decode(DeviceClass, {"metadata": {"name": name}, "spec": spec})
    return out  # type: ignore[return-value]


def _slices(rng: random.Random) -> list[ResourceSlice]:
    out = []
    for node in NODES:
        for driver in DRIVERS:
            if rng.random() < 0.3:
                continue
            devices = [
                {
                    "name": f"d{i}",
                    "attributes": {"model": {"string": rng.choice("xy")}},
                    "capacity": {"memory": {"value": rng.choice(["8Gi", "16Gi", "32Gi"])}},
                }
                for i in range(rng.randint(0, 4))
            ]
            if devices and rng.random() < 0.05:
                devices.append(dict(devices[0]))  # a duplicate name: the pool is invalid
            count = 2 if rng.random() < 0.05 else 1  # one slice of two: the pool is being updated
            doc = {
                "metadata": {"name": f"{node}-{driver}"},
                "spec": {
                    "driver": driver,
                    "nodeName": node,
                    "pool": {"name": f"{node}-pool", "generation": 1, "resourceSliceCount": count},
                    "devices": devices,
                },
            }
            out.append(_decode(ResourceSlice, doc))
    return out  # type: ignore[return-value]


def _claim(rng: random.Random, name: str) -> ResourceClaim:
    exactly: dict = {"deviceClassName": rng.choice([*CLASSES, "missing"]), "count": rng.randint(1, 3)}
    selector = rng.choice(REQUEST_SELECTORS)
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    if rng.random() < 0.1:
        exactly["adminAccess"] = True
    devices: dict = {"requests": [{"name": "r", "exactly": exactly}]}
    if rng.random() < 0.1:
        devices["constraints"] = [{"matchAttribute": "a.example.com/model"}]
    if rng.random() < 0.3:
        opaque = {"driver": "b.example.com", "parameters": {"replicas": rng.randint(1, 4)}}
        devices["config"] = [
            {"requests": ["r"], "opaque": opaque} if rng.random() < 0.5 else {"opaque": opaque}
        ]
    doc = {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices}}
    return _decode(ResourceClaim, doc)  # type: ignore[return-value]


def _devices(result: AllocationResult | None) -> object:
    # (as JSON: a driver configuration's parameters are raw JSON)
    return None if result is None else msgspec.json.decode(msgspec.json.encode(result))


@pytest.mark.parametrize("seed", range(40))
def test_the_counting_fast_path_answers_as_the_allocator_does(seed: int) -> None:
    rng = random.Random(seed)
    inventory = Inventory(_slices(rng))
    classes = _classes()
    ledger = DeviceLedger()
    allocator = Allocator(inventory, classes, ledger)
    rows = np.arange(len(NODES))
    indexes: dict[object, FreeIndex] = {}
    held: list[AllocationResult] = []
    answered = 0
    for step in range(30):
        claim = _claim(rng, f"c{step}")
        outcomes = [allocator.allocate([claim], node, {}) for node in NODES]
        shape = simple_shape(claim, classes, inventory)
        devices = shape_devices(inventory, shape.expressions) if shape is not None else None
        if shape is None or devices is None:
            continue  # the full allocator answers (test_the_fast_path_stands_aside_...)
        assert not any(o.claim_error for o in outcomes), [o.reason for o in outcomes]
        assert not any(o.cel_errors for o in outcomes)
        index = indexes.get(shape)
        if index is None:
            index = indexes[shape] = FreeIndex(shape, devices, list(NODES), ledger)
        answered += 1
        fits = index.fits(rows)
        assert fits.tolist() == [o.allocations is not None for o in outcomes]
        for row, outcome in enumerate(outcomes):
            expected = outcome.allocations[0] if outcome.allocations is not None else None
            assert _devices(index.pick(row, claim, classes)) == _devices(expected)
            assert index.why_not(row, f"default/{claim.metadata.name}", inventory) == (
                "" if expected is not None else outcome.reason
            )
        # take a node's devices (as the statement's allocate event does), sometimes give some back
        feasible = [o.allocations[0] for o in outcomes if o.allocations is not None]
        if feasible:
            taken = rng.choice(feasible)
            ledger.take(taken, claim.metadata.name)
            held.append(taken)
            _refresh(indexes, taken)
        if held and rng.random() < 0.3:
            given = held.pop(rng.randrange(len(held)))
            ledger.release(given)
            _refresh(indexes, given)
    assert answered, "the fast path answered no claim"


def _refresh(indexes: dict[object, FreeIndex], result: AllocationResult) -> None:
    for index in indexes.values():
        for r in result.devices.results:
            index.refresh((r.driver, r.pool, r.device))


def test_the_fast_path_stands_aside_for_what_only_the_allocator_answers() -> None:
    rng = random.Random(1)
    inventory = Inventory(_slices(rng))
    classes = _classes()

    def claim(exactly: dict, constraints: list | None = None) -> ResourceClaim:
        devices: dict = {"requests": [{"name": "r", "exactly": {"deviceClassName": "a", **exactly}}]}
        if constraints:
            devices["constraints"] = constraints
        return _decode(  # type: ignore[return-value]
            ResourceClaim, {"metadata": {"name": "c", "namespace": "default"}, "spec": {"devices": devices}}
        )

    assert simple_shape(claim({}), classes, inventory) is not None
    assert simple_shape(claim({"deviceClassName": "missing"}), classes, inventory) is None
    assert simple_shape(claim({"adminAccess": True}), classes, inventory) is None
    assert simple_shape(claim({"allocationMode": "All"}), classes, inventory) is None
    assert simple_shape(claim({"count": 33}), classes, inventory) is None
    assert simple_shape(claim({}, [{"matchAttribute": "a.example.com/model"}]), classes, inventory) is None
    bad = {"selectors": [{"cel": {"expression": "device.driver =="}}]}
    assert simple_shape(claim(bad), classes, inventory) is None
    # a selector that fails on some device: the allocator reports it, so the fast path does not answer
    failing = simple_shape(
        claim({"selectors": [{"cel": {"expression": REQUEST_SELECTORS[2]}}]}), classes, inventory
    )
    assert failing is not None
    any_class = simple_shape(
        _decode(  # type: ignore[arg-type]
            ResourceClaim,
            {
                "metadata": {"name": "c", "namespace": "default"},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "r",
                                "exactly": {
                                    "deviceClassName": "any",
                                    "selectors": [{"cel": {"expression": REQUEST_SELECTORS[2]}}],
                                },
                            }
                        ]
                    }
                },
            },
        ),
        classes,
        inventory,
    )
    assert any_class is not None
    assert shape_devices(inventory, any_class.expressions) is None  # b.example.com's devices fail it
    # a slice serving several nodes: the allocator matches it against each node's labels
    shared = _decode(
        ResourceSlice,
        {
            "metadata": {"name": "shared"},
            "spec": {
                "driver": "a.example.com",
                "allNodes": True,
                "pool": {"name": "shared", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "s0"}],
            },
        },
    )
    with_shared = Inventory([*_slices(random.Random(1)), shared])  # type: ignore[list-item]
    assert simple_shape(claim({}), classes, with_shared) is None


def test_devices_an_eviction_frees_are_counted_free_by_an_index_built_before_or_after() -> None:
    """An allocated claim whose last pod is evicted gives its devices back (``DeviceLedger.free``): an
    index made before counts them free once refreshed, one made after counts them free from the start,
    and both answer as the allocator over the same ledger; undoing the release holds them again."""
    slice_ = _decode(
        ResourceSlice,
        {
            "metadata": {"name": "n1-a"},
            "spec": {
                "driver": "a.example.com",
                "nodeName": "n1",
                "pool": {"name": "n1-pool", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "d0"}, {"name": "d1"}],
            },
        },
    )
    inventory = Inventory([slice_])  # type: ignore[list-item]
    classes = _classes()
    held = _decode(
        AllocationResult,
        {
            "devices": {
                "results": [{"request": "r", "driver": "a.example.com", "pool": "n1-pool", "device": "d1"}]
            }
        },
    )
    assert isinstance(held, AllocationResult)
    ledger = DeviceLedger([("a.example.com", "n1-pool", "d0"), ("a.example.com", "n1-pool", "d1")])
    allocator = Allocator(inventory, classes, ledger)
    claim = _decode(
        ResourceClaim,
        {
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "a"}}]}},
        },
    )
    assert isinstance(claim, ResourceClaim)
    shape = simple_shape(claim, classes, inventory)
    assert shape is not None
    devices = shape_devices(inventory, shape.expressions)
    assert devices is not None
    rows = np.arange(1)
    before = FreeIndex(shape, devices, ["n1"], ledger)
    assert before.fits(rows).tolist() == [False]

    ledger.free(held)
    _refresh({"before": before}, held)
    after = FreeIndex(shape, devices, ["n1"], ledger)
    expected = allocator.allocate([claim], "n1", {}).allocations
    assert expected is not None
    for index in (before, after):
        assert index.fits(rows).tolist() == [True]
        assert _devices(index.pick(0, claim, classes)) == _devices(expected[0])  # d1, the device released

    assert ledger.unfree(held) == []
    _refresh({"before": before, "after": after}, held)
    assert allocator.allocate([claim], "n1", {}).allocations is None
    for index in (before, after, FreeIndex(shape, devices, ["n1"], ledger)):
        assert index.fits(rows).tolist() == [False]


@pytest.mark.parametrize("seed", range(20))
def test_the_rows_in_use_are_the_devices_in_use_whichever_side_is_walked(seed: int) -> None:
    """``DeviceLedger.in_use_among`` (what a new index counts as taken) names, once each, exactly the
    devices ``in_use`` says are: allocated ones not freed by an eviction, and those the session took
    (freed ones among them), whether the devices asked about or those held are fewer."""
    rng = random.Random(seed)
    universe = [("a.example.com", "p", f"d{i}") for i in range(30)]

    def result(ids: list[tuple[str, str, str]]) -> AllocationResult:
        doc = {
            "devices": {"results": [{"request": "r", "driver": d, "pool": p, "device": n} for d, p, n in ids]}
        }
        got = _decode(AllocationResult, doc)
        assert isinstance(got, AllocationResult)
        return got

    allocated = rng.sample(universe, rng.randint(0, 20))
    ledger = DeviceLedger(allocated)
    if allocated:
        ledger.free(result(rng.sample(allocated, rng.randint(0, len(allocated)))))
    free_now = [d for d in universe if not ledger.in_use(d)]
    if free_now:
        ledger.take(result(rng.sample(free_now, rng.randint(0, min(5, len(free_now))))), "c")
    for size in (1, 3, 10, 30):
        asked = {d: row for row, d in enumerate(rng.sample(universe, size))}
        expected = sorted(row for d, row in asked.items() if ledger.in_use(d))
        assert sorted(ledger.in_use_among(asked)) == expected
        # what FreeIndex.refresh recounts a node with: the devices in_use says are free
        devices = [SimpleNamespace(id=d) for d in asked]
        assert ledger.free_among(devices) == len(asked) - len(expected)  # type: ignore[arg-type]
