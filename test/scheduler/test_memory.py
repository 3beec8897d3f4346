"""The binary's garbage-collector policy: a cycle leaves no reference cycles behind, what is alive
after a cycle is frozen, and a full collection still finds cyclic garbage once memory has grown."""

from __future__ import annotations

import gc
import weakref

import pytest

from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.hack.bench import load_jobs, make_cache, make_jobs
from caldera.scheduler import memory
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry


@pytest.fixture
def collector_state():
    """Whatever a test freezes or sets is undone: the rest of the suite keeps the usual collector."""
    thresholds = gc.get_threshold()
    gc.collect()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    gc.set_debug(0)
    gc.garbage.clear()
    gc.collect()


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_a_scheduling_cycle_leaves_no_reference_cycles(collector_state):
    """Six gangs on 50 nodes: everything the cycle built is freed by reference counting (the
    session and its plugins refer to each other; the loop breaks that when the session closes)."""
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    cache = make_cache(50)
    want = load_jobs(cache, make_jobs(6, 4))
    binder = RecordingBinder()
    loop = SchedulerLoop(cache, lambda: conf, registry, binder)
    loop.run_once()  # the first cycle builds the cache's copies
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    load_jobs(cache, make_jobs(2, 4, prefix="more"))
    loop.run_once()
    gc.collect()
    assert [type(o).__name__ for o in gc.garbage] == []
    assert len(binder.placements) == want + 8


def test_after_a_cycle_what_is_alive_is_frozen(collector_state):
    policy = memory.CollectorPolicy()
    policy.start()
    assert gc.get_threshold()[0] == memory.GEN0_THRESHOLD
    kept = [_Node() for _ in range(100)]
    before = gc.get_freeze_count()
    policy.after_cycle()
    assert gc.get_freeze_count() >= before + len(kept)
    collectable = {id(o) for generation in range(3) for o in gc.get_objects(generation)}
    assert not collectable & {id(n) for n in kept}


def test_cyclic_garbage_left_frozen_is_collected_once_memory_has_grown(collector_state, monkeypatch):
    resident = [100 * 2**20]
    monkeypatch.setattr(memory, "resident_bytes", lambda: resident[0])
    policy = memory.CollectorPolicy(growth=0.5, min_growth=10 * 2**20)
    policy.start()
    policy.after_cycle()  # the baseline: 100 MiB
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    alive = weakref.ref(a)
    policy.after_cycle()  # the pair is frozen while still in use
    del a, b
    resident[0] = 140 * 2**20  # grown by 40%: not yet
    policy.after_cycle()
    gc.collect()
    assert alive() is not None, "frozen cyclic garbage is out of reach of ordinary collections"
    assert policy.full_collections == 0
    resident[0] = 151 * 2**20  # grown by more than half
    policy.after_cycle()
    assert policy.full_collections == 1
    assert alive() is None
    assert policy.baseline == 151 * 2**20
