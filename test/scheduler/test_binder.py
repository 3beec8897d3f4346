"""The binder against a scripted API server: retries, permanent failures, no double binds, gangs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from aiohttp import web
from prometheus_client import REGISTRY

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.cache.store import ClusterCache
from caldera.framework.model import TaskStatus
from caldera.framework.result import Placement, SessionResult
from caldera.hack.scenario import gang, load, node
from caldera.scheduler.binder import Binder


class BindServer:
    """Answers each pod's binding with the next code from its script (then 201)."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[int]] = {}
        self.calls: dict[str, int] = {}
        self.bodies: list[dict[str, Any]] = []
        self.nodes: dict[str, str] = {}

    async def bind(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.calls[name] = self.calls.get(name, 0) + 1
        self.bodies.append(await request.json())
        script = self.scripts.get(name) or []
        code = script.pop(0) if script else 201
        if code == 201:
            if name in self.nodes:
                code = 409
            else:
                self.nodes[name] = self.bodies[-1]["target"]["name"]
                return web.Response(status=201, body=b"{}")
        reasons = {
            409: "Conflict",
            404: "NotFound",
            422: "Invalid",
            429: "TooManyRequests",
            500: "InternalError",
        }
        headers = {"Retry-After": "0"} if code == 429 else {}
        body = msgspec.json.encode(
            {"kind": "Status", "code": code, "reason": reasons.get(code, ""), "message": f"scripted {code}"}
        )
        return web.Response(status=code, body=body, headers=headers)

    async def get(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        return web.Response(body=msgspec.json.encode({"spec": {"nodeName": self.nodes.get(name, "")}}))


@pytest.fixture
async def server() -> AsyncIterator[tuple[BindServer, ApiClient]]:
    srv = BindServer()
    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", srv.bind)
    app.router.add_get("/api/v1/namespaces/{ns}/pods/{name}", srv.get)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = ApiClient(ClusterConfig(host=f"http://127.0.0.1:{port}"))
    yield srv, client
    await client.close()
    await runner.cleanup()


class Observer:
    def __init__(self) -> None:
        self.failed: list[tuple[str, str]] = []
        self.gangs: list[str] = []
        self.partial: list[tuple[str, int, dict[str, str]]] = []
        self.gone: list[tuple[str, str]] = []

    def bind_failed(self, task, node, reason) -> None:  # type: ignore[no-untyped-def]
        self.failed.append((task.name, reason))

    def bind_found_no_pod(self, task, node, reason) -> None:  # type: ignore[no-untyped-def]
        self.gone.append((task.name, reason))

    def gang_bound(self, job, placements) -> None:  # type: ignore[no-untyped-def]
        self.gangs.append(job)

    def gang_partly_bound(self, job, bound, failed) -> None:  # type: ignore[no-untyped-def]
        self.partial.append((job, len(bound), failed))

    def pod_bound(self, task, node) -> None:  # type: ignore[no-untyped-def]
        pass


def assumed(cache: ClusterCache, size: int, name: str = "g") -> list[Placement]:
    pg, pods = gang(name, size)
    load(cache, nodes=[node("n1", cpu="64")], podgroups=[pg], pods=pods)
    placements = [Placement(cache.task(p.metadata.uid), "n1") for p in pods]
    cache.apply(SessionResult(placements=placements))
    return placements


def partial_binds() -> float:
    return REGISTRY.get_sample_value("caldera_gang_partial_binds_total") or 0.0


async def settle(binder: Binder) -> None:
    await asyncio.wait_for(binder._queue.join(), 10)


async def test_transient_errors_are_retried_until_bound(server) -> None:
    srv, client = server
    cache = ClusterCache()
    placements = assumed(cache, 2)
    srv.scripts = {"g-0": [500, 429, 503], "g-1": [429]}
    obs = Observer()
    binder = Binder(client, cache, workers=2, observer=obs)
    binder.start()
    binder.bind(placements)
    await settle(binder)
    await binder.stop()
    assert srv.calls == {"g-0": 4, "g-1": 2}
    assert srv.nodes == {"g-0": "n1", "g-1": "n1"}
    assert all(cache.task(p.task.uid).status == TaskStatus.BOUND for p in placements)
    assert obs.gangs == ["default/g"] and not obs.failed
    body = srv.bodies[0]
    assert body["kind"] == "Binding" and body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}


async def bind_gang(
    server: Any, size: int, scripts: dict[str, list[int]]
) -> tuple[ClusterCache, list[Placement], Observer, Binder]:
    """A gang of ``size`` assumed on n1 and bound, the fake API server answering as scripted."""
    srv, client = server
    cache = ClusterCache()
    placements = assumed(cache, size)
    srv.scripts = scripts
    obs = Observer()
    binder = Binder(client, cache, observer=obs)
    binder.start()
    binder.bind(placements)
    await settle(binder)
    await binder.stop()
    return cache, placements, obs, binder


async def test_a_permanent_failure_returns_the_task_to_pending_and_says_why(server) -> None:
    srv, _ = server
    partial_before = partial_binds()
    cache, placements, obs, binder = await bind_gang(server, 2, {"g-1": [422]})
    failed_task = cache.task(placements[1].task.uid)
    assert failed_task.status == TaskStatus.PENDING and failed_task.node_name == ""
    assert cache.node_infos()["n1"].used.get("cpu") == 1000, "the failed member's resources are free again"
    assert srv.calls["g-1"] == 1, "a 422 is not retried"
    assert obs.failed and "422" in obs.failed[0][1]
    assert binder.failures[placements[1].task.uid].reason.startswith("422")
    (job, bound, failed) = obs.partial[0]
    assert job == "default/g" and bound == 1 and list(failed) == ["default/g-1"]
    assert partial_binds() == partial_before + 1


async def test_a_member_deleted_before_its_binding_is_no_partial_gang(server, caplog) -> None:
    """A Job torn down while its gang is bound: the binding of a deleted pod answers 404. The others
    are bound as a gang, the deleted one is neither reported as failed (no FailedScheduling) nor as a
    partly bound gang (no ERROR, no caldera_gang_partial_binds_total)."""
    srv, _ = server
    partial_before = partial_binds()
    with caplog.at_level(logging.INFO, logger="caldera.binder"):
        _, _, obs, _ = await bind_gang(server, 3, {"g-1": [404]})
    assert srv.calls["g-1"] == 1, "a 404 is not retried"
    assert [name for name, _ in obs.gone] == ["g-1"] and "404" in obs.gone[0][1]
    assert obs.failed == [] and obs.partial == []
    assert obs.gangs == ["default/g"]
    assert partial_binds() == partial_before
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "gang default/g: 2 pods bound, 1 deleted before their binding" in caplog.text


async def test_a_pod_is_never_bound_twice(server) -> None:
    srv, client = server
    cache = ClusterCache()
    placements = assumed(cache, 1)
    binder = Binder(client, cache)
    binder.start()
    binder.bind(placements)
    binder.bind(placements)  # the same placement again, e.g. from a cycle that saw a stale pod
    await settle(binder)
    binder.bind(placements)
    await settle(binder)
    await binder.stop()
    assert srv.calls == {"g-0": 1}


async def test_a_retry_that_finds_its_earlier_attempt_landed_counts_as_bound(server) -> None:
    srv, client = server
    cache = ClusterCache()
    placements = assumed(cache, 1)
    srv.nodes["g-0"] = "n1"  # the first attempt bound it, but its answer was lost as a 500
    srv.scripts = {"g-0": [500]}
    binder = Binder(client, cache)
    binder.start()
    binder.bind(placements)
    await settle(binder)
    await binder.stop()
    assert binder.bound_count == 1 and not binder.failures


async def test_binds_are_waiting_while_queued_and_not_once_sent(server) -> None:
    _, client = server
    cache = ClusterCache()
    placements = assumed(cache, 3)
    binder = Binder(client, cache, workers=1)
    assert not binder.waiting()
    binder.bind(placements)
    assert binder.waiting()  # the status flusher gives way to these
    binder.start()
    await settle(binder)
    assert not binder.waiting()
    await binder.stop()


async def test_abort_issues_nothing_more_and_releases_the_assumptions(server) -> None:
    srv, client = server
    cache = ClusterCache()
    placements = assumed(cache, 3)
    binder = Binder(client, cache)  # not started: everything stays queued
    binder.bind(placements)
    await binder.abort()
    binder.bind(placements)
    assert srv.calls == {}
    assert all(cache.task(p.task.uid).status == TaskStatus.PENDING for p in placements)


async def test_the_binds_of_deleted_pods_are_forgotten(server) -> None:
    """Bound pods deleted (a churn of short-lived pods): the binder's memory of their binds goes with
    them, as it goes with pods absent from a re-list, instead of staying for REMEMBER_BOUND."""
    _srv, client = server
    cache = ClusterCache()
    placements = assumed(cache, 40, "churn")
    binder = Binder(client, cache, workers=4, observer=Observer())
    binder.start()
    binder.bind(placements)
    await settle(binder)
    await binder.stop()
    assert dict(binder.remembered())["bound"] == 40
    for p in placements[:30]:
        binder.pod_gone(p.task.pod)
    binder.pods_relisted([p.task.pod for p in placements[30:35]])  # the other five absent from it
    remembered = dict(binder.remembered())
    assert remembered["bound"] == 5 and remembered["issued"] == 5
    binder.bind(placements[30:35])  # still remembered: not bound a second time
    assert binder.issued_count == 40
