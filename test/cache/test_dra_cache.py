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


def test_a_claims_wait_follows_its_claim_and_nothing_else_about_it() -> None:
    """problems() reads whether each claim exists and is being deleted (the assumed copy laid over
    the watched one): it looks again when that moves, and only then."""
    cache = load(
        ClusterCache(),
        nodes=[node("n1")],
        pods=[pod("p", group="p", spec_extra=claim_pod_spec("c0"))],
        podgroups=[podgroup("p")],
        dra=[device_class(GPU), resource_slice("n1", GPU, ["gpu-0"])],
    )
    claim = resource_claim("c0", GPU)
    [wait] = cache.problems().claim_waits
    assert wait.reason == "waiting for ResourceClaim default/c0 to be created"
    cache.upsert_resource_claim(claim)
    settled = cache.problems()
    assert settled.claim_waits == ()

    # allocated and reserved, by someone else's write or by an assumption: nothing problems() reads
    allocated = msgspec.structs.replace(
        claim, status=msgspec.structs.replace(claim.status, allocation=_allocation("gpu-0"))
    )
    cache.upsert_resource_claim(allocated)
    cache.upsert_resource_claim(claim)
    ca = ClaimAllocation("default", "c0", claim.metadata.uid, _allocation("gpu-0"), True)
    cache.assume_claims("other", "other-uid", [ca])
    cache.upsert_device_class(device_class(GPU))
    cache.upsert_resource_slice(resource_slice("n1", GPU, ["gpu-0", "gpu-1"]))
    assert cache.problems() is settled

    # being deleted: the watched claim says so, the assumed copy (made before) does not yet
    deleting = msgspec.structs.replace(
        claim, metadata=msgspec.structs.replace(claim.metadata, deletion_timestamp="2026-11-28T00:00:00Z")
    )
    cache.upsert_resource_claim(deleting)
    assert cache.problems().claim_waits == ()
    # the assumption given up: the deletion shows
    cache.forget_claims("other-uid")
    [wait] = cache.problems().claim_waits
    assert wait.reason == "ResourceClaim default/c0 is being deleted"
    cache.delete_resource_claim(deleting)
    [wait] = cache.problems().claim_waits
    assert wait.reason == "waiting for ResourceClaim default/c0 to be created"
    cache.upsert_resource_claim(claim)
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


def test_the_held_devices_follow_every_claim_change_as_a_rebuild_would() -> None:
    """The view's devices in use are kept from the claims changed since the last view; after random
    watch events (allocated, deallocated, deleted, a claim allocated to a device another holds) and
    assumptions made and given up, they are what a rebuild from every claim finds."""
    import random

    from caldera.framework.dra.view import allocated_devices

    rng = random.Random(7)
    cache = ClusterCache()
    cache.upsert_device_class(device_class(GPU))
    cache.upsert_resource_slice(resource_slice("n1", GPU, [f"gpu-{d}" for d in range(4)]))
    claims = {f"c{i}": resource_claim(f"c{i}", GPU) for i in range(6)}
    assumed_for: list[str] = []
    for step in range(300):
        name = rng.choice(sorted(claims))
        roll = rng.random()
        if roll < 0.4:
            allocation = _allocation(f"gpu-{rng.randrange(4)}") if rng.random() < 0.7 else None
            claims[name] = msgspec.structs.replace(
                claims[name], status=msgspec.structs.replace(claims[name].status, allocation=allocation)
            )
            cache.upsert_resource_claim(claims[name])
        elif roll < 0.5:
            cache.delete_resource_claim(claims[name])
        elif roll < 0.8:
            uid = f"pod-{step}"
            ca = ClaimAllocation(
                "default", name, claims[name].metadata.uid, _allocation(f"gpu-{rng.randrange(4)}"), True
            )
            cache.assume_claims(f"p{step}", uid, [ca])
            assumed_for.append(uid)
        elif assumed_for:
            cache.forget_claims(assumed_for.pop(rng.randrange(len(assumed_for))))
        if rng.random() < 0.3:
            view = cache.dra_view()
            assert view is not None
            expected = allocated_devices(view.claims)  # every claim the view has, assumed ones included
            assert view.allocated == frozenset(expected)
            assert set(view.holders) == set(expected)


def test_the_binders_claim_writes_coming_back_change_no_decision_but_another_change_does() -> None:
    p = pod("p", group="p", spec_extra=claim_pod_spec("c0"))
    claim = resource_claim("c0", GPU)
    cache = load(
        ClusterCache(),
        nodes=[node("n1")],
        pods=[p],
        podgroups=[podgroup("p")],
        dra=[device_class(GPU), resource_slice("n1", GPU, ["gpu-0", "gpu-1"]), claim],
    )
    snap = cache.snapshot()
    task = snap.jobs["default/p"].tasks[p.metadata.uid]
    ca = ClaimAllocation("default", "c0", claim.metadata.uid, _allocation("gpu-0"), True)
    cache.apply(SessionResult(placements=[Placement(task, "n1", claims=[ca])], seq=snap.seq))
    decided = cache.decision_revision

    def version(rv: str, **status: object):
        meta = msgspec.structs.replace(
            claim.metadata, resource_version=rv, finalizers=["resource.kubernetes.io/delete-protection"]
        )
        return msgspec.structs.replace(
            claim, metadata=meta, status=msgspec.structs.replace(claim.status, **status)
        )

    # the binder's finalizer, then its allocation and reservation, as the cache assumed them
    cache.upsert_resource_claim(version("2"))
    reserved = cache.snapshot().dra.claims["default/c0"].status.reserved_for
    cache.upsert_resource_claim(version("3", allocation=_allocation("gpu-0"), reserved_for=reserved))
    assert cache.decision_revision == decided
    # the binder's answers: the claim written at version 3, the pod bound
    cache.claim_written("default/c0", claim.metadata.uid, "3")
    cache.confirm_bound(p.metadata.uid)
    assert cache.decision_revision == decided
    # the pod ends and its reservation goes: a decision may change (the claim is free to reserve)
    cache.upsert_resource_claim(version("4", allocation=_allocation("gpu-0"), reserved_for=[]))
    assert cache.decision_revision > decided
    moved = cache.decision_revision
    # allocated elsewhere by someone else: the devices held changed
    cache.upsert_resource_claim(version("5", allocation=_allocation("gpu-1"), reserved_for=[]))
    assert cache.decision_revision > moved


def _at(claim, version: str, allocation: AllocationResult | None, reserved_for: str = ""):
    """The claim as the API has it at ``version``."""
    from caldera.framework.dra.objects import ResourceClaimConsumerReference, ResourceClaimStatus

    refs = (
        [ResourceClaimConsumerReference(resource="pods", name="p", uid=reserved_for)] if reserved_for else []
    )
    return msgspec.structs.replace(
        claim,
        metadata=msgspec.structs.replace(claim.metadata, resource_version=version),
        status=ResourceClaimStatus(allocation=allocation, reserved_for=refs),
    )


def _one_gpu_pod():
    """A node with one GPU, and pod p using claim c0 (at version 1, not allocated)."""
    p = pod("p", group="p", spec_extra=claim_pod_spec("c0"))
    claim = _at(resource_claim("c0", GPU), "1", None)
    cache = load(
        ClusterCache(),
        nodes=[node("n1")],
        pods=[p],
        podgroups=[podgroup("p")],
        dra=[device_class(GPU), resource_slice("n1", GPU, ["gpu-0"]), claim],
    )
    return cache, p, claim


def test_an_earlier_attempts_events_arriving_late_never_free_the_devices_of_the_next_one() -> None:
    # Attempt 1: the binder allocates c0 to gpu-0 for pod p (version 2), the binding fails, the
    # binder takes the reservation back (3) and the resourceclaim controller deallocates (4).
    # Attempt 2 places p on gpu-0 again. Only then does the watch bring versions 2, 3 and 4: the
    # deallocation is attempt 1's, and gpu-0 stays held for attempt 2 until its own write shows.
    cache, p, claim = _one_gpu_pod()
    uid = p.metadata.uid
    gpu0 = (GPU, "n1", "gpu-0")
    ca = ClaimAllocation("default", "c0", claim.metadata.uid, _allocation("gpu-0"), True)

    def place() -> None:
        task = cache.snapshot().jobs["default/p"].tasks[uid]
        cache.apply(SessionResult(placements=[Placement(task, "n1", claims=[ca])]))

    def held() -> bool:
        view = cache.snapshot().dra
        assert view is not None
        return gpu0 in view.allocated

    place()
    cache.claim_written("default/c0", claim.metadata.uid, "2")
    cache.forget_assumption(uid)  # the binding failed; the binder took the reservation back (3)
    assert held()  # written: the API holds it until the watch shows otherwise
    place()  # attempt 2
    for version, allocation, reserved in (("2", _allocation("gpu-0"), uid), ("3", _allocation("gpu-0"), "")):
        cache.upsert_resource_claim(_at(claim, version, allocation, reserved))
        assert held()
    cache.upsert_resource_claim(_at(claim, "4", None))
    assert held(), "attempt 1's deallocation freed the device attempt 2 is writing"

    cache.claim_written("default/c0", claim.metadata.uid, "5")  # attempt 2's write answered
    cache.confirm_bound(uid)
    assert held()
    cache.upsert_resource_claim(_at(claim, "5", _allocation("gpu-0"), uid))  # and seen
    view = cache.snapshot().dra
    assert view is not None and view.claims["default/c0"].metadata.resource_version == "5"
    assert gpu0 in view.allocated
    # the pod finished: deallocated by the controller, the device is free
    cache.upsert_resource_claim(_at(claim, "6", None))
    assert not held()


def test_a_claim_allocated_for_a_pod_whose_bind_was_answered_first_is_released_by_the_watch() -> None:
    # The watch shows the pod bound before the binder's answer arrives (the task is Bound when the
    # binder confirms): the claim's assumption still gives way to its written version, and when the
    # pod is done and the claim deallocated, the device is free.
    cache, p, claim = _one_gpu_pod()
    task = cache.snapshot().jobs["default/p"].tasks[p.metadata.uid]
    ca = ClaimAllocation("default", "c0", claim.metadata.uid, _allocation("gpu-0"), True)
    cache.apply(SessionResult(placements=[Placement(task, "n1", claims=[ca])]))
    cache.claim_written("default/c0", claim.metadata.uid, "2")
    bound = pod("p", group="p", spec_extra=claim_pod_spec("c0"), node_name="n1", uid=p.metadata.uid)
    cache.upsert_pod(bound)  # the watch first
    cache.confirm_bound(p.metadata.uid)  # then the answer
    cache.upsert_resource_claim(_at(claim, "2", _allocation("gpu-0"), p.metadata.uid))
    cache.upsert_resource_claim(_at(claim, "3", None))
    view = cache.snapshot().dra
    assert view is not None and not view.allocated
