"""Ingest: the cache's watch event handlers. Each ``upsert_*`` / ``delete_*`` applies one object of
one kind (pods, nodes, PodGroups, queues, priority classes, PodDisruptionBudgets, ResourceQuotas,
storage objects, HyperNodes) to the cache's state under its lock, and marks what it changed through the indexes
(``cache/indexes.py``). The fast paths of the updates that change little (``_update_in_place`` for a
pod whose status moved, ``_podgroup_status_only`` for a PodGroup whose status moved) leave the state
the full path leaves; ``settled_update`` says which updates cannot change a decision.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

import msgspec

from caldera.cache.indexes import GroupConflict, UnreadablePod
from caldera.cache.numa import NumaCache
from caldera.framework.model import (
    GROUP_NAME_ANNOTATION,
    OCCUPYING_STATUSES,
    JobInfo,
    NodeInfo,
    QueueInfo,
    TaskInfo,
    TaskStatus,
    native_job_key,
    node_ready,
    task_status_of,
    uncopied_claims_message,
)
from caldera.framework.objects import (
    CSINode,
    HyperNode,
    NativePodGroup,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
    Queue,
    ResourceQuota,
    StorageClass,
    Workload,
)
from caldera.framework.resource import Resource, ResourceError

log = logging.getLogger("caldera.cache")


#: statuses of a task placed on its node for good: moving among them changes no node's usage and no
#: gang's count of ready tasks
SETTLED_STATUSES = frozenset({TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING})
#: a task of one of our binds, in flight (Binding) or answered (Bound), before the watch brings it
_BIND_STATES = frozenset({TaskStatus.BINDING, TaskStatus.BOUND})


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
        # (a clone shares its requests: most updates compare one object with itself)
        and (old.resreq is new.resreq or old.resreq == new.resreq)
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


class Ingest(NumaCache):
    """The watch event handlers, one pair per kind (see the module's docstring)."""

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
        """The job of a pod: its ``spec.schedulingGroup.podGroupName`` (a ``scheduling.k8s.io/v1alpha2``
        PodGroup, under ``native_job_key``) wins over the Volcano ``scheduling.k8s.io/group-name``
        annotation (``_note_conflict`` reports a pod naming both)."""
        sg = pod.spec.scheduling_group
        if sg is not None and sg.pod_group_name:
            return native_job_key(pod.metadata.namespace, sg.pod_group_name)
        group = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION)
        if not group:
            return None
        return f"{pod.metadata.namespace}/{group}"

    def _note_conflict(self, task: TaskInfo) -> None:
        """Keep ``group_conflicts`` right for an added task: one log line when a pod starts naming
        both a native group and a Volcano PodGroup (the status updater sends the Warning Event)."""
        pod = task.pod
        sg = pod.spec.scheduling_group
        annotation = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION)
        if sg is None or not sg.pod_group_name or not annotation:
            if self.group_conflicts.pop(task.uid, None) is not None:
                self._problems_revision += 1
            return
        conflict = GroupConflict(task, sg.pod_group_name, annotation)
        before = self.group_conflicts.get(task.uid)
        if before is None or (before.native_group, before.volcano_group) != (sg.pod_group_name, annotation):
            log.warning("%s", conflict.message)
        self.group_conflicts[task.uid] = conflict
        self._problems_revision += 1

    # ------------------------------------------------------------------------------------------
    # pods
    # ------------------------------------------------------------------------------------------
    def upsert_pod(self, pod: Pod) -> None:
        with self._lock:
            self.revision += 1
            uid = pod.metadata.uid or f"{pod.metadata.namespace}/{pod.metadata.name}"
            old = self.tasks.get(uid)
            if old is not None:
                if pod.spec.node_name and not old.pod.spec.node_name and old.status in _BIND_STATES:
                    # one of our binds coming back: how late the watch brought it (cache/lag.py)
                    self.watch_lag.seen(uid, old.status == TaskStatus.BOUND)
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
                self._note_conflict(task)
                if pod.spec.resource_claims:
                    self._claim_pods.add(uid)
                    self._problems_revision += 1
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
            # the claims made from templates are named there: part of the template key
            or pod.status.resource_claim_statuses != old_pod.status.resource_claim_statuses
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
            self.watch_lag.forget(uid)
            if self.unreadable.pop(uid, None) is not None:
                self.revision += 1
                self._problems_revision += 1
            if self.numa_assumed:
                # Volcano's clearUnassignedNumaPod: a deleted pod's NUMA sets are free again
                self.forget_numa(uid)
            task = self.tasks.get(uid)
            if task is None:
                return
            self.revision += 1
            self._remove_task(task)

    def _remove_task(self, task: TaskInfo) -> None:
        self.tasks.pop(task.uid, None)
        self._affinity.pop(task.uid, None)
        if task.uid in self._claim_pods:
            self._claim_pods.discard(task.uid)
            self._problems_revision += 1
        if self.ungrouped.pop(task.uid, None) is not None:
            self._problems_revision += 1
        if self.group_conflicts.pop(task.uid, None) is not None:
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
                # A row of its own (a deleted node's, else a new one), written once below with the
                # rest (``NodeInfo(...)`` would write it a first time, and copy labels and taints).
                if self._free_rows:
                    row = self._free_rows.pop()
                    self.table.names[row] = name
                else:
                    row = self.table.add_row(name)
                info = NodeInfo.__new__(NodeInfo)
                info.name = name
                info.table = self.table
                info.row = row
                info.used = Resource()
                info.releasing = Resource()
                info.pipelined = Resource()
                info._tasks = {}
                info._tasks_loader = None
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
            self._adopt_tasks(key, job, old)
            self.jobs[key] = job
            self.podgroups[key] = pg
            self._job_changed(key)

    def _adopt_tasks(self, key: str, job: JobInfo, old: JobInfo | None) -> None:
        """A job built afresh takes its predecessor's tasks, or the pods that waited for its group."""
        if old is None and key in self.waiting:
            self._problems_revision += 1
            self._waiting_since.pop(key, None)
            self._podgroup_arrived(key)
        tasks: Iterable[TaskInfo] = (
            old.tasks.values() if old is not None else self.waiting.pop(key, {}).values()
        )
        for task in list(tasks):
            job.add_task(task)
        if old is not None:
            job.version = old.version + 1

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

    # ------------------------------------------------------------------------------------------
    # Kubernetes' own gang API: scheduling.k8s.io/v1alpha2 PodGroups and Workloads
    # ------------------------------------------------------------------------------------------
    def upsert_native_podgroup(self, pg: NativePodGroup) -> None:
        """A ``scheduling.k8s.io/v1alpha2`` PodGroup becomes (or updates) the job
        ``native_job_key(namespace, name)``; pods that waited for it join it. An update of its status
        alone (our conditions coming back) changes no decision. The job keeps the phase the cache
        assumed for it (the enqueue action's Inqueue): the object has no phase of its own."""
        with self._lock:
            key = native_job_key(pg.metadata.namespace, pg.metadata.name)
            self.revision += 1
            previous = self.native_podgroups.get(key)
            old = self.jobs.get(key)
            if (
                previous is not None
                and old is not None
                and previous.metadata.uid == pg.metadata.uid
                and previous.metadata.labels == pg.metadata.labels
                and previous.metadata.annotations == pg.metadata.annotations
                and previous.spec == pg.spec
            ):
                self._settled_changes += 1
                self.native_podgroups[key] = pg
                old.native = pg
                return
            self.native_podgroups[key] = pg
            self._rebuild_native(key, pg, old)

    def _rebuild_native(self, key: str, pg: NativePodGroup, old: JobInfo | None) -> None:
        job = JobInfo.from_native_podgroup(
            pg,
            self._priority_of(pg.spec.priority_class_name, pg.spec.priority),
            self.default_queue,
            self.workloads,
        )
        if job.uncopied_claims and (old is None or old.uncopied_claims != job.uncopied_claims):
            log.warning("%s", uncopied_claims_message(pg, job.uncopied_claims))
        self._adopt_tasks(key, job, old)
        if old is not None:
            job.phase = old.phase
        self.jobs[key] = job
        self._job_changed(key)

    def delete_native_podgroup(self, pg: NativePodGroup) -> None:
        """Forget a ``scheduling.k8s.io/v1alpha2`` PodGroup (unless a newer one of the name is held):
        its pods wait for it again."""
        with self._lock:
            key = native_job_key(pg.metadata.namespace, pg.metadata.name)
            current = self.native_podgroups.get(key)
            if current is None:
                return
            if pg.metadata.uid and current.metadata.uid and pg.metadata.uid != current.metadata.uid:
                return
            self.revision += 1
            del self.native_podgroups[key]
            job = self.jobs.pop(key, None)
            self._job_changed(key)
            if job is not None and job.tasks:
                self._wait_for_podgroup(key, dict(job.tasks))

    def upsert_workload(self, workload: Workload) -> None:
        """A Workload's templates (immutable) fill in what a PodGroup made from them leaves out: its
        PodGroups seen before it are built again."""
        self._workload(workload, True)

    def delete_workload(self, workload: Workload) -> None:
        self._workload(workload, False)

    def _workload(self, workload: Workload, present: bool) -> None:
        meta = workload.metadata
        with self._lock:
            self.revision += 1
            if present:
                self.workloads[f"{meta.namespace}/{meta.name}"] = workload
            else:
                self.workloads.pop(f"{meta.namespace}/{meta.name}", None)
            for key, pg in list(self.native_podgroups.items()):
                ref = pg.spec.pod_group_template_ref
                if (
                    pg.metadata.namespace == meta.namespace
                    and ref is not None
                    and ref.names()[0] == meta.name
                ):
                    self._rebuild_native(key, pg, self.jobs.get(key))

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

    def upsert_pdb(self, pdb: PodDisruptionBudget) -> None:
        with self._lock:
            self.revision += 1
            self.pdbs[f"{pdb.metadata.namespace}/{pdb.metadata.name}"] = pdb

    def delete_pdb(self, pdb: PodDisruptionBudget) -> None:
        with self._lock:
            self.revision += 1
            self.pdbs.pop(f"{pdb.metadata.namespace}/{pdb.metadata.name}", None)

    def upsert_resource_quota(self, quota: ResourceQuota) -> None:
        with self._lock:
            self.revision += 1
            self.resource_quotas[f"{quota.metadata.namespace}/{quota.metadata.name}"] = quota

    def delete_resource_quota(self, quota: ResourceQuota) -> None:
        with self._lock:
            self.revision += 1
            self.resource_quotas.pop(f"{quota.metadata.namespace}/{quota.metadata.name}", None)

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
