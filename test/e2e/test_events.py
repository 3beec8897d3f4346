"""PodGroup status, pod conditions and Events as the scheduler's status updater writes them to a
cluster: the scheduler's own watches fill its cache, its cycles decide, and the updater
(scheduler/status.py, its Events through scheduler/events.py) writes with the scheduler's
ServiceAccount. Only the clock is the test's, so that Event updates fall due without waiting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.cache.informer import Informers
from caldera.cache.store import ClusterCache
from caldera.config.conf import parse_conf
from caldera.scheduler.events import PATCH_INTERVAL
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.status import StatusUpdater

from .conftest import SCHEDULER, Api, e2e_registry, eventually


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Scheduler:
    """The scheduler's cache, fed by its watches; ``cycle()`` decides once and hands the result to
    the status updater, whose writer runs in the background as in the binary (scheduler/app.py)."""

    def __init__(self, client: ApiClient, clock: Clock) -> None:
        self.cache = ClusterCache((SCHEDULER,))
        self.informers = Informers(client, self.cache)
        registry, text = e2e_registry()
        conf = parse_conf(text, registry)
        self.loop = SchedulerLoop(self.cache, lambda: conf, registry, RecordingBinder())
        self.status = StatusUpdater(client, self.cache, component=SCHEDULER, clock=clock, flush_interval=0.02)

    def cycle(self) -> None:
        self.status.observe(self.loop.run_once())

    async def sees(self, check: Callable[[ClusterCache], bool]) -> None:
        async def seen() -> bool:
            return check(self.cache)

        await eventually(seen)


@asynccontextmanager
async def scheduler(kubeconfig: str, clock: Clock) -> AsyncIterator[Scheduler]:
    client = ApiClient(await ClusterConfig.load(kubeconfig))
    s = Scheduler(client, clock)
    s.informers.start()
    try:
        await s.sees(lambda _: s.informers.synced())
        s.status.start()
        yield s
    finally:
        await s.status.stop()
        await s.informers.stop()
        await client.close()


async def failed_scheduling(api: Api) -> list[dict[str, Any]]:
    return [e for e in await api.events() if e["reason"] == "FailedScheduling"]


def unschedulable(pg: dict[str, Any]) -> dict[str, Any]:
    return {c["type"]: c for c in pg.get("status", {}).get("conditions", [])}.get("Unschedulable", {})


async def test_a_gang_that_does_not_fit_is_reported_once_and_a_new_reason_updates_the_same_event(
    api: Api, kubeconfig: str
) -> None:
    await api.node("n1", cpu="4")
    await api.node("n2", cpu="4")
    await api.gang("big", 3, cpu="3")
    clock = Clock()
    async with scheduler(kubeconfig, clock) as s:
        await s.sees(lambda c: len(c.tasks) == 3 and {"n1", "n2"} <= set(c.nodes))
        nodes = len(s.cache.nodes)  # a real cluster has its own beside these
        s.cycle()

        async def written() -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
            """The PodGroup, once its condition, the Event and the pods' conditions are all written."""
            pg, events = await api.read_podgroup("big"), await failed_scheduling(api)
            told = [p for p in await api.pods() if "PodScheduled" in str(p["status"].get("conditions"))]
            return (pg, events) if unschedulable(pg) and events and len(told) == 3 else None

        pg, first = await eventually(written)
        cond = unschedulable(pg)
        assert (cond["status"], cond["reason"]) == ("True", "NotEnoughResources")
        assert "3/3 tasks in gang unschedulable" in cond["message"] and f"0/{nodes} nodes" in cond["message"]
        assert len(first) == 1 and first[0]["count"] == 1
        assert (
            first[0]["involvedObject"]["kind"] == "PodGroup" and first[0]["involvedObject"]["name"] == "big"
        )
        assert first[0]["message"] == cond["message"] and first[0]["type"] == "Warning"
        for i in range(3):
            pod = await api.get(f"/api/v1/namespaces/{api.ns}/pods/big-{i}")
            scheduled = {c["type"]: c for c in pod["status"].get("conditions", [])}["PodScheduled"]
            assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")

        # The same verdict cycle after cycle, once the watch brought the written status back: the
        # PodGroup is not written again and no Event occurs again.
        await s.sees(lambda c: bool(c.podgroups[f"{api.ns}/big"].status.conditions))
        for _ in range(3):
            s.cycle()
        await asyncio.sleep(0.3)
        again = await api.read_podgroup("big")
        assert again["metadata"]["resourceVersion"] == pg["metadata"]["resourceVersion"]
        assert [e["count"] for e in await failed_scheduling(api)] == [1]

        # Each node added changes the reason: one more occurrence of the same Event, which carries
        # the latest message, as the PodGroup's condition does (its transition time kept).
        for name in ("n3", "n4", "n5"):
            await api.node(name, cpu="2")
            await s.sees(lambda c, name=name: name in c.nodes)
            nodes += 1
            clock.now += PATCH_INTERVAL  # the Event's update falls due

            async def updated(nodes: int = nodes) -> list[dict[str, Any]]:
                events = await failed_scheduling(api)
                return events if events and f"0/{nodes} nodes" in events[0]["message"] else []

            s.cycle()
            events = await eventually(updated)

        async def condition_follows() -> dict[str, Any]:
            now = unschedulable(await api.read_podgroup("big"))
            return now if now.get("message") == events[0]["message"] else {}

        cond_now = await eventually(condition_follows)
    assert len(events) == 1 and events[0]["metadata"]["name"] == first[0]["metadata"]["name"]
    assert events[0]["count"] == 4
    assert cond_now["lastTransitionTime"] == cond["lastTransitionTime"]
