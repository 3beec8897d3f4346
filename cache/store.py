"""The cluster cache: one incremental, indexed mirror of pods, nodes, PodGroups, queues and
priority classes, and the per-cycle snapshot a session reads.

Watches (or tests) feed it object by object; it never rebuilds the world.

``snapshot()`` is copy-on-write across cycles. The cache keeps two sets of copies ("slots") and
hands them out in turn: the session that runs now gets one, the last finished session (whose result
the binary publishes to /debug, the metrics and the status updater) keeps the other. When a slot is
handed out again, only what changed since it was last used is copied afresh: nodes and jobs the cache
changed since (kept as per-slot dirty sets by every write), and what the session it was handed to
changed, as its result says (``SessionResult.touched_jobs`` / ``touched_nodes``, taken by
``apply``). A slot whose session never came back (a failed cycle) is copied afresh whole. So a
session's objects are never shared with the session before it or with a reader of that session's
result, and a session's changes never reach another session.

A snapshot is a plain value: nothing in it calls back into the cache (a node copy's tasks are the
task objects the node held when it was copied, which the cache never changes: it replaces them).
The binary makes it on the event loop in short steps (``snapshot_async``), so watch handlers, binds
and lease renewals never wait for a whole copy; what they change between two steps is copied again
before the last one.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from caldera.framework.model import (
    GROUP_NAME_ANNOTATION,
    OCCUPYING_STATUSES,
    QUEUE_NAME_ANNOTATION,
    JobInfo,
    NodeInfo,
    QueueInfo,
    TaskInfo,
    TaskStatus,
    node_ready,
    task_status_of,
)
from caldera.framework.nodetable import NodeTable
from caldera.framework.objects import (
    CSINode,
    HyperNode,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
    Queue,
    StorageClass,
)
from caldera.framework.resource import Resource, ResourceError
from caldera.framework.session import SessionResult
from caldera.framework.snapshot import Snapshot

log = logging.getLogger("caldera.cache")

#: ``snapshot_async``: seconds of copying per step before the event loop gets its turn
SNAPSHOT_STEP = 0.004
#: units of copying between two chances to end a step (a job copy is ~10 tasks)
STEP_JOBS = 64
STEP_NODES = 256
#: the round of copying from which a snapshot finishes in one go (what changed meanwhile is little)
FINAL_ROUND = 3


class _Slot:
    """One set of per-session copies: a node table, node and job copies, and what changed since."""

    __slots__ = (
        "dirty_jobs",
        "dirty_nodes",
        "handout",
        "jobs",
        "layout",
        "node_list",
        "nodes",
        "outstanding",
        "priority_revision",
        "rows",
        "seq",
        "table",
    )

    def __init__(self) -> None:
        self.table = NodeTable(capacity=1)
        self.nodes: dict[str, NodeInfo] = {}
        #: the copies in row order (row i of the table is node_list[i])
        self.node_list: list[NodeInfo] = []
        #: the cache's table row of each entry of node_list
        self.rows: np.ndarray = np.zeros(0, dtype=np.intp)
        #: the cache's node layout revision the node copies were made for (-1: none yet)
        self.layout = -1
        self.jobs: dict[str, JobInfo] = {}
        self.priority_revision = -1
        #: names of nodes / keys of jobs changed since this slot was last handed out: by the cache,
        #: and by the session it was handed to (``SessionResult.touched_*``, taken at ``apply``)
        self.dirty_nodes: set[str] = set()
        self.dirty_jobs: set[str] = set()
        #: the ``seq`` of the last snapshot made from this slot, and whether that snapshot's result
        #: has not been applied (then its copies are not used again: see ``_snapshot_steps``)
        self.seq = 0
        self.outstanding = False
        self.handout = _Handout()


#: statuses of a task placed on its node for good: moving among them changes no node's usage and no
#: gang's count of ready tasks
SETTLED_STATUSES = frozenset({TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING})


def settled_update(old: TaskInfo, new: TaskInfo) -> bool:
    """Whether replacing ``old`` by ``new`` (an update of the same pod) cannot change a scheduling
    decision: placed before and after on the same node, with the same requests, template, labels,
    priority, job and preemptability (a bind coming back, the kubelet reporting the pod running,
    a condition changing). See ``ClusterCache.decision_revision``."""
    return (
        old.status in SETTLED_STATUSES
        and new.status in SETTLED_STATUSES
        and old.node_name == new.node_name
        and old.job == new.job
        and old.priority == new.priority
        and old.template == new.template
        and old.preemptable == new.preemptable
        and old.role == new.role
        and old.resreq == new.resreq
        and old.pod.metadata.labels == new.pod.metadata.labels
    )


def _same_podgroup_but_status(old: PodGroup, new: PodGroup) -> bool:
    """The same PodGroup object but for its status: uid, labels, annotations, creation and spec."""
    om, nm = old.metadata, new.metadata
    return (
        om.uid == nm.uid
        and om.labels == nm.labels
        and om.annotations == nm.annotations
        and om.creation_timestamp == nm.creation_timestamp
        and old.spec == new.spec
    )


def _exact(res: Resource) -> tuple[float, float, float, dict[str, float]]:
    return (res.cpu, res.memory, res.pods, res.scalars)


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
    """Pods of ours whose ``scheduling.k8s.io/group-name`` names a PodGroup the cache does not hold."""

    namespace: str
    name: str
    pods: tuple[TaskInfo, ...]
    #: monotonic time at which the cache first saw a pod waiting for it
    since: float

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


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
class CacheProblems:
    """What the cache holds that no session can schedule, and why (read once per cycle)."""

    missing_podgroups: tuple[MissingPodGroup, ...] = ()
    unreadable_pods: tuple[UnreadablePod, ...] = ()
    ungrouped_pods: tuple[UngroupedPod, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.missing_podgroups or self.unreadable_pods or self.ungrouped_pods)


@dataclass
class CacheStats:
    skipped_objects: int = 0
    snapshots: int = 0
    reused_jobs: int = 0
    copied_jobs: int = 0
    reused_nodes: int = 0
    copied_nodes: int = 0
    errors: list[str] = field(default_factory=list)


class ClusterCache:
    """Thread-safe: watches write from the event loop while a session may be built from a snapshot."""

    def __init__(self, scheduler_names: Iterable[str] = ("caldera",), default_queue: str = "default") -> None:
        self.scheduler_names = frozenset(scheduler_names)
        self.default_queue = default_queue
        self._lock = threading.RLock()
        self.table = NodeTable()
        self.nodes: dict[str, NodeInfo] = {}
        self._free_rows: list[int] = []
        self.jobs: dict[str, JobInfo] = {}
        self.podgroups: dict[str, PodGroup] = {}
        self.queues: dict[str, QueueInfo] = {}
        self.priority_classes: dict[str, int] = {}
        self.default_priority = 0
        self._priority_revision = 0
        #: snapshots taken so far, and the jobs changed (added, removed) since the last one: a
        #: session's plugins redo only those (``Snapshot.changed_jobs``)
        self._snapshot_seq = 0
        #: the last generation stamped on a job (``JobInfo.generation``, ``framework.carry``)
        self._generation = 0
        #: the snapshot the last ``_snapshot_steps`` made
        self._made: Snapshot | None = None
        self._jobs_changed: set[str] | None = set()
        self._changed_priority_revision = 0
        self.hypernodes: dict[str, HyperNode] = {}
        #: bumped whenever a HyperNode comes, changes or goes (``Snapshot.hypernodes_revision``)
        self._hypernodes_revision = 0
        #: policy/v1 PodDisruptionBudgets by namespace/name (read by the pdb plugin)
        self.pdbs: dict[str, PodDisruptionBudget] = {}
        #: storage objects (the volume predicates and the binder's volume step read them)
        self.pvcs: dict[str, PersistentVolumeClaim] = {}
        self.pvs: dict[str, PersistentVolume] = {}
        self.storage_classes: dict[str, StorageClass] = {}
        self.csinodes: dict[str, CSINode] = {}
        #: every task the cache knows, ours or not, by pod uid
        self.tasks: dict[str, TaskInfo] = {}
        #: our pods whose PodGroup does not exist (yet), by job key
        self.waiting: dict[str, dict[str, TaskInfo]] = {}
        #: when each key of ``waiting`` started waiting (monotonic seconds)
        self._waiting_since: dict[str, float] = {}
        #: our pods that cannot be read, by pod uid
        self.unreadable: dict[str, UnreadablePod] = {}
        #: bumped whenever ``waiting`` or ``unreadable`` changes, so ``problems()`` is rebuilt only then
        self._problems_revision = 0
        self._problems: tuple[int, float, CacheProblems] = (0, 0.0, CacheProblems())
        #: our pods with no group annotation at all (for the PodGroup controller)
        self.ungrouped: dict[str, TaskInfo] = {}
        #: when each pod of ``ungrouped`` was first seen without a group (monotonic seconds)
        self._ungrouped_since: dict[str, float] = {}
        #: tasks whose pods carry inter-pod affinity or anti-affinity terms, by uid (usually few)
        self._affinity: dict[str, TaskInfo] = {}
        #: tasks bound to a node the cache has not seen (yet), by node name
        self._orphans_by_node: dict[str, dict[str, TaskInfo]] = {}
        #: two sets of session copies handed out in turn (see the module's docstring)
        self._slots = (_Slot(), _Slot())
        #: the slot of the last session whose result was applied (its readers may still hold it)
        self._published: _Slot | None = None
        self._last_slot: _Slot | None = None
        #: nodes whose usage changed since their table row was last written: the rows are written
        #: once each, before a snapshot copies the table (a cycle's placements and the watch's
        #: updates touch the same nodes many times between two snapshots)
        self._unsynced: set[str] = set()
        #: bumped when a node is added or deleted (rows of the snapshot's table move)
        self._layout = 0
        #: bumped when a node is added or deleted or its labels, taints, readiness, schedulability or
        #: allocatable change: sessions keep what they derive from those while it stands still
        self._node_specs = 0
        #: bumped whenever a node or a pod on a node changes (with ``_layout``: the snapshot's node_revision)
        self._node_revision = 0
        self.revision = 0
        #: changes counted in ``revision`` that cannot change a scheduling decision (see
        #: :attr:`decision_revision`)
        self._settled_changes = 0
        #: keys of the jobs with pending pods or in phase Pending (kept by _job_changed)
        self._pending_jobs: set[str] = set()
        self.stats = CacheStats()

    # ------------------------------------------------------------------------------------------
    # helpers
    # ------------------------------------------------------------------------------------------
    def _skip(self, what: str, exc: Exception) -> None:
        self.stats.skipped_objects += 1
        message = f"skipping {what}: {exc}"
        self.stats.errors = [*self.stats.errors[-19:], message]
        log.warning(message)

    def is_ours(self, pod: Pod) -> bool:
        return pod.spec.scheduler_name in self.scheduler_names

    def _job_key(self, pod: Pod) -> str | None:
        group = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION)
        if not group:
            return None
        return f"{pod.metadata.namespace}/{group}"

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

    # ------------------------------------------------------------------------------------------
    # pods
    # ------------------------------------------------------------------------------------------
    def upsert_pod(self, pod: Pod) -> None:
        with self._lock:
            self.revision += 1
            uid = pod.metadata.uid or f"{pod.metadata.namespace}/{pod.metadata.name}"
            old = self.tasks.get(uid)
            if old is not None:
                if self._update_in_place(old, pod):
                    return
                self._remove_task(old)
            ours = self.is_ours(pod)
            job_key = self._job_key(pod) if ours else None
            previous = old
            if previous is None and job_key is not None:
                # A new pod of a gang is usually made from the same template as the one before it:
                # its requests and template key are reused when every input to them is equal.
                sibling_job = self.jobs.get(job_key)
                if sibling_job is not None and sibling_job.tasks:
                    previous = next(reversed(sibling_job.tasks.values()))
            try:
                task = TaskInfo.from_pod(
                    pod,
                    job=job_key or "",
                    priority=self._priority_of(pod.spec.priority_class_name, pod.spec.priority),
                    previous=previous,
                )
            except ResourceError as exc:
                self._skip(f"pod {pod.metadata.namespace}/{pod.metadata.name}", exc)
                if ours:
                    self.unreadable[uid] = UnreadablePod(
                        pod.metadata.namespace, pod.metadata.name, uid, job_key or "", str(exc)
                    )
                    self._problems_revision += 1
                return
            if self.unreadable.pop(uid, None) is not None:
                self._problems_revision += 1
            if (
                old is not None
                and task.status == TaskStatus.PENDING
                and (
                    old.status == TaskStatus.BINDING
                    or (old.status == TaskStatus.BOUND and not old.pod.spec.node_name)
                )
            ):
                # Our bind is in flight (or done) and the watch has not caught up: keep the assumption,
                # so the pod is never placed (and bound) a second time.
                task.status = old.status
                task.node_name = old.node_name
                task.pod = _with_annotations(task.pod, old.pod.metadata.annotations)
            self.tasks[uid] = task
            affinity = pod.spec.affinity
            if affinity is not None and (
                affinity.pod_affinity is not None or affinity.pod_anti_affinity is not None
            ):
                self._affinity[uid] = task
            if ours:
                if job_key is None:
                    self.ungrouped[uid] = task
                    self._ungrouped_since.setdefault(uid, time.monotonic())
                    self._problems_revision += 1
                else:
                    job = self.jobs.get(job_key)
                    if job is not None:
                        job.add_task(task)
                        self._job_changed(job_key)
                    else:
                        self._wait_for_podgroup(job_key, {uid: task})
            self._attach_to_node(task)
            if old is not None and settled_update(old, task):
                self._settled_changes += 1

    def _update_in_place(self, old: TaskInfo, pod: Pod) -> bool:
        """The fast path of an update that changes nothing the task derives from its pod except its
        status, and that status is accounted on its node as the old one was (a bind coming back, the
        kubelet reporting Running, a condition changing): the task is swapped for a copy with the
        new pod and status, the job's and node's bookkeeping move only where the status moves, and
        the job and node are marked changed as the full path would mark them (the next snapshot
        copies them afresh). The result is the state the full path leaves, dict orders included
        (test/cache/test_update_fast_path.py compares the two). The old task object is left
        untouched (a session, a loader of a node's tasks or the binder may hold it). False, with
        nothing changed, when the full path is needed: anything else differs (the spec apart from
        ``nodeName``, labels, annotations, creation, the node, how the node holds the task), or
        the pod is ours but waits for its PodGroup or has none (the full path keeps those lists)."""
        new_meta = pod.metadata
        old_pod = old.pod
        old_meta = old_pod.metadata
        node_name = pod.spec.node_name
        if (
            node_name != old.node_name
            or new_meta.labels != old_meta.labels
            or new_meta.annotations != old_meta.annotations
            or new_meta.creation_timestamp != old_meta.creation_timestamp
            or new_meta.name != old_meta.name
            or new_meta.namespace != old_meta.namespace
        ):
            return False
        spec = old_pod.spec
        if spec.node_name != node_name:
            spec = msgspec.structs.replace(spec, node_name=node_name)
        if spec != pod.spec:
            return False
        status = task_status_of(pod)
        if _node_accounting(status, node_name) != _node_accounting(old.status, node_name):
            return False
        uid = old.uid
        job = None
        if old.job:
            job = self.jobs.get(old.job)
            if job is None or job.tasks.get(uid) is not old:
                return False  # waiting for its PodGroup: the full path keeps that list right
        elif self.is_ours(pod):
            return False  # ungrouped: the full path keeps the controller's list right
        node = None
        orphans = None
        if _node_accounting(status, node_name):
            node = self.nodes.get(node_name)
            if node is None:
                orphans = self._orphans_by_node.get(node_name)
                if orphans is None or orphans.get(uid) is not old:
                    return False
            elif node.tasks.get(uid) is not old:
                return False
        new = old.clone()
        new.pod = pod
        new.status = status
        new.priority = self._priority_of(pod.spec.priority_class_name, pod.spec.priority)
        # Every dict below gets the new task at its end, where the full path (remove, then add)
        # would put it: iteration orders stay exactly those of the full path.
        del self.tasks[uid]
        self.tasks[uid] = new
        if self._affinity.pop(uid, None) is not None:
            self._affinity[uid] = new
        if node is not None:
            node.replace_task(old, new)
            self._node_changed(node_name)
        elif orphans is not None:
            del orphans[uid]
            orphans[uid] = new
        if job is not None:
            job.replace_task(old, new)
            self._job_changed(old.job)
        if settled_update(old, new):
            self._settled_changes += 1
        return True

    def delete_pod(self, pod: Pod) -> None:
        with self._lock:
            uid = pod.metadata.uid or f"{pod.metadata.namespace}/{pod.metadata.name}"
            if self.unreadable.pop(uid, None) is not None:
                self.revision += 1
                self._problems_revision += 1
            task = self.tasks.get(uid)
            if task is None:
                return
            self.revision += 1
            self._remove_task(task)

    def _remove_task(self, task: TaskInfo) -> None:
        self.tasks.pop(task.uid, None)
        self._affinity.pop(task.uid, None)
        if self.ungrouped.pop(task.uid, None) is not None:
            self._problems_revision += 1
        self._detach_from_node(task)
        if task.job:
            job = self.jobs.get(task.job)
            if job is not None:
                job.remove_task(task)
                self._job_changed(task.job)
            waiting = self.waiting.get(task.job)
            if waiting is not None:
                waiting.pop(task.uid, None)
                self._problems_revision += 1
                if not waiting:
                    # ``_waiting_since`` keeps the key until problems() runs: an update of the pod
                    # (removed, then added again) does not restart the wait.
                    del self.waiting[task.job]

    def _wait_for_podgroup(self, job_key: str, tasks: dict[str, TaskInfo]) -> None:
        waiting = self.waiting.get(job_key)
        if waiting is None:
            waiting = self.waiting[job_key] = {}
            self._waiting_since.setdefault(job_key, time.monotonic())
        waiting.update(tasks)
        self._problems_revision += 1

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
                pods = tuple(sorted(tasks.values(), key=lambda t: t.name))
                missing.append(
                    MissingPodGroup(namespace, name, pods, self._waiting_since.get(key, time.monotonic()))
                )
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
            problems = CacheProblems(tuple(missing), unreadable, tuple(ungrouped))
            self._problems = (self._problems_revision, now, problems)
            return problems

    # ------------------------------------------------------------------------------------------
    # nodes
    # ------------------------------------------------------------------------------------------
    def upsert_node(self, node: Node) -> None:
        with self._lock:
            name = node.metadata.name
            try:
                alloc = Resource.from_resource_list(node.status.allocatable or node.status.capacity)
            except ResourceError as exc:
                self._skip(f"node {name}", exc)
                return
            self.revision += 1
            info = self.nodes.get(name)
            previous = info.node if info is not None else None
            if info is None:
                if self._free_rows:
                    row = self._free_rows.pop()
                    info = NodeInfo.__new__(NodeInfo)
                    info.name = name
                    info.table = self.table
                    info.row = row
                    self.table.names[row] = name
                    info.used = Resource()
                    info.releasing = Resource()
                    info.pipelined = Resource()
                    info._tasks = {}
                    info._tasks_loader = None
                else:
                    info = NodeInfo(name, alloc, self.table, node)
                self.nodes[name] = info
                self._layout += 1
            else:
                self._node_changed(name)
            ready = node_ready(node)
            if (
                previous is None
                or previous.metadata.labels != node.metadata.labels
                or previous.spec.taints != node.spec.taints
                or info.unschedulable != node.spec.unschedulable
                or info.ready != ready
                or _exact(info.allocatable) != _exact(alloc)
            ):
                self._node_specs += 1
            info.node = node
            info.labels = dict(node.metadata.labels)
            info.taints = list(node.spec.taints)
            info.unschedulable = node.spec.unschedulable
            info.ready = ready
            info.allocatable = alloc
            info.idle = alloc.clone().sub(info.used)
            info.sync_row()
            self._unsynced.discard(name)
            orphans = self._orphans_by_node.pop(name, None)
            if orphans:
                for task in orphans.values():
                    info.add_task(task)

    def delete_node(self, node: Node) -> None:
        with self._lock:
            name = node.metadata.name
            info = self.nodes.pop(name, None)
            if info is None:
                return
            self._unsynced.discard(name)
            self.revision += 1
            self._layout += 1
            self._node_specs += 1
            # Pods still bound there keep their node name; they wait in case the node comes back.
            for task in list(info.tasks.values()):
                self._orphans_by_node.setdefault(name, {})[task.uid] = task
            self.table.write_node(
                info.row, Resource(), Resource(), Resource(), Resource(), Resource(), False, True
            )
            self.table.names[info.row] = ""
            self._free_rows.append(info.row)

    # ------------------------------------------------------------------------------------------
    # PodGroups, queues, priority classes, hypernodes
    # ------------------------------------------------------------------------------------------
    def upsert_podgroup(self, pg: PodGroup) -> None:
        with self._lock:
            key = f"{pg.metadata.namespace}/{pg.metadata.name}"
            self.revision += 1
            previous = self.podgroups.get(key)
            if (
                previous is not None
                and _same_podgroup_but_status(previous, pg)
                and previous.status.phase == pg.status.phase
            ):
                # Only status counts or conditions moved (the status updater's own writes coming
                # back): no decision changes. A phase change can: queues count their Inqueue jobs.
                self._settled_changes += 1
            old = self.jobs.get(key)
            if old is not None and self._podgroup_status_only(key, old, pg):
                return
            job = JobInfo.from_podgroup(
                pg, self._priority_of(pg.spec.priority_class_name), self.default_queue
            )
            if old is None and key in self.waiting:
                self._problems_revision += 1
                self._waiting_since.pop(key, None)
            tasks: Iterable[TaskInfo] = (
                old.tasks.values() if old is not None else self.waiting.pop(key, {}).values()
            )
            for task in list(tasks):
                job.add_task(task)
            if old is not None:
                job.version = old.version + 1
            self.jobs[key] = job
            self.podgroups[key] = pg
            self._job_changed(key)

    def _podgroup_status_only(self, key: str, job: JobInfo, pg: PodGroup) -> bool:
        """The fast path of a PodGroup update that changes only its status (the phase and counts the
        status updater writes come back this way): the job takes the new object and phase in place
        instead of being rebuilt with every task added again. The result equals the full path's
        (a fresh job from the PodGroup, the same tasks, version one up), dict orders included.
        False, with nothing changed, when anything else differs."""
        old = self.podgroups.get(key)
        if old is None or not _same_podgroup_but_status(old, pg):
            return False
        job.podgroup = pg
        job.phase = pg.status.phase or "Pending"
        job.priority = self._priority_of(pg.spec.priority_class_name)
        job.fit_errors = {}
        job.job_fit_error = ""
        # The full path adds the tasks again in their order: the buckets follow that order.
        by_status: dict[TaskStatus, dict[str, TaskInfo]] = {}
        for uid, task in job.tasks.items():
            bucket = by_status.get(task.status)
            if bucket is None:
                bucket = by_status[task.status] = {}
            bucket[uid] = task
        job.by_status = by_status
        job.version += 1
        self.podgroups[key] = pg
        self._job_changed(key)
        return True

    def delete_podgroup(self, pg: PodGroup) -> None:
        """Forget a PodGroup, unless the cache already holds a newer one of the same name."""
        with self._lock:
            key = f"{pg.metadata.namespace}/{pg.metadata.name}"
            current = self.podgroups.get(key)
            if current is None:
                return
            if pg.metadata.uid and current.metadata.uid and pg.metadata.uid != current.metadata.uid:
                log.info(
                    "ignoring delete of an older PodGroup %s (uid %s; current uid %s)",
                    key,
                    pg.metadata.uid,
                    current.metadata.uid,
                )
                return
            self.revision += 1
            job = self.jobs.pop(key)
            del self.podgroups[key]
            self._job_changed(key)
            if job.tasks:
                self._wait_for_podgroup(key, dict(job.tasks))

    def upsert_queue(self, queue: Queue) -> None:
        with self._lock:
            self.revision += 1
            self._problems_revision += 1  # a pod may name this queue
            self.queues[queue.metadata.name] = QueueInfo.from_queue(queue)

    def delete_queue(self, queue: Queue) -> None:
        with self._lock:
            current = self.queues.get(queue.metadata.name)
            if current is None:
                return
            if (
                current.queue is not None
                and queue.metadata.uid
                and current.queue.metadata.uid not in ("", queue.metadata.uid)
            ):
                return
            self.revision += 1
            self._problems_revision += 1
            del self.queues[queue.metadata.name]

    def upsert_priority_class(self, pc: PriorityClass) -> None:
        with self._lock:
            self.revision += 1
            self._priority_revision += 1
            self.priority_classes[pc.metadata.name] = pc.value
            if pc.global_default:
                self.default_priority = pc.value
            self._every_job_changed()

    def delete_priority_class(self, pc: PriorityClass) -> None:
        with self._lock:
            self.revision += 1
            self._priority_revision += 1
            self.priority_classes.pop(pc.metadata.name, None)
            if pc.global_default:
                self.default_priority = 0
            self._every_job_changed()

    def _every_job_changed(self) -> None:
        """Priorities come from priority classes: every job's copy may read otherwise now."""
        for key in self.jobs:
            self._generation += 1
            self.jobs[key].generation = self._generation

    def upsert_pdb(self, pdb: PodDisruptionBudget) -> None:
        with self._lock:
            self.revision += 1
            self.pdbs[f"{pdb.metadata.namespace}/{pdb.metadata.name}"] = pdb

    def delete_pdb(self, pdb: PodDisruptionBudget) -> None:
        with self._lock:
            self.revision += 1
            self.pdbs.pop(f"{pdb.metadata.namespace}/{pdb.metadata.name}", None)

    def _storage(self, kind: str, obj: Any, present: bool) -> None:
        table: dict[str, Any] = getattr(self, kind)
        meta = obj.metadata
        key = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
        with self._lock:
            self.revision += 1
            if present:
                table[key] = obj
            else:
                table.pop(key, None)

    def upsert_pvc(self, obj: PersistentVolumeClaim) -> None:
        self._storage("pvcs", obj, True)

    def delete_pvc(self, obj: PersistentVolumeClaim) -> None:
        self._storage("pvcs", obj, False)

    def upsert_pv(self, obj: PersistentVolume) -> None:
        self._storage("pvs", obj, True)

    def delete_pv(self, obj: PersistentVolume) -> None:
        self._storage("pvs", obj, False)

    def upsert_storage_class(self, obj: StorageClass) -> None:
        self._storage("storage_classes", obj, True)

    def delete_storage_class(self, obj: StorageClass) -> None:
        self._storage("storage_classes", obj, False)

    def upsert_csinode(self, obj: CSINode) -> None:
        self._storage("csinodes", obj, True)

    def delete_csinode(self, obj: CSINode) -> None:
        self._storage("csinodes", obj, False)

    def upsert_hypernode(self, hn: HyperNode) -> None:
        with self._lock:
            self.revision += 1
            self._hypernodes_revision += 1
            self.hypernodes[hn.metadata.name] = hn

    def delete_hypernode(self, hn: HyperNode) -> None:
        with self._lock:
            self.revision += 1
            self._hypernodes_revision += 1
            self.hypernodes.pop(hn.metadata.name, None)

    @property
    def decision_revision(self) -> int:
        """Like ``revision``, without the changes that cannot change what a cycle decides: a pod
        whose task stays placed on the same node with the same requests and priority (its bind
        coming back, the kubelet reporting it running, a condition), a PodGroup whose status counts
        or conditions changed but not its phase (the status updater's own writes coming back). The
        loop skips a period while this stands still after a cycle that decided nothing."""
        return self.revision - self._settled_changes

    # ------------------------------------------------------------------------------------------
    # snapshot
    # ------------------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """A private view for one session; copies only what changed since its slot was last used.
        Made in one go under the lock (tests, tools, a caller off the event loop)."""
        with self._lock:
            for _ in self._snapshot_steps():
                pass
            return self._take_made()

    async def snapshot_async(
        self, step_seconds: float = SNAPSHOT_STEP, between: Callable[[], None] | None = None
    ) -> Snapshot:
        """The same snapshot, made on the event loop in steps of about ``step_seconds``: between two
        steps the loop handles watch events, binds and lease renewals, and whatever they change
        before the last step is copied again by it (every write marks what it changed), so the
        snapshot is as consistent as one made in one go, at the moment of its last step.
        ``between``: called after each step (the binary's collector policy freezes the copies
        made so far, so that collections do not walk them again)."""
        steps = self._snapshot_steps()
        while True:
            deadline = time.perf_counter() + step_seconds
            with self._lock:
                for _ in steps:
                    if time.perf_counter() >= deadline:
                        break
                else:
                    made = self._take_made()
                    if between is not None:
                        between()
                    return made
            if between is not None:
                between()
            await asyncio.sleep(0)

    def _take_made(self) -> Snapshot:
        made = self._made
        assert made is not None
        self._made = None
        return made

    def _snapshot_steps(self) -> Iterator[None]:
        """Make a snapshot, yielding between units of copying (the caller holds the lock while it
        runs the generator; between two of its steps the cache may change). Ends with the snapshot
        in ``_made``."""
        self.stats.snapshots += 1
        slot = self._pick_slot()
        if slot.outstanding:
            # Its last snapshot's session never came back (a failed cycle, a reader's snapshot):
            # whatever that session changed of the copies is unknown, so none is used again.
            slot = self._renew_slot(slot)
        if slot.priority_revision != self._priority_revision:
            slot.jobs.clear()  # every job's (and task's) priority may differ
            slot.dirty_jobs = set(self.jobs)
            slot.priority_revision = self._priority_revision
        # Per-session scratch fields of the copies used again: what that session wrote there is
        # not this one's (jobs copied afresh below get fresh ones anyway).
        reused = 0
        items = list(slot.jobs.items())
        for start in range(0, len(items), STEP_JOBS):
            dirty = slot.dirty_jobs
            for key, copy in items[start : start + STEP_JOBS]:
                if key in dirty:
                    continue
                reused += 1
                if copy.fit_errors:
                    copy.fit_errors = {}
                if copy.job_fit_error:
                    copy.job_fit_error = ""
                source = self.jobs.get(key)
                if source is not None and copy.phase != source.phase:
                    copy.phase = source.phase
            yield
        self.stats.reused_jobs += reused
        copied_before = self.stats.copied_nodes
        # Copy what changed, in rounds: what changes while a round runs is copied by the next one;
        # the last rounds run without a break, so the snapshot ends consistent.
        rounds = 0
        while slot.layout != self._layout or slot.dirty_nodes or slot.dirty_jobs:
            rounds += 1
            last = rounds >= FINAL_ROUND
            if slot.layout != self._layout:
                yield from self._relayout(slot, last)
            if slot.dirty_nodes and slot.layout == self._layout:
                yield from self._copy_nodes(slot, last)
            if slot.dirty_jobs:
                yield from self._copy_jobs(slot, last)
        self.stats.reused_nodes += max(0, len(slot.node_list) - (self.stats.copied_nodes - copied_before))
        self._made = self._hand_out(slot)

    def _relayout(self, slot: _Slot, last: bool) -> Iterator[None]:
        """Nodes came or went: rows move, so every node copy is made afresh (rare)."""
        layout = self._layout
        live = sorted(self.nodes.values(), key=lambda n: n.row)
        table = NodeTable.__new__(NodeTable)
        table.rows = len(live)
        table.names = [n.name for n in live]
        table.log = []
        nodes: dict[str, NodeInfo] = {}
        node_list: list[NodeInfo] = []
        slot.dirty_nodes = set()
        for position, info in enumerate(live):
            if not last and position and position % STEP_NODES == 0:
                yield
                if self._layout != layout:
                    return  # nodes came or went meanwhile: the caller starts again
            clone = info.clone_into(table, _TaskLoader(dict(info.tasks), slot.handout, info.name))
            clone.row = position
            nodes[info.name] = clone
            node_list.append(clone)
        slot.rows = np.fromiter((n.row for n in live), dtype=np.intp, count=len(live))
        slot.table = table
        slot.nodes = nodes
        slot.node_list = node_list
        self.stats.copied_nodes += len(live)
        slot.layout = layout

    def _copy_nodes(self, slot: _Slot, last: bool) -> Iterator[None]:
        dirty = slot.dirty_nodes
        slot.dirty_nodes = set()
        table = slot.table
        copied = 0
        for name in dirty:
            previous = slot.nodes.get(name)
            source = self.nodes.get(name)
            if previous is None or source is None:
                continue
            clone = source.clone_into(table, _TaskLoader(dict(source.tasks), slot.handout, name))
            clone.row = previous.row
            slot.nodes[name] = clone
            slot.node_list[previous.row] = clone
            copied += 1
            if not last and copied % STEP_NODES == 0:
                yield
        self.stats.copied_nodes += copied

    def _copy_jobs(self, slot: _Slot, last: bool) -> Iterator[None]:
        dirty = slot.dirty_jobs
        slot.dirty_jobs = set()
        jobs = slot.jobs
        copied = 0
        for key in sorted(dirty):  # sorted: new jobs join in the same order every run
            job = self.jobs.get(key)
            if job is None:
                jobs.pop(key, None)
                continue
            jobs[key] = self._copy_job(job)
            copied += 1
            if not last and copied % STEP_JOBS == 0:
                yield
        self.stats.copied_jobs += copied

    def _hand_out(self, slot: _Slot) -> Snapshot:
        """The last step: the node table's figures, and the snapshot as a plain value."""
        self.sync_table()
        table = slot.table
        self._fill_table(table, slot.rows)
        table.log = []
        self._snapshot_seq += 1
        slot.seq = self._snapshot_seq
        slot.outstanding = True
        changed = self._jobs_changed
        self._jobs_changed = set()
        if self._changed_priority_revision != self._priority_revision:
            changed = None  # every job's priority may differ
            self._changed_priority_revision = self._priority_revision
        queues = dict(self.queues)
        if self.default_queue not in queues:
            # The default queue exists implicitly until its object arrives (the queue controller creates it).
            queues[self.default_queue] = QueueInfo(self.default_queue)
        # Fresh dicts (a C-speed copy): a holder of an older snapshot never sees its keys change.
        jobs = dict(slot.jobs)
        loaded: list[str] = []
        slot.handout.jobs = jobs
        slot.handout.loaded = loaded
        return Snapshot(
            jobs=jobs,
            nodes=dict(slot.nodes),
            table=table,
            queues=queues,
            priority_classes=dict(self.priority_classes),
            hypernodes=dict(self.hypernodes),
            hypernodes_revision=self._hypernodes_revision,
            revision=self.revision,
            decision_revision=self.decision_revision,
            seq=self._snapshot_seq,
            changed_jobs=changed,
            pending_jobs=set(self._pending_jobs),
            node_revision=(self._layout, self._node_revision),
            node_specs=self._node_specs,
            loaded_nodes=loaded,
            pdbs=dict(self.pdbs),
            pvcs=dict(self.pvcs),
            pvs=dict(self.pvs),
            storage_classes=dict(self.storage_classes),
            csinodes=dict(self.csinodes),
            rows=list(slot.node_list),
            affinity_pods=len(self._affinity),
            affinity_nodes=frozenset(
                t.node_name for t in self._affinity.values() if t.node_name and t.status in OCCUPYING_STATUSES
            ),
        )

    def sync_table(self) -> None:
        """Bring the cache's own node table up to date (every snapshot does it first)."""
        with self._lock:
            nodes = self.nodes
            usages = []
            table = self.table
            for name in self._unsynced:
                info = nodes.get(name)
                if info is not None:
                    if info.table is not table:  # (never, unless built by hand): its own table
                        info.sync_usage()
                        continue
                    usages.append((info.row, info.idle, info.used, info.releasing, info.pipelined))
            table.write_usages(usages)
            self._unsynced.clear()

    def _pick_slot(self) -> _Slot:
        """Never the slot of the last published result (readers may hold it); else never the slot
        handed out last, so that two sessions in a row share nothing even when nothing is published."""
        first, second = self._slots
        if self._published is not None:
            slot = second if self._published is first else first
        else:
            slot = second if self._last_slot is first else first
        self._last_slot = slot
        return slot

    def _renew_slot(self, slot: _Slot) -> _Slot:
        """A fresh slot in place of ``slot`` (everything is copied afresh into it)."""
        fresh = _Slot()
        fresh.dirty_jobs = set(self.jobs)
        self._slots = tuple(fresh if s is slot else s for s in self._slots)  # type: ignore[assignment]
        if self._last_slot is slot:
            self._last_slot = fresh
        return fresh

    def reset_copies(self) -> None:
        """Forget every session copy: the next snapshots copy everything (benchmarks, tests)."""
        with self._lock:
            self._slots = (_Slot(), _Slot())
            self._published = None
            self._last_slot = None

    def _fill_table(self, table: NodeTable, rows: np.ndarray) -> None:
        """The cache's rows ``rows``, in that order, into ``table`` (fresh arrays: numpy copies)."""
        source = self.table
        table.dims = dict(source.dims)
        n = len(rows)
        if n and int(rows[-1]) == n - 1:
            # Rows 0..n-1 in order (rows are sorted and distinct: no node ever deleted): a slice
            # copies the same values as the gather, faster.
            def take(array: np.ndarray) -> np.ndarray:
                return array[:n].copy()
        else:

            def take(array: np.ndarray) -> np.ndarray:
                return array[rows]

        table.allocatable = take(source.allocatable)
        table.idle = take(source.idle)
        table.used = take(source.used)
        table.releasing = take(source.releasing)
        table.pipelined = take(source.pipelined)
        table.future = take(source.future)
        table.ready = take(source.ready)
        table.unschedulable = take(source.unschedulable)
        table._all_rows = None
        table._requests = {}  # column numbers follow dims, copied afresh above
        table.version = 0

    def _copy_job(self, job: JobInfo) -> JobInfo:
        copy = job.clone()
        copy.priority = self._priority_of(job.priority_class)
        for task in copy.tasks.values():
            if task.pod.spec.priority is None:
                task.priority = self._priority_of(task.pod.spec.priority_class_name)
        return copy

    # ------------------------------------------------------------------------------------------
    # results of a session
    # ------------------------------------------------------------------------------------------
    def apply(self, result: SessionResult) -> list[TaskInfo]:
        """Assume the session's placements (the binder confirms or reverts them) and mark evictions.
        Returns the cache tasks that were assumed; placements whose pod vanished are dropped."""
        assumed: list[TaskInfo] = []
        with self._lock:
            # The revision moves only when something is assumed: a cycle that decided nothing leaves
            # the cache as it was (the loop skips periods while nothing changes).
            before = self.revision
            for slot in self._slots:
                if result.seq and slot.seq == result.seq and slot.outstanding:
                    # Its result is about to be published: the next session must not use these
                    # copies; what the session changed of them is copied afresh when the slot
                    # is handed out again.
                    self._published = slot
                    slot.outstanding = False
                    slot.dirty_jobs.update(result.touched_jobs)
                    slot.dirty_nodes.update(result.touched_nodes)
                    slot.dirty_nodes.update(slot.handout.loaded)
            for key, job in result.jobs.items():
                if job.phase == "Inqueue":
                    # Enqueued by the session: assumed until the PodGroup's status comes back from
                    # the API (Volcano's cache keeps the job's new phase the same way).
                    source = self.jobs.get(key)
                    if source is not None and source.phase != "Inqueue":
                        source.phase = "Inqueue"
                        self._job_changed(key)
                        self.revision = before + 1
            for placement in result.placements:
                task = self.tasks.get(placement.task.uid)
                if task is None or task.status != TaskStatus.PENDING or placement.node not in self.nodes:
                    continue
                # What the binder will write on the pod (device assignments) is part of the
                # assumption: the next snapshot must see it before the watch brings it back.
                pod = _with_annotations(task.pod, placement.annotations) if placement.annotations else None
                assumed.append(self._set_status(task, TaskStatus.BINDING, placement.node, pod))
                self.revision = before + 1
            for eviction in result.evictions:
                task = self.tasks.get(eviction.task.uid)
                if task is None or task.status not in OCCUPYING_STATUSES:
                    continue
                self._set_status(task, TaskStatus.RELEASING, task.node_name)
                self.revision = before + 1
        return assumed

    def _set_status(
        self, task: TaskInfo, status: TaskStatus, node_name: str, pod: Pod | None = None
    ) -> TaskInfo:
        """Replace ``task`` by a copy with this status and node (and pod): a task object the cache
        may have handed out (a node copy's tasks are read lazily) is never changed."""
        new = task.clone()
        new.status = status
        new.node_name = node_name
        if pod is not None:
            new.pod = pod
        self._detach_from_node(task)
        self._replace_indexed(task, new)
        job = self.jobs.get(task.job) if task.job else None
        if job is not None and job.tasks.get(task.uid) is task:
            job.swap_task(task, new)
            self._job_changed(task.job)
        self._attach_to_node(new)
        return new

    def _replace_indexed(self, old: TaskInfo, new: TaskInfo) -> None:
        """``new`` in place of ``old`` in the indexes by uid (not jobs and nodes)."""
        uid = old.uid
        if self.tasks.get(uid) is old:
            self.tasks[uid] = new
        if self._affinity.get(uid) is old:
            self._affinity[uid] = new
        if self.ungrouped.get(uid) is old:
            self.ungrouped[uid] = new
        if old.job:
            waiting = self.waiting.get(old.job)
            if waiting is not None and waiting.get(uid) is old:
                waiting[uid] = new

    def forget_assumption(self, task_uid: str) -> bool:
        """A bind failed for good: the task is pending again and its node's resources are free."""
        with self._lock:
            task = self.tasks.get(task_uid)
            if task is None or task.status != TaskStatus.BINDING:
                return False
            self.revision += 1
            self._set_status(task, TaskStatus.PENDING, "")
            return True

    def forget_eviction(self, task_uid: str) -> bool:
        """An eviction was given up (a disruption budget kept refusing it): the pod, still there and
        not being deleted, holds its node again as the pod's own state says."""
        with self._lock:
            task = self.tasks.get(task_uid)
            if task is None or task.status != TaskStatus.RELEASING or task.pod.metadata.deletion_timestamp:
                return False
            self.revision += 1
            self._set_status(task, task_status_of(task.pod), task.node_name)
            return True

    def confirm_bound(self, task_uid: str) -> None:
        """The bind call succeeded; the watch will bring the pod's new state, but don't wait for it."""
        with self._lock:
            task = self.tasks.get(task_uid)
            if task is None or task.status != TaskStatus.BINDING:
                return
            self.revision += 1
            self._settled_changes += 1  # binding to bound on the same node: no decision changes
            self._node_revision += 1  # the task on its node is bound now, no longer binding
            new = task.clone()
            new.status = TaskStatus.BOUND
            self._replace_indexed(task, new)
            node = self.nodes.get(task.node_name)
            if node is not None and node.replace_task(task, new):
                self._node_changed(task.node_name)
            orphans = self._orphans_by_node.get(task.node_name)
            if orphans is not None and orphans.get(task.uid) is task:
                orphans[task.uid] = new
            job = self.jobs.get(task.job) if task.job else None
            if job is not None and job.tasks.get(task.uid) is task:
                job.swap_task(task, new)
                self._job_changed(task.job)


def _node_accounting(status: TaskStatus, node_name: str) -> int:
    """How a task of this status is held on its node (see ``_attach_to_node`` and
    ``NodeInfo.add_task``): 0 not at all, 1 releasing, 2 used."""
    if not node_name or status not in OCCUPYING_STATUSES:
        return 0
    return 1 if status == TaskStatus.RELEASING else 2


def _with_annotations(pod: Pod, annotations: dict[str, str]) -> Pod:
    """The pod with ``annotations`` added where it lacks them (pods are immutable structs)."""
    missing = {k: v for k, v in annotations.items() if pod.metadata.annotations.get(k) != v}
    if not missing:
        return pod
    merged = {**pod.metadata.annotations, **missing}
    return msgspec.structs.replace(pod, metadata=msgspec.structs.replace(pod.metadata, annotations=merged))


class _Handout:
    """What the slot's latest snapshot handed out, for its node copies' task loaders: its jobs
    (a loaded node's tasks are that session's own job copies) and the list the loaders note the
    loaded nodes in (``Snapshot.loaded_nodes``, the session's own). Set anew with every snapshot."""

    __slots__ = ("jobs", "loaded")

    def __init__(self) -> None:
        self.jobs: dict[str, JobInfo] = {}
        self.loaded: list[str] = []


class _TaskLoader:
    """Resolves a node's tasks, on first use only, to the session's own task copies, or to copies of
    the tasks the node held when it was copied (the cache never changes a task object once made, so
    what it held then is a plain value). Knows nothing of the cache."""

    __slots__ = ("handout", "held", "name")

    def __init__(self, held: dict[str, TaskInfo], handout: _Handout, name: str) -> None:
        self.held = held
        self.handout = handout
        self.name = name

    def __call__(self) -> dict[str, TaskInfo]:
        handout = self.handout
        handout.loaded.append(self.name)
        jobs = handout.jobs
        out: dict[str, TaskInfo] = {}
        for uid, task in self.held.items():
            job = jobs.get(task.job) if task.job else None
            own = job.tasks.get(uid) if job is not None else None
            out[uid] = own if own is not None else task.clone()
        return out
