"""Evictions: the eviction subresource first, else a delete guarded by the pod's uid."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from aiohttp import web

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.framework.model import TaskInfo
from caldera.framework.session import Eviction
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
