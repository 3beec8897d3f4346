"""A Session: one scheduling cycle over a snapshot, with the callback points plugins register.

Tier semantics follow Volcano's (``framework/tier_rules.py`` says how each kind of answer combines
across tiers); what a closed session hands back is in ``framework/result.py``.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from caldera.framework.callbacks import (
    BulkExplain,
    BulkPredicate,
    BulkScore,
    CallbackPoint,
    CallbackRegistry,
    EventHandler,
    EvictionContext,
    ValidateResult,
)
from caldera.framework.carry import Kept, carry_user
from caldera.framework.dra.view import ClaimAllocation
from caldera.framework.model import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from caldera.framework.nodetable import NodeTable
from caldera.framework.placement import PlacementEngine
from caldera.framework.plugin import Plugin
from caldera.framework.result import Event, Eviction, Placement, QueueShare, SessionReport, SessionResult
from caldera.framework.snapshot import Snapshot
from caldera.framework.tier_rules import (
    ABSTAIN,
    PERMIT,
    REJECT,
    tiered_order,
    tiered_victim_tasks,
    tiered_victims,
    tiered_vote,
)
from caldera.framework.tiers import PluginOption, Tier
from caldera.framework.topology import GradientRequest, NodeGroup, binpack_scores, gradients

if TYPE_CHECKING:
    from caldera.framework.statement import Statement
    from caldera.framework.subjobs import SubJob

log = logging.getLogger("caldera.session")

T = TypeVar("T")

#: victims whose refusal is noted, per job (what ``explain`` shows)
MAX_REFUSALS = 20
#: seconds between two hand-overs of committed placements while a session runs (``Session.dispatch``)
DISPATCH_EVERY = 0.01

__all__ = [
    "ABSTAIN",
    "PERMIT",
    "REJECT",
    "BulkExplain",
    "BulkPredicate",
    "BulkScore",
    "EventHandler",
    "Session",
    "ValidateResult",
    "close_session",
    "open_session",
]


class _NodeSpecMemo:
    """Values derived from the node specs alone, kept for the generation of the specs."""

    __slots__ = ("generation", "values")

    def __init__(self, generation: int, values: dict[object, Any]) -> None:
        self.generation = generation
        self.values = values


carry_user(_NodeSpecMemo, "values sessions derive from the node specs (Session.node_memo)")


class Session(CallbackRegistry):
    """One cycle. Actions read jobs/nodes/queues and change them only through statements."""

    def __init__(
        self,
        snapshot: Snapshot,
        tiers: list[Tier],
        plugins: dict[str, Plugin] | None = None,
        configurations: dict[str, Any] | None = None,
        carry: Mapping[object, Any] | None = None,
        standing: dict[object, Any] | None = None,
    ) -> None:
        super().__init__(tiers)
        self.started = time.monotonic()
        self.snapshot = snapshot
        self.jobs: dict[str, JobInfo] = snapshot.jobs
        self.nodes: dict[str, NodeInfo] = snapshot.nodes
        self.table: NodeTable = snapshot.table
        self.node_list: list[NodeInfo] = snapshot.node_list
        self.queues: dict[str, QueueInfo] = snapshot.queues
        self.priority_classes = snapshot.priority_classes
        self.plugins: dict[str, Plugin] = plugins or {}
        self.configurations = configurations or {}
        self.all_rows = self.table.all_rows
        self.table.log = []
        self.placements: list[Placement] = []
        #: where committed placements go while the session still runs (None: all at its close).
        #: A committed statement is final (later actions never undo it), so its placements can be
        #: bound at once, as Volcano's Statement.Commit dispatches each task to its binder
        #: (pkg/scheduler/framework/statement.go, ``allocate`` → ``ssn.cache.AddBindTask``): the
        #: bindings of a long cycle's first gangs overlap with the rest of the cycle
        self.dispatch: Callable[[list[Placement]], None] | None = None
        #: how many of ``placements`` (a prefix: they are only appended) went to ``dispatch``
        self.dispatched = 0
        self._next_dispatch = 0.0
        #: pod annotations plugins decide with a placement (set in allocate handlers, dropped in
        #: deallocate handlers); a committed placement carries its task's entry to the binder
        self.task_annotations: dict[str, dict[str, str]] = {}
        #: the ResourceClaims allocated or reserved for a placed task (set in the DRA allocate
        #: handler, dropped in its deallocate handler); a committed placement carries them
        self.task_claims: dict[str, list[ClaimAllocation]] = {}
        #: the NUMA sets assigned a placed task (set in the numa-aware plugin's allocate handler,
        #: dropped in its deallocate handler); a committed placement carries them
        self.task_numa: dict[str, dict[str, frozenset[int]]] = {}
        self.evictions: list[Eviction] = []
        #: the plugins that keep queue figures (proportion, capacity), in conf order: each gives the
        #: figures as they stand, from those of the ones before it (``queue_shares_now``)
        self.queue_figures_fns: list[Callable[[dict[str, QueueShare]], dict[str, QueueShare]]] = []
        # Every ready node's allocatable, summed over the table's column (not a loop over nodes).
        self.total_resource = self.table.total(self.table.allocatable, self.table.ready)
        self.plugin_errors: list[str] = []
        self.report = SessionReport()
        # -- state actions share within the session --------------------------------------------------
        #: enqueue ran this session (a Pending job not let in was decided on, not forgotten)
        self.enqueue_ran = False
        #: per template, the table version and reason it was last found to fit nowhere (allocate)
        self.unfit_templates: dict[bytes, tuple[int, str]] = {}
        #: per node row, the tasks that could be victims (preempt, reclaim; built on first use)
        self.evictable_by_row: dict[int, list[TaskInfo]] | None = None
        #: jobs whose soft topology requirement found no group: allocated cluster-wide this session
        self.topology_fell_back: set[str] = set()
        #: per task uid, why a victim function chose it (rescheduling; said by shuffle's log and Event)
        self.victim_reasons: dict[str, str] = {}
        self._memo: dict[object, Any] = {}
        #: plugins whose answers depend on something outside the snapshot (an HTTP extender): what
        #: this cycle found is then not taken over by the next (allocate's memo of vain tries)
        self.outside_answers: set[str] = set()
        #: preemptor job → (action, victim namespace/name) → the plugin whose victim function refused
        #: that victim this session (``Session.preemptable``, ``reclaimable``, ``unified_evictable``)
        self.victim_refusals: dict[str, dict[tuple[str, str], str]] = {}
        #: what the last applied cycle kept for this one, and what this one keeps for the next
        #: (``framework.carry``; nothing is offered to a lone session)
        self.carry = Kept(carry)
        #: what plugins keep for the scheduler's life and decide by (``Session.standing``)
        self._standing: dict[object, Any] = standing if standing is not None else {}
        #: allocate and deallocate events fired so far (any change of the session's state)
        self.changes = 0
        #: plugin → a function giving what the plugin's queue-level answers (allocatable, overused)
        #: depend on for a queue, as a value to compare across cycles (see ``queue_state``)
        self.queue_state_fns: dict[str, Callable[[QueueInfo], object]] = {}
        #: plugins whose allocatable function reads nothing of a task but its request
        self.allocatable_by_request_plugins: set[str] = set()
        self._node_memo: dict[object, Any] = {}
        #: ``time.perf_counter()`` after which allocate takes no further job this cycle (None: no
        #: limit; the binary's ``--cycle-budget``). Jobs it did not reach are named in ``unreached``:
        #: later actions leave them alone (``actions.helpers.job_considered``) and nothing is
        #: recorded against them; the next cycle takes them in order.
        self.deadline: float | None = None
        self.unreached: set[str] = self.report.unreached
        #: the jobs allocate already took in the pass this cycle goes on with (empty: the cycle
        #: begins a pass). A pass is allocate's walk of every pending job in order; when the budget
        #: cuts a cycle short, the next cycles go on with the jobs the pass has not taken before any
        #: is taken again (``SessionReport.pass_taken``; the binary's loop hands it on).
        self.pass_taken: frozenset[str] = frozenset()
        specs = snapshot.node_specs
        if specs:
            memo = self.carry.carried(_NodeSpecMemo)
            if isinstance(memo, _NodeSpecMemo) and memo.generation == specs:
                self._node_memo = dict(memo.values)
            self.carry.keep(_NodeSpecMemo, _NodeSpecMemo(specs, self._node_memo))
        self.placement = PlacementEngine(self, self.table, self.node_list, self._node_memo)
        # The placement engine's answers, as session methods (bound once: no per-call indirection).
        self.feasible_mask = self.placement.feasible_mask
        self.feasible_rows = self.placement.feasible_rows
        self.explain_predicates = self.placement.explain_predicates
        self.node_scores = self.placement.node_scores
        self.best_row = self.placement.best_row
        self.best_placement = self.placement.best_placement
        self.static_mask = self.placement.static_mask
        self.releasable_applies = self.placement.releasable_applies

    @property
    def checks_resources(self) -> bool:
        """Whether an enabled predicate already checks free resources (so actions need not)."""
        return self.placement.checks_resources

    def memo(self, key: object, build: Callable[[], T]) -> T:
        """A value built once per session and shared by whoever asks with the same ``key`` (an object
        of the asker's own, such as its class or function: never a string two modules could share
        by accident)."""
        try:
            return self._memo[key]  # type: ignore[no-any-return]
        except KeyError:
            value = self._memo[key] = build()
            return value

    def standing(self, key: object, build: Callable[[], T]) -> T:
        """State a plugin keeps for the life of the scheduler (the loop's, ``SchedulerLoop.standing``;
        a lone session's own) and decides by: the rescheduling plugin's time of its last run and
        tdm's of its last victim search, which Volcano keeps in package variables
        (``lastRescheduleTime``, ``lastEvictAt``). Unlike ``carry`` it is no
        reuse of something the session could compute afresh: without it the decisions differ, so
        it is neither dropped after a failed cycle nor checked by the twin harness. ``key`` as for
        :meth:`memo`; the value is the plugin's to change in place."""
        try:
            return self._standing[key]  # type: ignore[no-any-return]
        except KeyError:
            value = self._standing[key] = build()
            return value

    def add_queue_figures_fn(self, fn: Callable[[dict[str, QueueShare]], dict[str, QueueShare]]) -> None:
        """A plugin that keeps queue figures: ``fn`` gives them as they stand now, given those of
        the plugins before it in the conf (it may keep some of theirs)."""
        self.queue_figures_fns.append(fn)

    def queue_shares_now(self) -> dict[str, QueueShare]:
        """Every queue's figures as the plugins that keep them have them now (what they put in
        ``report.queue_shares`` at the session's close): for a reader before the close, such as the
        explanation of a job its queue's quota held."""
        shares: dict[str, QueueShare] = {}
        for fn in self.queue_figures_fns:
            shares = fn(shares)
        return shares

    def placements_committed(self) -> None:
        """A statement appended placements: hand the ones not yet handed over to ``dispatch``, at
        most every DISPATCH_EVERY seconds (the rest go with the session's result)."""
        dispatch = self.dispatch
        if dispatch is None:
            return
        now = time.perf_counter()
        if now < self._next_dispatch:
            return
        self._next_dispatch = now + DISPATCH_EVERY
        batch = self.placements[self.dispatched :]
        if batch:
            self.dispatched = len(self.placements)
            dispatch(batch)

    def release(self) -> None:
        """Drop every reference the session holds, once it is closed and its result taken. Plugins
        refer to the session and it to them: without this, a cycle's objects would wait for the
        garbage collector instead of being freed by reference counting (scheduler/memory.py)."""
        vars(self).clear()

    def node_memo(self, key: object, build: Callable[[], T]) -> T:
        """Like :meth:`memo`, for a value derived from the nodes' specs alone (names and rows, labels,
        taints, readiness, schedulability, allocatable: never usage, pods, jobs or arguments, unless
        they are part of ``key``): kept across cycles for the snapshot's generation of the node
        specs (``framework.carry``). The value is shared with later sessions, so it must never be
        changed in place (arrays: read-only)."""
        try:
            return self._node_memo[key]  # type: ignore[no-any-return]
        except KeyError:
            value = self._node_memo[key] = build()
            return value

    def node_memo_replace(self, key: object, value: Any) -> None:
        """Put ``value`` under ``key`` in place of what :meth:`node_memo` holds there (a value that
        depends on more than the node specs and found stale by its user); kept like the others."""
        self._node_memo[key] = value

    def pending_candidates(self) -> Collection[str] | None:
        """The uids of the jobs that had a pending task or were in phase Pending when the session
        opened (a session never makes a task pending), when the snapshot's builder keeps that index;
        None otherwise (then every job is a candidate). In no particular order: a caller whose
        result depends on order sorts, or walks ``jobs`` and tests membership."""
        return self.snapshot.pending_jobs

    def jobs_changed_since(self, seq: int) -> set[str] | None:
        """The uids of the jobs whose copies may differ from those the session over snapshot ``seq``
        opened with (changed, added or removed since), when this session's snapshot is the next one
        of the same source; None otherwise (then a carried figure is checked job by job, with
        ``framework.carry.job_generation``). Never to be changed."""
        snapshot = self.snapshot
        if not seq or snapshot.changed_jobs is None or snapshot.seq != seq + 1:
            return None
        return snapshot.changed_jobs

    # -- order -----------------------------------------------------------------------------------
    _order = staticmethod(tiered_order)

    def job_order(self, left: JobInfo, right: JobInfo) -> bool:
        """True when ``left`` goes before ``right``: plugins first, then creation time, then uid."""
        result = self._order(self.job_order_fns, left, right)
        if result:
            return result < 0
        if left.creation != right.creation:
            return left.creation < right.creation
        return left.uid < right.uid

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> bool:
        result = self._order(self.queue_order_fns, left, right)
        if result:
            return result < 0
        if left.creation != right.creation:
            return left.creation < right.creation
        return left.name < right.name

    def victim_queue_order(self, left: QueueInfo, right: QueueInfo, preemptor: QueueInfo) -> bool:
        """True when victims of ``left`` go before those of ``right`` (actions/helpers.py victim
        order). Volcano: ``Session.VictimQueueOrderFn``, falling back to the reverse of queue order."""
        for level in self.victim_queue_order_fns.levels():
            for fn in level:
                result = fn(left, right, preemptor)
                if result != 0:
                    return result < 0
        return not self.queue_order(left, right)

    def task_order(self, left: TaskInfo, right: TaskInfo) -> bool:
        result = self._order(self.task_order_fns, left, right)
        if result:
            return result < 0
        if left.creation != right.creation:
            return left.creation < right.creation
        return left.uid < right.uid

    @staticmethod
    def _cmp_key(less: Callable[[Any, Any], bool]) -> Callable[[Any], Any]:
        def cmp(a: Any, b: Any) -> int:
            if less(a, b):
                return -1
            if less(b, a):
                return 1
            return 0

        return functools.cmp_to_key(cmp)

    def _three_way_key(
        self, point: CallbackPoint[Callable[[Any, Any], int]], tie: Callable[[Any], Any]
    ) -> Callable[[Any], Any]:
        """A sort key giving the order of the matching ``*_order`` method, with one walk of the
        plugins' order functions per comparison instead of up to two (sorting pending work is most
        of a cycle over a large backlog)."""
        order = self._order

        def cmp(a: Any, b: Any) -> int:
            result = order(point, a, b)
            if result:
                return result
            ta, tb = tie(a), tie(b)
            return (ta > tb) - (ta < tb)

        return functools.cmp_to_key(cmp)

    @property
    def job_key(self) -> Callable[[JobInfo], Any]:
        """A sort key giving job order (for ``sorted`` and heaps)."""
        return self._three_way_key(self.job_order_fns, _creation_uid)

    @property
    def task_key(self) -> Callable[[TaskInfo], Any]:
        return self._three_way_key(self.task_order_fns, _creation_uid)

    @property
    def queue_key(self) -> Callable[[QueueInfo], Any]:
        return self._three_way_key(self.queue_order_fns, _creation_name)

    # -- predicates --------------------------------------------------------------------------------
    def pre_predicate(self, task: TaskInfo) -> str | None:
        for fn in self.pre_predicate_fns.flat():
            reason = fn(task)
            if reason:
                return str(reason)
        return None

    def predicate(self, task: TaskInfo, node: NodeInfo) -> str | None:
        """All predicates on one node: None when the task fits, else the first failing reason."""
        return self.placement.predicate(task, node)

    # -- job-level votes ---------------------------------------------------------------------------
    def job_ready(self, job: JobInfo) -> bool:
        for fn in self.job_ready_fns.flat():
            if not fn(job):
                return False
        return True

    _vote = staticmethod(tiered_vote)

    def job_pipelined(self, job: JobInfo) -> bool:
        return self._vote(self.job_pipelined_fns, job)

    def job_enqueueable(self, job: JobInfo) -> bool:
        return self._vote(self.job_enqueueable_fns, job)

    def job_enqueued(self, job: JobInfo) -> None:
        for fn in self.job_enqueued_fns.flat():
            fn(job)

    def job_valid(self, job: JobInfo) -> ValidateResult | None:
        for fn in self.job_valid_fns.flat():
            result = fn(job)
            if result is not None and not result.passed:
                return result
        return None

    def job_starving(self, job: JobInfo) -> bool:
        for level in self.job_starving_fns.levels():
            found = False
            for fn in level:
                found = True
                if not fn(job):
                    return False
            if found:
                return True
        return False

    # -- sub-jobs and HyperNodes (Volcano's pkg/scheduler/framework/session_plugins.go) -------------
    def sub_job_ready(self, job: JobInfo, sub: SubJob) -> bool:
        """``Session.SubJobReady``: a job without sub-group policies asks job ready; else every
        enabled sub-job ready function must pass."""
        if job.sub_groups is None:
            return self.job_ready(job)
        return all(fn(sub) for fn in self.sub_job_ready_fns.flat())

    def sub_job_pipelined(self, job: JobInfo, sub: SubJob) -> bool:
        """``Session.SubJobPipelined``: votes as job pipelined does, tier by tier."""
        if job.sub_groups is None:
            return self.job_pipelined(job)
        return self._vote(self.sub_job_pipelined_fns, sub)  # type: ignore[arg-type]

    def sub_job_order(self, left: SubJob, right: SubJob) -> bool:
        """``Session.SubJobOrderFn``: plugins first, then MatchIndex, then uid."""
        result = self._order(self.sub_job_order_fns, left, right)
        if result:
            return result < 0
        if left.match_index != right.match_index:
            return left.match_index < right.match_index
        return left.uid < right.uid

    @property
    def sub_job_key(self) -> Callable[[SubJob], Any]:
        return self._three_way_key(self.sub_job_order_fns, lambda s: (s.match_index, s.uid))

    def hypernode_scores(self, sub: SubJob, groups: list[NodeGroup]) -> dict[str, float]:
        """``Session.HyperNodeOrderMapFn`` summed per group as ``util.PrioritizeHyperNodes`` does
        (a group no plugin scores has 0). When no plugin registers one (network-topology-aware
        not configured), the plugin's own score (``framework.topology.binpack_scores``): Caldera
        places by topology without the plugin, as it always has; a plugin that registered it with
        ``enabledHyperNodeOrder: false`` leaves every group at 0 (ties go by name)."""
        point = self.hypernode_order_fns
        if not point.registered():
            return binpack_scores(self.table, list(sub.tasks.values()), groups)
        total = dict.fromkeys((g.name for g in groups), 0.0)
        for fn in point.flat():
            for name, score in fn(sub, groups).items():
                if name in total:
                    total[name] += score
        return total

    def hypernode_order_on(self) -> bool:
        """Whether groups are scored at all (see ``hypernode_scores``)."""
        return not self.hypernode_order_fns.registered() or bool(self.hypernode_order_fns)

    def hypernode_gradients(self, request: GradientRequest) -> list[list[NodeGroup]] | None:
        """``Session.HyperNodeGradientForJobFn`` / ``ForSubJobFn``: the first enabled plugin's
        gradients; registered but switched off (``enabledHyperNodeGradient: false``): the root
        alone, so no tier bounds the placement; registered by no plugin: the plugin's own
        (``framework.topology.gradients``), as for ``hypernode_scores``."""
        point = self.hypernode_gradient_fns
        if not point.registered():
            return gradients(request)
        for fn in point.flat():
            return fn(request)
        return [[request.root]]

    # -- victims -----------------------------------------------------------------------------------
    _victims = staticmethod(tiered_victims)

    def preemptable(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> list[TaskInfo]:
        refused: dict[str, str] = {}
        out = self._victims(self.preemptable_fns, preemptor, preemptees, refused)
        if refused:
            self._note_refusals("preempt", preemptor.job, preemptees, refused)
        return out

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> list[TaskInfo]:
        refused: dict[str, str] = {}
        out = self._victims(self.reclaimable_fns, reclaimer, reclaimees, refused)
        if refused:
            self._note_refusals("reclaim", reclaimer.job, reclaimees, refused)
        return out

    def unified_evictable(self, ctx: EvictionContext, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Volcano's ``Session.UnifiedEvictable``: the gang actions' victim filter, with the tier
        and intersection rules of Preemptable/Reclaimable."""
        refused: dict[str, str] = {}
        out = self._victims(self.unified_evictable_fns, ctx, candidates, refused)
        if refused:
            self._note_refusals(ctx.kind, ctx.job.uid, candidates, refused)
        return out

    def _note_refusals(
        self, action: str, job: str, candidates: list[TaskInfo], refused: dict[str, str]
    ) -> None:
        """Which plugin refused which victim of the job's preemption or reclaim (``explain``), the
        first ``MAX_REFUSALS`` per job."""
        noted = self.victim_refusals.setdefault(job, {})
        for task in candidates:
            plugin = refused.get(task.uid)
            if plugin is None:
                continue
            key = (action, task.key)
            if key not in noted and len(noted) < MAX_REFUSALS:
                noted[key] = plugin

    def victim_tasks(self, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Volcano's ``Session.VictimTasks``: the tasks the plugins select for eviction among the
        candidates (the shuffle action), narrowed by the guards (``tier_rules.tiered_victim_tasks``)."""
        return tiered_victim_tasks(self.victim_tasks_fns, self.victim_guard_fns, candidates)

    # -- queue-level -------------------------------------------------------------------------------
    def add_queue_state_fn(self, name: str, fn: Callable[[QueueInfo], object]) -> None:
        self.queue_state_fns[name] = fn

    def declare_allocatable_by_request(self, name: str) -> None:
        """The plugin's allocatable function reads nothing of a task but its request (``resreq``)."""
        self.allocatable_by_request_plugins.add(name)

    @property
    def allocatable_by_request(self) -> bool:
        """Whether ``allocatable`` gives the same answer for two tasks of equal requests (every
        enabled allocatable function is declared so)."""
        declared = self.allocatable_by_request_plugins
        return all(name in declared for name in self.allocatable_fns.enabled_plugins())

    def queue_state(self, queue: QueueInfo) -> tuple[object, ...] | None:
        """What the enabled queue-level functions (allocatable, overused) answer from,
        for ``queue``, as a value equal across two sessions exactly when their answers for the same
        task are; None when a plugin with such a function does not say (then nothing may be assumed)."""
        names = [*self.allocatable_fns.enabled_plugins(), *self.overused_fns.enabled_plugins()]
        fns = self.queue_state_fns
        out: list[object] = []
        for name in dict.fromkeys(names):
            fn = fns.get(name)
            if fn is None:
                return None
            out.append((name, fn(queue)))
        return tuple(out)

    def overused(self, queue: QueueInfo) -> bool:
        for fn in self.overused_fns.flat():
            if fn(queue):
                return True
        return False

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        for fn in self.allocatable_fns.flat():
            if not fn(queue, task):
                return False
        return True

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return all(fn(queue, task) for fn in self.preemptive_fns.flat())

    # ---------------------------------------------------------------------------------------------
    # state changes (called by Statement only)
    # ---------------------------------------------------------------------------------------------
    def _fire(self, allocate: bool, task: TaskInfo) -> None:
        self.changes += 1
        event = Event(task)
        for handler in self.event_handlers:
            fn = handler.allocate if allocate else handler.deallocate
            if fn is not None:
                fn(event)

    def _fire_fallible(self, task: TaskInfo) -> tuple[str, list[EventHandler]] | None:
        """The allocate event of an allocation or pipeline when a handler may refuse it
        (``fallible_events``): the handlers in order until one sets ``Event.err``. None when none
        did; else the reason, naming the refusing plugin, and the handlers whose allocate ran (the
        refusing one last), for ``_fire_undo``. Volcano's ``Statement.Allocate`` / ``Pipeline``
        (pkg/scheduler/framework/statement.go) collect every handler's ``Event.Err`` and roll back
        through ``unallocate`` / ``unPipeline``, which fire every deallocate handler; here the
        handlers after a refusing one are not asked (the outcome for the session is the same, and
        an extender is not sent an allocation already refused)."""
        self.changes += 1
        event = Event(task)
        ran: list[EventHandler] = []
        for handler in self.event_handlers:
            fn = handler.allocate
            if fn is None:
                continue
            ran.append(handler)
            fn(event)
            if event.err is not None:
                by = f" by {handler.plugin}" if handler.plugin else ""
                return f"refused{by}: {event.err}", ran
        return None

    def _fire_undo(self, task: TaskInfo, handlers: list[EventHandler]) -> None:
        """Deallocate events for ``handlers`` (those whose allocate ran), newest first: what a
        refused allocation leaves of their effects is undone. The refusing handler is told too, as
        Volcano's rollback tells every handler (``Statement.unallocate``)."""
        self.changes += 1
        for handler in reversed(handlers):
            fn = handler.deallocate
            if fn is not None:
                fn(Event(task))

    def job_of(self, task: TaskInfo) -> JobInfo:
        return self.jobs[task.job]

    def statement(self) -> Statement:
        from caldera.framework.statement import Statement

        return Statement(self)

    # ---------------------------------------------------------------------------------------------
    # helpers for actions
    # ---------------------------------------------------------------------------------------------
    def pending_jobs(self) -> Iterable[JobInfo]:
        return (j for j in self.jobs.values() if j.count(TaskStatus.PENDING))

    def out_of_time(self) -> bool:
        """Whether the cycle's budget (``deadline``) is spent."""
        return self.deadline is not None and time.perf_counter() >= self.deadline

    def record_job_error(self, job: JobInfo, message: str) -> None:
        job.job_fit_error = message

    def result(self) -> SessionResult:
        return SessionResult(
            placements=list(self.placements),
            dispatched=self.dispatched,
            evictions=list(self.evictions),
            jobs=self.jobs,
            queues=self.queues,
            node_count=len(self.nodes),
            duration=time.monotonic() - self.started,
            report=self.report,
            seq=self.snapshot.seq,
            changed_jobs=self.snapshot.changed_jobs,
            kept=self.carry.kept,
            touched_jobs=[uid for uid, job in self.jobs.items() if job.version],
            touched_nodes=self._touched_nodes(),
        )

    def _touched_nodes(self) -> list[str]:
        names = self.table.names
        rows = self.table.log
        out = [names[row] for row in set(rows) if row < len(names)] if rows else []
        out.extend(self.snapshot.loaded_nodes)
        return out


def _creation_uid(item: Any) -> tuple[float, str]:
    return item.creation, item.uid


def _creation_name(item: Any) -> tuple[float, str]:
    return item.creation, item.name


def open_session(
    snapshot: Snapshot,
    tiers: list[Tier],
    plugin_classes: dict[str, type[Plugin]],
    configurations: dict[str, Any] | None = None,
    carry: Mapping[object, Any] | None = None,
    deadline: float | None = None,
    standing: dict[object, Any] | None = None,
    pass_taken: frozenset[str] = frozenset(),
) -> Session:
    """Build the conf's plugins, open a session, and let every plugin register its callbacks.
    ``carry``: what the last applied cycle kept for this one (``framework.carry.CarryBook.offer``);
    ``deadline``: ``Session.deadline``; ``standing``: the scheduler's standing state
    (``Session.standing``); ``pass_taken``: ``Session.pass_taken``."""
    plugins: dict[str, Plugin] = {}
    options: list[PluginOption] = [p for t in tiers for p in t.plugins]
    for option in options:
        cls = plugin_classes.get(option.name)
        if cls is None:
            raise KeyError(f"plugin {option.name!r} is not registered")
        plugins[option.name] = cls(option.arguments)
    ssn = Session(snapshot, tiers, plugins, configurations, carry, standing)
    ssn.deadline = deadline
    ssn.pass_taken = pass_taken
    timings = ssn.report.plugin_seconds
    for option in options:
        started = time.perf_counter()
        plugins[option.name].on_session_open(ssn)
        timings.append((option.name, "OnSessionOpen", time.perf_counter() - started))
    return ssn


def close_session(ssn: Session) -> SessionResult:
    timings = ssn.report.plugin_seconds
    for plugin in ssn.plugins.values():
        started = time.perf_counter()
        try:
            plugin.on_session_close(ssn)
        except Exception:  # a plugin's close must not lose the cycle's committed work
            log.exception("plugin %s failed on session close", plugin.name)
        timings.append((plugin.name, "OnSessionClose", time.perf_counter() - started))
    return ssn.result()
