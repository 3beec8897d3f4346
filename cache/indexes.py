"""Indexes: what the cache derives from its objects as they come and go, and the marks every
write leaves for the snapshot. Tasks attached to and detached from their nodes (or kept as orphans
of a node not seen yet), the job and node changed marks and the generations they stamp
(``JobInfo.generation``), the pending-jobs index (``has_pending_work``), the revision that counts
only what can change a decision (``decision_revision``), and the pods no session can see: waiting
for their PodGroup, unreadable, with no PodGroup at all, or waiting for their ResourceClaims
(``problems()`` and its dataclasses).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from caldera.cache.state import CacheState
from caldera.framework.dra.view import missing_claim_reason
from caldera.framework.model import (
    NATIVE_JOB_PREFIX,
    OCCUPYING_STATUSES,
    QUEUE_NAME_ANNOTATION,
    TaskInfo,
    TaskStatus,
)


@dataclass(frozen=True)
class UnreadablePod:
    """A pod of ours whose spec the cache could not read (an invalid or negative quantity): it cannot
    be scheduled, and it must not wait in silence."""

    namespace: str
    name: str
    uid: str
    #: the job its group annotation names ("" when none)
    job: str
    reason: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class MissingPodGroup:
    """Pods of ours whose ``scheduling.k8s.io/group-name`` names a PodGroup the cache does not hold,
    or (``native``) whose ``spec.schedulingGroup.podGroupName`` names a ``scheduling.k8s.io/v1alpha2``
    PodGroup it does not hold."""

    namespace: str
    name: str
    pods: tuple[TaskInfo, ...]
    #: monotonic time at which the cache first saw a pod waiting for it
    since: float
    native: bool = False
    #: (native) whether the cache watches ``scheduling.k8s.io/v1alpha2`` PodGroups at all
    api_served: bool = True

    @property
    def key(self) -> str:
        """The job key (a native group's carries ``NATIVE_JOB_PREFIX``)."""
        return f"{self.namespace}/{NATIVE_JOB_PREFIX if self.native else ''}{self.name}"


@dataclass(frozen=True)
class GroupConflict:
    """A pod of ours naming a native group (``spec.schedulingGroup``) and, through the
    ``scheduling.k8s.io/group-name`` annotation, a Volcano PodGroup: it belongs to the native one."""

    task: TaskInfo
    native_group: str
    volcano_group: str

    @property
    def message(self) -> str:
        return (
            f"pod {self.task.key} names the scheduling.k8s.io/v1alpha2 PodGroup {self.native_group} "
            f"(spec.schedulingGroup) and the Volcano PodGroup {self.volcano_group} (annotation "
            f"scheduling.k8s.io/group-name); it belongs to {self.native_group}, the annotation is ignored"
        )


@dataclass(frozen=True)
class UngroupedPod:
    """A pending pod of ours that names no PodGroup: a controller (ours, or Volcano's beside us) is
    expected to make one and annotate the pod; until then no session sees it."""

    task: TaskInfo
    #: the queue its ``scheduling.volcano.sh/queue-name`` annotation names ("" when none)
    queue: str
    #: that queue exists in the cache (or no queue is named)
    queue_exists: bool
    #: monotonic time at which the cache first saw the pod without a group
    since: float

    @property
    def key(self) -> str:
        return self.task.key


@dataclass(frozen=True)
class ClaimWait:
    """A pending pod of ours whose ResourceClaims do not all exist yet (or whose template claim is not
    named in its status yet): no node will do until they do."""

    task: TaskInfo
    reason: str

    @property
    def key(self) -> str:
        return self.task.key


@dataclass(frozen=True)
class CacheProblems:
    """What the cache holds that no session can schedule, and why (read once per cycle)."""

    missing_podgroups: tuple[MissingPodGroup, ...] = ()
    unreadable_pods: tuple[UnreadablePod, ...] = ()
    ungrouped_pods: tuple[UngroupedPod, ...] = ()
    group_conflicts: tuple[GroupConflict, ...] = ()
    claim_waits: tuple[ClaimWait, ...] = ()

    def __bool__(self) -> bool:
        return bool(
            self.missing_podgroups
            or self.unreadable_pods
            or self.ungrouped_pods
            or self.group_conflicts
            or self.claim_waits
        )


class Indexes(CacheState):
    """The indexes and the changed marks (see the module's docstring)."""

    def _priority_of(self, class_name: str, explicit: int | None = None) -> int:
        if explicit is not None:
            return explicit
        if class_name:
            return self.priority_classes.get(class_name, self.default_priority)
        return self.default_priority

    def _node_changed(self, name: str) -> None:
        self._node_revision += 1
        for slot in self._slots:
            slot.dirty_nodes.add(name)

    def _job_changed(self, key: str) -> None:
        self._generation += 1
        job = self.jobs.get(key)
        if job is not None:
            job.generation = self._generation
        bound = 2 * len(self.jobs) + 1000
        for slot in self._slots:
            dirty = slot.dirty_jobs
            dirty.add(key)
            if len(dirty) > bound:
                # Likewise for a slot no snapshot has refreshed for long: copy everything afresh.
                slot.dirty_jobs = set()
                slot.priority_revision = -1
        changed = self._jobs_changed
        if changed is not None:
            changed.add(key)
            if len(changed) > bound:
                # No snapshot for long (a standby replica never takes one): the names of every job
                # ever changed would pile up. "Everything may have changed" says the same, in O(1).
                self._jobs_changed = None
        job = self.jobs.get(key)
        if job is not None and (job.phase == "Pending" or job.count(TaskStatus.PENDING)):
            self._pending_jobs.add(key)
        else:
            self._pending_jobs.discard(key)

    def has_pending_work(self) -> bool:
        """Whether any job has a pending pod or waits in phase Pending: without one, no action has
        anything to do (enqueue, allocate, backfill, preempt and reclaim all start from pending
        work), whatever else changes."""
        return bool(self._pending_jobs)

    def _attach_to_node(self, task: TaskInfo) -> None:
        if not task.node_name or task.status not in OCCUPYING_STATUSES:
            return
        node = self.nodes.get(task.node_name)
        if node is None:
            self._orphans_by_node.setdefault(task.node_name, {})[task.uid] = task
        else:
            node.add_task(task, sync=False)
            self._unsynced.add(task.node_name)
            self._node_changed(task.node_name)

    def _detach_from_node(self, task: TaskInfo) -> None:
        if not task.node_name:
            return
        node = self.nodes.get(task.node_name)
        if node is not None:
            node.remove_task(task, sync=False)
            self._unsynced.add(task.node_name)
            self._node_changed(task.node_name)
        orphans = self._orphans_by_node.get(task.node_name)
        if orphans is not None:
            orphans.pop(task.uid, None)
            if not orphans:
                del self._orphans_by_node[task.node_name]

    def _wait_for_podgroup(self, job_key: str, tasks: dict[str, TaskInfo]) -> None:
        waiting = self.waiting.get(job_key)
        if waiting is None:
            waiting = self.waiting[job_key] = {}
            self._waiting_since.setdefault(job_key, time.monotonic())
        waiting.update(tasks)
        self._problems_revision += 1

    def _podgroup_arrived(self, job_key: str) -> None:
        """The PodGroup pods waited for exists now: when the last problem list reports it missing,
        the next ``problems()`` rebuilds the list whatever its ``max_age``, so the report does not
        outlive the problem (a pod bound while /debug/jobs still said its PodGroup was not found)."""
        revision, _, cached = self._problems
        if any(m.key == job_key for m in cached.missing_podgroups):
            self._problems = (revision, -float("inf"), cached)

    def problems(self, max_age: float = 0.0) -> CacheProblems:
        """Pods waiting for a PodGroup that does not exist or was never made, and pods that cannot be
        read; rebuilt only when something changed since the last call, and (``max_age``) not more
        often than that: plain pods arriving by the thousand change the set every cycle, and what it
        reports waits seconds anyway."""
        with self._lock:
            revision, built_at, cached = self._problems
            if revision == self._problems_revision:
                return cached
            now = time.monotonic()
            if max_age > 0 and now - built_at < max_age:
                return cached
            for key in [k for k in self._waiting_since if k not in self.waiting]:
                del self._waiting_since[key]
            for uid in [u for u in self._ungrouped_since if u not in self.ungrouped]:
                del self._ungrouped_since[uid]
            missing = []
            for key, tasks in self.waiting.items():
                namespace, _, name = key.partition("/")
                native = name.startswith(NATIVE_JOB_PREFIX)
                if native:
                    name = name[len(NATIVE_JOB_PREFIX) :]
                pods = tuple(sorted(tasks.values(), key=lambda t: t.name))
                since = self._waiting_since.get(key, time.monotonic())
                served = self.native_gang_api
                missing.append(MissingPodGroup(namespace, name, pods, since, native, served or not native))
            missing.sort(key=lambda m: m.key)
            unreadable = tuple(sorted(self.unreadable.values(), key=lambda u: u.key))
            ungrouped = []
            for uid, task in self.ungrouped.items():
                if task.status != TaskStatus.PENDING:
                    continue
                queue = task.pod.metadata.annotations.get(QUEUE_NAME_ANNOTATION, "")
                exists = not queue or queue in self.queues or queue == self.default_queue
                since = self._ungrouped_since.get(uid, time.monotonic())
                ungrouped.append(UngroupedPod(task, queue, exists, since))
            ungrouped.sort(key=lambda u: u.key)
            conflicts = tuple(sorted(self.group_conflicts.values(), key=lambda c: c.task.key))
            claims = {**self.resource_claims, **self._assumed_claims}
            waits = []
            for uid in self._claim_pods:
                claimant = self.tasks.get(uid)
                if claimant is None or claimant.status != TaskStatus.PENDING:
                    continue
                reason = missing_claim_reason(claimant.pod, claims)
                if reason:
                    waits.append(ClaimWait(claimant, reason))
            waits.sort(key=lambda w: w.key)
            problems = CacheProblems(tuple(missing), unreadable, tuple(ungrouped), conflicts, tuple(waits))
            self._problems = (self._problems_revision, now, problems)
            return problems

    def _every_job_changed(self) -> None:
        """Priorities come from priority classes: every job's copy may read otherwise now."""
        for key in self.jobs:
            self._generation += 1
            self.jobs[key].generation = self._generation

    @property
    def decision_revision(self) -> int:
        """Like ``revision``, without the changes that cannot change what a cycle decides: a pod
        whose task stays placed on the same node with the same requests and priority (its bind
        coming back, the kubelet reporting it running, a condition), a PodGroup whose status counts
        or conditions changed but not its phase (the status updater's own writes coming back). The
        loop skips a period while this stands still after a cycle that decided nothing."""
        return self.revision - self._settled_changes
