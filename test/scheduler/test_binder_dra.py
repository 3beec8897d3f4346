"""The binder's ResourceClaim writes against a fake API server that keeps claims as the real one does
(resourceVersion preconditions, reservedFor only with an allocation): the claim's status is written
before the binding, a conflict is retried on a fresh read, a failed claim write means no binding, and
a failed binding takes the reservation back."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from caldera.cache.store import ClusterCache
from caldera.framework.dra.objects import (
    AllocationResult,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    ResourceClaim,
)
from caldera.framework.dra.view import ClaimAllocation
from caldera.framework.model import TaskStatus
from caldera.framework.objects import convert
from caldera.framework.result import Placement, SessionResult
from caldera.hack.scenario import claim_pod_spec, load, node, pod, podgroup, resource_claim
from caldera.scheduler.binder import Binder

GPU = "gpu.example.com"


def allocation(device: str) -> AllocationResult:
    return AllocationResult(
        devices=DeviceAllocationResult(
            results=[DeviceRequestAllocationResult(request="req", driver=GPU, pool="n1", device=device)]
        )
    )


def placed(srv: Any, cache: ClusterCache, name: str = "p", claim: str = "c0") -> Placement:
    """A pod using ``claim``, placed on n1 with gpu-0 for it, assumed in the cache."""
    rc = srv.claims.get(claim)
    claim_obj = convert(ResourceClaim, rc) if rc is not None else resource_claim(claim, GPU)
    if rc is None:
        srv.add(claim_obj)
        claim_obj = convert(ResourceClaim, srv.claims[claim])
    p = pod(name, group=name, spec_extra=claim_pod_spec(claim))
    load(cache, nodes=[node("n1")], podgroups=[podgroup(name)], pods=[p], dra=[claim_obj])
    ca = ClaimAllocation("default", claim, claim_obj.metadata.uid, allocation("gpu-0"), True)
    placement = Placement(cache.task(p.metadata.uid), "n1", claims=[ca])  # type: ignore[arg-type]
    cache.apply(SessionResult(placements=[placement]))
    return placement


async def run(binder: Binder, placements: list[Placement]) -> None:
    binder.start()
    binder.bind(placements)
    assert await binder.drain(10)


async def test_the_claim_is_allocated_and_reserved_in_one_write_before_the_binding(server) -> None:
    srv, client = server
    cache = ClusterCache()
    placement = placed(srv, cache)
    await run(Binder(client, cache), [placement])
    # the finalizer first (a normal update), then allocation and reservation in one status write
    assert srv.log == [("finalizer", "c0"), ("claim", "c0"), ("bind", "p")]
    assert srv.claims["c0"]["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    status = srv.claims["c0"]["status"]
    assert status["allocation"]["devices"]["results"] == [
        {"request": "req", "driver": GPU, "pool": "n1", "device": "gpu-0"}
    ]
    assert status["reservedFor"] == [{"resource": "pods", "name": "p", "uid": placement.task.uid}]
    assert cache.task(placement.task.uid).status == TaskStatus.BOUND  # type: ignore[union-attr]


async def test_the_claim_writes_are_merge_patches_that_leave_an_allocation_alone_when_only_reserving(
    server,
) -> None:
    """Both writes are JSON merge patches (the API server reads another patch type differently); a
    write that only reserves an allocated claim carries no ``allocation`` at all (in a merge patch a
    null would remove it)."""
    srv, client = server
    cache = ClusterCache()
    first = placed(srv, cache, "a", "shared")
    await run(Binder(client, cache), [first])
    after_first = srv.claims["shared"]["metadata"]["resourceVersion"]
    second = placed(srv, cache, "b", "shared")
    await run(Binder(client, cache), [second])
    assert srv.log == [
        ("finalizer", "shared"),
        ("claim", "shared"),
        ("bind", "a"),
        ("claim", "shared"),
        ("bind", "b"),
    ]
    assert srv.content_types == ["application/merge-patch+json"] * 3
    assert "allocation" in srv.patches[0]["status"]
    assert "allocation" not in srv.patches[1]["status"]
    # the claim's uid and the resourceVersion the first write left are the preconditions
    assert srv.patches[1]["metadata"] == {"uid": first.claims[0].uid, "resourceVersion": after_first}
    assert [r["name"] for r in srv.claims["shared"]["status"]["reservedFor"]] == ["a", "b"]


async def test_a_conflict_is_retried_on_a_fresh_read(server) -> None:
    srv, client = server
    cache = ClusterCache()
    placement = placed(srv, cache)
    # Another writer changed the claim (not its allocation) since the watch showed it.
    srv.interfere = {}
    await run(Binder(client, cache), [placement])
    assert srv.log == [("finalizer", "c0"), ("claim", "c0"), ("claim", "c0"), ("bind", "p")]
    assert srv.claims["c0"]["status"]["reservedFor"][0]["name"] == "p"


async def test_a_claim_allocated_meanwhile_to_other_devices_fails_the_placement_and_nothing_is_bound(
    server,
) -> None:
    srv, client = server
    cache = ClusterCache()
    placement = placed(srv, cache)
    srv.interfere = {"allocation": msgspec.to_builtins(allocation("gpu-1"))}
    await run(Binder(client, cache), [placement])
    assert ("bind", "p") not in srv.log
    task = cache.task(placement.task.uid)
    assert task is not None and task.status == TaskStatus.PENDING
    view = cache.snapshot().dra
    assert view is not None and (GPU, "n1", "gpu-0") not in view.allocated, "the assumption is forgotten"


async def test_a_failed_claim_write_means_no_binding(server) -> None:
    srv, client = server
    cache = ClusterCache()
    placement = placed(srv, cache)
    srv.claim_codes = [403]
    binder = Binder(client, cache)
    await run(binder, [placement])
    assert srv.log == [("finalizer", "c0"), ("claim", "c0")]
    assert "could not allocate its ResourceClaims" in binder.failures[placement.task.uid].reason
    assert cache.task(placement.task.uid).status == TaskStatus.PENDING  # type: ignore[union-attr]


async def test_a_failed_binding_takes_the_reservation_back(server) -> None:
    srv, client = server
    cache = ClusterCache()
    placement = placed(srv, cache)
    srv.bind_codes = {"p": 404}
    await run(Binder(client, cache), [placement])
    assert srv.log == [("finalizer", "c0"), ("claim", "c0"), ("bind", "p"), ("claim", "c0")]
    # unreserved; the allocation is left to the resourceclaim controller (the claim has the finalizer)
    assert "reservedFor" not in srv.claims["c0"]["status"]
    assert srv.claims["c0"]["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert cache.task(placement.task.uid).status == TaskStatus.PENDING  # type: ignore[union-attr]


async def test_a_pod_with_claims_but_no_allocation_is_never_bound(server) -> None:
    srv, client = server
    cache = ClusterCache()
    placement = placed(srv, cache)
    placement.claims = None
    await run(Binder(client, cache), [placement])
    assert srv.log == []
    assert cache.task(placement.task.uid).status == TaskStatus.PENDING  # type: ignore[union-attr]


async def test_a_shared_claim_is_allocated_by_the_first_write_and_only_reserved_by_the_second(server) -> None:
    srv, client = server
    cache = ClusterCache()
    first = placed(srv, cache, "a", "shared")
    second = placed(srv, cache, "b", "shared")
    await run(Binder(client, cache, workers=1), [first, second])
    # (the second pod's first try may meet a 409: the watch has not shown the first write yet)
    assert [("allocation" in p["status"]) for p in srv.accepted] == [True, False]
    assert [r["name"] for r in srv.claims["shared"]["status"]["reservedFor"]] == ["a", "b"]


async def test_a_claim_being_deleted_is_not_allocated_and_the_pod_not_bound(server) -> None:
    srv, client = server
    cache = ClusterCache()
    srv.add(resource_claim("c0", GPU))
    srv.claims["c0"]["metadata"]["deletionTimestamp"] = "2026-11-25T10:00:00Z"
    placement = placed(srv, cache)
    binder = Binder(client, cache)
    await run(binder, [placement])
    assert srv.log == []
    assert "is being deleted" in binder.failures[placement.task.uid].reason


def allocation_with_conditions(device: str) -> AllocationResult:
    return AllocationResult(
        devices=DeviceAllocationResult(
            results=[
                DeviceRequestAllocationResult(
                    request="req",
                    driver=GPU,
                    pool="n1",
                    device=device,
                    binding_conditions=["Attached"],
                    binding_failure_conditions=["AttachFailed"],
                )
            ]
        )
    )


def placed_with_conditions(srv: Any, cache: ClusterCache) -> Placement:
    placement = placed(srv, cache)
    ca = placement.claims[0]  # type: ignore[index]
    return Placement(
        placement.task,
        "n1",
        claims=[ClaimAllocation(ca.namespace, ca.name, ca.uid, allocation_with_conditions("gpu-0"), True)],
    )


def driver_reports(srv: Any, condition: str) -> None:
    """The device's driver writes its condition into the claim's status.devices (after the allocation)."""
    srv.claims["c0"]["status"]["devices"] = [
        {
            "driver": GPU,
            "pool": "n1",
            "device": "gpu-0",
            "conditions": [{"type": condition, "status": "True"}],
        }
    ]


async def test_a_device_with_binding_conditions_binds_the_pod_only_once_its_driver_reports_them(
    server,
) -> None:
    """kube-scheduler's PreBind waits for binding conditions (dynamicresources.go PreBind)."""
    srv, client = server
    cache = ClusterCache()
    placement = placed_with_conditions(srv, cache)
    binder = Binder(client, cache, binding_poll=0.02, binding_timeout=5)
    binder.start()
    binder.bind([placement])
    await asyncio.sleep(0.2)
    # allocated (with its timestamp), reserved, and waiting: not bound
    assert srv.log == [("finalizer", "c0"), ("claim", "c0")]
    assert srv.claims["c0"]["status"]["allocation"]["allocationTimestamp"]
    driver_reports(srv, "Attached")
    assert await binder.drain(5)
    assert srv.log[-1] == ("bind", "p")


async def test_a_binding_failure_condition_unreserves_and_does_not_bind(server) -> None:
    srv, client = server
    cache = ClusterCache()
    placement = placed_with_conditions(srv, cache)
    binder = Binder(client, cache, binding_poll=0.02, binding_timeout=5)
    binder.start()
    binder.bind([placement])
    await asyncio.sleep(0.1)
    driver_reports(srv, "AttachFailed")
    assert await binder.drain(5)
    assert ("bind", "p") not in srv.log
    assert srv.claims["c0"]["status"].get("reservedFor", []) == []


async def test_binding_conditions_never_reported_time_out_and_nothing_is_bound(server) -> None:
    srv, client = server
    cache = ClusterCache()
    placement = placed_with_conditions(srv, cache)
    await run(Binder(client, cache, binding_poll=0.02, binding_timeout=0.2), [placement])
    assert ("bind", "p") not in srv.log
    assert srv.claims["c0"]["status"].get("reservedFor", []) == []


async def test_a_pod_waiting_for_its_devices_holds_no_bind_worker(server) -> None:
    """The wait (up to 600 s in production) runs beside the workers: with a single worker, a pod
    placed after the waiting one is bound while the first still waits."""
    srv, client = server
    cache = ClusterCache()
    waiting = placed_with_conditions(srv, cache)
    plain = pod("other", group="other")
    load(cache, podgroups=[podgroup("other")], pods=[plain])
    other = Placement(cache.task(plain.metadata.uid), "n1")  # type: ignore[arg-type]
    cache.apply(SessionResult(placements=[other]))
    binder = Binder(client, cache, workers=1, binding_poll=0.02, binding_timeout=5)
    binder.start()
    binder.bind([waiting, other])

    async def other_bound() -> None:
        while ("bind", "other") not in srv.log:
            await asyncio.sleep(0.02)

    await asyncio.wait_for(other_bound(), 5)
    assert ("bind", "p") not in srv.log  # still waiting for its driver
    driver_reports(srv, "Attached")
    assert await binder.drain(5)
    assert srv.log[-1] == ("bind", "p")


async def test_a_gang_sharing_one_claim_writes_it_once_per_pod_without_conflicts(server) -> None:
    """Eight pods of a gang share one claim and are bound at once by eight workers: the finalizer once,
    then one status write per pod (the first allocates, each reserves the claim for its pod, as each pod's
    PreBind does in kube-scheduler), and not one 409: the writes take turns on the claim, each starting
    from what the last one returned, though the watch (the cache) still shows the claim unallocated."""
    srv, client = server
    cache = ClusterCache()
    placements = [placed(srv, cache, f"p{i}", "shared") for i in range(8)]
    await run(Binder(client, cache, workers=8), placements)
    writes = [entry for entry in srv.log if entry[0] != "bind"]
    assert writes == [("finalizer", "shared")] + [("claim", "shared")] * 8
    assert (
        len(srv.accepted) == 8
        and [("allocation" in p["status"]) for p in srv.accepted] == [True] + [False] * 7
    )
    reserved = [r["name"] for r in srv.claims["shared"]["status"]["reservedFor"]]
    assert sorted(reserved) == [f"p{i}" for i in range(8)]
    assert sorted(name for kind, name in srv.log if kind == "bind") == sorted(reserved)


async def test_a_pod_placed_again_after_its_reservation_was_taken_back_is_reserved_again(server) -> None:
    """The binding fails after the claim was written, the reservation is taken back; the pod's next
    placement writes the reservation again (it never trusts the answer of the write that was undone)."""
    srv, client = server
    cache = ClusterCache()
    placement = placed(srv, cache)
    srv.bind_codes = {"p": 404}
    binder = Binder(client, cache)
    await run(binder, [placement])
    assert "reservedFor" not in srv.claims["c0"]["status"]
    srv.bind_codes = {}
    again = Placement(placement.task, "n1", claims=placement.claims)
    cache.apply(SessionResult(placements=[again]))
    await run(binder, [again])
    assert srv.log[-2:] == [("claim", "c0"), ("bind", "p")]
    assert [r["name"] for r in srv.claims["c0"]["status"]["reservedFor"]] == ["p"]
