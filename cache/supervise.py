"""Long-running asyncio workers that can never fail in silence.

Every background worker of the binary (binder, evictor, status updater, controllers, watches) is started
with :func:`supervise`: if its coroutine raises, the traceback is logged, ``caldera_worker_crashes_total``
counts it, and the worker is started again after a back-off that doubles up to ``max_backoff`` (never a
tight loop). :func:`stop_workers` cancels and awaits them; an error raised while one stops is logged
with its traceback too, never swallowed, and a cancellation of the caller itself goes on up.

Workers wait with ``asyncio.timeout``, never ``asyncio.wait_for``: in Python 3.11 a cancellation that
meets an inner wait just completed is swallowed by ``wait_for`` (python/cpython gh-86296, fixed in
3.12), and a ``while True`` worker around it never ends (test/scheduler/test_stop_when_woken.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from prometheus_client import Counter

log = logging.getLogger("caldera.workers")

WORKER_CRASHES = Counter(
    "caldera_worker_crashes",
    "Background workers (binder, evictor, status, controllers, watches) that raised and were restarted.",
    ["worker"],
)


def supervise(
    name: str,
    work: Callable[[], Awaitable[None]],
    *,
    backoff: float = 0.5,
    max_backoff: float = 30.0,
) -> asyncio.Task[None]:
    """Run ``work()`` as a task named ``name``, restarting it whenever it raises.

    A worker that returns normally is done (it had nothing more to do); one that is cancelled stops."""

    async def run() -> None:
        delay = backoff
        while True:
            try:
                await work()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                WORKER_CRASHES.labels(name).inc()
                log.exception("worker %s crashed; restarting it in %.1f s", name, delay)
                await asyncio.sleep(delay)
                delay = min(max_backoff, delay * 2)

    return asyncio.create_task(run(), name=name)


async def stop_workers(tasks: Iterable[asyncio.Task[None]]) -> None:
    """Cancel every task and wait for each to end; what one raises on the way out is logged."""
    tasks = list(tasks)
    current = asyncio.current_task()
    # cancellations of the caller already asked before (it may be stopping its workers in the finally
    # of its own cancellation): only one asked while it waits here is the caller's to take
    asked = current.cancelling() if current is not None else 0
    for task in tasks:
        task.cancel()
    for task in tasks:
        try:
            await task
        except asyncio.CancelledError:
            if current is not None and current.cancelling() > asked:
                raise  # the caller was cancelled while it waited, not only the task it awaited
            continue
        except Exception:
            WORKER_CRASHES.labels(task.get_name()).inc()
            log.exception("worker %s failed while stopping", task.get_name())
