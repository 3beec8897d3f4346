"""Leader election under faults: the API stops answering a renewal, the lease worker crashes and is
restarted. The clock is this test's; the lease duration is 15 s and the renew deadline 10 s, so
another replica could take the lease 15 s after our last renewal: we must have stopped before."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from caldera.cache.client import ApiError
from caldera.cache.http1 import RequestShape
from caldera.cache.store import ClusterCache
from caldera.cache.supervise import supervise
from caldera.framework.result import Eviction
from caldera.scheduler.binder import Binder
from caldera.scheduler.controllers.api import BoundedCalls
from caldera.scheduler.evictor import Evictor
from caldera.scheduler.leader import NOT_LEADER, ElectionConfig, LeaderElector, Lease
from caldera.scheduler.status import StatusUpdater

from .test_binder import Observer, assumed


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class LeaseApi:
    """A Lease endpoint that answers, hangs (``mode = "hang"``), fails (``"error"``: a 500) or makes the
    caller crash (``"crash"``: an exception no API client raises). Bindings are counted; every other
    request (an eviction, a status write, an Event) is recorded in ``writes`` and answered."""

    def __init__(self) -> None:
        self.lease: Lease | None = None
        self.mode = "ok"
        self.renewals = 0
        self.bindings = 0
        self.writes: list[tuple[str, str]] = []
        self.hanging = asyncio.Event()

    def shape(self, method: str, suffix: str, content_type: str = "application/json") -> RequestShape:
        return RequestShape(method, suffix, b"", b"", content_type)

    async def send(self, shape: RequestShape, path: str, data: bytes, timeout: float = 30.0) -> bytes:
        self.bindings += 1  # POST pods/NAME/binding
        return b"{}"

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> bytes:
        if "/leases" not in path:
            self.writes.append((method, path))
            return b"{}"
        if self.mode == "hang":
            self.hanging.set()
            await asyncio.Event().wait()
        if self.mode == "crash":
            raise RuntimeError("injected crash in the lease worker")
        if self.mode == "error":
            raise ApiError(500, "InternalError", "etcd unavailable")
        if method == "GET":
            if self.lease is None:
                raise ApiError(404, "NotFound")
            return msgspec.json.encode(self.lease)
        self.renewals += 1
        self.lease = body
        return msgspec.json.encode(body)


def elector(api: LeaseApi, clock: Clock) -> LeaderElector:
    config = ElectionConfig("kube-system", lease_duration=15, renew_deadline=10, retry_period=0.01)
    return LeaderElector(api, config, clock=clock)  # type: ignore[arg-type]


async def test_a_replica_whose_renewal_hangs_stops_binding_at_the_renew_deadline() -> None:
    api, clock = LeaseApi(), Clock()
    leader = elector(api, clock)
    stop = asyncio.Event()
    assert await leader.acquire(stop)
    cache = ClusterCache()
    binder = Binder(api, cache, observer=Observer())  # type: ignore[arg-type]
    binder.may_write = leader.holds
    binder.start()
    hold = supervise("lease", lambda: leader.hold(stop))
    try:
        clock.now = 2.0
        await asyncio.sleep(0.05)  # renewed at 2.0 (and again, the clock standing still)
        assert leader.renewed_at == 2.0
        binder.bind(assumed(cache, 2, "before"))
        await asyncio.wait_for(binder._queue.join(), 5)
        assert api.bindings == 2  # while the lease is ours, binds go out
        api.mode = "hang"  # the API server stops answering
        await asyncio.wait_for(api.hanging.wait(), 5)
        clock.now = 11.9
        assert leader.holds()  # 9.9 s since the renewal: still ours
        clock.now = 12.0  # the renew deadline; the renewal still hangs
        assert not leader.holds()
        binder.bind(assumed(cache, 2, "after"))
        await asyncio.wait_for(binder._queue.join(), 5)
        assert api.bindings == 2  # nothing bound past the deadline, 3 s before the lease could pass
        assert "lease may no longer be held" in binder.failures[next(iter(binder.failures))].reason
    finally:
        stop.set()
        hold.cancel()
        await binder.stop()


async def test_a_restarted_lease_worker_keeps_the_deadline_of_the_last_renewal() -> None:
    api, clock = LeaseApi(), Clock()
    leader = elector(api, clock)
    stop = asyncio.Event()
    assert await leader.acquire(stop)  # renewed at 0
    clock.now = 9.0
    api.mode = "crash"
    with pytest.raises(RuntimeError):
        await leader.hold(stop)  # the worker crashes at 9 s
    api.mode = "error"  # restarted (as supervise does) while the API keeps failing
    clock.now = 9.5
    restarted = asyncio.create_task(leader.hold(stop))
    await asyncio.sleep(0.05)
    assert not leader.lost.is_set() and leader.holds()  # 9.5 s since the renewal: still ours
    clock.now = 10.5
    await asyncio.wait_for(leader.lost.wait(), 5)  # 10 s after the renewal, not 10 s after the restart
    assert not leader.holds() and not leader.is_leader
    await asyncio.wait_for(restarted, 5)


async def test_a_worker_restarted_after_the_deadline_gives_the_lease_up_at_once() -> None:
    api, clock = LeaseApi(), Clock()
    leader = elector(api, clock)
    stop = asyncio.Event()
    assert await leader.acquire(stop)
    clock.now = 10.0  # the worker was down (crash back-off) past the renew deadline
    await asyncio.wait_for(leader.hold(stop), 5)
    assert leader.lost.is_set() and api.renewals == 1


async def lease_held_then_hung(api: LeaseApi, clock: Clock, leader: LeaderElector) -> asyncio.Task[None]:
    """The lease renewed at 2.0, then the API stops answering renewals: the hold worker (returned) hangs."""
    stop = asyncio.Event()
    assert await leader.acquire(stop)
    hold = supervise("lease", lambda: leader.hold(stop))
    clock.now = 2.0
    await asyncio.sleep(0.05)
    assert leader.renewed_at == 2.0
    api.mode = "hang"
    await asyncio.wait_for(api.hanging.wait(), 5)
    return hold


async def test_a_replica_past_its_renew_deadline_evicts_nothing_and_gives_the_pod_back() -> None:
    api, clock = LeaseApi(), Clock()
    leader = elector(api, clock)
    cache = ClusterCache()
    victims = [p.task for p in assumed(cache, 2, "victims")]
    given_back: list[str] = []
    evictor = Evictor(api, may_write=leader.holds, on_abandoned=given_back.append)  # type: ignore[arg-type]
    evictor.start()
    hold = await lease_held_then_hung(api, clock, leader)
    try:
        clock.now = 11.9  # 9.9 s since the renewal: still ours
        evictor.evict([Eviction(victims[0], "preempted")])
        await asyncio.wait_for(evictor._queue.join(), 5)
        # the eviction, then Volcano's Ready=False mark on the terminating pod
        assert api.writes == [
            ("POST", f"/api/v1/namespaces/default/pods/{victims[0].name}/eviction"),
            ("PATCH", f"/api/v1/namespaces/default/pods/{victims[0].name}/status"),
        ]
        clock.now = 12.0  # the renew deadline; the renewal still hangs
        evictor.evict([Eviction(victims[1], "preempted")])
        await asyncio.wait_for(evictor._queue.join(), 5)
        assert len(api.writes) == 2  # nothing sent: another replica may lead 3 s from now
        assert evictor.done[victims[1].uid].startswith("withheld")
        assert given_back == [victims[1].uid]  # the cache holds the pod as running again
    finally:
        hold.cancel()
        await evictor.stop()


async def test_a_replica_past_its_renew_deadline_writes_no_status_until_it_renews() -> None:
    api, clock = LeaseApi(), Clock()
    leader = elector(api, clock)
    cache = ClusterCache()
    task = assumed(cache, 1, "pending")[0].task
    status = StatusUpdater(api, cache, may_write=leader.holds, clock=clock)  # type: ignore[arg-type]
    status.events.patch_interval = 0.0  # an Event's update is due at once
    hold = await lease_held_then_hung(api, clock, leader)
    try:
        clock.now = 11.9
        status.event_for_pod(task, "Warning", "FailedScheduling", "0/1 nodes are available")
        await status.flush()
        assert [m for m, _ in api.writes] == ["POST"]  # the Event, while the lease is ours
        clock.now = 12.0  # the deadline passes while the renewal hangs
        status.pod_unschedulable(task, "0/1 nodes are available")
        status.event_for_pod(task, "Warning", "FailedScheduling", "0/2 nodes are available")
        await status.flush()
        assert len(api.writes) == 1 and status.withheld == 2  # both kept back, unsent
        assert status.pending == 2  # the condition and the Event's update wait
        hold.cancel()
        api.mode = "ok"
        assert await leader.try_acquire_or_renew()  # renewed: the lease is provably ours again
        await status.flush()
        assert sorted(m for m, _ in api.writes) == ["PATCH", "PATCH", "POST"]
        assert status.pending == 0
    finally:
        hold.cancel()


async def test_the_controllers_write_nothing_past_the_renew_deadline_but_still_read() -> None:
    api, clock = LeaseApi(), Clock()
    leader = elector(api, clock)
    call = BoundedCalls(api, 2, 1.0, may_write=leader.holds)  # type: ignore[arg-type]
    hold = await lease_held_then_hung(api, clock, leader)
    try:
        clock.now = 12.0
        with pytest.raises(ApiError) as refused:
            await call("POST", "/apis/scheduling.volcano.sh/v1beta1/namespaces/a/podgroups", {})
        assert refused.value.reason == NOT_LEADER
        await call("GET", "/apis/scheduling.volcano.sh/v1beta1/namespaces/a/podgroups/x")
        assert api.writes == [("GET", "/apis/scheduling.volcano.sh/v1beta1/namespaces/a/podgroups/x")]
    finally:
        hold.cancel()
