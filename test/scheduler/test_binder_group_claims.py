"""The binder and a ``scheduling.k8s.io/v1alpha2`` PodGroup's own ResourceClaim (KEP-5729), against
the fake API server of ``conftest.py``: the claim is allocated once and reserved for the PodGroup; a
failed binding takes the PodGroup's reservation (and the allocation) back only when no pod of the
group is placed any more (KEP-5729 "Deallocate": "When no Pods in the group are scheduled, the
scheduler removes the PodGroup from the claim's ``status.reservedFor``")."""

from __future__ import annotations

from typing import Any

from caldera.cache.store import ClusterCache
from caldera.framework.dra.objects import (
    AllocationResult,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    ResourceClaim,
)
from caldera.framework.dra.view import ClaimAllocation, Consumer
from caldera.framework.model import TaskStatus
from caldera.framework.objects import convert
from caldera.framework.result import Placement, SessionResult
from caldera.hack.scenario import claim_pod_spec, load, native_member, native_podgroup, node, resource_claim
from caldera.scheduler.binder import Binder

GPU = "gpu.example.com"
GROUP_UID = "pg-train"
GROUP_REF = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "train", "uid": GROUP_UID}


def _allocation() -> AllocationResult:
    return AllocationResult(
        devices=DeviceAllocationResult(
            results=[DeviceRequestAllocationResult(request="req", driver=GPU, pool="n1", device="gpu-0")]
        )
    )


def _world(srv: Any, running: tuple[str, ...] = (), pending: tuple[str, ...] = ()) -> ClusterCache:
    """The PodGroup ``train`` sharing claim ``c0`` with its pods: ``running`` ones bound to n1,
    ``pending`` ones waiting; the claim is as the fake server holds it."""
    srv.add(resource_claim("c0", GPU))
    claim = convert(ResourceClaim, srv.claims["c0"])
    group = native_podgroup(
        "train", min_count=1, uid=GROUP_UID, resource_claims=[{"name": "c0", "resourceClaimName": "c0"}]
    )
    cache = load(ClusterCache(), nodes=[node("n1", cpu="16")], dra=[claim])
    cache.upsert_native_podgroup(group)
    for name in running:
        cache.upsert_pod(
            native_member(
                name, "train", uid=name, node_name="n1", phase="Running", spec_extra=claim_pod_spec("c0")
            )
        )
    for name in pending:
        cache.upsert_pod(native_member(name, "train", uid=name, spec_extra=claim_pod_spec("c0")))
    return cache


def _place(srv: Any, cache: ClusterCache, *names: str) -> list[Placement]:
    """The pods ``names`` placed on n1 in one cycle, each with the group's claim (gpu-0, reserved for
    the PodGroup), assumed in the cache."""
    uid = srv.claims["c0"]["metadata"]["uid"]
    consumer = Consumer("scheduling.k8s.io", "podgroups", "train", GROUP_UID)
    placements = []
    for name in names:
        task = cache.task(name)
        assert task is not None
        ca = ClaimAllocation("default", "c0", uid, _allocation(), True, consumer)
        placements.append(Placement(task, "n1", claims=[ca]))
    cache.apply(SessionResult(placements=placements))
    return placements


async def _run(binder: Binder, placements: list[Placement]) -> None:
    binder.start()
    binder.bind(placements)
    assert await binder.drain(10)


async def test_the_group_claim_is_allocated_and_reserved_for_the_podgroup_once(server) -> None:
    srv, client = server
    cache = _world(srv, pending=("train-0", "train-1"))
    await _run(Binder(client, cache), _place(srv, cache, "train-0", "train-1"))
    assert srv.claims["c0"]["status"]["reservedFor"] == [GROUP_REF]
    claim_writes = [entry for entry in srv.log if entry[0] == "claim"]
    assert claim_writes == [("claim", "c0")], "the second pod finds the claim reserved for its group"
    assert {cache.task(n).status for n in ("train-0", "train-1")} == {TaskStatus.BOUND}  # type: ignore[union-attr]


async def test_a_failed_binding_with_no_pod_of_the_group_placed_takes_the_group_reservation_back(
    server,
) -> None:
    srv, client = server
    cache = _world(srv, pending=("train-0", "train-1"))
    srv.bind_codes = {"train-0": 404}
    await _run(Binder(client, cache), _place(srv, cache, "train-0"))
    assert srv.log == [("finalizer", "c0"), ("claim", "c0"), ("bind", "train-0"), ("claim", "c0")]
    status = srv.claims["c0"]["status"]
    # nothing else reserved it: the PodGroup's entry goes, and the allocation with it
    assert "reservedFor" not in status and "allocation" not in status
    assert cache.task("train-0").status == TaskStatus.PENDING  # type: ignore[union-attr]


async def test_a_failed_binding_leaves_the_group_reservation_while_another_pod_of_the_group_runs(
    server,
) -> None:
    srv, client = server
    cache = _world(srv, running=("train-0",), pending=("train-1",))
    srv.bind_codes = {"train-1": 404}
    await _run(Binder(client, cache), _place(srv, cache, "train-1"))
    assert srv.log.count(("claim", "c0")) == 1, "written once, never taken back"
    assert srv.claims["c0"]["status"]["reservedFor"] == [GROUP_REF]
    assert srv.claims["c0"]["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"


async def test_when_every_pod_of_the_group_fails_to_bind_the_reservation_goes(server) -> None:
    # the first pod writes the claim, the second finds it so and writes nothing: whichever fails last
    # sees none of its group placed and takes the reservation back, though it never wrote it
    srv, client = server
    cache = _world(srv, pending=("train-0", "train-1"))
    srv.bind_codes = {"train-0": 404, "train-1": 404}
    await _run(Binder(client, cache), _place(srv, cache, "train-0", "train-1"))
    status = srv.claims["c0"]["status"]
    assert "reservedFor" not in status and "allocation" not in status
    assert {cache.task(n).status for n in ("train-0", "train-1")} == {TaskStatus.PENDING}  # type: ignore[union-attr]


async def test_another_consumer_keeps_the_allocation_when_the_group_reservation_goes(server) -> None:
    srv, client = server
    cache = _world(srv, pending=("train-0",))
    other = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "eval", "uid": "pg-eval"}
    # another group got the claim (the same device) since the watch showed it
    srv.claims["c0"]["status"] = {"allocation": _allocation_dict(), "reservedFor": [other]}
    srv.claims["c0"]["metadata"]["resourceVersion"] = "2"
    srv.bind_codes = {"train-0": 404}
    await _run(Binder(client, cache), _place(srv, cache, "train-0"))
    assert srv.accepted[0]["status"]["reservedFor"] == [other, GROUP_REF]
    status = srv.claims["c0"]["status"]
    assert status["reservedFor"] == [other]
    assert status["allocation"] == _allocation_dict()


def _allocation_dict() -> dict[str, Any]:
    return {"devices": {"results": [{"request": "req", "driver": GPU, "pool": "n1", "device": "gpu-0"}]}}
