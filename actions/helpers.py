"""What the actions share: which jobs a cycle considers, vectorised resource fit on node rows,
kube-scheduler style explanations, ordered heaps, and the evict-then-pipeline step of preempt
and reclaim."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

import numpy as np

from caldera.framework.carry import JobCarry, JobGeneration, carry_user, job_generation
from caldera.framework.model import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus, parse_preemptable
from caldera.framework.resource import Resource
from caldera.framework.session import Session
from caldera.framework.statement import Statement

T = TypeVar("T")

#: Statuses of tasks that may be evicted by preempt and reclaim.
EVICTABLE_STATUSES = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND})


class OrderedHeap(Generic[T]):
    """Items kept in a session order (``ssn.job_key`` ...); the order is asked again at every push.

    A sorted list rather than a binary heap: jobs mostly arrive already in order (creation time),
    which an adaptive sort checks in about n comparisons instead of n log n, and every comparison
    here walks the plugins' order functions."""

    def __init__(self, key: Callable[[T], Any], items: Iterable[T] = ()) -> None:
        self._key = key
        self._items: list[T] = sorted(items, key=key)
        self._head = 0

    def push(self, item: T) -> None:
        if self._head > 64 and self._head * 2 > len(self._items):
            del self._items[: self._head]
            self._head = 0
        bisect.insort_right(self._items, item, lo=self._head, key=self._key)

    def pop(self) -> T:
        item = self._items[self._head]
        self._head += 1
        return item

    def __len__(self) -> int:
        return len(self._items) - self._head

    def __bool__(self) -> bool:
        return self._head < len(self._items)

    def __iter__(self) -> Iterator[T]:
        """The items not yet popped, in order."""
        return iter(self._items[self._head :])


def pending_jobs(ssn: Session) -> Iterable[JobInfo]:
    """The session's jobs that may have a pending task, in the session's job order: those the
    snapshot names as pending (``Session.pending_candidates``; a set lookup per job instead of a
    count), or every job when it names none."""
    candidates = ssn.pending_candidates()
    if candidates is None:
        return ssn.jobs.values()
    return [job for job in ssn.jobs.values() if job.uid in candidates]


def job_considered(ssn: Session, job: JobInfo) -> QueueInfo | None:
    """The job's queue when this cycle may schedule the job (queue known and open; job let in by
    enqueue, or enqueue not configured, as in Volcano; reached by allocate before the cycle's
    budget ran out, ``Session.unreached``: preempt and reclaim never evict for a job allocate has
    not tried on the free room), else None."""
    queue = ssn.queues.get(job.queue)
    if queue is None or not queue.is_open or job.uid in ssn.unreached:
        return None
    if job.phase == "Pending" and ssn.enqueue_ran:
        return None
    return queue


# ------------------------------------------------------------------------------------------------
# What a cycle may take over from the last one
# ------------------------------------------------------------------------------------------------
class SessionWorld:
    """Everything a job's attempt in allocate reads besides the job itself and its queue's plugin
    state: the conf (tiers and configurations, by identity: a reload makes new ones), the nodes
    and the pods on them (the snapshot's ``node_revision``), the nodes' real load (``node_usage``),
    queues, priority classes, hypernodes, disruption budgets and storage objects (by identity: the cache replaces an object it updates).
    Two sessions with equal worlds see the same cluster apart from the jobs (and the count of pods
    with inter-pod affinity terms, which plugins read)."""

    __slots__ = (
        "affinity_pods",
        "configurations",
        "dra",
        "node_revision",
        "numa",
        "objects",
        "outside",
        "priority_classes",
        "queues",
        "tiers",
        "usage",
    )

    def __init__(self, ssn: Session) -> None:
        snap = ssn.snapshot
        self.tiers = ssn.tiers
        self.configurations = ssn.configurations
        self.node_revision = snap.node_revision
        #: a plugin answers from outside the snapshot (Session.outside_answers): never the same world
        self.outside = bool(ssn.outside_answers)
        # pods with inter-pod (anti-)affinity terms, pending ones included (plugins size work by it)
        self.affinity_pods = snap.affinity_pods
        # DRA classes, slices and claims: one immutable value the cache makes anew when any changes
        self.dra = snap.dra
        # nodes' real load (the usage plugin): its revision and which nodes' data is fresh
        self.usage = snap.node_usage.token() if snap.node_usage is not None else None
        # Numatopologies (with the cache's assumptions): one immutable value, made anew on any change
        self.numa = snap.numa
        self.priority_classes = dict(snap.priority_classes)
        # an implicit queue (no object yet) is rebuilt every snapshot: compared by its fields
        self.queues = {
            name: q.queue if q.queue is not None else (q.weight, q.state, q.priority, q.creation)
            for name, q in ssn.queues.items()
        }
        self.objects: tuple[dict[str, Any], ...] = (
            snap.hypernodes,
            snap.pdbs,
            snap.pvcs,
            snap.pvs,
            snap.storage_classes,
            snap.csinodes,
        )

    @property
    def known(self) -> bool:
        return self.node_revision is not None and not self.outside

    def same(self, other: SessionWorld) -> bool:
        if not (
            self.known
            and self.tiers is other.tiers
            and (
                self.configurations is other.configurations
                or not (self.configurations or other.configurations)
            )
            and self.node_revision == other.node_revision
            and self.affinity_pods == other.affinity_pods
            and self.dra is other.dra
            and self.usage == other.usage
            and self.numa is other.numa
            and self.priority_classes == other.priority_classes
            and self.queues.keys() == other.queues.keys()
        ):
            return False
        theirs = other.queues
        for name, token in self.queues.items():
            old = theirs[name]
            if token is not old and not (isinstance(token, tuple) and token == old):
                return False
        return all(_same_objects(a, b) for a, b in zip(self.objects, other.objects, strict=True))


def _same_objects(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if len(a) != len(b):
        return False
    get = b.get
    return all(get(k) is v for k, v in a.items())


class _Failure:
    __slots__ = ("answers", "fit_errors", "job_fit_error", "queue_state", "token", "tried")

    def __init__(
        self,
        token: JobGeneration,
        queue_state: tuple[object, ...] | None,
        answers: tuple[bool, ...],
        fit_errors: dict[str, str],
        job_fit_error: str,
        tried: int,
    ) -> None:
        self.token = token
        self.queue_state = queue_state
        self.answers = answers
        self.fit_errors = fit_errors
        self.job_fit_error = job_fit_error
        self.tried = tried


class _FailureCarry:
    """Kept in ``Session.carry`` from one cycle to the next: the world the failures were found in,
    and per job uid the failure."""

    __slots__ = ("failures", "world")

    def __init__(self, world: SessionWorld, failures: dict[str, _Failure]) -> None:
        self.world = world
        self.failures = failures


class FailureMemo:
    """Jobs allocate tried in vain, kept for the next cycle. Allocate tries every job every cycle,
    as Volcano's does (``allocateResources`` in pkg/scheduler/actions/allocate/allocate.go pops
    every queue's jobs and gives each ``allocateResourcesForTasks``); over a backlog that cannot
    fit, each try ends the same way: fit errors recorded, nothing placed. This memo takes that
    outcome over instead of trying again, when nothing it depended on can have changed:

    - the job is the same (``framework.carry.job_generation``: same tasks, statuses, phase, priority);
    - the cluster is the same (``SessionWorld``: conf, nodes and pods on them, queues, ...);
    - its queue lets each of its pending tasks be placed, or not, as it did then
      (``Session.allocatable``, the only queue-level question a try asks): known at once when the
      queue's plugin state is the same (``Session.queue_state``: proportion's deserved and
      allocated share), else asked again task by task (jobs arriving in a queue move its
      deserved share, mostly without changing any answer);
    - nothing changed in this session before its turn, nor in the one that recorded it
      (``Session.changes`` zero both times), so both tries would start from the same state;
    - the try changed nothing (no task placed, even for a while) and left the job not ready.

    Then allocate would decide exactly what it decided last cycle, and the job gets last cycle's
    fit errors, in the same order. A freed node, a queue or conf change, a job changed or any
    placement earlier in the cycle sends the job through the full path again."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.world = SessionWorld(ssn)
        carried = ssn.carry.carried(FailureMemo)
        self.previous: dict[str, _Failure] = {}
        if isinstance(carried, _FailureCarry) and self.world.same(carried.world):
            self.previous = carried.failures
        self.current: dict[str, _Failure] = {}
        # what this cycle finds is what the next one may take over (once this cycle is applied)
        ssn.carry.keep(FailureMemo, _FailureCarry(self.world, self.current))
        self._queue_states: dict[str, tuple[object, ...] | None] = {}
        self._by_request = ssn.allocatable_by_request
        self.replayed = 0

    @classmethod
    def of(cls, ssn: Session) -> FailureMemo:
        return ssn.memo(FailureMemo, lambda: cls(ssn))

    def _queue_state(self, name: str) -> tuple[object, ...] | None:
        # asked only while the session is unchanged (changes == 0): its answer holds for the session
        try:
            return self._queue_states[name]
        except KeyError:
            queue = self.ssn.queues.get(name)
            state = self._queue_states[name] = None if queue is None else self.ssn.queue_state(queue)
            return state

    def replay(self, job: JobInfo) -> int | None:
        """At the job's turn: last cycle's failure put on the job when it holds (see the class);
        returns how many tasks that try went through, else None (try the job in full)."""
        if not self.fresh(job):
            return None
        old = self.previous.get(job.uid)
        if old is None:
            return None
        token = job_generation(job)
        if token is None or token != old.token:
            return None
        state = self._queue_state(job.queue)
        if (state is None or state != old.queue_state) and self._answers(job) != old.answers:
            return None
        job.fit_errors = dict(old.fit_errors)
        job.job_fit_error = old.job_fit_error
        self.current[job.uid] = old
        self.replayed += 1
        return old.tried

    def fresh(self, job: JobInfo) -> bool:
        """Whether a try of the job now starts from the state of the session's start: nothing
        changed in the session yet, no failure recorded on the job yet."""
        return not self.ssn.changes and self.world.known and not job.fit_errors and not job.job_fit_error

    def record(self, job: JobInfo, fresh: bool, stmt: Statement, tried: int) -> None:
        """After a full try that started ``fresh``: remember it when it may be taken over next
        cycle (see the class)."""
        ssn = self.ssn
        if not fresh or ssn.changes or len(stmt):
            return
        token = job_generation(job)
        if token is None or ssn.job_ready(job):
            return
        answers = self._answers(job)
        if answers is None:
            return
        self.current[job.uid] = _Failure(
            token, self._queue_state(job.queue), answers, dict(job.fit_errors), job.job_fit_error, tried
        )

    def _answers(self, job: JobInfo) -> tuple[bool, ...] | None:
        """Whether the job's queue lets each of its pending tasks be placed now (in the job's task
        order, which the token fixes). Asked only while the session is unchanged."""
        queue = self.ssn.queues.get(job.queue)
        if queue is None:
            return None
        allocatable = self.ssn.allocatable
        if not self._by_request:
            return tuple(allocatable(queue, t) for t in job.tasks_in(TaskStatus.PENDING))
        # equal requests, equal answers (Session.allocatable_by_request): asked once per request
        seen: dict[object, bool] = {}
        out = []
        for t in job.tasks_in(TaskStatus.PENDING):
            req = t.resreq
            key = (req.cpu, req.memory, req.pods, tuple(req.scalars.items()) if req.scalars else ())
            answer = seen.get(key)
            if answer is None:
                answer = seen[key] = allocatable(queue, t)
            out.append(answer)
        return tuple(out)


def gated_message(job: JobInfo) -> str:
    """``2/4 tasks in gang are waiting for scheduling gates: pod a (gates: x, y), pod b (gates: x)``."""
    gated = sorted(job.gated_tasks(), key=lambda t: t.name)
    shown = ", ".join(f"pod {t.name} (gates: {', '.join(t.gates)})" for t in gated[:5])
    more = f" and {len(gated) - 5} more" if len(gated) > 5 else ""
    return (
        f"{len(gated)}/{len(job.tasks)} tasks in gang are waiting for scheduling gates: {shown}{more}; "
        f"pod group is not ready, {job.ready_task_num()} ready, {job.min_available} minAvailable"
    )


def job_valid(ssn: Session, job: JobInfo) -> bool:
    result = ssn.job_valid(job)
    if result is not None:
        job.job_fit_error = result.message or result.reason
        return False
    # A gang that needs gated pods waits whole: nothing of it is placed, no room is taken by
    # preempt or reclaim (Volcano's actions skip ``task.SchGated`` tasks; here the gang as a whole).
    if _waits_for_gates(ssn, job):
        job.job_fit_error = gated_message(job)
        return False
    return True


class _GateAnswers:
    """``JobInfo.waits_for_gates`` per job, kept for the next cycle (``framework.carry``): it
    depends on the job's tasks alone, so a copy of the same generation has last cycle's answer."""


carry_user(_GateAnswers, "whether each job waits for scheduling gates")
carry_user(FailureMemo, "allocate's vain tries of jobs, with the world they were made in")


def _waits_for_gates(ssn: Session, job: JobInfo) -> bool:
    generation = job_generation(job)
    if generation is None:
        return job.waits_for_gates()
    answers: JobCarry[bool] = ssn.memo(_GateAnswers, lambda: JobCarry(ssn.carry, _GateAnswers))
    found, waits = answers.get(job, generation)
    if found:
        return bool(waits)
    waits = job.waits_for_gates()
    answers.put(job, generation, waits)
    return waits


def pending_tasks(ssn: Session, job: JobInfo, best_effort: bool = False) -> list[TaskInfo]:
    """The job's pending tasks with (or without) requests, in task order; gated pods are left out
    (kube-scheduler's SchedulingGates PreEnqueue, Volcano's ``if task.SchGated { continue }``)."""
    tasks = [
        t
        for t in job.tasks_in(TaskStatus.PENDING)
        if t.best_effort == best_effort and not t.pod.spec.scheduling_gates
    ]
    if len(tasks) > 1:
        tasks.sort(key=ssn.task_key)
    return tasks


def fit_mask(ssn: Session, task: TaskInfo, rows: np.ndarray | None, future: bool = True) -> np.ndarray:
    """Which of ``rows`` have room for the task now (``future=False``) or once releasing pods
    are gone and pipelined ones placed (``future=True``)."""
    return ssn.table.fits(task.init_resreq, rows, future)


def resource_reasons(ssn: Session, task: TaskInfo, rows: np.ndarray) -> dict[str, int]:
    """For rows that lack room, the first missing resource, in kube-scheduler's words."""
    counts: dict[str, int] = {}
    left = np.ones(len(rows), dtype=bool)
    for reason, fails in ssn.table.shortfalls(task.init_resreq, rows).items():
        fails = fails & left
        n = int(fails.sum())
        if n:
            counts[reason] = counts.get(reason, 0) + n
        left &= ~fails
    return counts


def explain(ssn: Session, task: TaskInfo, rows: np.ndarray | None = None) -> str:
    """'0/N nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint.'"""
    rows = ssn.all_rows if rows is None else rows
    counts = ssn.explain_predicates(task, rows)
    passed = ssn.feasible_rows(task, rows)
    for reason, n in resource_reasons(ssn, task, passed).items():
        counts[reason] = counts.get(reason, 0) + n
    if not counts:
        return f"0/{len(rows)} nodes are available."
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    return f"0/{len(rows)} nodes are available: {parts}."


def ordered_rows(ssn: Session, task: TaskInfo, rows: np.ndarray) -> list[int]:
    """Rows best first by node score; ties by node name."""
    if len(rows) == 0:
        return []
    scores = ssn.node_scores(task, rows)
    rank = ssn.placement.name_rank[rows]
    order = np.lexsort((rank, -scores))
    return [int(r) for r in rows[order]]


def evictable_by_row(ssn: Session) -> dict[int, list[TaskInfo]]:
    """Per node row, its tasks that could ever be victims (running or bound, marked preemptable or
    unmarked, which Volcano's ``GetPodPreemptable`` takes as preemptable): built once per session,
    so a preemptor does not scan every pod of every node."""
    index = ssn.evictable_by_row
    if index is None:
        index = {}
        for node in ssn.node_list:
            tasks = [t for t in node.tasks.values() if t.status in EVICTABLE_STATUSES and t.preemptable]
            if tasks:
                index[node.row] = tasks
        ssn.evictable_by_row = index
    return index


def preemption_allowed(task: TaskInfo) -> bool:
    """A pod with ``preemptionPolicy: Never`` never evicts anything. Volcano:
    ``taskEligibleToPreempt`` in pkg/scheduler/actions/preempt/preempt.go, and the same check in
    ``Execute`` of pkg/scheduler/actions/reclaim/reclaim.go."""
    return task.pod.spec.preemption_policy != "Never"


def victim_order_key(ssn: Session, preemptor: TaskInfo) -> Callable[[TaskInfo], Any]:
    """Victims first-to-go first. Volcano: ``Session.BuildVictimsPriorityQueue``
    (pkg/scheduler/framework/session_plugins.go): within a job, the reverse of task order; tasks
    whose job is gone first; across queues, ``VictimQueueOrderFn``; else the reverse of job order
    with the reverse of task order as a tie-break."""
    jobs = ssn.jobs
    queues = ssn.queues
    pjob = jobs.get(preemptor.job)
    pqueue = queues.get(pjob.queue) if pjob is not None else None

    def before(left: TaskInfo, right: TaskInfo) -> bool:
        if left.job == right.job:
            return ssn.task_order(right, left)
        lj, rj = jobs.get(left.job), jobs.get(right.job)
        if lj is None or rj is None:
            if lj is None and rj is None:
                return ssn.task_order(right, left)
            return lj is None
        if pqueue is not None and lj.queue != rj.queue:
            lq, rq = queues.get(lj.queue), queues.get(rj.queue)
            if lq is not None and rq is not None:
                return ssn.victim_queue_order(lq, rq, pqueue)
        if ssn.job_order(rj, lj):
            return True
        if ssn.job_order(lj, rj):
            return False
        return ssn.task_order(right, left)

    return ssn._cmp_key(before)


def job_preemptable_for_gang(job: JobInfo) -> bool:
    """Volcano ``IsJobPreemptableForGangEviction`` (pkg/scheduler/actions/utils/util.go): a job
    whose PodGroup is marked ``volcano.sh/preemptable: "false"`` is never a gang victim; unmarked,
    it may be."""
    pg = job.podgroup
    return pg is None or parse_preemptable(
        pg.metadata.annotations, pg.metadata.labels, True, f"podgroup {job.uid}"
    )


def whole_gang(job: JobInfo, candidate: Callable[[TaskInfo], bool]) -> list[TaskInfo] | None:
    """Every running task of ``job`` when each one may be a victim (preemptable, passes
    ``candidate``), else None. A victim its gang cannot spare takes the whole gang with it, wherever
    its tasks run, so that a gang is never left partly running: Volcano 1.15's "whole" bundle
    (``CreateJobBundles`` in pkg/scheduler/actions/utils/bundle.go); the tasks a gang can spare
    (its surplus over minAvailable) go first, one at a time, as its "safe" bundle."""
    if not job_preemptable_for_gang(job):
        return None
    running = list(job.tasks_in(*EVICTABLE_STATUSES))
    if not running or not all(t.preemptable and candidate(t) for t in running):
        return None
    return running


def evict_and_pipeline(
    ssn: Session,
    stmt: Statement,
    task: TaskInfo,
    candidate: Callable[[TaskInfo], bool],
    choose: Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]],
    reason: str,
    without_eviction: bool = True,
    queue: QueueInfo | None = None,
    scored: bool = True,
    whole_needs_priority: bool = False,
) -> bool:
    """Make room for ``task`` and pipeline it there.

    A node whose future idle already holds it needs no victim (taken only when
    ``without_eviction``: the caller says whether the task may simply be placed, e.g. its queue is
    within its share). Otherwise nodes are tried best score first (``scored``; reclaim takes them
    in node order as Volcano's reclaim does); on each, the victims the plugins choose among the
    node's tasks that pass ``candidate`` are evicted lowest-ordered first until the task fits: its
    queue allows it (when ``queue`` is given: Volcano's ``preemptorFitsOnNode``), the node's future
    idle holds it and its predicates pass. Victims of a gang are taken from its surplus first; a
    victim its gang cannot spare takes the whole gang (``GangLedger``); a victim of a native PodGroup
    whose ``disruptionMode`` is ``PodGroup`` always takes its whole group, even where one pod would
    do (KEP-5710 "Preemption unit"; ``JobInfo.disrupt_whole``). A node where the task still
    does not fit is left untouched; with ``whole_needs_priority`` (preempt) a gang is taken whole
    only for a preemptor job of higher priority. A node where an event handler refuses the
    pipeline (``Statement.pipeline``) is left untouched too. Returns False (and changes nothing)
    when no node works."""
    if not preemption_allowed(task):
        return False
    index = evictable_by_row(ssn)
    if not index and not without_eviction:
        return False  # no victim anywhere and no free room to take: nothing to look at
    rows = ssn.feasible_rows(task, resources=False)
    need = task.init_resreq
    node_list = ssn.node_list
    if without_eviction and len(rows):
        free = rows[ssn.table.fits(need, rows)]
        while len(free):
            best = ssn.best_row(task, free, ssn.node_scores(task, free))
            if stmt.pipeline(task, node_list[best].name) is None:
                return True
            # an event handler refused that node: the next one (Volcano's preempt tries node by node)
            free = free[free != best]
    if not index:
        return False
    # a task needing what evictions release (DRA devices) may take a node where it does not fit now:
    # those predicates are left out here and decide in the dry run on each node (``fits``)
    releasing = ssn.releasable_applies(task)
    if releasing:
        rows = ssn.feasible_rows(task, resources=False, releasable=False)
    if not len(rows):
        return False
    rows = rows[np.isin(rows, np.fromiter(index, dtype=np.intp, count=len(index)))]
    order = ordered_rows(ssn, task, rows) if scored else sorted(int(r) for r in rows)
    key = victim_order_key(ssn, task)

    def fits(node: NodeInfo) -> bool:
        if queue is not None and not ssn.allocatable(queue, task):
            return False
        if not need.less_equal(node.future_idle):
            return False
        return bool(ssn.feasible_mask(task, np.asarray([node.row], dtype=np.intp), resources=False)[0])

    mine = ssn.jobs.get(task.job)
    whole_ok: dict[str, list[TaskInfo] | None] = {}

    def whole_of(job: JobInfo) -> list[TaskInfo] | None:
        """The job's running pods when the gang may be taken whole for this preemptor, else None.
        Volcano 1.15 gangpreempt (``selectDomainBundles``) takes a gang whole only for a preemptor
        job of higher priority; a job of min member 1 is one pod, as in the legacy preempt."""
        if job.uid not in whole_ok:
            allowed = (
                not whole_needs_priority
                or job.min_available <= 1
                or (mine is not None and mine.priority > job.priority)
            )
            whole_ok[job.uid] = whole_gang(job, candidate) if allowed else None
        got = whole_ok[job.uid]
        return None if got is None else [t for t in got if t.status in EVICTABLE_STATUSES]

    def holds_with(node: NodeInfo, evicted: list[TaskInfo]) -> bool:
        """Whether the node's future idle plus what ``evicted`` hold can hold the task."""
        room = node.future_idle
        for t in evicted:
            room.add(t.resreq)
        return need.less_equal(room)

    for r in order:
        node = node_list[r]
        preemptees = [
            t
            for t in index[r]
            if t.node_name == node.name and t.status in EVICTABLE_STATUSES and candidate(t)
        ]
        if not preemptees:
            continue
        # The victims are some of these candidates: when the node's future idle plus all of them
        # cannot hold the task, no choice of victims passes the check below (ValidateVictims), and
        # the plugins' votes (the costly part of a preemptor that fits nowhere) are not asked.
        if not holds_with(node, preemptees):
            continue
        chosen = choose(task, preemptees)
        # keep only the victims the gang rule lets go: a job's surplus, a gang already broken, or
        # a gang that may be taken whole
        victims = []
        spare: dict[str, int] = {}
        for v in chosen:
            job = ssn.jobs.get(v.job)
            if job is None:
                victims.append(v)
                continue
            if job.disrupt_whole:
                # a native group of ``disruptionMode: PodGroup`` goes whole or not at all (KEP-5710)
                if whole_of(job) is not None:
                    victims.append(v)
                continue
            left = spare.get(job.uid)
            if left is None:
                left = job.ready_task_num() - job.min_available
            if left > 0:
                spare[job.uid] = left - 1
                victims.append(v)
            elif left < 0 or whole_of(job) is not None:
                spare[job.uid] = left
                victims.append(v)
        if not victims:
            continue
        # Volcano ``util.ValidateVictims``: the node's future idle plus every victim must hold the task
        if not holds_with(node, victims):
            continue
        victims.sort(key=key)
        node_stmt = ssn.statement()
        ok = fits(node)
        units: list[tuple[list[TaskInfo], bool]] = []
        for v in victims:
            if ok:
                break
            if v.status not in EVICTABLE_STATUSES:
                continue  # already taken with its whole gang
            job = ssn.jobs.get(v.job)
            if job is None or (not job.disrupt_whole and job.ready_task_num() != job.min_available):
                # surplus over the minimum, or a gang already below it: "safe", one task at a time
                unit, is_whole = [v], False
            else:
                whole = whole_of(job)
                if not whole:
                    continue
                unit, is_whole = whole, True
            for t in unit:
                node_stmt.evict(t, reason)
            units.append((unit, is_whole))
            ok = fits(node)
        if ok and releasing and len(units) > 1:
            node_stmt = _reprieve(ssn, node_stmt, units, functools.partial(fits, node), reason)
        # Volcano's reclaimForTask pipelines on a node with reclaimees even when no eviction is
        # needed there; preempt (``queue`` given) takes free room only through ``without_eviction``
        if ok and (len(node_stmt) or queue is None):
            # an event handler may refuse: the node's evictions are undone, the next node is tried
            # (Volcano's preempt and reclaim: "Pipeline failed: discard all evictions for this node")
            if node_stmt.pipeline(task, node.name) is None:
                stmt.merge(node_stmt)
                return True
        node_stmt.discard()
    return False


def _reprieve(
    ssn: Session,
    stmt: Statement,
    units: list[tuple[list[TaskInfo], bool]],
    fits: Callable[[], bool],
    reason: str,
) -> Statement:
    """For a preemptor needing what evictions release (DRA devices): spare every victim the task fits
    without, as kube-scheduler's ``SelectVictimsOnNode`` reprieves victims (pkg/scheduler/framework/
    preemption, default_preemption.go), so a pod holding no device the preemptor can use (and not
    needed for cpu or memory) is not evicted. ``units`` are the evictions in the order made (a pod, or
    a whole gang: True), lowest first until the task fitted, so the last is needed; the others are
    tried highest first. A pod whose gang is also taken whole here stays evicted (sparing it would
    leave that gang partly running). Returns the statement of the evictions kept (applied)."""
    taken_whole = {u[0].job for u, whole in units if whole}
    kept = [u for u, _ in units]

    def evict_all(victims: list[list[TaskInfo]]) -> Statement:
        out = ssn.statement()
        for u in victims:
            for t in u:
                out.evict(t, reason)
        return out

    for unit, whole in reversed(units[:-1]):
        if not whole and unit[0].job in taken_whole:
            continue
        stmt.discard()
        trial = [u for u in kept if u is not unit]
        stmt = evict_all(trial)
        if fits():
            kept = trial
            continue
        stmt.discard()
        stmt = evict_all(kept)
    return stmt


def resreq_of(tasks: Iterable[TaskInfo]) -> Resource:
    out = Resource()
    for t in tasks:
        out.add(t.resreq)
    return out
