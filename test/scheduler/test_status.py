"""Status writes: coalesced, sent only on change, events per PodGroup and not repeated."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from aiohttp import web

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.cache.store import ClusterCache
from caldera.framework.objects import PodGroup
from caldera.framework.session import SessionResult
from caldera.hack.scenario import gang, load, node, podgroup_dict
from caldera.scheduler.status import StatusUpdater


class Recorder:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path, await request.json()))
        return web.Response(status=200, body=b"{}")

    def of(self, method: str, fragment: str) -> list[Any]:
        return [body for m, path, body in self.requests if m == method and fragment in path]


@pytest.fixture
async def recorder() -> AsyncIterator[tuple[Recorder, ApiClient]]:
    rec = Recorder()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", rec.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = ApiClient(ClusterConfig(host=f"http://127.0.0.1:{port}"))
    yield rec, client
    await client.close()
    await runner.cleanup()


def unschedulable_cycle(cache: ClusterCache) -> SessionResult:
    snap = cache.snapshot()
    job = snap.jobs["default/big"]
    job.job_fit_error = "0/1 nodes are available: 1 Insufficient cpu."
    for uid in job.tasks:
        job.fit_errors[uid] = "0/1 nodes are available: 1 Insufficient cpu."
    return SessionResult(jobs=snap.jobs)


async def test_unchanged_wishes_are_written_once_and_coalesced(recorder) -> None:
    rec, client = recorder
    cache = ClusterCache()
    pg, pods = gang("big", 2, cpu="16")
    load(cache, nodes=[node("n1", cpu="8")], podgroups=[pg], pods=pods)
    status = StatusUpdater(client, cache, component="caldera")
    for _ in range(5):  # a busy scheduler: five cycles with the same verdict
        status.observe(unschedulable_cycle(cache))
    await status.flush()
    patches = rec.of("PATCH", "/podgroups/big")
    assert len(patches) == 1
    cond = patches[0]["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Unschedulable", "True", "NotEnoughResources")
    assert "2/2 tasks in gang unschedulable" in cond["message"]
    pod_patches = rec.of("PATCH", "/status")
    assert len(pod_patches) == 2
    assert pod_patches[0]["status"]["conditions"][0]["reason"] == "Unschedulable"
    events = rec.of("POST", "/events")
    assert len(events) == 1 and events[0]["reason"] == "FailedScheduling"
    assert events[0]["involvedObject"]["kind"] == "PodGroup"

    # The watch brings the written status back: nothing more to send, however many cycles run.
    written = podgroup_dict("big", min_member=2)
    written["metadata"]["uid"] = pg.metadata.uid
    written["status"] = patches[0]["status"]
    cache.upsert_podgroup(msgspec.convert(written, PodGroup))
    rec.requests.clear()
    for _ in range(3):
        status.observe(unschedulable_cycle(cache))
    await status.flush()
    assert rec.of("PATCH", "/podgroups/") == [] and rec.of("POST", "/events") == []


async def test_per_pod_events_only_behind_the_flag(recorder) -> None:
    rec, client = recorder
    cache = ClusterCache()
    pg, pods = gang("big", 3, cpu="16")
    load(cache, nodes=[node("n1", cpu="8")], podgroups=[pg], pods=pods)
    status = StatusUpdater(client, cache, per_pod_events=True)
    status.observe(unschedulable_cycle(cache))
    await status.flush()
    kinds = sorted(e["involvedObject"]["kind"] for e in rec.of("POST", "/events"))
    assert kinds == ["Pod", "Pod", "Pod", "PodGroup"]


async def test_a_plugins_queue_event_reaches_the_api_once(recorder) -> None:
    """Proportion reports a queue whose guarantee it scaled down; the binary publishes it on the Queue,
    and the same message in the next cycles is not sent again."""
    from caldera.framework.session import SessionReport

    rec, client = recorder
    cache = ClusterCache()
    status = StatusUpdater(client, cache, component="caldera")
    message = "guarantees of all queues exceed the cluster's capacity; guarantee scaled down: cpu to 4 (x0.500)"
    for _ in range(3):
        report = SessionReport(events=[("Queue", "team-a", "GuaranteeScaled", message)])
        status.observe(SessionResult(report=report))
    await status.flush()
    events = rec.of("POST", "/events")
    assert len(events) == 1
    assert events[0]["involvedObject"]["kind"] == "Queue" and events[0]["involvedObject"]["name"] == "team-a"
    assert (events[0]["type"], events[0]["reason"], events[0]["message"]) == ("Warning", "GuaranteeScaled", message)
