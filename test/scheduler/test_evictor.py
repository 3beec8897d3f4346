"""Evictions: the eviction subresource first, else a delete guarded by the pod's uid; the pod
marked as Volcano's evictor marks it (``Ready`` False, and ``DisruptionTarget`` where no API server
writes one)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from aiohttp import web

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.framework.model import TaskInfo
from caldera.framework.objects import PodCondition
from caldera.framework.result import Eviction
from caldera.hack.scenario import pod
from caldera.scheduler.evictor import Evictor, evict_conditions


class Server:
    def __init__(self, eviction_code: int, status_code: int = 200) -> None:
        self.eviction_code = eviction_code
        self.status_code = status_code
        self.calls: list[tuple[str, str, Any]] = []

    async def patch_status(self, request: web.Request) -> web.Response:
        self.calls.append(("PATCH", request.path, await request.json()))
        if self.status_code == 200:
            return web.Response(status=200, body=b"{}")
        status = {"kind": "Status", "code": self.status_code, "reason": "Forbidden", "message": "no"}
        return web.Response(status=self.status_code, body=msgspec.json.encode(status))

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

    async def start(code: int, status_code: int = 200, **kw: Any) -> tuple[Server, Evictor]:
        srv = Server(code, status_code)
        app = web.Application()
        app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/eviction", srv.evict)
        app.router.add_delete("/api/v1/namespaces/{ns}/pods/{name}", srv.delete)
        app.router.add_patch("/api/v1/namespaces/{ns}/pods/{name}/status", srv.patch_status)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        client = ApiClient(ClusterConfig(host=f"http://127.0.0.1:{port}"))
        clients.append(client)
        return srv, Evictor(client, **kw)

    yield start
    for c in clients:
        await c.close()
    for r in runners:
        await r.cleanup()


def victim() -> Eviction:
    return Eviction(TaskInfo.from_pod(pod("victim", node_name="n1", phase="Running")), "preempted")


def marks(call: tuple[str, str, Any]) -> dict[str, tuple[str, str, str]]:
    """The conditions a status patch writes: type -> (status, reason, message)."""
    method, path, body = call
    assert method == "PATCH" and path.endswith("/status")
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in body["status"]["conditions"]}


async def test_eviction_through_the_subresource_then_the_pod_marked_not_ready(make) -> None:
    """The API server writes DisruptionTarget itself as it evicts: the evictor adds Volcano's Ready
    False only, after the eviction was accepted (never before: an unready pod is evicted without
    charging its budget)."""
    srv, evictor = await make(201)
    v = victim()
    assert await evictor.evict_one(v) == "evicted"
    assert [c[0] for c in srv.calls] == ["POST", "PATCH"]
    assert srv.calls[0][2]["kind"] == "Eviction"
    assert marks(srv.calls[1]) == {"Ready": ("False", "Evict", "Pod is evicted, because of preempted")}
    assert srv.calls[1][2]["metadata"] == {"uid": v.task.uid}


async def test_an_accepted_eviction_stands_when_the_mark_fails(make) -> None:
    srv, evictor = await make(201, status_code=403)
    assert await evictor.evict_one(victim()) == "evicted"
    assert [c[0] for c in srv.calls] == ["POST", "PATCH"]


async def test_without_the_subresource_volcanos_marks_then_a_uid_checked_delete(make) -> None:
    """As Volcano's defaultEvictor.Evict: one status write with both conditions, then the delete."""
    srv, evictor = await make(404)
    v = victim()
    assert await evictor.evict_one(v) == "deleted"
    assert [c[0] for c in srv.calls] == ["POST", "PATCH", "DELETE"]
    assert marks(srv.calls[1]) == {
        "Ready": ("False", "Evict", "Pod is evicted, because of preempted"),
        "DisruptionTarget": (
            "True",
            "PreemptionByScheduler",
            "caldera: preempting to accommodate a higher priority pod",
        ),
    }
    method, _, body = srv.calls[-1]
    assert method == "DELETE" and body["preconditions"] == {"uid": v.task.uid}


async def test_a_pod_that_cannot_be_marked_is_not_deleted_and_the_eviction_given_up(make) -> None:
    """Volcano's Evict returns the status update's error without deleting (the cache resyncs the
    task): the eviction is given up, the pod taken back as running."""
    abandoned: list[str] = []
    srv, evictor = await make(404, status_code=403, on_abandoned=abandoned.append)
    v = victim()
    outcome = await evictor.evict_one(v)
    assert outcome.startswith("failed: marking the pod")
    assert [c[0] for c in srv.calls] == ["POST", "PATCH"]
    assert abandoned == [v.task.uid]


def test_a_condition_already_false_keeps_its_transition_time() -> None:
    """UpdatePodCondition: the time changes only with the status."""
    since = "2026-01-02T03:04:05Z"
    p = pod("victim", node_name="n1", phase="Running")
    p = msgspec.structs.replace(
        p,
        status=msgspec.structs.replace(
            p.status, conditions=[PodCondition(type="Ready", status="False", last_transition_time=since)]
        ),
    )
    ready, disruption = evict_conditions(TaskInfo.from_pod(p), "reclaim", disruption=True)
    assert ready["lastTransitionTime"] == since
    assert disruption["lastTransitionTime"] != since


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
