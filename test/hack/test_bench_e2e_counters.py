"""`caldera-sim bench e2e` reads the scheduler's own counters from its /metrics text."""

from __future__ import annotations

import gc

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from caldera.hack.bench_e2e import E2EResult, read_counters
from caldera.metrics import gc as gc_metrics


def _scheduler_metrics_text() -> str:
    """What a scheduler that saw 30 pod and 3 PodGroup events, bound 10 pods, wrote 2 PodGroup
    statuses and one Event, and ran 4 cycles exports (the same metric names and labels)."""
    reg = CollectorRegistry()
    watch = Counter("caldera_watch_events_total", "", ["kind", "type"], registry=reg)
    watch.labels("pods", "ADDED").inc(10)
    watch.labels("pods", "MODIFIED").inc(20)
    watch.labels("podgroups", "ADDED").inc(3)
    binds = Counter("caldera_binds_total", "", ["result"], registry=reg)
    binds.labels("bound").inc(10)
    writes = Counter("caldera_status_writes_total", "", ["kind", "result"], registry=reg)
    writes.labels("podgroup", "ok").inc(2)
    writes.labels("event", "ok").inc(1)
    cycles = Histogram("caldera_cycle_duration_seconds", "", registry=reg)
    for _ in range(4):
        cycles.observe(0.01)
    spent = Counter("caldera_gc_seconds_total", "", ["generation"], registry=reg)
    spent.labels("0").inc(0.25)
    runs = Counter("python_gc_collections_total", "", ["generation"], registry=reg)
    runs.labels("0").inc(7)
    return generate_latest(reg).decode()


def test_bench_reads_events_writes_cycles_and_collector_time() -> None:
    result = E2EResult(pods=10, nodes=2, gang_size=10, period="100ms", bound=10)
    read_counters(_scheduler_metrics_text(), result)
    assert result.events_seen == {"pods": 30.0, "podgroups": 3.0}
    assert result.writes == {"bindings": 10.0, "podgroup status": 2.0, "events": 1.0}
    assert result.cycles == 4
    assert result.gc_seconds == {"0": 0.25}
    assert result.gc_collections == {"0": 7.0}
    report = result.report()
    assert "API writes: bindings 10, events 1, podgroup status 2 (1.30 per bound pod)" in report
    assert "scheduling cycles: 4" in report
    assert "garbage collector (whole process life): 0.25s (gen0 0.25s in 7)" in report


def test_collector_time_is_counted_by_generation() -> None:
    gc_metrics.install()
    gc_metrics.install()  # idempotent: one callback
    assert gc.callbacks.count(gc_metrics._callback) == 1
    before = gc_metrics.GC_SECONDS.labels("2")._value.get()
    gc.collect()
    assert gc_metrics.GC_SECONDS.labels("2")._value.get() > before
