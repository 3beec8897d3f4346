"""The metrics the scheduler binary exports: Volcano's names where Volcano has one, ``caldera_`` otherwise."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

SCHEDULE_ATTEMPTS = Counter(
    "volcano_schedule_attempts_total",
    "Scheduling attempts of pods, by result (scheduled, unschedulable, error).",
    ["result"],
)
E2E_SCHEDULING_LATENCY = Histogram(
    "volcano_e2e_scheduling_latency_milliseconds",
    "End-to-end scheduling latency of a cycle in milliseconds.",
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000),
)
CYCLE_DURATION = Histogram(
    "caldera_cycle_duration_seconds",
    "Duration of a scheduling cycle (snapshot, actions, hand-over).",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
BINDS = Counter("caldera_binds_total", "Bind requests finished, by result (bound, failed).", ["result"])
BIND_RETRIES = Counter(
    "caldera_bind_retries_total", "Bind attempts retried after a transient error.", ["code"]
)
BIND_QUEUE = Gauge("caldera_bind_queue_length", "Placements waiting for a bind worker.")
GANG_PARTIAL = Counter("caldera_gang_partial_binds_total", "Gangs whose bind partly failed.")
EVICTIONS = Counter("caldera_evictions_total", "Evictions finished, by result.", ["result"])
STATUS_WRITES = Counter(
    "caldera_status_writes_total",
    "Status writes sent to the API server, by kind and result.",
    ["kind", "result"],
)
WATCH_EVENTS = Counter(
    "caldera_watch_events_total", "Watch events received, by kind and type.", ["kind", "type"]
)
LEADER = Gauge("caldera_leader", "1 while this replica holds the leader lease.")
CONF_RELOADS = Counter(
    "caldera_conf_reloads_total", "Scheduler conf reloads, by result (ok, rejected).", ["result"]
)
CACHE_SYNCED = Gauge("caldera_cache_synced", "1 once every watched kind has been listed.")
