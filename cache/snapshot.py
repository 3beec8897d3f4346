"""The snapshot: the per-cycle copy of the cache a session reads.

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
import time
from collections.abc import Callable, Iterator

import numpy as np

from caldera.cache.dra import DraCache
from caldera.framework.model import OCCUPYING_STATUSES, JobInfo, NodeInfo, QueueInfo, TaskInfo
from caldera.framework.nodetable import NodeTable
from caldera.framework.snapshot import Snapshot

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


class Snapshots(DraCache):
    """Making snapshots from the slots (see the module's docstring)."""

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
            node_usage=dict(self.node_usage),
            resource_quotas=dict(self.resource_quotas),
            pvcs=dict(self.pvcs),
            pvs=dict(self.pvs),
            storage_classes=dict(self.storage_classes),
            csinodes=dict(self.csinodes),
            dra=self.dra_view(),
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
        native = job.native
        copy.priority = self._priority_of(job.priority_class, native.spec.priority if native else None)
        for task in copy.tasks.values():
            if task.pod.spec.priority is None:
                task.priority = self._priority_of(task.pod.spec.priority_class_name)
        return copy
