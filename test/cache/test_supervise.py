"""A background worker that crashes is reported (traceback, metric) and restarted, never silently lost."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import REGISTRY

from caldera.cache.supervise import stop_workers, supervise


def crashes(worker: str) -> float:
    return REGISTRY.get_sample_value("caldera_worker_crashes_total", {"worker": worker}) or 0.0


async def test_a_crashing_worker_is_logged_counted_and_restarted(caplog: pytest.LogCaptureFixture) -> None:
    runs: list[int] = []
    recovered = asyncio.Event()

    async def flaky() -> None:
        runs.append(1)
        if len(runs) < 3:
            raise RuntimeError(f"boom {len(runs)}")
        recovered.set()
        await asyncio.Event().wait()  # healthy from now on

    before = crashes("flaky-worker")
    with caplog.at_level(logging.ERROR, logger="caldera.workers"):
        task = supervise("flaky-worker", flaky, backoff=0.01)
        await asyncio.wait_for(recovered.wait(), 5)
    assert len(runs) == 3
    assert crashes("flaky-worker") - before == 2
    crash_logs = [r for r in caplog.records if "flaky-worker crashed" in r.getMessage()]
    assert len(crash_logs) == 2
    assert all(r.exc_info and "boom" in str(r.exc_info[1]) for r in crash_logs)
    await stop_workers([task])
    assert task.cancelled() or task.done()


async def test_restarts_back_off_instead_of_spinning() -> None:
    runs = 0

    async def always_fails() -> None:
        nonlocal runs
        runs += 1
        raise ValueError("still broken")

    task = supervise("broken-worker", always_fails, backoff=0.05, max_backoff=0.2)
    await asyncio.sleep(0.5)
    await stop_workers([task])
    # 0.05 + 0.1 + 0.2 + 0.2 ... : a handful of tries in half a second, not thousands
    assert 2 <= runs <= 6


async def test_a_binder_worker_that_crashes_comes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real binder: its worker raises once (a bug), the supervisor restarts it, binds go on."""
    from caldera.cache.store import ClusterCache
    from caldera.scheduler.binder import Binder

    class Client:
        async def request(self, *args: object, **kwargs: object) -> object:
            raise AssertionError("not used")

    binder = Binder(Client(), ClusterCache(), workers=1)  # type: ignore[arg-type]
    original = binder._worker
    calls = 0

    async def worker_with_a_bug() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise KeyError("a bug in the worker")
        await original()

    monkeypatch.setattr(binder, "_worker", worker_with_a_bug)
    before = crashes("binder-0")
    binder.start()
    for _ in range(100):
        if calls >= 2:
            break
        await asyncio.sleep(0.05)
    assert calls == 2 and crashes("binder-0") - before == 1
    await binder.stop()


async def test_stopping_workers_can_itself_be_cancelled() -> None:
    """A caller cancelled while it waits for a worker to stop is cancelled (it was not: the worker's
    CancelledError and the caller's own looked alike, and both were taken as the worker's)."""
    release = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await release.wait()  # still cleaning up
            raise

    worker = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    stopping = asyncio.create_task(stop_workers([worker]))
    await asyncio.sleep(0.01)
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await worker


async def test_a_cancelled_task_stopping_its_workers_in_its_finally_waits_for_all_of_them() -> None:
    """The finally of a task being cancelled stops its workers: each is waited for, though the task's
    own cancellation was asked before."""
    ended: list[str] = []

    async def worker(name: str, cleanup: float) -> None:
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(cleanup)
            ended.append(name)

    async def owner() -> None:
        workers = [asyncio.create_task(worker(n, t)) for n, t in (("a", 0.01), ("b", 0.05), ("c", 0.1))]
        try:
            await asyncio.sleep(60)
        finally:
            await stop_workers(workers)

    task = asyncio.create_task(owner())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ended == ["a", "b", "c"]
