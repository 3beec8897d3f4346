"""Assumptions: what the cache takes for true before the API says so, and how it is confirmed or
forgotten. ``apply`` assumes a session's placements (their tasks Binding on their nodes, with the
annotations the binder will write, and the ResourceClaims allocated and reserved for them: see
``cache/dra.py``), its evictions (Releasing) and its enqueued jobs (Inqueue);
``confirm_bound`` records a bind the API accepted before the watch brings it back;
``forget_assumption`` puts a task whose bind failed for good back to Pending, ``forget_eviction``
gives a pod whose eviction was given up its node back. A task object is never changed: it is
replaced by a copy (``_set_status``, ``_replace_indexed``).
"""

from __future__ import annotations

from caldera.cache.dra import DraCache
from caldera.cache.ingest import _with_annotations
from caldera.cache.numa import NumaCache
from caldera.framework.model import OCCUPYING_STATUSES, TaskInfo, TaskStatus, task_status_of
from caldera.framework.numa import PodMeta
from caldera.framework.objects import Pod
from caldera.framework.result import Placement, SessionResult


class Assumptions(DraCache, NumaCache):
    """The assume / confirm / forget lifecycle (see the module's docstring)."""

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
            # The first ``dispatched`` were assumed while the session ran (``assume_placements``).
            self._assume(result.undispatched, assumed)
            if assumed:
                self.revision = before + 1
            for eviction in result.evictions:
                task = self.tasks.get(eviction.task.uid)
                if task is None or task.status not in OCCUPYING_STATUSES:
                    continue
                self._set_status(task, TaskStatus.RELEASING, task.node_name)
                self.revision = before + 1
        return assumed

    def assume_placements(self, placements: list[Placement]) -> list[TaskInfo]:
        """Assume placements a session handed over while it still runs (``Session.dispatch``), as
        ``apply`` assumes the rest of them at its close. Returns the cache tasks assumed."""
        assumed: list[TaskInfo] = []
        with self._lock:
            self._assume(placements, assumed)
            if assumed:
                self.revision += 1
        return assumed

    def _assume(self, placements: list[Placement], assumed: list[TaskInfo]) -> None:
        """Each placement's task Binding on its node, with what the binder will write, added to
        ``assumed`` (placements whose pod vanished or that are no longer pending are dropped)."""
        for placement in placements:
            task = self.tasks.get(placement.task.uid)
            if task is None or task.status != TaskStatus.PENDING or placement.node not in self.nodes:
                continue
            # What the binder will write on the pod (device assignments) is part of the
            # assumption: the next snapshot must see it before the watch brings it back.
            pod = _with_annotations(task.pod, placement.annotations) if placement.annotations else None
            assumed.append(self._set_status(task, TaskStatus.BINDING, placement.node, pod))
            if placement.claims:
                # The claims as the binder will write them: their devices are in use from now.
                self.assume_claims(task.name, task.uid, placement.claims)
            if placement.numa:
                # The NUMA sets the numa-aware plugin assigned: taken until the exporter says so.
                meta = task.pod.metadata
                self.assume_numa(placement.node, PodMeta(task.uid, meta.name, meta.namespace), placement.numa)

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
        """A bind failed for good: the task is pending again and its node's resources are free. The
        placement's claims are given up whatever the pod shows meanwhile (deleted, or bound after
        all): the binder took their reservations back."""
        with self._lock:
            self.forget_claims(task_uid)
            task = self.tasks.get(task_uid)
            if task is None or task.status != TaskStatus.BINDING:
                return False
            self.revision += 1
            self._set_status(task, TaskStatus.PENDING, "")
            if self.numa_assumed:
                self.forget_numa(task_uid)
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
        """The bind call succeeded; the watch will bring the pod's new state, but don't wait for it.
        The placement's claims were written before it, whatever the pod shows meanwhile (the watch
        may have shown it bound already)."""
        with self._lock:
            self.claim_confirmed(task_uid)
            task = self.tasks.get(task_uid)
            if task is None or task.status != TaskStatus.BINDING:
                return
            self.revision += 1
            self._settled_changes += 1  # binding to bound on the same node: no decision changes
            self.watch_lag.answered(task_uid)
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
