"""Why a placed pod is not bound yet, as ``/debug/pods`` (and ``caldera-scheduler explain pod``) say
it: queued behind how many placements, its binding being written, bound and not yet seen by the pod
watch, or bound and waiting for its kubelet. The binder keeps nothing of a bind once it settles."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import msgspec
import pytest
from aiohttp import web

from caldera.cache.client import ApiClient
from caldera.cache.store import ClusterCache
from caldera.framework.result import Placement
from caldera.scheduler.binder import Binder
from caldera.scheduler.debug import DebugApi, Observatory

from .conftest import _serving
from .test_binder import assumed, settle


class GatedServer:
    """Binds every pod at once but ``held``, whose binding waits until ``release`` is set."""

    def __init__(self, held: str) -> None:
        self.held = held
        self.release = asyncio.Event()
        self.arrived = asyncio.Event()

    async def bind(self, request: web.Request) -> web.Response:
        if request.match_info["name"] == self.held:
            self.arrived.set()
            await self.release.wait()
        return web.Response(status=201, body=b"{}")


@pytest.fixture
async def gated() -> AsyncIterator[tuple[GatedServer, ApiClient]]:
    srv = GatedServer("g-0")
    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", srv.bind)
    async with _serving(app) as client:
        yield srv, client
        srv.release.set()


async def one_worker_on_the_first(
    srv: GatedServer, client: ApiClient, size: int
) -> tuple[ClusterCache, list[Placement], Binder]:
    """A gang of ``size`` assumed on n1 and handed to a binder of one worker, which is on g-0 (whose
    answer waits for ``srv.release``)."""
    cache = ClusterCache()
    placements = assumed(cache, size)
    binder = Binder(client, cache, workers=1)
    binder.start()
    binder.bind(placements)
    await asyncio.wait_for(srv.arrived.wait(), 5)
    return cache, placements, binder


def page(cache: ClusterCache, binder: Binder, name: str) -> dict[str, object]:
    return DebugApi(Observatory(), pod_lookup=cache.find_task, bind_progress=binder.progress).pod(
        "default", name
    )


async def test_a_placed_pod_says_where_its_bind_is(gated) -> None:
    srv, client = gated
    cache, _, binder = await one_worker_on_the_first(srv, client, 4)

    writing = page(cache, binder, "g-0")
    assert writing["status"] == "Binding"
    assert str(writing["reason"]).startswith("its binding is being written, for ")
    last = page(cache, binder, "g-3")
    assert str(last["reason"]).startswith("queued for binding ")
    assert "; 2 placement(s) ahead of it in the bind queue, 1 written at a time" in str(last["reason"])
    assert "; 0 placement(s) ahead" in str(page(cache, binder, "g-1")["reason"])
    assert binder.progress("no-such-uid") is None

    srv.release.set()
    await settle(binder)
    await binder.stop()
    # bound by our binder, and the pod watch has not brought the pod back with its node yet
    assert str(page(cache, binder, "g-0")["reason"]).startswith("bound by this scheduler ")
    assert dict(binder.remembered())["in_hand"] == 0


async def test_a_pod_the_watch_shows_bound_waits_for_its_kubelet(gated) -> None:
    srv, client = gated
    srv.release.set()
    cache = ClusterCache()
    (placement,) = assumed(cache, 1)
    binder = Binder(client, cache, workers=1)
    binder.start()
    binder.bind([placement])
    await settle(binder)
    await binder.stop()
    pod = placement.task.pod
    cache.upsert_pod(
        msgspec.structs.replace(
            pod,
            spec=msgspec.structs.replace(pod.spec, node_name="n1"),
            metadata=msgspec.structs.replace(pod.metadata, resource_version="7"),
        )
    )
    doc = page(cache, binder, "g-0")
    assert doc["reason"] == "bound to n1; its kubelet has not reported it running yet"


async def test_queued_binds_given_up_at_a_lost_lease_are_forgotten(gated) -> None:
    srv, client = gated
    _, placements, binder = await one_worker_on_the_first(srv, client, 3)
    srv.release.set()
    await binder.abort()
    assert dict(binder.remembered())["in_hand"] == 0
    assert [binder.progress(p.task.uid) for p in placements[1:]] == [None, None]
