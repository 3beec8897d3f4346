"""The cache's DRA room (cache/dra.py): the view a snapshot gets, what is rebuilt when, pods waiting
for their claims, and allocations assumed until the watch shows them."""

from __future__ import annotations

import msgspec

from caldera.cache.informer import OPTIONAL, PATHS
from caldera.cache.store import ClusterCache
from caldera.framework.dra.objects import (
    AllocationResult,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
)
from caldera.framework.dra.view import ClaimAllocation
from caldera.framework.result import Placement, SessionResult
from caldera.hack.scenario import (
    claim_pod_spec,
    device_class,
    load,
    node,
    pod,
    podgroup,
    resource_claim,
    resource_slice,
)

GPU = "gpu.example.com"


def test_the_dra_kinds_are_watched_and_optional() -> None:
    for kind in ("deviceclasses", "resourceslices", "resourceclaims"):
        assert PATHS[kind].startswith("/apis/resource.k8s.io/v1/")
        assert kind in OPTIONAL


def test_no_dra_objects_no_view() -> None:
    cache = load(ClusterCache(), nodes=[node("n1")], pods=[pod("p", group="p")], podgroups=[podgroup("p")])
    assert cache.snapshot().dra is None


def test_the_inventory_is_rebuilt_only_when_slices_change() -> None:
    cache = ClusterCache()
    cache.upsert_device_class(device_class(GPU))
    cache.upsert_resource_slice(resource_slice("n1", GPU, ["gpu-0"]))
    first = cache.snapshot().dra
    assert first is not None
    assert cache.snapshot().dra is first  # nothing changed: the same value
    cache.upsert_resource_claim(resource_claim("c0", GPU))
    second = cache.snapshot().dra
    assert second is not None and second is not first
    assert second.inventory is first.inventory
    assert "default/c0" in second.claims and "default/c0" not in first.claims
    cache.upsert_resource_slice(resource_slice("n2", GPU, ["gpu-0"]))
    third = cache.snapshot().dra
    assert third is not None and third.inventory is not first.inventory


def test_a_pod_whose_claim_is_missing_is_a_problem_until_the_claim_comes() -> None:
    cache = load(
        ClusterCache(),
        nodes=[node("n1")],
        pods=[pod("p", group="p", spec_extra=claim_pod_spec("c0"))],
        podgroups=[podgroup("p")],
    )
    [wait] = cache.problems().claim_waits
    assert (wait.key, wait.reason) == ("default/p", "waiting for ResourceClaim default/c0 to be created")
    cache.upsert_resource_claim(resource_claim("c0", GPU))
    assert cache.problems().claim_waits == ()


def _allocation(device: str) -> AllocationResult:
    return AllocationResult(
        devices=DeviceAllocationResult(
            results=[DeviceRequestAllocationResult(request="req", driver=GPU, pool="n1", device=device)]
        )
    )


def test_an_assumed_allocation_holds_the_devices_until_the_watch_shows_the_claim() -> None:
    p = pod("p", group="p", spec_extra=claim_pod_spec("c0"))
    claim = resource_claim("c0", GPU)
    cache = load(
        ClusterCache(),
        nodes=[node("n1")],
        pods=[p],
        podgroups=[podgroup("p")],
        dra=[device_class(GPU), resource_slice("n1", GPU, ["gpu-0"]), claim],
    )
    snap = cache.snapshot()
    task = snap.jobs["default/p"].tasks[p.metadata.uid]
    ca = ClaimAllocation("default", "c0", claim.metadata.uid, _allocation("gpu-0"), True)
    cache.apply(SessionResult(placements=[Placement(task, "n1", claims=[ca])], seq=snap.seq))
    view = cache.snapshot().dra
    assert view is not None and (GPU, "n1", "gpu-0") in view.allocated
    assert [r.uid for r in view.claims["default/c0"].status.reserved_for] == [p.metadata.uid]

    # The bind failed: the assumption goes, the device is free again.
    cache.forget_assumption(p.metadata.uid)
    view = cache.snapshot().dra
    assert view is not None and not view.allocated

    # Assumed again, then the watch shows the claim allocated: the API's word stands.
    task = cache.snapshot().jobs["default/p"].tasks[p.metadata.uid]
    cache.apply(SessionResult(placements=[Placement(task, "n1", claims=[ca])]))
    cache.confirm_bound(p.metadata.uid)
    written = msgspec.structs.replace(
        claim, status=msgspec.structs.replace(claim.status, allocation=_allocation("gpu-0"))
    )
    cache.upsert_resource_claim(written)
    view = cache.snapshot().dra
    assert view is not None and view.claims["default/c0"] is written
    assert (GPU, "n1", "gpu-0") in view.allocated
