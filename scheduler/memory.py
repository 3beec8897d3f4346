"""How the scheduler binary runs Python's cyclic garbage collector.

What the scheduler allocates is of two kinds. The cache's objects (decoded objects, tasks, jobs,
nodes) and each cycle's copies are acyclic and freed by reference counting; the only reference
cycles a cycle made were its session and plugins, and the loop breaks those when the session closes
(``SchedulerLoop.decide``). Yet the collector walks every container allocated since its last run
(and again on each older generation's run): with thousands of nodes that is tens of thousands of
pointers into a large heap, mostly cache misses, each time. ``bench e2e`` at 5,000 nodes showed it
at 10-17% of the scheduler's CPU (``caldera_gc_seconds_total``).

So, after each cycle, everything alive is moved out of the collector's reach (``gc.freeze``, O(1)):
automatic collections then walk only what was allocated since the last cycle. Objects frozen are
still freed by reference counting as soon as they are dropped; only garbage caught in a reference
cycle after being frozen would stay. To bound that, when the process's resident memory has doubled
since the last full collection, the scheduler unfreezes, collects everything once, and freezes
again: the cost of full collections stays proportional to growth, and what such garbage can take is
bounded. (The number of frozen objects is not checked each cycle: counting them walks them all.)
``caldera_gc_frozen_objects`` (as of the last full collection) and
``caldera_gc_full_collections_total`` show it working.
"""

from __future__ import annotations

import gc
import logging
import os
import time

from caldera.metrics import gc as gc_metrics

log = logging.getLogger("caldera.memory")

#: a young-generation collection after this many net allocations (CPython's default is 700): a
#: cycle's copies and a burst of watch events allocate tens of thousands of objects that live until
#: the cycle ends; collecting every 700 would walk the same live objects over and over
GEN0_THRESHOLD = 50_000
GEN1_THRESHOLD = 20
GEN2_THRESHOLD = 100
#: a full collection once resident memory grew by this share since the last one (doubled)...
GROWTH_FOR_FULL = 1.0
#: ...and by at least this many bytes: a cluster filling up grows the cache by about 10 MiB per 1,000
#: pods, which is not garbage; the cycles leave no reference cycles behind (the loop breaks the
#: session's), so what this bounds is garbage of other origins, rare by measure
MIN_GROWTH = 256 * 2**20


def set_thresholds() -> None:
    """The thresholds above; the binary sets them before it imports the scheduler, whose imports
    make a few hundred thousand objects that live as long as the process (walked again and again
    at CPython's default of a collection per 700 allocations: ~2% of the start-up's instructions)."""
    gc.set_threshold(GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD)


def resident_bytes() -> int:
    """This process's resident set, from /proc/self/statm (one small read); 0 where unknown."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return 0


PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class CollectorPolicy:
    """Thresholds at start; after each cycle, freeze; when memory has grown, one full collection."""

    def __init__(self, growth: float = GROWTH_FOR_FULL, min_growth: int = MIN_GROWTH) -> None:
        self.growth = growth
        self.min_growth = min_growth
        #: resident bytes right after the last full collection (0: none yet)
        self.baseline = 0
        self.full_collections = 0

    def start(self) -> None:
        gc_metrics.install()
        set_thresholds()

    def after_cycle(self) -> None:
        """Freeze what is alive; run a full collection when memory outgrew the last one."""
        gc.freeze()
        rss = resident_bytes()
        if not self.baseline:
            self.baseline = rss
        elif rss - self.baseline > max(self.min_growth, self.growth * self.baseline):
            self.collect_all()

    def between_steps(self) -> None:
        """Between the steps of a snapshot made on the event loop, and once it is made: freeze
        (O(1)) what is alive, the copies made so far included, so that the collections the rest of
        the cycle triggers walk only what it allocates since (a young generation walked whole,
        copies and all, stalls the event loop for tens of milliseconds at 100,000 pods)."""
        gc.freeze()

    def collect_all(self) -> None:
        """Unfreeze, collect every generation, freeze what is left."""
        started = time.perf_counter()
        gc.unfreeze()
        found = gc.collect()
        gc.freeze()
        self.baseline = resident_bytes()
        self.full_collections += 1
        frozen = gc.get_freeze_count()
        gc_metrics.FULL_COLLECTIONS.inc()
        gc_metrics.FROZEN.set(frozen)
        log.info(
            "full garbage collection: %d objects kept, %d unreachable found, %.3fs; resident %d MiB",
            frozen,
            found,
            time.perf_counter() - started,
            self.baseline // 2**20,
        )
