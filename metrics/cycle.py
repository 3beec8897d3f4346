"""Per-cycle metrics: what a closed session did (latencies, attempts, preemption, unschedulable jobs)
and the state it left (queues, job and namespace shares).

Labelled series follow the objects they describe: a queue, job or namespace that is gone from the
cycle has its series removed, so cardinality stays bounded under churn. The work per cycle is
proportional to queues plus jobs whose value changed (a dict lookup for the others).
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import Gauge

from caldera.framework.model import QueueInfo, TaskInfo, TaskStatus
from caldera.framework.result import Placement, QueueShare, SessionReport, SessionResult
from caldera.metrics import scheduler as m

_INF = float("inf")


def _finite(values: dict[str, float] | None) -> dict[str, float]:
    return {k: v for k, v in (values or {}).items() if v == v and v not in (_INF, -_INF)}


class _Resources:
    """One resource vector metric family: cpu, memory and a scalar gauge with a resource label."""

    def __init__(self, cpu: Gauge, memory: Gauge, scalar: Gauge) -> None:
        self.cpu, self.memory, self.scalar = cpu, memory, scalar
        self.scalars: dict[str, set[str]] = {}

    def set(self, queue: str, values: dict[str, float] | None) -> None:
        if values is None:
            self.remove(queue)
            return
        values = _finite(values)
        self.cpu.labels(queue).set(values.get("cpu", 0.0))
        self.memory.labels(queue).set(values.get("memory", 0.0))
        names = {k for k in values if k not in ("cpu", "memory", "pods")}
        for name in names:
            self.scalar.labels(queue, name).set(values[name])
        for gone in self.scalars.get(queue, set()) - names:
            _remove(self.scalar, queue, gone)
        self.scalars[queue] = names

    def remove(self, queue: str) -> None:
        _remove(self.cpu, queue)
        _remove(self.memory, queue)
        for name in self.scalars.pop(queue, set()):
            _remove(self.scalar, queue, name)


def _remove(gauge: Gauge, *labels: str) -> None:
    try:
        gauge.remove(*labels)
    except KeyError:
        pass


class CycleMetrics:
    """Feeds the ``volcano_`` and ``caldera_`` metrics from each cycle's result; one per binary."""

    def __init__(self) -> None:
        self.allocated = _Resources(m.QUEUE_ALLOCATED_CPU, m.QUEUE_ALLOCATED_MEMORY, m.QUEUE_ALLOCATED_SCALAR)
        self.request = _Resources(m.QUEUE_REQUEST_CPU, m.QUEUE_REQUEST_MEMORY, m.QUEUE_REQUEST_SCALAR)
        self.deserved = _Resources(m.QUEUE_DESERVED_CPU, m.QUEUE_DESERVED_MEMORY, m.QUEUE_DESERVED_SCALAR)
        self.capacity = _Resources(m.QUEUE_CAPACITY_CPU, m.QUEUE_CAPACITY_MEMORY, m.QUEUE_CAPACITY_SCALAR)
        self.inqueue = _Resources(m.QUEUE_INQUEUE_CPU, m.QUEUE_INQUEUE_MEMORY, m.QUEUE_INQUEUE_SCALAR)
        self.real_capacity = _Resources(
            m.QUEUE_REAL_CAPACITY_CPU, m.QUEUE_REAL_CAPACITY_MEMORY, m.QUEUE_REAL_CAPACITY_SCALAR
        )
        self.queues: set[str] = set()
        #: per queue, what its series were last set from (weight, share figures, capability)
        self.queue_values: dict[str, tuple[float, QueueShare, dict[str, float] | None]] = {}
        #: labelled latency histograms, by action or (plugin, point)
        self._latency_children: dict[object, Any] = {}
        self.job_shares: dict[str, tuple[str, str, float]] = {}
        self.namespaces: dict[str, float] = {}
        self.unschedulable: dict[str, int] = {}
        #: the pending tasks of the last observed result's explained jobs (the sum of ``unschedulable``)
        self.unschedulable_tasks = 0
        self.preemption_attempts = 0
        #: placements handed to the binder and not yet settled: task uid → hand-over time
        self.handed: dict[str, float] = {}

    # -- the cycle -------------------------------------------------------------------------------
    def observe(self, result: SessionResult | None, duration: float, error: BaseException | None) -> None:
        m.CYCLE_DURATION.observe(duration)
        m.E2E_SCHEDULING_LATENCY.observe(duration * 1000)
        if error is not None or result is None:
            m.CYCLES_FAILED.inc()
            m.SCHEDULE_ATTEMPTS.labels("error").inc()
            return
        report = result.report
        self._latencies(report)
        if result.placements:
            m.SCHEDULE_ATTEMPTS.labels("scheduled").inc(len(result.placements))
            self._handed(result.placements)
        self._unschedulable(result)
        victims = sum(1 for e in result.evictions if e.reason == "preempt")
        m.PREEMPTION_VICTIMS.set(victims)
        attempts = report.preempt_attempts
        if attempts:
            self.preemption_attempts += attempts
            m.PREEMPTION_ATTEMPTS.set(self.preemption_attempts)
        self._queues(result.queues, report.queue_shares)
        self._job_shares(result, report.job_shares)
        self._namespaces(report.namespace_shares)

    def _latencies(self, report: SessionReport) -> None:
        opened = report.open_session_seconds
        if opened is not None:
            m.OPEN_SESSION_LATENCY.observe(opened * 1000)
        # The labelled children are looked up once (a ``labels()`` call costs more than the
        # observation); these series are never removed, so a child stays the one exported.
        children = self._latency_children
        for action, seconds in report.action_seconds.items():
            child = children.get(action)
            if child is None:
                child = children[action] = m.ACTION_LATENCY.labels(action)
            child.observe(seconds * 1000)
        for plugin, point, seconds in report.plugin_seconds:
            key = (plugin, point)
            child = children.get(key)
            if child is None:
                child = children[key] = m.PLUGIN_LATENCY.labels(plugin, point)
            child.observe(seconds * 1000)

    def _unschedulable(self, result: SessionResult) -> None:
        explanations = result.report.explanations
        now: dict[str, int] = {}
        for uid in explanations:
            job = result.jobs.get(uid)
            if job is None:
                continue
            now[uid] = job.count(TaskStatus.PENDING)
        tasks = self.unschedulable_tasks = sum(now.values())
        if tasks:
            m.SCHEDULE_ATTEMPTS.labels("unschedulable").inc(tasks)
        for uid, count in now.items():
            if self.unschedulable.get(uid) != count:
                m.UNSCHEDULE_TASK_COUNT.labels(uid).set(count)
        for uid in self.unschedulable.keys() - now.keys():
            _remove(m.UNSCHEDULE_TASK_COUNT, uid)
        self.unschedulable = now
        m.UNSCHEDULE_JOB_COUNT.set(len(now))

    def _queues(self, queues: dict[str, QueueInfo], shares: dict[str, QueueShare]) -> None:
        """Every queue's series, each set only when its value moved since it was last set (a cycle
        moves one or two figures of a queue, if any): what they read is the same. The capability
        series are the plugin's (capacity's) where it reports them, else the queue's spec.capability
        where it has one; the real capability series are capacity's only (Volcano's proportion sets
        neither)."""
        last = self.queue_values
        now: dict[str, tuple[float, QueueShare, dict[str, float] | None]] = {}
        for name, queue in queues.items():
            s = shares.get(name) or QueueShare()
            capability = s.capability
            if capability is None:
                cap = queue.capability
                capability = cap.to_dict() if cap is not None and not cap.is_empty() else None
            values = now[name] = (queue.weight, s, capability)
            was = last.get(name)
            if was == values:
                continue
            fresh = was is None
            weight, old, old_capability = was if was is not None else (None, None, None)
            if weight != queue.weight:
                m.QUEUE_WEIGHT.labels(name).set(queue.weight)
            if old is None or old.share != s.share:
                m.QUEUE_SHARE.labels(name).set(s.share)
            if old is None or old.overused != s.overused:
                m.QUEUE_OVERUSED.labels(name).set(1.0 if s.overused else 0.0)
            if old is None or old.allocated != s.allocated:
                self.allocated.set(name, s.allocated)
            if old is None or old.request != s.request:
                self.request.set(name, s.request)
            if old is None or old.deserved != s.deserved:
                self.deserved.set(name, s.deserved)
            if old is None or old.inqueue != s.inqueue:
                self.inqueue.set(name, s.inqueue)
            if fresh or old_capability != capability:
                self.capacity.set(name, capability)
            if old is None or old.real_capacity != s.real_capacity:
                self.real_capacity.set(name, s.real_capacity)
        self.queue_values = now
        for gone in self.queues - queues.keys():
            for gauge in (m.QUEUE_WEIGHT, m.QUEUE_SHARE, m.QUEUE_OVERUSED):
                _remove(gauge, gone)
            for family in (
                self.allocated,
                self.request,
                self.deserved,
                self.inqueue,
                self.capacity,
                self.real_capacity,
            ):
                family.remove(gone)
        self.queues = set(queues)

    def _job_shares(self, result: SessionResult, shares: dict[str, float] | None) -> None:
        """The gauge of every job's share: set where the value is new or moved (a lookup per job
        against the value last set; a cycle moves few jobs' shares), removed where the job is gone
        or no job names it any more."""
        shares = shares or {}
        jobs = result.jobs
        entries = self.job_shares
        for uid, value in shares.items():
            entry = entries.get(uid)
            if entry is None or entry[2] != value:
                job = jobs.get(uid)
                if job is not None:
                    m.JOB_SHARE.labels(job.namespace, job.name).set(value)
                    entries[uid] = (job.namespace, job.name, value)
        for uid in entries.keys() - (shares.keys() & jobs.keys()):
            ns, name, _ = entries.pop(uid)
            _remove(m.JOB_SHARE, ns, name)

    def _namespaces(self, shares: dict[str, float] | None) -> None:
        shares = shares or {}
        for ns, value in shares.items():
            if self.namespaces.get(ns) != value:
                m.NAMESPACE_SHARE.labels(ns).set(value)
        for gone in self.namespaces.keys() - shares.keys():
            _remove(m.NAMESPACE_SHARE, gone)
        self.namespaces = dict(shares)

    # -- binds (the binder's observer, beside the status updater) --------------------------------
    def _handed(self, placements: list[Placement]) -> None:
        now = time.monotonic()
        if len(self.handed) > 200_000:  # binds that never settled (a stopped binder): forget them
            self.handed.clear()
        for p in placements:
            self.handed[p.task.uid] = now

    def bound(self, task: TaskInfo) -> None:
        started = self.handed.pop(task.uid, None)
        if started is not None:
            m.BIND_DURATION.observe(time.monotonic() - started)
        if task.creation > 0:
            m.TASK_LATENCY.observe(max(0.0, time.time() - task.creation) * 1000)

    def bind_failed(self, task: TaskInfo, reason: str) -> None:
        self.handed.pop(task.uid, None)
        m.BIND_FAILURES.labels(bind_failure_kind(reason)).inc()


def bind_failure_kind(reason: str) -> str:
    """A bounded label for a bind failure's free-text reason."""
    if reason.startswith("could not annotate"):
        return "annotate"
    if reason.startswith("no answer"):
        return "unreachable"
    code = reason.split(" ", 1)[0]
    if code == "409":
        return "conflict"
    if code == "404":
        return "not_found"
    if code in ("401", "403"):
        return "forbidden"
    if code.isdigit() and code.startswith("4"):
        return "rejected"
    if code.isdigit() and code.startswith("5"):
        return "server_error"
    return "other"
