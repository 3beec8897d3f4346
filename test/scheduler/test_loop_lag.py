"""The event loop's lateness (scheduler/looplag.py): a loop held by a blocking step shows it."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import REGISTRY

from caldera.scheduler.looplag import LoopLag


def _count() -> float:
    return REGISTRY.get_sample_value("caldera_event_loop_lag_seconds_count") or 0.0


async def test_a_loop_held_for_a_while_is_reported_that_late() -> None:
    lag = LoopLag(period=0.02)
    stop = asyncio.Event()
    before = _count()
    task = asyncio.create_task(lag.run(stop))
    await asyncio.sleep(0.1)  # a few punctual ticks first
    time.sleep(0.3)  # a step that holds the loop
    await asyncio.sleep(0.1)
    stop.set()
    await asyncio.wait_for(task, 1)
    doc = lag.summary()
    assert doc["observed"] >= 3 and doc["recent"] == doc["observed"]
    assert doc["max_ms"] >= 250  # the held tick woke that much later than asked
    assert doc["p50_ms"] < 250  # the others did not
    assert _count() == before + doc["observed"]


def test_nothing_measured_yet_says_so() -> None:
    assert LoopLag().summary() == {"observed": 0, "recent": 0}
