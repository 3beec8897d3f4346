"""drf: dominant resource fairness between jobs: the job with the smallest dominant share goes
first, and a job may preempt another only while its share stays at or below the other's.

With ``enableHierarchy: true`` (Volcano's hdrf, pkg/scheduler/plugins/drf/drf.go): queues carry a
path ``volcano.sh/hierarchy: root/eng/dev`` and weights ``volcano.sh/hierarchy-weights: 100/50/50``;
jobs are the leaves of that tree, each inner node's share is its children's allocations rescaled
to the smallest unsaturated child's dominant share, queues go in order of the first level where
their paths' weighted shares differ (saturated nodes last), and a queue may reclaim from another
while its weighted share stays below the other's after the move."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from caldera.framework.carry import JobGeneration, carry_user, job_generation
from caldera.framework.model import JobInfo, QueueInfo, TaskInfo, TaskStatus
from caldera.framework.plugin import Plugin
from caldera.framework.resource import Resource
from caldera.plugins.helpers import exact_range, safe_sub, share, whole

if TYPE_CHECKING:
    from caldera.framework.result import Event
    from caldera.framework.session import Session

PERMIT = 1
SHARE_DELTA = 0.000001
HIERARCHY_ANNOTATION = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS_ANNOTATION = "volcano.sh/hierarchy-weights"


class HNode:
    """A node of the hdrf tree: an inner node (a hierarchy level) or a leaf (a job)."""

    __slots__ = ("allocated", "children", "name", "parent", "request", "saturated", "share", "weight")

    def __init__(self, name: str, weight: float = 1.0, parent: HNode | None = None) -> None:
        self.name = name
        self.weight = weight
        self.parent = parent
        self.allocated = Resource()
        self.request = Resource()
        self.share = 0.0
        self.saturated = False
        self.children: dict[str, HNode] | None = {}

    def clone(self, parent: HNode | None = None) -> HNode:
        node = HNode(self.name, self.weight, parent)
        node.allocated = self.allocated.clone()
        node.request = self.request.clone()
        node.share = self.share
        node.saturated = self.saturated
        node.children = (
            None if self.children is None else {k: c.clone(node) for k, c in self.children.items()}
        )
        return node


def queue_path(queue: QueueInfo) -> tuple[list[str], list[str]]:
    ann = queue.queue.metadata.annotations if queue.queue is not None else {}
    return ann.get(HIERARCHY_ANNOTATION, "").split("/"), ann.get(HIERARCHY_WEIGHTS_ANNOTATION, "").split("/")


def _saturated(allocated: Resource, request: Resource, demanding: set[str]) -> bool:
    # Volcano's resourceSaturated
    for name, value in allocated.items():
        if value <= 0:
            continue
        want = request.get(name)
        if want and value >= want:
            return True
        if name not in demanding and want:
            return True
    return False


def total_key(total: Resource) -> tuple[float, float, float, tuple[tuple[str, float], ...]]:
    """The cluster total exactly (bit for bit), to know whether a carried share still holds."""
    return (total.cpu, total.memory, total.pods, tuple(sorted(total.scalars.items())))


class _DrfOpen:
    """What a session's drf opened with (``framework.carry``), per job uid: its copy's token, its
    allocation and share, whether it may hold anything; the cluster total the shares were taken of,
    and the snapshot the jobs came from. Never changed once carried."""

    __slots__ = ("allocated", "holding", "seq", "shares", "tokens", "total_key")

    def __init__(self, total_key: tuple[object, ...]) -> None:
        self.total_key = total_key
        self.seq = 0
        self.tokens: dict[str, JobGeneration | None] = {}
        self.allocated: dict[str, Resource] = {}
        self.shares: dict[str, float] = {}
        self.holding: set[str] = set()


class _DrfClose:
    """What a session's drf closed with (``framework.carry``): per job uid that counted, its namespace
    and the allocation it added; per namespace, how many jobs counted and their sum; the jobs the
    session's events changed; its snapshot; whether every figure is a whole number in the exact
    range (else it is not carried). Taken by the next close, which updates it in place."""

    __slots__ = ("counted", "exact", "namespaces", "seq", "touched")

    def __init__(self) -> None:
        self.counted: dict[str, tuple[str, Resource]] = {}
        self.namespaces: dict[str, _NamespaceSum] = {}
        self.seq = 0
        self.touched: set[str] = set()
        self.exact = True


carry_user(_DrfOpen, "drf: each job's allocation and dominant share at session open")
carry_user(_DrfClose, "drf: each namespace's summed allocation at session close")


class _NamespaceSum:
    """How many of a namespace's jobs count, and the sum of their allocations."""

    __slots__ = ("jobs", "total")

    def __init__(self, first: Resource) -> None:
        self.jobs = 1
        self.total = first.clone()


class DrfPlugin(Plugin):
    name: ClassVar[str] = "drf"
    #: set by the plugin option ``enableHierarchy: true`` (config/conf.py), as Volcano reads it
    arguments_schema: ClassVar[dict[str, type]] = {"enableHierarchy": bool}

    def on_session_open(self, ssn: Session) -> None:
        from caldera.framework.session import EventHandler

        self.ssn = ssn
        self.hierarchy = self.arguments.bool("enableHierarchy", False)
        self.total = ssn.total_resource
        self.allocated: dict[str, Resource] = {}
        self.shares: dict[str, float] = {}
        #: the jobs whose allocation may be other than nothing (the others are left out at close)
        self.holding: set[str] = set()
        #: the jobs whose allocation this session's events changed (even if back to what it was)
        self.touched: set[str] = set()
        self._open_jobs(ssn)

        def job_order(left: JobInfo, right: JobInfo) -> int:
            ls, rs = self.shares.get(left.uid, 0.0), self.shares.get(right.uid, 0.0)
            if ls == rs:
                return 0
            return -1 if ls < rs else 1

        def preemptable(preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            mine = self.allocated.get(preemptor.job, Resource()).clone().add(preemptor.resreq)
            ls = share(mine, self.total)
            out = []
            for t in preemptees:
                theirs = self.allocated.get(t.job)
                rs = share(safe_sub(theirs, t.resreq), self.total) if theirs is not None else 0.0
                if ls < rs or abs(ls - rs) <= SHARE_DELTA:
                    out.append(t)
            return out, PERMIT

        def on_allocate(event: Event) -> None:
            self._change(event.task, add=True)

        def on_deallocate(event: Event) -> None:
            self._change(event.task, add=False)

        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_preemptable_fn(self.name, preemptable)
        ssn.add_event_handler(EventHandler(allocate=on_allocate, deallocate=on_deallocate))
        if self.hierarchy:
            self.root = HNode("root")
            self.total_allocated = Resource()
            for job in ssn.jobs.values():
                if job.queue in ssn.queues:
                    self.total_allocated.add(self.allocated[job.uid])
                    self._update_tree(self.root, self.total_allocated, job, self.allocated[job.uid])
            ssn.add_queue_order_fn(self.name, self._queue_order)
            ssn.add_reclaimable_fn(self.name, self._reclaimable)

    def _open_jobs(self, ssn: Session) -> None:
        """Each job's allocation (its allocated statuses and pipelined tasks) and dominant share.

        Taken over from the last session's opening figures (``framework.carry``) for every job copy
        unchanged since: the same vector (never changed in place: ``_change`` replaces it) and, when
        the cluster total is the same to the bit, the same share. When this session's snapshot
        follows the last one's, only the jobs it names as changed are looked at
        (``Session.jobs_changed_since``); otherwise every job is checked by its generation
        (``framework.carry.job_generation``)."""
        total = self.total
        key = total_key(total)
        carried = ssn.carry.carried(_DrfOpen)
        previous = carried if isinstance(carried, _DrfOpen) else None
        jobs = ssn.jobs
        opened: _DrfOpen | None = None
        #: the jobs redone from the last session's opening figures, and that session's snapshot
        #: (None: every job was looked at); ``on_session_close`` redoes the same ones
        self._redone: set[str] | None = None
        self._opened_from = previous.seq if previous is not None else 0
        if previous is not None:
            changed = ssn.jobs_changed_since(previous.seq)
            if changed is not None:
                opened = self._open_changed(jobs, previous, changed, key)
        if opened is None:
            opened = self._open_each(jobs, previous, key)
        opened.seq = ssn.snapshot.seq
        ssn.carry.keep(_DrfOpen, opened)
        # the session's own (changed by its events); the opening figures stay as carried
        self.allocated = dict(opened.allocated)
        self.shares = dict(opened.shares)
        self.holding = set(opened.holding)

    def _open_changed(
        self, jobs: dict[str, JobInfo], previous: _DrfOpen, changed: set[str], key: tuple[object, ...]
    ) -> _DrfOpen | None:
        """The last opening figures with the changed, new and gone jobs redone (None: they do not
        add up to this session's jobs, so every job is checked instead)."""
        total = self.total
        opened = _DrfOpen(key)
        tokens, allocated, shares, holding = (
            dict(previous.tokens),
            dict(previous.allocated),
            dict(previous.shares),
            set(previous.holding),
        )
        redo = changed | (previous.tokens.keys() - jobs.keys())
        for uid in redo:
            job = jobs.get(uid)
            if job is None:
                tokens.pop(uid, None)
                allocated.pop(uid, None)
                shares.pop(uid, None)
                holding.discard(uid)
                continue
            alloc, held = self._allocation_of(job)
            tokens[uid] = job_generation(job)
            allocated[uid] = alloc
            shares[uid] = share(alloc, total) if held else 0.0
            if held:
                holding.add(uid)
            else:
                holding.discard(uid)
        if len(allocated) != len(jobs):
            return None
        if previous.total_key != key:
            shares = {uid: share(allocated[uid], total) if uid in holding else 0.0 for uid in allocated}
        opened.tokens, opened.allocated, opened.shares, opened.holding = tokens, allocated, shares, holding
        self._redone = redo
        return opened

    def _open_each(
        self, jobs: dict[str, JobInfo], previous: _DrfOpen | None, key: tuple[object, ...]
    ) -> _DrfOpen:
        """Every job, in job order; a job whose copy is unchanged (the same generation,
        ``framework.carry.job_generation``) keeps its figures."""
        total = self.total
        same_total = previous is not None and previous.total_key == key
        old_tokens = previous.tokens if previous is not None else {}
        opened = _DrfOpen(key)
        tokens, allocated, shares, holding = opened.tokens, opened.allocated, opened.shares, opened.holding
        for job in jobs.values():
            uid = job.uid
            token = job_generation(job)
            if previous is not None and token is not None and old_tokens.get(uid) == token:
                alloc = previous.allocated[uid]
                held = uid in previous.holding
                value = previous.shares[uid] if same_total else (share(alloc, total) if held else 0.0)
            else:
                alloc, held = self._allocation_of(job)
                value = share(alloc, total) if held else 0.0
            tokens[uid] = token
            allocated[uid] = alloc
            shares[uid] = value
            if held:
                holding.add(uid)
        return opened

    @staticmethod
    def _allocation_of(job: JobInfo) -> tuple[Resource, bool]:
        """(allocation, whether it may be other than nothing). job.allocated is kept by the job for
        its allocated statuses: only pipelined tasks are added, O(pipelined) rather than O(tasks)."""
        held = job.allocated
        if not (held.cpu or held.memory or held.pods or held.scalars or job.count(TaskStatus.PIPELINED)):
            # nothing held (a pending job): its share is 0 whatever the total, no need to work it out
            return Resource(), False
        alloc = held.clone()
        for t in job.tasks_in(TaskStatus.PIPELINED):
            alloc.add(t.resreq)
        return alloc, True

    def _change(self, task: TaskInfo, add: bool) -> None:
        alloc = self.allocated.get(task.job)
        if alloc is None:
            return
        self.touched.add(task.job)
        self.holding.add(task.job)
        # a new vector, never the old one changed: the old one may be last cycle's, carried (_open_jobs)
        if add:
            self.allocated[task.job] = alloc = alloc.clone().add(task.resreq)
        else:
            self.allocated[task.job] = alloc = safe_sub(alloc, task.resreq)
        self.shares[task.job] = share(alloc, self.total)
        if self.hierarchy:
            job = self.ssn.jobs.get(task.job)
            if job is not None and job.queue in self.ssn.queues:
                if add:
                    self.total_allocated.add(task.resreq)
                else:
                    self.total_allocated = safe_sub(self.total_allocated, task.resreq)
                self._update_tree(self.root, self.total_allocated, job, alloc)

    # -- hierarchical DRF (Volcano's hdrf) ----------------------------------------------------------
    def _update_tree(self, root: HNode, total_allocated: Resource, job: JobInfo, alloc: Resource) -> None:
        """Volcano's ``UpdateHierarchicalShare``: (re)place the job's leaf, then recompute bottom up."""
        demanding = {n for n, v in self.total.items() if total_allocated.get(n) < v}
        paths, weights = queue_path(self.ssn.queues[job.queue])
        node = root
        for i in range(1, len(paths)):
            assert node.children is not None
            child = node.children.get(paths[i])
            if child is None:
                try:
                    weight = float(weights[i]) if i < len(weights) else 1.0
                except ValueError:
                    weight = 1.0
                child = HNode(paths[i], max(weight, 1.0), node)
                node.children[paths[i]] = child
            node = child
        leaf = HNode(job.uid, 1.0, node)
        leaf.children = None
        leaf.allocated = alloc
        leaf.share = share(alloc, self.total)
        leaf.request = job.total_request.clone()
        assert node.children is not None
        node.children[job.uid] = leaf
        self._recompute(root, demanding)

    def _recompute(self, node: HNode, demanding: set[str]) -> None:
        """Volcano's ``updateHierarchicalShare``."""
        if node.children is None:
            node.share = share(node.allocated, self.total)
            node.saturated = _saturated(node.allocated, node.request, demanding)
            return
        smallest = 1.0
        for child in node.children.values():
            self._recompute(child, demanding)
            if child.share != 0 and not child.saturated:
                smallest = min(smallest, share(child.allocated, self.total))
        total = Resource()
        saturated = True
        for child in node.children.values():
            if not child.saturated:
                saturated = False
            if child.share != 0:
                if child.saturated:
                    total.add(child.allocated)
                else:
                    total.add(child.allocated.clone().multiply(smallest / child.share))
        node.allocated = total
        node.share = share(total, self.total)
        node.saturated = saturated

    def _compare_queues(self, root: HNode, left: QueueInfo, right: QueueInfo) -> float:
        """Volcano's ``compareQueues``: walk both paths while the weighted shares tie."""
        lpaths, _ = queue_path(left)
        rpaths, _ = queue_path(right)
        lnode: HNode | None = root
        rnode: HNode | None = root
        depth = min(len(lpaths), len(rpaths))
        for i in range(depth):
            if lnode is None or rnode is None:
                return 0.0
            if not lnode.saturated and rnode.saturated:
                return -1.0
            if lnode.saturated and not rnode.saturated:
                return 1.0
            lw, rw = lnode.share / lnode.weight, rnode.share / rnode.weight
            if lw != rw:
                return lw - rw
            if i < depth - 1:
                lnode = (lnode.children or {}).get(lpaths[i + 1])
                rnode = (rnode.children or {}).get(rpaths[i + 1])
        return 0.0

    def _queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        got = self._compare_queues(self.root, left, right)
        return -1 if got < 0 else (1 if got > 0 else 0)

    def _reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        """Volcano's hdrf ReclaimableFn: on a copy of the tree, a reclaimee is a victim while the
        reclaimer's queue, holding the task, stays below the reclaimee's queue without it."""
        ssn = self.ssn
        victims: list[TaskInfo] = []
        ljob = ssn.jobs.get(reclaimer.job)
        lqueue = ssn.queues.get(ljob.queue) if ljob is not None else None
        if ljob is None or lqueue is None:
            return victims, PERMIT
        root = self.root.clone()
        total_allocated = self.total_allocated.clone().add(reclaimer.resreq)
        self._update_tree(root, total_allocated, ljob, self.allocated[ljob.uid].clone().add(reclaimer.resreq))
        for t in reclaimees:
            rjob = ssn.jobs.get(t.job)
            rqueue = ssn.queues.get(rjob.queue) if rjob is not None else None
            if rjob is None or rqueue is None or rjob.uid not in self.allocated:
                continue
            less = safe_sub(total_allocated, t.resreq)
            self._update_tree(root, less, rjob, safe_sub(self.allocated[rjob.uid], t.resreq))
            got = self._compare_queues(root, lqueue, rqueue)
            self._update_tree(root, total_allocated, rjob, self.allocated[rjob.uid].clone())
            if got < 0:
                victims.append(t)
        return victims, PERMIT

    def on_session_close(self, ssn: Session) -> None:
        """The job shares, and every namespace's dominant share: the sum of the allocations of its
        jobs that hold something, as a share of the cluster (a namespace with no such job is not
        named). The sums are taken over from the last session's close (``framework.carry``) when this
        session's figures were opened from that session's (``_open_changed``): only the jobs
        redone at open and those the two sessions' events changed can count otherwise than they
        did there. Whole-number quantities (``EXACT_BELOW``) make a sum less some parts plus others
        the sum made afresh, so the shares equal those of a sum over every job."""
        # For the binary's volcano_job_share and volcano_namespace_share gauges.
        ssn.report.job_shares = self.shares
        carried = ssn.carry.carried(_DrfClose)
        closed: _DrfClose | None = None
        if isinstance(carried, _DrfClose) and self._redone is not None and carried.seq == self._opened_from:
            closed = self._close_changed(ssn, carried, self._redone | self.touched | carried.touched)
        if closed is None:
            closed = self._close_each(ssn)
        total = self.total
        ssn.report.namespace_shares = {ns: share(s.total, total) for ns, s in closed.namespaces.items()}
        if closed.exact:
            closed.seq = ssn.snapshot.seq
            closed.touched = self.touched
            ssn.carry.keep(_DrfClose, closed)

    def _counts(self, ssn: Session, uid: str) -> Resource | None:
        """The allocation the job adds to its namespace's sum (None: nothing)."""
        alloc = self.allocated.get(uid)
        if alloc is None or uid not in self.holding or uid not in ssn.jobs or alloc.is_empty():
            return None
        return alloc

    def _close_each(self, ssn: Session) -> _DrfClose:
        """Every job, in job order."""
        closed = _DrfClose()
        counted, namespaces = closed.counted, closed.namespaces
        exact = True
        jobs = ssn.jobs
        holding = self.holding
        for uid, alloc in self.allocated.items():  # in job order, as the sums were always made
            if uid not in holding:
                continue
            job = jobs.get(uid)
            if job is None or alloc.is_empty():
                continue
            counted[uid] = (job.namespace, alloc)
            exact = exact and whole(alloc)
            entry = namespaces.get(job.namespace)
            if entry is None:
                namespaces[job.namespace] = _NamespaceSum(alloc)
            else:
                entry.jobs += 1
                entry.total.add(alloc)
        closed.exact = exact and all(exact_range(entry.total) for entry in namespaces.values())
        return closed

    def _close_changed(self, ssn: Session, carried: _DrfClose, redo: set[str]) -> _DrfClose | None:
        """The last close's sums with the jobs of ``redo`` taken out as they counted there and put
        in as they count now (None: a figure left the exact range; the sums are made afresh)."""
        counted, namespaces = carried.counted, carried.namespaces
        jobs = ssn.jobs
        for uid in redo:
            old = counted.get(uid)
            alloc = self._counts(ssn, uid)
            if old is not None and old[1] is alloc:
                continue
            if alloc is not None and not whole(alloc):
                return None
            if old is not None:
                ns = old[0]
                was = namespaces[ns]
                was.jobs -= 1
                if was.jobs:
                    was.total.sub(old[1])  # exact (EXACT_BELOW): it is part of the sum
                else:
                    del namespaces[ns]
                del counted[uid]
            if alloc is not None:
                ns = jobs[uid].namespace
                counted[uid] = (ns, alloc)
                entry = namespaces.get(ns)
                if entry is None:
                    entry = namespaces[ns] = _NamespaceSum(alloc)
                else:
                    entry.jobs += 1
                    entry.total.add(alloc)
                if not exact_range(entry.total):
                    return None
        return carried
