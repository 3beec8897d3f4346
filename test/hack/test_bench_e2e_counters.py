"""`caldera-sim bench e2e` reads the scheduler's own counters from its /metrics text.

The text is what the scheduler's /metrics serves (``generate_latest(REGISTRY)``, scheduler/http.py),
read before and after the scheduler's own metric objects move by known amounts: a metric renamed or
relabelled in metrics/ and not in the reader makes the reader miss it here."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from prometheus_client import REGISTRY, generate_latest

from caldera.hack.bench_e2e import E2EResult, read_counters
from caldera.metrics import gc as gc_metrics
from caldera.metrics import scheduler as m


def _scrape() -> E2EResult:
    result = E2EResult(pods=10, nodes=2, gang_size=10, period="100ms")
    read_counters(generate_latest(REGISTRY).decode(), result)
    return result


def _rise(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}


@contextmanager
def _no_automatic_collection() -> Iterator[None]:
    """The collector's own counts and times stay still while the test reads them."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def test_bench_reads_the_schedulers_events_writes_cycles_and_collector_time() -> None:
    """A scheduler that saw 30 pod and 3 PodGroup events, finished 10 binds (one failed), wrote 2
    PodGroup statuses and one Event (and failed one), and ran 4 cycles."""
    with _no_automatic_collection():
        before = _scrape()
        m.WATCH_EVENTS.labels(kind="pods", type="ADDED").inc(10)
        m.WATCH_EVENTS.labels(kind="pods", type="MODIFIED").inc(20)
        m.WATCH_EVENTS.labels(kind="podgroups", type="ADDED").inc(3)
        m.BINDS.labels(result="bound").inc(9)
        m.BINDS.labels(result="failed").inc()
        m.STATUS_WRITES.labels(kind="podgroup", result="ok").inc(2)
        m.STATUS_WRITES.labels(kind="podgroup", result="error").inc()
        m.STATUS_WRITES.labels(kind="event", result="ok").inc()
        for _ in range(4):
            m.CYCLE_DURATION.observe(0.01)
        gc_metrics.GC_SECONDS.labels(generation="0").inc(0.25)
        after = _scrape()
        collections = {str(g): float(s["collections"]) for g, s in enumerate(gc.get_stats())}

    assert _rise(after.events_seen, before.events_seen) == {"pods": 30.0, "podgroups": 3.0}
    assert _rise(after.writes, before.writes) == {"bindings": 10.0, "podgroup status": 3.0, "events": 1.0}
    assert after.cycles is not None and after.cycles - (before.cycles or 0.0) == 4
    assert _rise(after.gc_seconds, before.gc_seconds) == {"0": pytest.approx(0.25)}
    # prometheus_client's own collector, registered with the default registry the scheduler serves
    assert after.gc_collections == collections


def test_report_states_the_counters() -> None:
    result = E2EResult(pods=10, nodes=2, gang_size=10, period="100ms", bound=10)
    result.events_seen = {"pods": 30.0, "podgroups": 3.0}
    result.writes = {"bindings": 10.0, "podgroup status": 2.0, "events": 1.0}
    result.cycles = 4
    result.gc_seconds = {"0": 0.25}
    result.gc_collections = {"0": 7.0}
    report = result.report()
    assert "watch events the scheduler decoded: podgroups 3, pods 30" in report
    assert "API writes: bindings 10, events 1, podgroup status 2 (1.30 per bound pod)" in report
    assert "scheduling cycles: 4" in report
    assert "garbage collector (whole process life): 0.25s (gen0 0.25s in 7)" in report


def test_collector_time_is_counted_by_generation() -> None:
    gc_metrics.install()
    gc_metrics.install()  # idempotent: one callback
    assert gc.callbacks.count(gc_metrics._callback) == 1
    before = _scrape().gc_seconds["2"]
    gc.collect()
    assert _scrape().gc_seconds["2"] > before


def test_bench_reports_the_lag_the_scheduler_measured() -> None:
    """The lag lines come from /debug/scheduler's ``lag``, as WatchLag and LoopLag summarise it."""
    from caldera.cache.lag import WatchLag
    from caldera.hack.bench_e2e import lag_lines
    from caldera.scheduler.looplag import LoopLag

    now = [0.0]
    watch, loop = WatchLag(clock=lambda: now[0]), LoopLag()
    for uid, delay in (("a", 0.004), ("b", 0.012)):
        watch.answered(uid)
        now[0] += delay
        watch.seen(uid, answered_first=True)
    loop.note(0.002)
    lines = lag_lines({"watch": watch.summary(), "loop": loop.summary()})
    assert (
        lines[0]
        == "  event loop lateness (a timer every 0.25 s, 1 of them): p50 2 ms, p99 2 ms, longest 2 ms"
    )
    assert lines[1].startswith(
        "  binds seen back by the pod watch after the API's answer (the last 2 of 2): p50 8 ms"
    )
    assert lines[1].endswith("longest 12 ms")
    assert lag_lines({"watch": WatchLag().summary(), "loop": LoopLag().summary()}) == []
