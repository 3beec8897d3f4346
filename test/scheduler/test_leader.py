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
from caldera.scheduler.binder import Binder
from caldera.scheduler.leader import ElectionConfig, LeaderElector, Lease

from .test_binder import Observer, assumed


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class LeaseApi:
    """A Lease endpoint that answers, hangs (``mode = "hang"``), fails (``"error"``: a 500) or makes the
    caller crash (``"crash"``: an exception no API client raises). Bindings are counted."""

    def __init__(self) -> None:
        self.lease: Lease | None = None
        self.mode = "ok"
        self.renewals = 0
        self.bindings = 0
        self.hanging = asyncio.Event()

    def shape(self, method: str, suffix: str, content_type: str = "application/json") -> RequestShape:
        return RequestShape(method, suffix, b"", b"", content_type)

    async def send(self, shape: RequestShape, path: str, data: bytes, timeout: float = 30.0) -> bytes:
        self.bindings += 1  # POST pods/NAME/binding
        return b"{}"

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> bytes:
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
