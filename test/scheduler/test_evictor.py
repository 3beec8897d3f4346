"""Evictions: the eviction subresource first, else a delete guarded by the pod's uid."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from aiohttp import web

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.framework.model import TaskInfo
from caldera.framework.result import Eviction
from caldera.hack.scenario import pod
from caldera.scheduler.evictor import Evictor


class Server:
    def __init__(self, eviction_code: int) -> None:
        self.eviction_code = eviction_code
        self.calls: list[tuple[str, str, Any]] = []

    async def evict(self, request: web.Request) -> web.Response:
        self.calls.append(("POST", request.path, await request.json()))
        status = {
            "kind": "Status",
            "code": self.eviction_code,
            "reason": "NotFound",
            "message": "no eviction here",
        }
        if self.eviction_code == 201:
            return web.Response(status=201, body=b"{}")
        return web.Response(status=self.eviction_code, body=msgspec.json.encode(status))

    async def delete(self, request: web.Request) -> web.Response:
        self.calls.append(("DELETE", request.path, await request.json()))
        return web.Response(status=200, body=b"{}")


@pytest.fixture
async def make() -> AsyncIterator[Any]:
    runners: list[web.AppRunner] = []
    clients: list[ApiClient] = []

    async def start(code: int) -> tuple[Server, Evictor]:
        srv = Server(code)
        app = web.Application()
        app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/eviction", srv.evict)
        app.router.add_delete("/api/v1/namespaces/{ns}/pods/{name}", srv.delete)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        client = ApiClient(ClusterConfig(host=f"http://127.0.0.1:{port}"))
        clients.append(client)
        return srv, Evictor(client)

    yield start
    for c in clients:
        await c.close()
    for r in runners:
        await r.cleanup()


def victim() -> Eviction:
    return Eviction(TaskInfo.from_pod(pod("victim", node_name="n1", phase="Running")), "preempted")


async def test_eviction_through_the_subresource(make) -> None:
    srv, evictor = await make(201)
    assert await evictor.evict_one(victim()) == "evicted"
    assert [c[0] for c in srv.calls] == ["POST"]
    assert srv.calls[0][2]["kind"] == "Eviction"


async def test_without_the_subresource_a_uid_checked_delete(make) -> None:
    srv, evictor = await make(404)
    v = victim()
    assert await evictor.evict_one(v) == "deleted"
    method, _, body = srv.calls[-1]
    assert method == "DELETE" and body["preconditions"] == {"uid": v.task.uid}


class Budget(Server):
    """An API server whose PodDisruptionBudget refuses the first ``refusals`` evictions with 429."""

    def __init__(self, refusals: int) -> None:
        super().__init__(201)
        self.refusals = refusals

    async def evict(self, request: web.Request) -> web.Response:
        self.calls.append(("POST", request.path, await request.json()))
        if self.refusals > 0:
            self.refusals -= 1
            body = {
                "kind": "Status",
                "code": 429,
                "reason": "TooManyRequests",
                "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            }
            return web.Response(status=429, body=msgspec.json.encode(body), headers={"Retry-After": "0"})
        return web.Response(status=201, body=b"{}")


async def _budget_server(refusals: int) -> tuple[Budget, ApiClient, web.AppRunner]:
    srv = Budget(refusals)
    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/eviction", srv.evict)
    app.router.add_delete("/api/v1/namespaces/{ns}/pods/{name}", srv.delete)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return srv, ApiClient(ClusterConfig(host=f"http://127.0.0.1:{port}")), runner


async def test_a_429_from_a_disruption_budget_is_retried_not_a_failure() -> None:
    # more refusals than max_attempts: 429s do not use up attempts
    srv, client, runner = await _budget_server(refusals=8)
    try:
        evictor = Evictor(client, max_attempts=3, budget_wait=30.0)
        assert await evictor.evict_one(victim()) == "evicted"
        assert [c[0] for c in srv.calls] == ["POST"] * 9
    finally:
        await client.close()
        await runner.cleanup()


async def test_a_budget_that_keeps_refusing_is_given_up_and_never_bypassed_by_a_delete() -> None:
    srv, client, runner = await _budget_server(refusals=10_000)
    abandoned: list[str] = []
    try:
        evictor = Evictor(client, budget_wait=0.3, on_abandoned=abandoned.append)
        v = victim()
        outcome = await evictor.evict_one(v)
        assert outcome.startswith("blocked: ") and "disruption budget" in outcome
        assert all(method == "POST" for method, _, _ in srv.calls), "never a delete around the budget"
        assert abandoned == [v.task.uid]
    finally:
        await client.close()
        await runner.cleanup()


def test_the_cache_takes_an_abandoned_eviction_back_as_running() -> None:
    from caldera.cache.store import ClusterCache
    from caldera.framework.model import TaskStatus
    from caldera.framework.result import SessionResult
    from caldera.hack.scenario import load, node

    cache = ClusterCache()
    p = pod("victim", node_name="n1", phase="Running", group="g")
    load(cache, nodes=[node("n1", cpu="4")], pods=[p])
    task = cache.task(p.metadata.uid)
    cache.apply(SessionResult(evictions=[Eviction(task, "preempt")]))
    assert cache.task(p.metadata.uid).status == TaskStatus.RELEASING
    assert cache.forget_eviction(p.metadata.uid)
    assert cache.task(p.metadata.uid).status == TaskStatus.RUNNING
    assert cache.snapshot().nodes["n1"].used.cpu == 1000
