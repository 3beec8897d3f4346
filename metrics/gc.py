"""Time the interpreter spends in its cyclic garbage collector, by generation.

Python's collector pauses whichever thread allocates; with a large heap a full collection walks every
tracked object. ``caldera_gc_seconds_total`` makes that cost visible (prometheus-client's own
``python_gc_collections_total`` counts collections but not their time), and the benchmarks print it.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import Counter

GC_SECONDS = Counter(
    "caldera_gc_seconds_total",
    "Seconds spent in the cyclic garbage collector, by generation.",
    ["generation"],
)

_children = [GC_SECONDS.labels(str(g)) for g in range(3)]
_started = [0.0]


def _callback(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
    elif _started[0]:
        _children[min(2, int(info.get("generation", 2)))].inc(time.perf_counter() - _started[0])
        _started[0] = 0.0


def install() -> None:
    """Start timing collections (idempotent)."""
    if _callback not in gc.callbacks:
        gc.callbacks.append(_callback)


#: a young-generation collection after this many net allocations (CPython's default is 700): the
#: watch decodes and each cycle's session copies allocate in bursts of tens of thousands of objects,
#: most of which live exactly one cycle, so collecting every 700 walks the same young objects many
#: times over
GEN0_THRESHOLD = 50_000
GEN1_THRESHOLD = 20
GEN2_THRESHOLD = 100


def tune() -> None:
    """The scheduler's collector settings: fewer, larger young collections and rare full ones. The
    objects the cache holds are acyclic (decoded structs are not even tracked, see
    ``framework/objects.py``), so full collections find little; they are still run, only less often.
    ``bench e2e`` prints the collector's time (``caldera_gc_seconds_total``) to check this."""
    gc.set_threshold(GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD)


def freeze_long_lived() -> None:
    """Once the cache has listed the cluster: move everything alive now (the cache's objects, the
    imported modules) out of the collector's reach, so no later collection walks them again. They
    are still freed by reference counting when the cache drops them; only a reference cycle among
    them would be kept until exit, so what can leak is bounded by what existed at that moment."""
    gc.collect()
    gc.freeze()
