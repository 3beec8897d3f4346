"""How long the scheduler's event loop waits while cycles run: ``caldera-sim bench core`` prints it.

The binary's loop handles watch events, bind answers and lease renewals; a cycle's decision runs in a
worker thread, and its snapshot is made on the loop in short steps (``ClusterCache.snapshot_async``).
This drives cycles exactly as the binary does (``SchedulerLoop.cycle``, the garbage collector set as
the binary sets it) over a cluster of full nodes and a backlog of pending pods, while a ticker on the
loop does what a watch event does every millisecond (a pod of another scheduler updated in the cache,
under its lock) and measures how late each tick runs: the longest lateness is the longest stall, a
timer's figure, not an estimate. ``--stall-in-thread`` measures the same with the snapshot made in one
go by the decision's thread instead, as before (the loop then waits for the cache's lock).
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import time
from dataclasses import dataclass

import msgspec

from caldera.cache.store import ClusterCache
from caldera.framework.objects import Pod
from caldera.hack.stats import percentile

#: the ticker's period (seconds)
TICK = 0.001
#: print every tick later than SLOW seconds, with when it was (CALDERA_STALL_TRACE=1)
SLOW = 0.02
TRACE = bool(os.environ.get("CALDERA_STALL_TRACE"))


@dataclass
class StallFigures:
    cycles: int
    ticks: int
    #: lateness of the ticks, seconds
    longest: float
    p99: float
    p50: float
    #: the cycles' wall time, seconds: the first (everything copied) and the median of the rest
    first_cycle: float
    median_cycle: float

    def line(self, how: str) -> str:
        return (
            f"event loop stall while {self.cycles} cycles ran ({how}): longest {self.longest * 1e3:.1f} ms,"
            f" p99 {self.p99 * 1e3:.1f} ms, p50 {self.p50 * 1e3:.2f} ms over {self.ticks} ticks of"
            f" {TICK * 1e3:.0f} ms, each applying a pod update to the cache (first cycle"
            f" {self.first_cycle:.2f} s, then p50 {self.median_cycle * 1e3:.0f} ms)"
        )


class _InThread:
    """A cache whose snapshot the decision's thread takes (hides ``snapshot_async``)."""

    def __init__(self, cache: ClusterCache) -> None:
        self._cache = cache

    def __getattr__(self, name: str) -> object:
        if name == "snapshot_async":
            raise AttributeError(name)
        return getattr(self._cache, name)


def measure_stall(
    loop_factory, cache: ClusterCache, fillers: list[Pod], cycles: int, in_thread: bool
) -> StallFigures:  # type: ignore[no-untyped-def]
    """Run ``cycles`` cycles of ``loop_factory(source)`` (a SchedulerLoop over ``source``) under a
    ticker that updates the ``fillers`` (pods of another scheduler, on nodes) one by one."""
    source = _InThread(cache) if in_thread else cache
    sched = loop_factory(source)
    lateness: list[float] = []
    durations: list[float] = []
    begun = time.perf_counter()
    phase = ["start"]
    trace: list[tuple[float, float, str]] | None = [] if TRACE else None

    async def main() -> None:
        stop = asyncio.Event()

        async def ticker() -> None:
            # A tick's lateness: from when it was due (TICK after the last tick's work ended) to
            # when its own work ended, so time spent waiting for the cache's lock counts too.
            loop = asyncio.get_running_loop()
            k = 0
            done = loop.time()
            while not stop.is_set():
                await asyncio.sleep(TICK)
                old = fillers[k % len(fillers)]
                labels = {**old.metadata.labels, "tick": str(k)}
                new = msgspec.structs.replace(
                    old, metadata=msgspec.structs.replace(old.metadata, labels=labels)
                )
                fillers[k % len(fillers)] = new
                cache.upsert_pod(new)
                k += 1
                now = loop.time()
                lateness.append(max(0.0, now - done - TICK))
                if lateness[-1] > SLOW and trace is not None:
                    trace.append((round(now - begun, 3), round(lateness[-1] * 1e3, 1), phase[0]))
                done = now

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.05)
        for c in range(cycles):
            phase[0] = f"cycle {c}"
            t = time.perf_counter()
            await sched.cycle()
            durations.append(time.perf_counter() - t)
        stop.set()
        await task

    gc.collect()
    asyncio.run(main())
    if trace:
        print("slow ticks (s since start, ms late, during):", trace)
    ordered = sorted(lateness)
    return StallFigures(
        cycles=cycles,
        ticks=len(lateness),
        longest=ordered[-1] if ordered else 0.0,
        p99=percentile(ordered, 99) if ordered else 0.0,
        p50=statistics.median(ordered) if ordered else 0.0,
        first_cycle=durations[0],
        median_cycle=statistics.median(durations[1:]) if len(durations) > 1 else durations[0],
    )


def run_stall(nodes: int, pending: int, cycles: int, in_thread: bool = False) -> StallFigures:
    """The figure over ``nodes`` full nodes (one pod of another scheduler each) and ``pending``
    pending pods in gangs of 10 (nothing fits: every cycle goes over the whole backlog)."""
    from caldera.config.conf import DEFAULT_CONF, parse_conf
    from caldera.hack.bench import load_jobs, make_cache, make_jobs
    from caldera.hack.scenario import pod
    from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
    from caldera.scheduler.memory import CollectorPolicy
    from caldera.scheduler.registry import builtin_registry

    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    saved_threshold = gc.get_threshold()
    policy = CollectorPolicy()
    policy.start()
    try:
        cache = make_cache(nodes)
        fillers = []
        for i in range(nodes):
            filler = pod(
                f"filler-{i}",
                cpu="32",
                memory="1Gi",
                scheduler="default-scheduler",
                node_name=f"node-{i:05d}",
                phase="Running",
            )
            cache.upsert_pod(filler)
            fillers.append(filler)
        load_jobs(cache, make_jobs(pending // 10, 10))

        def factory(source: object) -> SchedulerLoop:
            return SchedulerLoop(
                source,  # type: ignore[arg-type]
                lambda: conf,
                registry,
                RecordingBinder(),
                on_cycle=lambda result, seconds, error: policy.after_cycle(),
                between_steps=policy.between_steps,
            )

        return measure_stall(factory, cache, fillers, cycles, in_thread)
    finally:
        gc.unfreeze()
        gc.set_threshold(*saved_threshold)
