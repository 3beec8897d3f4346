"""PodGroup status, pod conditions and Events, written back coalesced and only on change.

Each cycle computes the status every PodGroup should have (phase, conditions, counts) and the
``PodScheduled=False`` condition of every pending pod of an unschedulable gang. Nothing is written
if it equals what the cache already holds or what was last sent; what is left waits in a dict keyed
by object (a newer wish replaces an older one) that a flusher drains a moment later with bounded
concurrency. Events are per PodGroup (per pod behind a flag) and not repeated while unchanged.

What is remembered per pod or PodGroup (the last wish sent, the last event, the memo of the last
look) is forgotten when the object goes: the updater subscribes to the cache's pod and PodGroup
watches (``subscribers``), so its memory follows the live objects even when a write it sent is never
seen back (the object deleted first).

Before each write the updater asks ``may_write`` (the leader lease still held:
``LeaderElector.holds``). When it says no, nothing is sent: the write stays pending (an Event stays
due) and is counted in ``caldera_writes_withheld_total{writer="status"}``; it goes out once the gate
opens again, or is dropped with the process when the lease is lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from caldera.cache.client import ApiClient, ApiError, backoff_delay
from caldera.cache.indexes import CacheProblems
from caldera.cache.store import ClusterCache
from caldera.cache.supervise import stop_workers, supervise
from caldera.cache.watch import Handler
from caldera.framework.model import (
    ALLOCATED_STATUSES,
    JobInfo,
    TaskInfo,
    TaskStatus,
    is_native_job_key,
    native_job_key,
    uncopied_claims_message,
)
from caldera.framework.objects import NativePodGroup, Pod, PodGroup
from caldera.framework.result import Eviction, Placement, SessionResult
from caldera.metrics import scheduler as m
from caldera.scheduler.events import EventRecorder
from caldera.scheduler.explain import one_line
from caldera.scheduler.leader import always
from caldera.scheduler.problems import (
    PODGROUP_GRACE,
    missing_podgroup_reason,
    ungrouped_grace,
    ungrouped_reason,
    unreadable_reason,
)
from caldera.scheduler.refresh import HeldRefreshes

log = logging.getLogger("caldera.status")

PG_PATH = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups/{name}"
NATIVE_PG_STATUS_PATH = "/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups/{name}/status"
#: the condition a ``scheduling.k8s.io/v1alpha2`` PodGroup's status carries, and its reasons
#: (kubernetes/kubernetes staging/src/k8s.io/api/scheduling/v1alpha2/types.go, ``PodGroupStatus``)
NATIVE_SCHEDULED = "PodGroupScheduled"
NATIVE_UNSCHEDULABLE = "Unschedulable"
#: the longest the flusher holds status writes and Events back while binds are queued (seconds):
#: a burst's bindings go to the API server first, and a PodGroup's wishes of the burst coalesce
#: (its phase and its running count in one write instead of two)
MAX_DEFER = 2.0
#: the condition a native PodGroup gets when the scheduler evicts its pods to make room, and its
#: reason (types.go ``DisruptionTarget``, ``PodGroupReasonPreemptionByScheduler``; KEP-5832 "API",
#: KEP-5710 "Monitoring Requirements")
NATIVE_DISRUPTION_TARGET = "DisruptionTarget"
NATIVE_PREEMPTED = "PreemptionByScheduler"
#: a native PodGroup lacking resourceClaims its Workload template lists (the Warning Event's reason)
UNCOPIED_CLAIMS = "ResourceClaimsNotCopied"
#: a pod that names both a native group and a Volcano PodGroup (the Warning Event's reason)
GROUP_CONFLICT = "SchedulingGroupConflict"
#: the reason of the Events on an evicted pod and on its PodGroup (Volcano's pkg/scheduler/cache/
#: cache.go, ``defaultEvictor.Evict`` and ``SchedulerCache.Evict``)
EVICT = "Evict"
POD_STATUS_PATH = "/api/v1/namespaces/{ns}/pods/{name}/status"
EVENTS_PATH = "/api/v1/namespaces/{ns}/events"

UNSCHEDULABLE = "Unschedulable"
#: PodGroup condition (and reason) of a gang waiting for its pods' scheduling gates; the pods' own
#: PodScheduled condition carries the same reason, set by the API server.
GATED = "SchedulingGated"
SCHEDULED = "Scheduled"
#: An unchanged event is not repeated sooner than this.
EVENT_REPEAT = 600.0
#: a pending pod's PodScheduled=False condition whose status and reason stay the same is written
#: again with a new message at most this often (seconds); the newest message goes when the period
#: ends. Every cycle words a pending pod's reason anew from the nodes it was tried on ("0/83 nodes are
#: available: 12 Insufficient cpu, ..."), and in a busy cluster the counts move every cycle: a write
#: per pending pod per cycle (a soak of twice the default load sent 20 of them per binding). Volcano
#: writes each change (pkg/scheduler/cache/cache.go, ``taskUnschedulable``: ``podConditionHaveUpdate``
#: compares the message too); kube-scheduler tries an unschedulable pod again no sooner than its
#: backoff, at most ``podMaxBackoffSeconds`` (10 s by default, pkg/scheduler/apis/config/v1/
#: defaults.go, ``SetDefaults_KubeSchedulerConfiguration``), or when an event may make it
#: schedulable, and writes the condition when an attempt changes it. A change of status or reason is
#: written at once.
CONDITION_MESSAGE_REFRESH = 10.0
#: ...and however many pods wait for such a refresh, those refreshes add no more than this many writes
#: a second: with more pods waiting, each waits longer (a soak with 8,000 pending gang pods whose
#: message moved every cycle sent 800 a second at one per pod per 10 s)
CONDITION_MESSAGE_RATE = 100.0
#: memos of jobs gone (``_observed``) kept before an observation drops them all
OBSERVED_LEFTOVERS = 32
#: a job's phase when its PodGroup names none (``JobInfo.from_podgroup``)
PENDING = "Pending"


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


Cond = tuple[str, str, str, str]  # type, status, reason, message
Signature = tuple[str, int, int, int, tuple[Cond, ...]]


@dataclass
class _Write:
    kind: str  # "podgroup" | "pod" | "event"
    namespace: str
    name: str
    body: dict[str, Any]
    signature: Any = None
    attempts: int = 0
    #: the uid of the pod a pod condition write is for ("" for other writes)
    uid: str = ""


@dataclass
class _Disruption:
    """A native PodGroup whose pods the scheduler evicted: each evicted pod's uid and the action
    that chose it, and whether they are all gone (the condition then goes False)."""

    pods: dict[str, str]
    over: bool = False

    def message(self) -> str:
        counts: dict[str, int] = {}
        for action in self.pods.values():
            counts[action] = counts.get(action, 0) + 1
        by = ", ".join(f"{n} pod(s) by {action}" for action, n in sorted(counts.items()))
        if self.over:
            return f"preempted by the scheduler ({by}); the evicted pods are gone"
        return f"preempted by the scheduler to make room for higher-priority workloads: {by}"


def gang_message(job: JobInfo) -> str:
    """Volcano's wording: ``3/4 tasks in gang unschedulable: pod group is not ready, ...``; the same
    line as the job's explanation (``/debug/jobs``, ``caldera-scheduler explain``)."""
    return one_line(job)


def only_messages_differ(before: Signature, after: Signature) -> bool:
    """Whether a PodGroup status ``after`` says what ``before`` did but for its conditions' messages:
    the same phase and counts, the same conditions with the same status and reason."""
    return before[:4] == after[:4] and [c[:3] for c in before[4]] == [c[:3] for c in after[4]]


def nothing_waits() -> bool:
    """``binds_waiting`` of an updater with no binder beside it."""
    return False


class StatusUpdater:
    def __init__(
        self,
        client: ApiClient,
        cache: ClusterCache,
        *,
        component: str = "caldera",
        per_pod_events: bool = False,
        flush_interval: float = 0.2,
        concurrency: int = 8,
        instance: str = "",
        clock: Callable[[], float] = time.monotonic,
        missing_podgroup_grace: float = PODGROUP_GRACE,
        controllers: bool = True,
        may_write: Callable[[], bool] = always,
        binds_waiting: Callable[[], bool] = nothing_waits,
        max_defer: float = MAX_DEFER,
        message_refresh: float = CONDITION_MESSAGE_REFRESH,
        message_rate: float = CONDITION_MESSAGE_RATE,
    ) -> None:
        self.client = client
        #: whether binds are queued (``Binder.waiting``): the flush waits for them, up to ``max_defer``
        self.binds_waiting = binds_waiting
        self.max_defer = max_defer
        #: asked before every write (the leader lease still held: ``LeaderElector.holds``)
        self.may_write = may_write
        self.cache = cache
        self.component = component
        self.per_pod_events = per_pod_events
        self.flush_interval = flush_interval
        self.concurrency = concurrency
        self.instance = instance
        self.clock = clock
        self.missing_podgroup_grace = missing_podgroup_grace
        #: whether this binary's PodGroup controller runs (the reason for an ungrouped pod differs)
        self.controllers = controllers
        #: the last problems fully reported (nothing left waiting for its grace): skipped while unchanged
        self._problems_done: CacheProblems | None = None
        self._problems_due = float("inf")
        self._pending: dict[tuple[str, str, str], _Write] = {}
        self.events = EventRecorder(component=component, instance=instance, clock=clock)
        self._sent_pg: dict[str, Signature] = {}
        #: per native PodGroup, the conditions last sent (PodGroupScheduled, DisruptionTarget)
        self._sent_native: dict[str, tuple[Cond, ...]] = {}
        #: native jobs whose pods were evicted (the evictor's word, ``evicted``), until the PodGroup
        #: shows its DisruptionTarget condition False again
        self._disruptions: dict[str, _Disruption] = {}
        #: per PodGroup, what the last observation was computed from (job copy, version, reasons, PodGroup)
        self._observed: dict[str, tuple[Any, ...]] = {}
        #: the snapshot ``seq`` of the last observed result (0: look at every job next time), the
        #: jobs a session had marked then and those whose status could not be computed, and the
        #: cache's PodGroups then (``observe``)
        self._seq = 0
        self._marked: set[str] = set()
        self._failed: set[str] = set()
        self._podgroups: dict[str, PodGroup] = {}
        self._sent_pod: dict[str, Cond] = {}
        #: how often a pending pod's condition may be written again with only a new message
        self.message_refresh = message_refresh
        self.message_rate = message_rate
        #: per pod uid, when its PodScheduled condition was last queued for writing, and the newest
        #: condition held back (its message only is new) with the time it falls due
        self._pod_refresh: HeldRefreshes[_Write] = HeldRefreshes()
        #: the same per PodGroup (job key, Volcano's or native): its Unschedulable message
        self._pg_refresh: HeldRefreshes[_Write] = HeldRefreshes()
        #: per involved object (``event_object``), per reason: the last message and when it was sent
        self._sent_events: dict[str, dict[str, tuple[str, float]]] = {}
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.writes = 0
        self.skipped = 0
        #: writes kept back because the lease may no longer be held
        self.withheld = 0

    # -- what a cycle wants ------------------------------------------------------------------------
    def observe(self, result: SessionResult | None) -> None:
        """Compute the status of every job whose state may differ from what it was computed from
        last time (the memo of ``_look``).

        When this result's snapshot follows the last observed one (``SessionResult.seq`` one up,
        ``changed_jobs`` known), a job is looked at again only if the cache changed it since
        (``changed_jobs``), its PodGroup in the cache is another object than at the last
        observation, or its copy was marked in this cycle or the last: a session's fields on it
        differ from the values a copy is handed out with (see the loop). An unmarked copy of an
        unchanged job holds the same as last cycle's unmarked copy, so its memo would match.
        Otherwise (the first cycle, a snapshot taken in between by another reader, a failed
        cycle, a dropped write) every job is looked at. Either way jobs are looked at in the
        result's job order, so writes and events are queued in the same order as by looking at
        every job."""
        if result is None:
            return
        self._plugin_events(result)
        self._eviction_events(result)
        podgroups = self.cache.podgroups_view()
        jobs = result.jobs
        look = self._look_again(result)
        marked: set[str] = set()
        failed: set[str] = set()
        then = self._podgroups.get
        now = podgroups.get
        for key, job in jobs.items():
            # Marked: a session left something on this copy: a task status changed (even if changed
            # back: ``version``), a failure recorded, a phase other than its PodGroup's (the enqueue
            # action's Inqueue, or the cache's assumed Inqueue until the PodGroup says so). A copy is
            # handed out with version 0, no failure and its PodGroup's phase but for that assumption,
            # so two unmarked copies of an unchanged job hold the same. (Inline, cheapest tests
            # first: this runs for every job every cycle.)
            pg = job.podgroup
            if (
                job.version
                or job.job_fit_error
                or job.fit_errors
                or (pg is not None and job.phase != (pg.status.phase or PENDING))
            ):
                marked.add(key)
            elif look is not None and key not in look and now(key) is then(key):
                continue
            self._look(key, job, podgroups, failed)
        self._marked = marked
        self._failed = failed
        self._podgroups = dict(podgroups)
        self._seq = result.seq if result.seq else 0
        m.STATUS_REMEMBERED.labels("pod").set(len(self._sent_pod))
        m.STATUS_REMEMBERED.labels("podgroup").set(len(self._sent_pg))
        m.STATUS_REMEMBERED.labels("event_series").set(len(self.events))
        observed = self._observed
        if len(observed) > len(jobs) + OBSERVED_LEFTOVERS:
            # jobs gone whose deletion did not reach ``podgroup_gone`` (a native PodGroup: its watch is
            # not subscribed): a scan once they are that many (a write answered 404 used to clear the
            # whole memo, which hid them)
            for key in [k for k in observed if k not in jobs]:
                del observed[key]
        native = self._sent_native
        if len(native) > len(jobs) + 100:
            # native PodGroups gone before their write was seen (their watch is not subscribed:
            # it starts and stops with discovery): what is kept follows the live jobs
            for key in [k for k in native if k not in jobs]:
                del native[key]
        if len(self._pg_refresh.written_at) > len(jobs) + OBSERVED_LEFTOVERS:
            # the same for when PodGroups were last written (a Volcano PodGroup's deletion forgets
            # its own at once)
            self._pg_refresh.keep_only(jobs)
        for key in [k for k in self._disruptions if k not in jobs]:
            del self._disruptions[key]  # the PodGroup is gone

    def _look_again(self, result: SessionResult) -> set[str] | None:
        """The jobs to look at beside those a session marked and those whose PodGroup object moved
        (see ``observe``); None: every job."""
        changed = result.changed_jobs
        if not self._seq or changed is None or result.seq != self._seq + 1:
            return None
        return changed | self._marked | self._failed

    def _look(self, key: str, job: JobInfo, podgroups: Mapping[str, PodGroup], failed: set[str]) -> None:
        native = job.native
        if job.podgroup is None and native is None:
            return
        pg: PodGroup | NativePodGroup | None = (
            podgroups.get(key) or job.podgroup
            if native is None
            else self.cache.native_podgroup(key) or native
        )
        if not job.tasks and (
            native is not None or not isinstance(pg, PodGroup) or pg.status.phase not in ("", "Pending")
        ):
            # No pod of ours and past Pending: the PodGroup is another scheduler's (Volcano's,
            # beside us) or its pods are gone; its status is not ours to write (running 0 would undo
            # the other's counts). A Volcano PodGroup without pods that is Pending is ours to move:
            # Volcano's job controller creates the pods only once it is Inqueue, and Volcano's
            # enqueue action and JobUpdater (pkg/scheduler/framework/job_updater.go, ``jobStatus``
            # and ``getPodGroupPhase`` in session.go) write Pending, or Inqueue once let in.
            if isinstance(pg, NativePodGroup) and key in self._disruptions:
                # but a native group whose evicted pods are all gone: its disruption is over
                cond = self._disruption_condition(key, job, pg)
                if cond is not None:
                    self._want_native_conditions(key, pg, (cond,))
            return
        # A copy of the same generation of the job (the cache hands out two sets of copies in
        # turn), untouched since, with the same PodGroup object: nothing to recompute.
        origin = job.generation or job
        seen = self._observed.get(key)
        if (
            seen is not None
            and seen[0] == origin
            and seen[1] == job.version
            and seen[2] == job.job_fit_error
            and seen[3] == len(job.fit_errors)
            and (seen[4] is pg or seen[4] == pg)
            and seen[5] == job.phase
        ):
            return
        # The phase too: the enqueue action sets it on a copy without changing its tasks.
        memo = (origin, job.version, job.job_fit_error, len(job.fit_errors), pg, job.phase)
        try:
            if native is not None:
                self._observe_native(key, job)
            else:
                self._observe_job(key, job)
        except Exception:
            log.exception("status of %s not computed", key)
            failed.add(key)  # looked at again next cycle, as if nothing was computed
            return
        self._observed[key] = memo

    def _plugin_events(self, result: SessionResult) -> None:
        """Events plugins left in the session's report (a queue's guarantee scaled down, ...), on the
        Queue or namespaced object they name; a repeat of the same message is held back as any event."""
        for kind, name, reason, message in result.report.events:
            namespace, _, object_name = name.rpartition("/")
            ref = {"kind": kind, "name": object_name}
            if kind == "Queue":
                ref["apiVersion"] = "scheduling.volcano.sh/v1beta1"
                queue = result.queues.get(object_name)
                if queue is not None and queue.queue is not None and queue.queue.metadata.uid:
                    ref["uid"] = queue.queue.metadata.uid
            elif kind == "ResourceClaim":
                ref["apiVersion"] = "resource.k8s.io/v1"
            elif kind == "Pod":
                ref["apiVersion"] = "v1"
            if namespace:
                ref["namespace"] = namespace
            self.event(ref, "Warning", reason, message)

    def _eviction_events(self, result: SessionResult) -> None:
        """The cycle's evictions (preempt, reclaim, their gang forms, shuffle), announced as Volcano
        announces them (pkg/scheduler/cache/cache.go): a Warning ``Evict`` on the pod, "Pod is
        evicted, because of <reason>" (``defaultEvictor.Evict``), and a Normal ``Evict`` on its
        PodGroup saying the reason (``SchedulerCache.Evict``). A pod the action already gave an
        ``Evict`` Event with its why (shuffle's) gets no second one."""
        if not result.evictions:
            return
        told = {name for kind, name, reason, _ in result.report.events if kind == "Pod" and reason == EVICT}
        for eviction in result.evictions:
            task = eviction.task
            if task.key not in told:
                self.event_for_pod(task, "Warning", EVICT, f"Pod is evicted, because of {eviction.reason}")
            key = task.job
            pg: PodGroup | NativePodGroup | None = (
                self.cache.native_podgroup(key) if is_native_job_key(key) else self.cache.podgroup(key)
            )
            if pg is not None:
                self.event_for_podgroup(pg, "Normal", EVICT, eviction.reason)

    def _observe_job(self, key: str, job: JobInfo) -> None:
        pg = self.cache.podgroup(key) or job.podgroup
        assert pg is not None
        running = job.count(TaskStatus.RUNNING)
        succeeded = job.count(TaskStatus.SUCCEEDED)
        failed = job.count(TaskStatus.FAILED)
        pending = [t for t in job.tasks_in(TaskStatus.PENDING)]
        allocated = job.count(*ALLOCATED_STATUSES, TaskStatus.SUCCEEDED)
        ready = allocated >= job.min_available and job.roles_satisfied()
        # Waiting for scheduling gates is not a failure to schedule: its own condition, no
        # FailedScheduling event and no pod condition (the API server set PodScheduled=False,
        # SchedulingGated on the pods itself).
        gated = bool(pending) and not ready and job.waits_for_gates()
        unschedulable = (
            bool(pending) and not ready and not gated and bool(job.job_fit_error or job.fit_errors)
        )
        message = gang_message(job) if unschedulable or gated else ""

        if running and unschedulable:
            phase = "Unknown"
        elif ready and job.tasks:
            phase = "Running"
        elif job.phase == "Inqueue" or pg.status.phase == "Inqueue":
            phase = "Inqueue"
        elif pg.status.phase in ("Running", "Unknown") and not job.tasks:
            phase = pg.status.phase
        else:
            phase = pg.status.phase if pg.status.phase and not job.tasks else "Pending"

        conds: dict[str, Cond] = {}
        old_times: dict[str, tuple[str, str | None]] = {}
        for c in pg.status.conditions:
            conds[c.type] = (c.type, c.status, c.reason, c.message)
            old_times[c.type] = (c.status, c.last_transition_time)
        if gated:
            conds[GATED] = (GATED, "True", GATED, message)
            if UNSCHEDULABLE in conds and conds[UNSCHEDULABLE][1] == "True":
                conds[UNSCHEDULABLE] = (UNSCHEDULABLE, "False", GATED, "")
        elif GATED in conds and conds[GATED][1] == "True":
            conds[GATED] = (GATED, "False", "GatesRemoved", "")
        if unschedulable:
            conds[UNSCHEDULABLE] = (UNSCHEDULABLE, "True", "NotEnoughResources", message)
        elif ready and job.tasks:
            conds[SCHEDULED] = (SCHEDULED, "True", "tasks in gang are ready to be scheduled", "")
            if UNSCHEDULABLE in conds and conds[UNSCHEDULABLE][1] == "True":
                conds[UNSCHEDULABLE] = (UNSCHEDULABLE, "False", "Scheduled", "")
        signature: Signature = (phase, running, succeeded, failed, tuple(sorted(conds.values())))
        current: Signature = (
            pg.status.phase,
            pg.status.running,
            pg.status.succeeded,
            pg.status.failed,
            tuple(sorted((c.type, c.status, c.reason, c.message) for c in pg.status.conditions)),
        )
        sent = self._sent_pg.get(key)
        if signature == current:
            self._sent_pg.pop(key, None)
            self._pg_refresh.drop(key)
        elif sent == signature:
            self._pg_refresh.drop(key)  # a newer message held back is no longer wanted
        else:
            stamp = now_rfc3339()
            conditions = []
            for ctype, status, reason, msg in sorted(conds.values()):
                old = old_times.get(ctype)
                when = old[1] if old is not None and old[0] == status and old[1] else stamp
                conditions.append(
                    {
                        "type": ctype,
                        "status": status,
                        "reason": reason,
                        "message": msg,
                        "lastTransitionTime": when,
                    }
                )
            body = {
                "status": {
                    "phase": phase,
                    "running": running,
                    "succeeded": succeeded,
                    "failed": failed,
                    "conditions": conditions,
                }
            }
            write = _Write("podgroup", pg.metadata.namespace, pg.metadata.name, body, signature)
            if not self._held_back(
                self._pg_refresh, key, write, only_messages_differ(sent or current, signature)
            ):
                self._write_podgroup(key, write, self.clock())

        if unschedulable:
            self.event_for_podgroup(pg, "Warning", "FailedScheduling", message)
            for task in pending:
                if task.pod.spec.scheduling_gates:
                    continue  # its PodScheduled condition says SchedulingGated (the API server's)
                pod_msg = job.fit_errors.get(task.uid) or message
                self.pod_unschedulable(task, pod_msg)
                if self.per_pod_events:
                    self.event_for_pod(task, "Warning", "FailedScheduling", pod_msg)

    def _observe_native(self, key: str, job: JobInfo) -> None:
        """A ``scheduling.k8s.io/v1alpha2`` PodGroup's status as Kubernetes reads it: the
        ``PodGroupScheduled`` condition, True (reason ``Scheduled``) once its minimum is placed,
        False (reason ``Unschedulable``, with the gang's message) while a cycle failed to place it;
        written through ``podgroups/status`` only when it changes (other conditions are kept).
        Events and pod conditions as for a Volcano PodGroup."""
        pg = self.cache.native_podgroup(key) or job.native
        assert pg is not None
        pending = list(job.tasks_in(TaskStatus.PENDING))
        allocated = job.count(*ALLOCATED_STATUSES, TaskStatus.SUCCEEDED)
        ready = allocated >= job.min_available
        gated = bool(pending) and not ready and job.waits_for_gates()
        unschedulable = (
            bool(pending) and not ready and not gated and bool(job.job_fit_error or job.fit_errors)
        )
        message = gang_message(job) if unschedulable else ""
        wanted: list[Cond] = []
        if ready:
            wanted.append(
                (NATIVE_SCHEDULED, "True", SCHEDULED, f"{allocated} of {len(job.tasks)} pods scheduled")
            )
        elif unschedulable:
            wanted.append((NATIVE_SCHEDULED, "False", NATIVE_UNSCHEDULABLE, message))
        disrupted = self._disruption_condition(key, job, pg)
        if disrupted is not None:
            wanted.append(disrupted)
        if wanted:
            self._want_native_conditions(key, pg, tuple(wanted))
        if job.uncopied_claims:
            self.event_for_podgroup(
                pg, "Warning", UNCOPIED_CLAIMS, uncopied_claims_message(pg, job.uncopied_claims)
            )
        if unschedulable:
            self.event_for_podgroup(pg, "Warning", "FailedScheduling", message)
            for task in pending:
                if task.pod.spec.scheduling_gates:
                    continue
                pod_msg = job.fit_errors.get(task.uid) or message
                self.pod_unschedulable(task, pod_msg)
                if self.per_pod_events:
                    self.event_for_pod(task, "Warning", "FailedScheduling", pod_msg)

    def evicted(self, eviction: Eviction) -> None:
        """The evictor carried out an eviction (``Evictor.on_evicted``): a pod of a native PodGroup
        makes the PodGroup a ``DisruptionTarget`` (True, ``PreemptionByScheduler``), written now.
        Only evictions done count: one the API server refused (a PodDisruptionBudget's 429 until
        the evictor gave up) never marks the group (types.go ``DisruptionTarget``: "the PodGroup is
        about to be terminated due to disruption such as preemption")."""
        key = eviction.task.job
        if not is_native_job_key(key):
            return
        pg = self.cache.native_podgroup(key)
        if pg is None:
            return
        d = self._disruptions.get(key)
        if d is None or d.over:
            d = self._disruptions[key] = _Disruption({})
        d.pods[eviction.task.uid] = eviction.reason
        self._want_native_conditions(
            key, pg, ((NATIVE_DISRUPTION_TARGET, "True", NATIVE_PREEMPTED, d.message()),)
        )

    def _disruption_condition(self, key: str, job: JobInfo, pg: NativePodGroup) -> Cond | None:
        """The PodGroup's ``DisruptionTarget`` while its evicted pods go: True until none of them is
        left in the job (or each finished), then False (same reason) until the PodGroup shows it,
        after which nothing more is wanted (the condition stays as written). As Kubernetes'
        disruption controller does for a pod whose disruption is over
        (``syncStalePodDisruption`` in pkg/controller/disruption/disruption.go sets the pod's
        ``DisruptionTarget`` back to False), so that a group that lost pods but runs on is not
        shown about to be terminated forever."""
        d = self._disruptions.get(key)
        if d is None:
            return None
        if not d.over:
            tasks = job.tasks
            left = [
                uid
                for uid in d.pods
                if uid in tasks and tasks[uid].status not in (TaskStatus.SUCCEEDED, TaskStatus.FAILED)
            ]
            if left:
                return (NATIVE_DISRUPTION_TARGET, "True", NATIVE_PREEMPTED, d.message())
            d.over = True
        shown = next((c for c in pg.status.conditions if c.type == NATIVE_DISRUPTION_TARGET), None)
        if shown is not None and shown.status == "False":
            del self._disruptions[key]
            return None
        return (NATIVE_DISRUPTION_TARGET, "False", NATIVE_PREEMPTED, d.message())

    def _want_native_conditions(self, key: str, pg: NativePodGroup, wanted: tuple[Cond, ...]) -> None:
        """Write the wanted conditions through ``podgroups/status`` unless the PodGroup holds them or
        the same wish is on its way; the PodGroup's other conditions are kept, and a condition's
        ``lastTransitionTime`` moves only when its status does."""
        current = {c.type: c for c in pg.status.conditions}
        # a condition sent before that the PodGroup does not show yet goes again with these: the
        # write replaces the whole list
        wanted += tuple(
            c
            for c in self._sent_native.get(key, ())
            if c[0] not in current and all(c[0] != w[0] for w in wanted)
        )

        def held(cond: Cond) -> bool:
            c = current.get(cond[0])
            return c is not None and (c.type, c.status, c.reason, c.message) == cond

        if all(held(cond) for cond in wanted):
            self._sent_native.pop(key, None)
            self._pg_refresh.drop(key)
            return
        sent = self._sent_native.get(key)
        if sent == wanted:
            self._pg_refresh.drop(key)  # a newer message held back is no longer wanted
            return
        now = now_rfc3339()
        types = {cond[0] for cond in wanted}
        conditions: list[dict[str, Any]] = [
            {
                "type": c.type,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": c.last_transition_time or now,
                **({"observedGeneration": c.observed_generation} if c.observed_generation else {}),
            }
            for c in pg.status.conditions
            if c.type not in types
        ]
        for cond in wanted:
            before = current.get(cond[0])
            when = (
                before.last_transition_time
                if before is not None and before.status == cond[1] and before.last_transition_time
                else now
            )
            conditions.append(
                {
                    "type": cond[0],
                    "status": cond[1],
                    "reason": cond[2],
                    "message": cond[3],
                    "lastTransitionTime": when,
                    "observedGeneration": pg.metadata.generation,
                }
            )
        body = {"status": {"conditions": conditions}}
        write = _Write("native-podgroup", pg.metadata.namespace, pg.metadata.name, body, wanted)
        prior: tuple[Cond, ...] = (
            sent
            if sent is not None
            else tuple(
                (c.type, c.status, c.reason, c.message) for c in pg.status.conditions if c.type in types
            )
        )
        if not self._held_back(
            self._pg_refresh, key, write, sorted(c[:3] for c in prior) == sorted(c[:3] for c in wanted)
        ):
            self._write_podgroup(key, write, self.clock())

    def _group(self, job: str) -> PodGroup | NativePodGroup | None:
        """The Volcano or native PodGroup of job key ``job``."""
        return self.cache.podgroup(job) or self.cache.native_podgroup(job)

    def observe_problems(self, problems: CacheProblems) -> None:
        """A Warning Event (and, where the pod is known, the PodScheduled condition) for every pod no
        cycle can schedule: its PodGroup does not exist or was never made, or its spec cannot be read.
        Deduplicated like every event: an unchanged message is not sent again within ``EVENT_REPEAT``.
        A pod without a PodGroup is reported once it has waited ``missing_podgroup_grace``."""
        now = self.clock()
        if problems is self._problems_done and now < self._problems_due:
            return
        due = float("inf")
        for missing in problems.missing_podgroups:
            if now - missing.since < self.missing_podgroup_grace:
                due = min(due, missing.since + self.missing_podgroup_grace)
                continue
            message = missing_podgroup_reason(missing)
            for task in missing.pods:
                if task.status != TaskStatus.PENDING:
                    continue
                self.event_for_pod(task, "Warning", "FailedScheduling", message)
                self.pod_unschedulable(task, message)
        for pod in problems.unreadable_pods:
            ref = {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.name,
                "namespace": pod.namespace,
                "uid": pod.uid,
            }
            self.event(ref, "Warning", "FailedScheduling", unreadable_reason(pod))
        for ungrouped in problems.ungrouped_pods:
            grace = ungrouped_grace(ungrouped, self.controllers, self.missing_podgroup_grace)
            if now - ungrouped.since < grace:
                due = min(due, ungrouped.since + grace)
                continue
            message = ungrouped_reason(ungrouped, self.controllers)
            self.event_for_pod(ungrouped.task, "Warning", "FailedScheduling", message)
            self.pod_unschedulable(ungrouped.task, message)
        for conflict in problems.group_conflicts:
            self.event_for_pod(conflict.task, "Warning", GROUP_CONFLICT, conflict.message)
        # Until a deferred one comes due, the same problems need no second look.
        self._problems_done = problems
        self._problems_due = due

    def pod_unschedulable(self, task: TaskInfo, message: str) -> None:
        if self.cache.task(task.uid) is None:
            # Deleted since the cycle's snapshot: its deletion already went by (``pod_gone``), and
            # what were remembered of it now would stay until the next re-list.
            return
        uid = task.uid
        cond: Cond = ("PodScheduled", "False", UNSCHEDULABLE, message)
        shown: Cond | None = None
        for c in task.pod.status.conditions:
            if c.type == "PodScheduled":
                shown = (c.type, c.status, c.reason, c.message)
                break
        if shown == cond:
            self._sent_pod.pop(uid, None)
            self._pod_refresh.drop(uid)
            return
        last = self._sent_pod.get(uid)
        if last == cond:
            self._pod_refresh.drop(uid)  # a newer message held back is no longer wanted
            return
        body = {
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": UNSCHEDULABLE,
                        "message": message,
                        "lastTransitionTime": now_rfc3339(),
                    }
                ]
            },
        }
        write = _Write("pod", task.namespace, task.name, body, cond, uid=uid)
        before = last if last is not None else shown
        if not self._held_back(self._pod_refresh, uid, write, before is not None and before[:3] == cond[:3]):
            self._write_pod_condition(write, self.clock())

    def _held_back(self, refresh: HeldRefreshes[_Write], key: str, write: _Write, message_only: bool) -> bool:
        """Whether ``write`` is held back by ``refresh`` (scheduler/refresh.py): only its message is
        new and its object was written within the refresh period. Never when a write for the same
        object still waits in the queue: replacing that one costs no write."""
        unsent = (write.kind, write.namespace, write.name) in self._pending
        if not refresh.hold(key, write, message_only and not unsent, self.clock(), self._refresh_period()):
            return False
        self._dirty.set()  # the flusher wakes for it when it falls due
        m.CONDITION_MESSAGES_DEFERRED.labels(write.kind).inc()
        return True

    def _refresh_period(self) -> float:
        """How long after an object's last status write a new message alone waits: the refresh
        period, or longer when so many wait that their refreshes would exceed the rate."""
        waiting = len(self._pod_refresh) + len(self._pg_refresh)
        return max(self.message_refresh, waiting / self.message_rate)

    def _write_pod_condition(self, write: _Write, now: float) -> None:
        self._sent_pod[write.uid] = write.signature
        self._pod_refresh.written(write.uid, now)
        self._queue(write)

    def _write_podgroup(self, key: str, write: _Write, now: float) -> None:
        """Queue a Volcano or native PodGroup's status write and remember it as sent."""
        if write.kind == "podgroup":
            self._sent_pg[key] = write.signature
        else:
            self._sent_native[key] = write.signature
        self._pg_refresh.written(key, now)
        self._queue(write)

    def _release_due(self, now: float) -> None:
        """The status writes held back whose refresh period has ended, queued with their newest
        message: not for a pod gone or placed since (its PodScheduled condition is the API server's
        to set then), nor for a PodGroup gone."""
        for uid, write in self._pod_refresh.due(now):
            task = self.cache.task(uid)
            if task is None or task.status != TaskStatus.PENDING or task.node_name:
                continue
            self._write_pod_condition(write, now)
        for key, write in self._pg_refresh.due(now):
            if self._group(key) is not None:
                self._write_podgroup(key, write, now)

    def _next_due(self) -> float | None:
        """Seconds until the next Event update or held-back status write falls due (None: none)."""
        wait = self.events.next_due()
        for refresh in (self._pod_refresh, self._pg_refresh):
            due = refresh.next_due()
            if due is not None:
                held = max(0.0, due - self.clock())
                wait = held if wait is None else min(wait, held)
        return wait

    # -- the binder's observer ---------------------------------------------------------------------
    def bind_failed(self, task: TaskInfo, node: str, reason: str) -> None:
        message = f"binding rejected: failed to bind {task.key} to {node}: {reason}"
        self.pod_unschedulable(task, message)
        pg = self._group(task.job) if task.job else None
        if pg is not None:
            self.event_for_podgroup(pg, "Warning", "FailedScheduling", message, force=True)
        else:
            self.event_for_pod(task, "Warning", "FailedScheduling", message, force=True)

    def bind_found_no_pod(self, task: TaskInfo, node: str, reason: str) -> None:
        """A pod deleted before its binding: no condition or Event to write for it (a write to a pod
        that is gone would only be answered 404)."""

    def gang_bound(self, job: str, placements: list[Placement]) -> None:
        pg = self._group(job)
        if pg is None or self.per_pod_events:
            return
        nodes = sorted({p.node for p in placements})
        shown = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
        self.event_for_podgroup(
            pg,
            "Normal",
            "Scheduled",
            f"Successfully assigned {len(placements)} pods of {job} to {shown}",
            force=True,
        )

    def gang_partly_bound(self, job: str, bound: list[Placement], failed: dict[str, str]) -> None:
        pg = self._group(job)
        if pg is None:
            return
        detail = "; ".join(f"{pod}: {why}" for pod, why in list(failed.items())[:5])
        self.event_for_podgroup(
            pg,
            "Warning",
            "GangPartiallyBound",
            f"{len(bound)} pods of {job} bound, {len(failed)} failed and are pending again: {detail}",
            force=True,
        )

    def pod_bound(self, task: TaskInfo, node: str) -> None:
        self._sent_pod.pop(task.uid, None)
        if self.per_pod_events:
            self.event_for_pod(
                task, "Normal", "Scheduled", f"Successfully assigned {task.key} to {node}", force=True
            )

    # -- events ------------------------------------------------------------------------------------
    def event_for_podgroup(
        self, pg: PodGroup | NativePodGroup, etype: str, reason: str, message: str, force: bool = False
    ) -> None:
        native = isinstance(pg, NativePodGroup)
        ref = {
            "apiVersion": "scheduling.k8s.io/v1alpha2" if native else "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "name": pg.metadata.name,
            "namespace": pg.metadata.namespace,
            "uid": pg.metadata.uid,
            "resourceVersion": pg.metadata.resource_version,
        }
        self.event(ref, etype, reason, message, force=force)

    def event_for_pod(
        self, task: TaskInfo, etype: str, reason: str, message: str, force: bool = False
    ) -> None:
        if self.cache.task(task.uid) is None:
            return  # deleted since the cycle's snapshot (see ``pod_unschedulable``)
        ref = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": task.name,
            "namespace": task.namespace,
            "uid": task.uid,
        }
        self.event(ref, etype, reason, message, force=force)

    def event(self, ref: dict[str, str], etype: str, reason: str, message: str, force: bool = False) -> None:
        """Record an event. An unchanged event (same message) is not an occurrence again sooner than
        ``EVENT_REPEAT`` unless ``force``d (a bind failure is one each time); every occurrence of the
        same reason about the same object updates one Event (scheduler/events.py)."""
        obj = event_object(
            ref.get("kind", ""), ref.get("namespace", ""), ref.get("name", ""), ref.get("uid", "")
        )
        now = self.clock()
        sent = self._sent_events.get(obj)
        if sent is None:
            sent = self._sent_events[obj] = {}
            if len(self._sent_events) > 20_000:  # objects that are not pods or PodGroups (queues)
                for k in list(self._sent_events)[:10_000]:
                    del self._sent_events[k]
        last = sent.get(reason)
        if not force and last is not None and last[0] == message and now - last[1] < EVENT_REPEAT:
            return
        sent[reason] = (message, now)
        self.events.record(ref, etype, reason, message)
        self._dirty.set()

    def remembered(self) -> list[tuple[str, int]]:
        """The sizes of the maps kept per pod, PodGroup and involved object
        (``caldera_remembered_objects``)."""
        return [
            ("pod_conditions", len(self._sent_pod)),
            ("podgroup_status", len(self._sent_pg)),
            ("native_podgroup_status", len(self._sent_native)),
            ("observed", len(self._observed)),
            ("podgroups", len(self._podgroups)),
            ("event_objects", len(self._sent_events)),
            ("event_series", len(self.events)),
            ("pending", self.pending),
            ("pod_condition_times", len(self._pod_refresh.written_at)),
            ("pod_conditions_deferred", len(self._pod_refresh)),
            ("podgroup_condition_times", len(self._pg_refresh.written_at)),
            ("podgroup_conditions_deferred", len(self._pg_refresh)),
        ]

    # -- objects that go ---------------------------------------------------------------------------
    def subscribers(self) -> dict[str, Handler[Any]]:
        """Watch handlers (``Informers.subscribe``) through which the updater forgets what it keeps
        about a pod or PodGroup once it is deleted, or absent from a re-list."""
        return {
            "pods": Gone(self.pod_gone, self._pod_keys),
            "podgroups": Gone(self.podgroup_gone, self._podgroup_keys),
        }

    def pod_gone(self, pod: Pod) -> None:
        meta = pod.metadata
        self._forget_pod(meta.uid or f"{meta.namespace}/{meta.name}", meta.namespace, meta.name)

    def _forget_pod(self, uid: str, namespace: str, name: str) -> None:
        self._sent_pod.pop(uid, None)
        self._pod_refresh.forget(uid)
        key = ("pod", namespace, name)
        unsent = self._pending.get(key)
        if unsent is not None and unsent.uid == uid:
            del self._pending[key]  # its pod is gone: the write would only be answered 404
        obj = event_object("Pod", namespace, name, uid)
        self._sent_events.pop(obj, None)
        self.events.forget(obj)

    def podgroup_gone(self, pg: PodGroup) -> None:
        meta = pg.metadata
        self._forget_podgroup(f"{meta.namespace}/{meta.name}", meta.uid)

    def _forget_podgroup(self, key: str, uid: str) -> None:
        namespace, _, name = key.partition("/")
        self._sent_pg.pop(key, None)
        self._pg_refresh.forget(key)
        self._observed.pop(key, None)
        self._podgroups.pop(key, None)
        obj = event_object("PodGroup", namespace, name, uid)
        self._sent_events.pop(obj, None)
        self.events.forget(obj)

    def _pod_keys(self, live: list[Pod]) -> None:
        """After a re-list: forget the pods that are not in it."""
        present = {p.metadata.uid or f"{p.metadata.namespace}/{p.metadata.name}" for p in live}
        for obj in [o for o in self._sent_events if o.startswith("Pod/")]:
            _, namespace, name, uid = obj.split("/", 3)
            if (uid or f"{namespace}/{name}") not in present:
                self._forget_pod(uid, namespace, name)
        for uid in [u for u in self._sent_pod if u not in present]:
            del self._sent_pod[uid]
        self._pod_refresh.keep_only(present)
        for key in [k for k, w in self._pending.items() if w.kind == "pod" and w.uid not in present]:
            del self._pending[key]

    def _podgroup_keys(self, live: list[PodGroup]) -> None:
        present = {f"{pg.metadata.namespace}/{pg.metadata.name}" for pg in live}
        for obj in [o for o in self._sent_events if o.startswith("PodGroup/")]:
            _, namespace, name, uid = obj.split("/", 3)
            if f"{namespace}/{name}" not in present:
                self._forget_podgroup(f"{namespace}/{name}", uid)
        refreshed = self._pg_refresh.written_at
        for key in [k for k in (*self._sent_pg, *self._observed, *refreshed) if k not in present]:
            if not is_native_job_key(key):
                self._forget_podgroup(key, "")

    # -- writing -----------------------------------------------------------------------------------
    def _queue(self, write: _Write) -> None:
        self._pending[(write.kind, write.namespace, write.name)] = write
        self._dirty.set()

    @property
    def pending(self) -> int:
        return len(self._pending) + len(self.events._dirty)

    def start(self) -> None:
        self._task = supervise("status-updater", self._run)

    async def stop(self, flush: bool = True, timeout: float = 5.0) -> None:
        if self._task is not None:
            await stop_workers([self._task])
            self._task = None
        if flush:
            try:
                async with asyncio.timeout(timeout):
                    await self.flush()
            except TimeoutError:
                log.warning("%d status writes left unsent at shutdown", self.pending)

    async def _run(self) -> None:
        while True:
            # Coalesced Event updates fall due later: wake for them even when nothing else happens.
            wait = self._next_due()
            if wait is None:
                await self._dirty.wait()
            else:
                try:
                    async with asyncio.timeout(max(wait, self.flush_interval)):
                        await self._dirty.wait()
                except TimeoutError:
                    pass
            # Let a busy cycle's wishes pile up (and supersede each other) before writing, and
            # while binds are queued let them have the API server first (up to max_defer).
            woke = self.clock()
            await asyncio.sleep(self.flush_interval)
            while self.binds_waiting() and self.clock() - woke < self.max_defer:
                await asyncio.sleep(self.flush_interval)
            self._dirty.clear()
            try:
                await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("status flush failed")

    async def flush(self) -> None:
        self._release_due(self.clock())
        writes: list[_Write] = list(self._pending.values())
        self._pending = {}
        writes.extend(_Write("event", e.namespace, e.name, e.body, e) for e in self.events.due())
        if not writes:
            return
        sem = asyncio.Semaphore(self.concurrency)

        async def one(w: _Write) -> None:
            async with sem:
                await self._send(w)

        await asyncio.gather(*(one(w) for w in writes))

    async def _send(self, w: _Write) -> None:
        if not self.may_write():
            self._withhold(w)
            return
        self.writes += 1
        try:
            if w.kind in ("podgroup", "native-podgroup"):
                path = PG_PATH if w.kind == "podgroup" else NATIVE_PG_STATUS_PATH
                await self.client.request(
                    "PATCH",
                    path.format(ns=w.namespace, name=w.name),
                    body=w.body,
                    content_type="application/merge-patch+json",
                )
            elif w.kind == "pod":
                await self.client.request(
                    "PATCH",
                    POD_STATUS_PATH.format(ns=w.namespace, name=w.name),
                    body=w.body,
                    content_type="application/strategic-merge-patch+json",
                )
            elif w.signature.method == "POST":
                await self.client.request("POST", EVENTS_PATH.format(ns=w.namespace), body=w.body)
            else:
                await self.client.request(
                    "PATCH",
                    f"{EVENTS_PATH.format(ns=w.namespace)}/{w.name}",
                    body=w.body,
                    content_type="application/merge-patch+json",
                )
            if w.kind == "event":
                self.events.written(w.signature, True)
            m.STATUS_WRITES.labels(w.kind, "ok").inc()
        except ApiError as exc:
            m.STATUS_WRITES.labels(w.kind, "error").inc()
            if w.kind == "event":
                if exc.transient:
                    await asyncio.sleep(backoff_delay(w.attempts + 1, 0.1, 2.0))
                self.events.written(w.signature, False, exc.code, retry=exc.transient)
                self._dirty.set()
                return
            if exc.transient and w.attempts < 5:
                w.attempts += 1
                await asyncio.sleep(backoff_delay(w.attempts, 0.1, 2.0))
                key = (w.kind, w.namespace, w.name)
                if key not in self._pending:  # unless a newer wish replaced it
                    self._pending[key] = w
                    self._dirty.set()
                return
            log.info("%s %s/%s status write dropped: %s", w.kind, w.namespace, w.name, exc)
            if exc.code != 404:
                # recompute every job next cycle, so the dropped wish is made again (not for an object
                # that is gone: its deletion takes what is kept of it, and nothing is to be made again)
                self._observed.clear()
                self._seq = 0
            if w.kind == "podgroup":
                self._sent_pg.pop(f"{w.namespace}/{w.name}", None)
            elif w.kind == "native-podgroup":
                self._sent_native.pop(native_job_key(w.namespace, w.name), None)

    def _withhold(self, w: _Write) -> None:
        """Keep a write back, unsent, while the lease may no longer be held: pending again (unless a
        newer wish replaced it), an Event due again."""
        m.WRITES_WITHHELD.labels("status").inc()
        self.withheld += 1
        if w.kind == "event":
            self.events.written(w.signature, False, retry=True)
            return
        self._pending.setdefault((w.kind, w.namespace, w.name), w)


def event_object(kind: str, namespace: str, name: str, uid: str) -> str:
    """The key of an Event's involved object (as the recorder keys its series)."""
    return f"{kind}/{namespace}/{name}/{uid}"


class Gone:
    """A watch subscriber that only tells which objects went: deleted, or absent from a re-list."""

    def __init__(self, gone: Callable[[Any], None], relisted: Callable[[list[Any]], None]) -> None:
        self._gone = gone
        self._relisted = relisted

    def replace(self, objects: list[Any]) -> None:
        self._relisted(objects)

    def upsert(self, obj: Any) -> None:
        pass

    def delete(self, obj: Any) -> None:
        self._gone(obj)
