"""A worker cancelled just as what it waits for arrives still stops. Python 3.11's ``asyncio.wait_for``
returns the inner result instead of raising when a cancellation meets an inner wait that has just
completed (python/cpython gh-86296, fixed in 3.12 by building ``wait_for`` on ``asyncio.timeout``):
a ``while True`` worker around it then never ends, and whoever stops it waits forever. The status
updater waits so for its dirty event, which a busy leader sets all the time; a replica that lost
its lease hung in stopping it (seen in two soaks of session 13, exited by the lost-lease watchdog
since). Workers wait with ``asyncio.timeout`` instead."""

from __future__ import annotations

import asyncio

from caldera.cache.store import ClusterCache
from caldera.scheduler.status import StatusUpdater


async def test_the_status_updater_stops_when_cancelled_as_its_event_is_set(recorder) -> None:
    _, client = recorder
    for _ in range(3):
        status = StatusUpdater(client, ClusterCache())
        status.events.next_due = lambda: 60.0  # type: ignore[method-assign]  # an Event update due later
        status.start()
        await asyncio.sleep(0.01)  # waiting for its dirty event, with a timeout
        status._dirty.set()  # a wish arrives...
        await asyncio.sleep(0)  # ...and the inner wait completes
        stopping = asyncio.create_task(status.stop(flush=False))  # ...as the replica stops it
        done, _ = await asyncio.wait({stopping}, timeout=2.0)  # (asyncio.wait cancels nothing)
        assert done, "the status updater did not stop"
