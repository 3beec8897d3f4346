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
BINDS = Counter(  # per bound pod: the binder keeps its labelled children (scheduler/binder.py)
    "caldera_binds_total", "Bind requests finished, by result (bound, failed).", ["result"]
)
BIND_RETRIES = Counter(
    "caldera_bind_retries_total", "Bind attempts retried after a transient error.", ["code"]
)
BIND_QUEUE = Gauge("caldera_bind_queue_length", "Placements waiting for a bind worker.")
DECISION_PAUSED_FOR_BINDS = Counter(
    "caldera_decision_paused_for_binds_seconds_total",
    "Seconds running decisions paused while more binds waited for a bind worker than a cycle may leave"
    " (scheduler/loop.py BindPacing).",
)
GANG_PARTIAL = Counter("caldera_gang_partial_binds_total", "Gangs whose bind partly failed.")
EVICTIONS = Counter("caldera_evictions_total", "Evictions finished, by result.", ["result"])
WRITES_WITHHELD = Counter(
    "caldera_writes_withheld_total",
    "Writes not sent because this replica could not prove it still holds the leader lease (its renew"
    " deadline passed), by writer (bind, eviction, status, controller).",
    ["writer"],
)
STATUS_WRITES = Counter(
    "caldera_status_writes_total",
    "Status writes sent to the API server, by kind and result.",
    ["kind", "result"],
)
CONDITION_MESSAGES_DEFERRED = Counter(
    "caldera_condition_messages_deferred_total",
    "New messages of a pending pod's PodScheduled=False condition (kind pod) or a pending PodGroup's"
    " Unschedulable condition (kind podgroup, native-podgroup) held back because the object's status"
    " was written less than a refresh period ago (its status, reason, phase and counts unchanged); the"
    " newest is written when the period ends.",
    ["kind"],
)
CLAIM_WRITES = Counter(  # scheduler/binder.py: PreBind's writes of a pod's ResourceClaims
    "caldera_resourceclaim_writes_total",
    "ResourceClaim writes sent by the binder: the finalizer, the status (allocation and reservedFor),"
    " the reservation undone; by write and result.",
    ["write", "result"],
)
WATCH_EVENTS = Counter(
    "caldera_watch_events_total", "Watch events received, by kind and type.", ["kind", "type"]
)
LEADER = Gauge("caldera_leader", "1 while this replica holds the leader lease.")
CONF_RELOADS = Counter(
    "caldera_conf_reloads_total", "Scheduler conf reloads, by result (ok, rejected).", ["result"]
)
CACHE_SYNCED = Gauge("caldera_cache_synced", "1 once every watched kind has been listed.")
STATUS_REMEMBERED = Gauge(
    "caldera_status_remembered_objects",
    "Pods and PodGroups the status updater keeps a last wish or an Event for (forgotten when the object goes).",
    ["kind"],
)

# -- Volcano's scheduler metrics (same names and labels, so existing dashboards keep working) -----
_MS_BUCKETS = tuple(5 * 2**i for i in range(15))  # Volcano's ExponentialBuckets(5, 2, 15)

OPEN_SESSION_LATENCY = Histogram(
    "volcano_open_session_duration_milliseconds",
    "Duration of opening a scheduling session (snapshot and plugins' session open) in milliseconds.",
    buckets=(0.1, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000),
)
ACTION_LATENCY = Histogram(
    "volcano_action_scheduling_latency_milliseconds",
    "Action scheduling latency in milliseconds.",
    ["action"],
    buckets=(0.1, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000),
)
PLUGIN_LATENCY = Histogram(
    "volcano_plugin_scheduling_latency_milliseconds",
    "Plugin scheduling latency in milliseconds, at session open and close.",
    ["plugin", "OnSession"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000),
)
TASK_LATENCY = Histogram(
    "volcano_task_scheduling_latency_milliseconds",
    "Task scheduling latency in milliseconds (task created to task bound to a node).",
    buckets=_MS_BUCKETS,
)
PREEMPTION_VICTIMS = Gauge(
    "volcano_pod_preemption_victims", "Number of preemption victims selected in the last cycle."
)
# A gauge, not a Counter: prometheus_client would add ``_total`` to the name Volcano exports.
PREEMPTION_ATTEMPTS = Gauge(
    "volcano_total_preemption_attempts", "Total preemption attempts in the cluster till now (only grows)."
)
UNSCHEDULE_TASK_COUNT = Gauge(
    "volcano_unschedule_task_count", "Number of tasks of a job that could not be scheduled.", ["job_id"]
)
UNSCHEDULE_JOB_COUNT = Gauge("volcano_unschedule_job_count", "Number of jobs that could not be scheduled.")
QUEUE_ALLOCATED_CPU = Gauge(
    "volcano_queue_allocated_milli_cpu", "Allocated CPU for one queue.", ["queue_name"]
)
QUEUE_ALLOCATED_MEMORY = Gauge(
    "volcano_queue_allocated_memory_bytes", "Allocated memory for one queue.", ["queue_name"]
)
QUEUE_ALLOCATED_SCALAR = Gauge(
    "volcano_queue_allocated_scalar_resources",
    "Allocated scalar resources for one queue.",
    ["queue_name", "resource"],
)
QUEUE_REQUEST_CPU = Gauge("volcano_queue_request_milli_cpu", "Requested CPU for one queue.", ["queue_name"])
QUEUE_REQUEST_MEMORY = Gauge(
    "volcano_queue_request_memory_bytes", "Requested memory for one queue.", ["queue_name"]
)
QUEUE_REQUEST_SCALAR = Gauge(
    "volcano_queue_request_scalar_resources",
    "Requested scalar resources for one queue.",
    ["queue_name", "resource"],
)
QUEUE_DESERVED_CPU = Gauge("volcano_queue_deserved_milli_cpu", "Deserved CPU for one queue.", ["queue_name"])
QUEUE_DESERVED_MEMORY = Gauge(
    "volcano_queue_deserved_memory_bytes", "Deserved memory for one queue.", ["queue_name"]
)
QUEUE_DESERVED_SCALAR = Gauge(
    "volcano_queue_deserved_scalar_resources",
    "Deserved scalar resources for one queue.",
    ["queue_name", "resource"],
)
QUEUE_CAPACITY_CPU = Gauge("volcano_queue_capacity_milli_cpu", "Capability CPU of one queue.", ["queue_name"])
QUEUE_CAPACITY_MEMORY = Gauge(
    "volcano_queue_capacity_memory_bytes", "Capability memory of one queue.", ["queue_name"]
)
QUEUE_CAPACITY_SCALAR = Gauge(
    "volcano_queue_capacity_scalar_resources",
    "Capability scalar resources of one queue.",
    ["queue_name", "resource"],
)
QUEUE_REAL_CAPACITY_CPU = Gauge(
    "volcano_queue_real_capacity_milli_cpu", "Real capability CPU of one queue (capacity).", ["queue_name"]
)
QUEUE_REAL_CAPACITY_MEMORY = Gauge(
    "volcano_queue_real_capacity_memory_bytes",
    "Real capability memory of one queue (capacity).",
    ["queue_name"],
)
QUEUE_REAL_CAPACITY_SCALAR = Gauge(
    "volcano_queue_real_capacity_scalar_resources",
    "Real capability scalar resources of one queue (capacity).",
    ["queue_name", "resource"],
)
QUEUE_INQUEUE_CPU = Gauge(
    "volcano_queue_inqueue_milli_cpu",
    "Inqueue CPU for admitted but not yet running jobs in one queue.",
    ["queue_name"],
)
QUEUE_INQUEUE_MEMORY = Gauge(
    "volcano_queue_inqueue_memory_bytes",
    "Inqueue memory for admitted but not yet running jobs in one queue.",
    ["queue_name"],
)
QUEUE_INQUEUE_SCALAR = Gauge(
    "volcano_queue_inqueue_scalar_resources",
    "Inqueue scalar resources for admitted but not yet running jobs in one queue.",
    ["queue_name", "resource"],
)
QUEUE_SHARE = Gauge("volcano_queue_share", "Share of one queue (allocated over deserved).", ["queue_name"])
QUEUE_WEIGHT = Gauge("volcano_queue_weight", "Weight of one queue.", ["queue_name"])
QUEUE_OVERUSED = Gauge("volcano_queue_overused", "1 if one queue is overused.", ["queue_name"])
JOB_SHARE = Gauge("volcano_job_share", "Dominant resource share of one job.", ["job_ns", "job_id"])
NAMESPACE_SHARE = Gauge(
    "volcano_namespace_share", "Dominant resource share of one namespace.", ["namespace_name"]
)

# -- Caldera's own ---------------------------------------------------------------------------------
CYCLES_FAILED = Counter("caldera_cycles_failed", "Scheduling cycles that failed (nothing of them was bound).")
BIND_DURATION = Histogram(
    "caldera_bind_duration_seconds",
    "From a placement's hand-over to the binder to its pod being bound.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
LOOP_LAG = Histogram(
    "caldera_event_loop_lag_seconds",
    "How much later than asked a timer on the event loop ran (measured every 0.25 s): how long "
    "watch events, bind answers and lease renewals wait while the loop is held.",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
BIND_FAILURES = Counter(
    "caldera_bind_failures",
    "Binds that failed for good, by reason (conflict, not_found, forbidden, rejected, "
    "server_error, unreachable, annotate, other).",
    ["reason"],
)
