"""tdm: time-division multiplexing of revocable nodes, Volcano's ``tdm`` plugin
(pkg/scheduler/plugins/tdm/tdm.go).

A node labelled ``volcano.sh/revocable-zone: <zone>`` belongs to a revocable zone; the conf gives
each zone a daily window (``tdm.revocable-zone.<zone>: "10:00-21:00"``, the scheduler's local time).
Outside its window a revocable node takes no pod; inside it, only pods that may use revocable nodes:
a pod whose annotation ``volcano.sh/revocable-zone`` is ``*``, or that has no such annotation and
whose annotation ``volcano.sh/preemptable`` is true (``GetPodRevocableZone``,
pkg/scheduler/api/pod_info.go: the annotation only, never the label). What each callback does, as in
``tdmPlugin.OnSessionOpen``:

- predicate (``predicateFn``): a node outside every zone passes; a node of a zone the conf does not
  name, or whose window is closed, fails; an open one fails a pod that may not use it;
- node order (``nodeOrderFn``): 100 (MaxNodeScore) on an open revocable node for a pod that may use
  it, else 0;
- preemptable (``preemptableFn``): a preemptor that is preemptable (``volcano.sh/preemptable``,
  default true for pods) or may use revocable nodes preempts nobody (Reject); any other may take the
  Running preemptable pods on nodes outside every zone, at most the job's budget of each job
  (``maxVictims``);
- victim tasks (``victimsFn``, Volcano's ``VictimTasks`` hook, which the ``shuffle`` action calls):
  once per ``tdm.evict.period`` (a Go duration, default 1m), the Running preemptable pods on the nodes
  of every zone whose window is closed, at most the job's budget of each job;
- job order (``jobOrderFn``): jobs that are not preemptable (the PodGroup's ``volcano.sh/preemptable``,
  default false) first; job pipelined (``jobPipelinedFn``): Permit once the job is pipelined, else
  Reject; job starving (``jobStarvingFn``): a job that is not preemptable and has pending pods.

A job's budget (``getMaxPodEvictNum``) comes from its PodGroup's annotation
``volcano.sh/jdb-min-available``, else ``volcano.sh/jdb-max-unavailable`` (``extractBudget``), an integer
or a percentage of the job's pods rounded up (``parseIntStr``): with max-unavailable, that less the
pods neither Running nor finished; with min-available, the Running pods above it; else (and, as in
Volcano, when fewer pods run than min-available asks) one pod.

A window (``parseRevocableZone``) is ``H:MM-H:MM`` (hours of one or two digits, minutes of two); it
starts today at its first time and ends today at its second, or tomorrow when the second is not
later than the first; it is open from its start to its end inclusive, to the second. As in Volcano
an overnight window (``22:00-06:00``) is therefore open from 22:00 to midnight only: the window is
always the one starting today. A window that does not parse keeps its nodes closed (one log line).

Differences, none visible to a conf: the time is read once when the session opens (Volcano reads the
clock at every call within the cycle); when the last victim search was (Volcano's package-level
``lastEvictAt``) is the scheduler's standing state (``Session.standing``, key :class:`LastEvict`), so
two schedulers in one process, or two tests, never share it. The clock is the plugin class's
(:meth:`TdmPlugin.read_clock`, local wall time); a test registers ``with_clock(...)`` in a registry of
its own.
Because the answers depend on the clock, not on the snapshot alone, the plugin marks the session as
answering from outside it (``Session.outside_answers``) when a revocable node is there, so that
allocate does not take over last cycle's vain tries when a window opens.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from caldera.config.duration import parse_duration
from caldera.framework.model import JobInfo, TaskInfo, TaskStatus
from caldera.framework.plugin import Plugin

if TYPE_CHECKING:
    from caldera.framework.session import Session

log = logging.getLogger("caldera.plugins.tdm")

#: v1beta1.RevocableZone (volcano.sh/apis pkg/apis/scheduling/v1beta1/labels.go): the node label
#: naming its zone, and the pod annotation (``*``) letting a pod use revocable nodes
REVOCABLE_ZONE = "volcano.sh/revocable-zone"
PREEMPTABLE = "volcano.sh/preemptable"
#: v1beta1.JDBMinAvailable, v1beta1.JDBMaxUnavailable: a job's disruption budget
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
ZONE_PREFIX = "tdm.revocable-zone."
EVICT_PERIOD = "tdm.evict.period"
DEFAULT_EVICT_PERIOD = 60.0
DEFAULT_POD_EVICT_NUM = 1
MAX_NODE_SCORE = 100.0
PERMIT = 1
REJECT = -1
#: the predicate's reason for a pod that may not use an open revocable node (Volcano's words)
NOT_ALLOWED = "not allow to dispatch to revocable node"

# Go's time.Parse with layout "15:04": an hour of one or two digits, a minute of exactly two
_CLOCK_TIME = re.compile(r"(\d{1,2}):(\d{2})")
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


def _local_now() -> datetime:
    return datetime.now().astimezone()


@dataclass
class LastEvict:
    """When the plugin last looked for victims, in epoch seconds: Volcano's package-level
    ``lastEvictAt`` (tdm.go), its zero time (never) being -inf. The scheduler's standing state
    (``Session.standing``): it changes what the next cycles evict, and lives as long as the scheduler."""

    at: float = -math.inf


def _clock_time(text: str) -> tuple[int, int]:
    m = _CLOCK_TIME.fullmatch(text)
    if m is None or int(m.group(1)) > 23 or int(m.group(2)) > 59:
        raise ValueError(f"cannot parse {text!r} as H:MM")
    return int(m.group(1)), int(m.group(2))


def parse_revocable_zone(raw: str, now: datetime) -> tuple[datetime, datetime]:
    """The window ``raw`` gives on the day of ``now``: ``parseRevocableZone`` in tdm.go. Raises
    ValueError when it does not parse."""
    parts = raw.strip().split("-")
    if len(parts) != 2:
        raise ValueError(f"revocable zone {raw} format error")
    (h1, m1), (h2, m2) = _clock_time(parts[0]), _clock_time(parts[1])
    start = now.replace(hour=h1, minute=m1, second=0, microsecond=0)
    end_day = now + timedelta(days=1) if (h1, m1) >= (h2, m2) else now
    end = end_day.replace(hour=h2, minute=m2, second=0, microsecond=0)
    return start, end


def zone_closed(zones: dict[str, str], zone: str, now: datetime) -> str | None:
    """None when ``zone``'s window is open at ``now``, else why not: ``availableRevocableZone``."""
    raw = zones.get(zone)
    if raw is None:
        return f"revocable zone {zone} not support"
    try:
        start, end = parse_revocable_zone(raw, now)
    except ValueError as exc:
        return str(exc)
    second = int(now.timestamp())
    if second < int(start.timestamp()) or second > int(end.timestamp()):
        return f"current time beyond revocable zone {zone}:{raw}"
    return None


def task_revocable(task: TaskInfo) -> bool:
    """Whether the pod may use revocable nodes: ``GetPodRevocableZone`` is ``*``."""
    annotations = task.pod.metadata.annotations
    value = annotations.get(REVOCABLE_ZONE)
    if value is not None:
        return value == "*"
    return annotations.get(PREEMPTABLE) in _GO_TRUE


def job_annotations(job: JobInfo) -> dict[str, str]:
    if job.podgroup is not None:
        return job.podgroup.metadata.annotations
    if job.native is not None:
        return job.native.metadata.annotations
    return {}


def int_or_percent(value: str, total: int) -> int:
    """``parseIntStr``: an integer, or a percentage of ``total`` rounded up (Kubernetes'
    ``intstr.GetValueFromIntOrPercent`` with roundUp); anything else is 0, with a log line."""
    try:
        return int(value)
    except ValueError:
        pass
    if value.endswith("%"):
        try:
            return math.ceil(int(value[:-1]) * total / 100)
        except ValueError:
            pass
    log.warning("TDM get percent value err: invalid value %r for a disruption budget", value)
    return 0


def max_pod_evict_num(job: JobInfo) -> int:
    """How many pods of ``job`` may be evicted: ``getMaxPodEvictNum`` in tdm.go."""
    annotations = job_annotations(job)
    total = len(job.tasks)
    running = job.count(TaskStatus.RUNNING)
    # extractBudget (pkg/scheduler/api/job_info.go): min-available when the annotation is there,
    # else max-unavailable; an empty value is no budget
    min_available = annotations.get(JDB_MIN_AVAILABLE)
    max_unavailable = annotations.get(JDB_MAX_UNAVAILABLE) if min_available is None else None
    if max_unavailable:
        allowed = int_or_percent(max_unavailable, total)
        finished = job.count(TaskStatus.SUCCEEDED, TaskStatus.FAILED)
        unavailable = total - finished - running
        return 0 if unavailable >= allowed else allowed - unavailable
    if min_available:
        wanted = int_or_percent(min_available, total)
        if running >= wanted:
            return running - wanted
    return DEFAULT_POD_EVICT_NUM


def max_victims(ssn: Session, by_job: dict[str, list[TaskInfo]]) -> list[TaskInfo]:
    """Of each job's candidates, as many as its budget allows (``maxVictims``), in the order given."""
    out: list[TaskInfo] = []
    for uid, tasks in by_job.items():
        job = ssn.jobs.get(uid)
        if job is not None:
            out.extend(tasks[: max(0, min(max_pod_evict_num(job), len(tasks)))])
    return out


class TdmPlugin(Plugin):
    name: ClassVar[str] = "tdm"
    arguments_schema: ClassVar[dict[str, type]] = {f"{ZONE_PREFIX}*": str, EVICT_PERIOD: str}

    def on_session_open(self, ssn: Session) -> None:
        # New in tdm.go: a key holding the prefix names a zone; the period is a Go duration
        self.zones = {
            key.replace(ZONE_PREFIX, "", 1): str(value)
            for key, value in self.arguments.items()
            if ZONE_PREFIX in key
        }
        self.evict_period = DEFAULT_EVICT_PERIOD
        raw_period = self.arguments.get(EVICT_PERIOD)
        if raw_period is not None:
            try:
                self.evict_period = parse_duration(str(raw_period))
            except ValueError:
                log.warning(
                    "tdm: %s=%r is not a duration; evicting at most once a minute", EVICT_PERIOD, raw_period
                )
        now = self.read_clock()
        self.now = now
        self.ssn = ssn
        self.last_evict = ssn.standing(LastEvict, LastEvict)
        zone_of = [n.labels.get(REVOCABLE_ZONE, "") for n in ssn.node_list]
        closed = {z: zone_closed(self.zones, z, now) for z in set(zone_of) if z}
        self.node_zone = {n.name: z for n, z in zip(ssn.node_list, zone_of, strict=True)}
        revocable = np.array([bool(z) for z in zone_of], dtype=bool)
        open_ = np.array([bool(z) and closed[z] is None for z in zone_of], dtype=bool)
        closed_reasons: dict[str, np.ndarray] = {}
        for zone, reason in closed.items():
            if reason is not None:
                mask = np.array([z == zone for z in zone_of], dtype=bool)
                closed_reasons[reason] = closed_reasons.get(reason, mask) | mask

        if revocable.any():
            ssn.outside_answers.add(self.name)

        def passes(task: TaskInfo, rows: np.ndarray) -> np.ndarray:
            if task_revocable(task):
                return ~revocable[rows] | open_[rows]
            return ~revocable[rows]

        def explain(task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
            out = {reason: mask[rows] for reason, mask in closed_reasons.items()}
            if not task_revocable(task):
                out[NOT_ALLOWED] = open_[rows]
            return out

        def score(task: TaskInfo, rows: np.ndarray) -> np.ndarray:
            if task_revocable(task):
                return np.where(open_[rows], MAX_NODE_SCORE, 0.0)
            return np.zeros(len(rows))

        ssn.add_template_qualifier(self.name, lambda t: b"r" if task_revocable(t) else b"")
        ssn.add_bulk_predicate_fn(self.name, passes, explain, static=True, local=True)
        ssn.add_bulk_node_order_fn(self.name, score, local=True)
        ssn.add_preemptable_fn(self.name, self.preemptable)
        ssn.add_victim_tasks_fns(self.name, [self.victim_tasks])
        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_job_pipelined_fn(self.name, job_pipelined)
        ssn.add_job_starving_fn(self.name, job_starving)

    def read_clock(self) -> datetime:
        """The time the session decides by: local wall time (Volcano's ``time.Now()``)."""
        return _local_now()

    def preemptable(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        """``preemptableFn``: the Running preemptable preemptees on nodes outside every zone."""
        if preemptor.preemptable or task_revocable(preemptor):
            return [], REJECT
        by_job: dict[str, list[TaskInfo]] = {}
        for task in preemptees:
            if not task.preemptable or task.status != TaskStatus.RUNNING:
                continue
            zone = self.node_zone.get(task.node_name)
            if zone is None or zone:
                continue
            by_job.setdefault(task.job, []).append(task)
        return max_victims(self.ssn, by_job), PERMIT

    def victim_tasks(self, _tasks: list[TaskInfo]) -> list[TaskInfo]:
        """``victimsFn``: once per evict period, the Running preemptable pods on the nodes of the
        zones whose window is closed, within each job's budget (the candidates given are not read,
        as in Volcano)."""
        now = self.now.timestamp()
        if self.last_evict.at + self.evict_period > now:
            return []
        victims: list[TaskInfo] = []
        for zone in self.zones:
            reason = zone_closed(self.zones, zone, self.now)
            if reason is None:
                continue
            by_job: dict[str, list[TaskInfo]] = {}
            for node in self.ssn.node_list:
                if self.node_zone.get(node.name) != zone:
                    continue
                for task in sorted(node.tasks.values(), key=lambda t: t.name):
                    if task.preemptable and task.status == TaskStatus.RUNNING:
                        by_job.setdefault(task.job, []).append(task)
            victims.extend(max_victims(self.ssn, by_job))
        self.last_evict.at = now
        return victims


def with_clock(now: Callable[[], datetime]) -> type[TdmPlugin]:
    """The tdm plugin reading ``now`` instead of the wall clock, for a test to register in a
    registry of its own (``Registry.register_plugin``): the clock is that scheduler's alone."""

    class ClockedTdmPlugin(TdmPlugin):
        def read_clock(self) -> datetime:
            return now()

    return ClockedTdmPlugin


def job_order(left: JobInfo, right: JobInfo) -> int:
    """``jobOrderFn``: jobs that are not preemptable first."""
    if left.preemptable == right.preemptable:
        return 0
    return 1 if left.preemptable else -1


def job_pipelined(job: JobInfo) -> int:
    return PERMIT if job.is_pipelined() else REJECT


def job_starving(job: JobInfo) -> bool:
    """``jobStarvingFn``: a job that is not preemptable and has pending pods."""
    return not job.preemptable and job.pending_task_num() > 0
