"""Time the interpreter spends in its cyclic garbage collector, by generation.

Python's collector pauses whichever thread allocates; with a large heap a full collection walks every
tracked object. ``caldera_gc_seconds_total`` makes that cost visible (prometheus-client's own
``python_gc_collections_total`` counts collections but not their time), and the benchmarks print it.
The time is the collecting thread's CPU time: a collection that runs a finalizer may hand the GIL to
the other thread for a while, which wall-clock time would count as collecting.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import Counter, Gauge

GC_SECONDS = Counter(
    "caldera_gc_seconds_total",
    "Seconds spent in the cyclic garbage collector, by generation.",
    ["generation"],
)

_children = [GC_SECONDS.labels(str(g)) for g in range(3)]
_started = [0.0]


def _callback(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[0] = time.thread_time()
    elif _started[0]:
        _children[min(2, int(info.get("generation", 2)))].inc(time.thread_time() - _started[0])
        _started[0] = 0.0


def install() -> None:
    """Start timing collections (idempotent)."""
    if _callback not in gc.callbacks:
        gc.callbacks.append(_callback)


FROZEN = Gauge(
    "caldera_gc_frozen_objects",
    "Objects out of the collector's reach after the last full collection (scheduler/memory.py).",
)
FULL_COLLECTIONS = Counter(
    "caldera_gc_full_collections_total",
    "Full collections the scheduler ran itself (its memory had grown past the limit).",
)
