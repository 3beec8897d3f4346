"""In the scheduler the controllers read the cache's own watches: one watch and one decode per pod,
PodGroup and Queue event for both, and the controllers behave as with watches of their own."""

from __future__ import annotations

import asyncio
from typing import Any

from caldera.cache.informer import Informers
from caldera.cache.store import ClusterCache
from caldera.scheduler.controllers import Controllers
from caldera.scheduler.controllers.state import GROUP_NAME_ANNOTATION


async def test_controllers_fed_by_the_cache_watches_group_pods_and_remove_groups(harness: Any) -> None:
    owner = ("ReplicaSet", "web-abc", "rs-1")
    harness.create_pod("web-abc-1", owner=owner)  # there before anything starts: comes with the list
    cache = ClusterCache()
    informers = Informers(harness.client, cache)
    informers.start()
    stop = asyncio.Event()
    controllers = Controllers(harness.client, source=informers, update_podgroup_status=False)
    task = asyncio.create_task(controllers.run(stop))
    try:
        assert controllers.reflectors == {}  # no watch of their own
        harness.create_pod("web-abc-2", owner=owner)  # arrives as a watch event
        await harness.eventually(
            lambda: all(
                (harness.pod(p) or {})["metadata"].get("annotations", {}).get(GROUP_NAME_ANNOTATION)
                == "podgroup-rs-1"
                for p in ("web-abc-1", "web-abc-2")
            ),
            what="both replicas grouped",
        )
        # the default queue is created, and the cache sees the group and both pods in it
        await harness.eventually(lambda: harness.queue("default") is not None, what="default queue")
        await harness.eventually(
            lambda: len(cache.jobs.get("default/podgroup-rs-1", _empty).tasks) == 2, what="the cache's job"
        )
        harness.delete_pod("web-abc-1")
        harness.delete_pod("web-abc-2")
        await harness.eventually(lambda: harness.podgroup("podgroup-rs-1") is None, what="group removed")
        assert controllers.podgroups.stats.created == 1 and controllers.podgroups.stats.deleted == 1
    finally:
        stop.set()
        await task
        await informers.stop()
    # stopped controllers are no longer fed
    assert all(not h.subscribers for h in informers.handlers.values())


class _Empty:
    tasks: dict[str, object] = {}


_empty = _Empty()
