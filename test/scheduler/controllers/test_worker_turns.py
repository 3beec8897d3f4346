"""A controller worker lets the event loop run while it goes through a long queue of keys that need
no request (a resync of every PodGroup): it never holds the loop for the whole queue."""

from __future__ import annotations

import asyncio
import itertools
import time

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.scheduler.controllers import Controllers
from caldera.scheduler.controllers.state import WorkQueue


async def test_a_worker_going_through_many_keys_lets_other_work_run() -> None:
    client = ApiClient(ClusterConfig(host="http://127.0.0.1:9", token="t"))
    controllers = Controllers(client)
    queue: WorkQueue[str] = WorkQueue()
    for i in range(3000):
        queue.add(f"pg-{i}")
    done: list[str] = []

    async def reconcile(key: str) -> None:  # nothing to write for this key: no pause of its own
        time.sleep(0.0001)
        done.append(key)

    ticks: list[int] = []

    async def ticker() -> None:
        while len(done) < 3000:
            ticks.append(len(done))
            await asyncio.sleep(0)

    worker = asyncio.create_task(controllers._worker(queue, reconcile))
    await asyncio.wait_for(ticker(), 10)
    worker.cancel()
    await client.close()
    # 3,000 keys of 0.1 ms each (0.3 s in all): the loop ran other work every few milliseconds, not
    # once at the end
    steps_between = [b - a for a, b in itertools.pairwise(ticks) if b > a]
    assert len(steps_between) >= 20
    assert max(steps_between) <= 200  # 20 ms of keys at most in one step
