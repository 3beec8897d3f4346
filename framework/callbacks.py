"""The callback points plugins register on a session, each stored with its type, walked tier by tier.

Volcano's framework (``pkg/scheduler/framework/session_plugins.go``) keeps one map per callback kind
(``jobOrderFns``, ``predicateFns``, ...) and walks the conf's tiers in order, skipping a plugin whose
``enabledXxx`` switch is off. :class:`CallbackPoint` is one such map; :class:`CallbackRegistry` holds
one per kind and the ``add_*`` methods plugins call (Volcano's ``AddJobOrderFn`` and so on).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from caldera.framework.model import JobInfo, NodeInfo, QueueInfo, TaskInfo
from caldera.framework.tiers import Tier

if TYPE_CHECKING:
    from caldera.framework.result import Event

#: A bulk predicate: (task, rows) → boolean mask over ``rows`` (True: the node passes).
BulkPredicate = Callable[[TaskInfo, np.ndarray], np.ndarray]
#: Its explanation: (task, rows) → reason → mask of the rows that fail for that reason.
BulkExplain = Callable[[TaskInfo, np.ndarray], dict[str, np.ndarray]]
#: A bulk score: (task, rows) → float score per row.
BulkScore = Callable[[TaskInfo, np.ndarray], np.ndarray]
#: Whether a predicate's or score's result for a node depends on that node alone (for one task).
Locality = bool | Callable[[TaskInfo], bool]
Applies = Callable[[TaskInfo], bool]

JobOrderFn = Callable[[JobInfo, JobInfo], int]
QueueOrderFn = Callable[[QueueInfo, QueueInfo], int]
#: (left, right, the preemptor's queue) → order of victim queues
VictimQueueOrderFn = Callable[[QueueInfo, QueueInfo, QueueInfo], int]
TaskOrderFn = Callable[[TaskInfo, TaskInfo], int]
#: None when the task may be placed at all, else the reason
PrePredicateFn = Callable[[TaskInfo], str | None]
#: None when the task fits the node, else the reason (kube-scheduler's words)
PredicateFn = Callable[[TaskInfo, NodeInfo], str | None]
NodeOrderFn = Callable[[TaskInfo, NodeInfo], float]
BatchNodeOrderFn = Callable[[TaskInfo, list[NodeInfo]], dict[str, float]]
BestNodeFn = Callable[[TaskInfo, dict[float, list[NodeInfo]]], NodeInfo | None]
JobTestFn = Callable[[JobInfo], bool]
#: PERMIT (1), ABSTAIN (0) or REJECT (-1)
JobVoteFn = Callable[[JobInfo], int]
JobValidFn = Callable[[JobInfo], "ValidateResult | None"]
JobEnqueuedFn = Callable[[JobInfo], None]
#: candidates → the victims a plugin selects among them (Volcano's api.VictimTasksFn)
VictimTasksFn = Callable[[list[TaskInfo]], list[TaskInfo]]
#: (actor, candidates) → (chosen victims, vote)
VictimsFn = Callable[[TaskInfo, list[TaskInfo]], tuple[list[TaskInfo], int]]
#: Sub-job callbacks (Volcano's AddSubJobReadyFn / AddSubJobPipelinedFn / AddSubJobOrderFn); the
#: sub-job is a ``framework.subjobs.SubJob``
SubJobTestFn = Callable[[Any], bool]
SubJobVoteFn = Callable[[Any], int]
SubJobOrderFn = Callable[[Any, Any], int]
#: (sub-job, candidate groups) → score per group name (Volcano's HyperNodeOrderFn)
HyperNodeOrderFn = Callable[[Any, list[Any]], dict[str, float]]
#: (a ``framework.topology.GradientRequest``) → groups in gradients, narrowest first, or None when
#: the search has no root (Volcano's HyperNodeGradientForJobFn / HyperNodeGradientForSubJobFn)
HyperNodeGradientFn = Callable[[Any], "list[list[Any]] | None"]
QueueTestFn = Callable[[QueueInfo], bool]
QueueTaskTestFn = Callable[[QueueInfo, TaskInfo], bool]
#: What a plugin's predicates and scores read of a task beyond its pod template (bytes; b"" for none)
TemplateQualifier = Callable[[TaskInfo], bytes]

F = TypeVar("F")


@dataclass
class ValidateResult:
    passed: bool
    reason: str = ""
    message: str = ""


#: The kinds of eviction the gang actions ask victims for (Volcano's api.EvictionKindGang*)
GANG_PREEMPT = "gangpreempt"
GANG_RECLAIM = "gangreclaim"


@dataclass(frozen=True)
class EvictionContext:
    """What a gang-aware victim filter is told: Volcano's ``api.EvictionContext``
    (pkg/scheduler/api/types.go) — the action's kind (``gangpreempt`` or ``gangreclaim``), the job
    that wants the room and the domain (node group) it is sought in."""

    kind: str
    job: JobInfo
    domain: str


#: (context, candidates in bundle order) → (the candidates allowed, vote): Volcano's UnifiedEvictableFn
UnifiedEvictableFn = Callable[[EvictionContext, list[TaskInfo]], tuple[list[TaskInfo], int]]


@dataclass
class EventHandler:
    allocate: Callable[[Event], None] | None = None
    deallocate: Callable[[Event], None] | None = None
    #: the allocate handler may refuse an allocation or pipeline by setting ``Event.err`` (the
    #: extender's ``allocateFuncVerb``); a session with none such fires events without checking
    can_fail: bool = False
    #: the plugin registering it, named in the reason of a refusal
    plugin: str = ""


@dataclass
class BulkPred:
    fn: BulkPredicate
    explain: BulkExplain | None
    #: depends only on the pod's template and the nodes' specs: cached per template for the session
    static: bool
    #: fails only for lack of free resources, which evicting pods can resolve
    resource: bool = False
    #: the result for a node depends on that node alone (for this task): results can be patched
    #: row by row as nodes change, instead of recomputed over every node
    local: Locality = False
    #: None, or a per-task test: False means that for this task the predicate passes every node (it
    #: has nothing to check: no host ports, no spread constraints), so placing it may leave it out
    applies: Applies | None = None
    #: may fail for want of something evicting pods releases (DRA devices), which the predicate itself
    #: tracks through the statement's events: exact in a dry run, left out when choosing the nodes
    #: worth a dry run (``feasible_mask(releasable=False)``)
    releasable: bool = False


def applies_to(applies: Applies | None, task: TaskInfo) -> bool:
    return applies is None or applies(task)


def is_local(local: Locality, task: TaskInfo) -> bool:
    return local(task) if callable(local) else local


class CallbackPoint(Generic[F]):
    """Each plugin's function of one kind (``kind`` is also the name its conf switch goes by)."""

    __slots__ = ("_flat", "_fns", "_levels", "_named", "_tiers", "kind")

    def __init__(self, kind: str, tiers: list[Tier]) -> None:
        self.kind = kind
        self._tiers = tiers
        self._fns: dict[str, F] = {}
        self._levels: list[list[F]] | None = None
        self._named: list[list[tuple[str, F]]] | None = None
        self._flat: list[F] | None = None

    def add(self, plugin: str, fn: F) -> None:
        self._fns[plugin] = fn
        self._levels = None
        self._named = None
        self._flat = None

    def enabled_plugins(self) -> list[str]:
        """The plugins whose function is enabled, in walking order."""
        return [name for level in self._named_levels() for name, _ in level]

    def _named_levels(self) -> list[list[tuple[str, F]]]:
        fns = self._fns
        out = [
            [(p.name, fns[p.name]) for p in tier.plugins if p.name in fns and p.enabled(self.kind)]
            for tier in self._tiers
        ]
        # Plugins registered outside the conf (tests, tools) form a last tier of their own.
        in_conf = {p.name for t in self._tiers for p in t.plugins}
        extra = [(name, fn) for name, fn in fns.items() if name not in in_conf]
        if extra:
            out.append(extra)
        return out

    def named_levels(self) -> list[list[tuple[str, F]]]:
        """Per tier, (plugin, function) of the enabled plugins in conf order (cached as ``levels``)."""
        if self._named is None:
            self._named = self._named_levels()
        return self._named

    def levels(self) -> list[list[F]]:
        """Per tier, the enabled plugins' functions in conf order (cached until the next ``add``)."""
        if self._levels is None:
            self._levels = [[fn for _, fn in level] for level in self.named_levels()]
        return self._levels

    def flat(self) -> list[F]:
        if self._flat is None:
            self._flat = [fn for level in self.levels() for fn in level]
        return self._flat

    def __bool__(self) -> bool:
        return bool(self.flat())

    def registered(self) -> bool:
        """Whether any plugin registered a function of this kind (enabled or not)."""
        return bool(self._fns)


class CallbackRegistry:
    """The session's callback points and the ``add_*`` methods plugins register through."""

    def __init__(self, tiers: list[Tier]) -> None:
        self.tiers = tiers
        self.job_order_fns = CallbackPoint[JobOrderFn]("job_order", tiers)
        self.queue_order_fns = CallbackPoint[QueueOrderFn]("queue_order", tiers)
        self.victim_queue_order_fns = CallbackPoint[VictimQueueOrderFn]("victim_queue_order", tiers)
        self.task_order_fns = CallbackPoint[TaskOrderFn]("task_order", tiers)
        self.pre_predicate_fns = CallbackPoint[PrePredicateFn]("pre_predicate", tiers)
        self.predicate_fns = CallbackPoint[PredicateFn]("predicate", tiers)
        self.node_order_fns = CallbackPoint[NodeOrderFn]("node_order", tiers)
        self.batch_node_order_fns = CallbackPoint[BatchNodeOrderFn]("batch_node_order", tiers)
        self.bulk_node_order_fns = CallbackPoint[BulkScore]("node_order", tiers)
        self.best_node_fns = CallbackPoint[BestNodeFn]("best_node", tiers)
        self.job_ready_fns = CallbackPoint[JobTestFn]("job_ready", tiers)
        self.job_pipelined_fns = CallbackPoint[JobVoteFn]("job_pipelined", tiers)
        self.job_valid_fns = CallbackPoint[JobValidFn]("job_valid", tiers)
        self.job_enqueueable_fns = CallbackPoint[JobVoteFn]("job_enqueueable", tiers)
        self.job_enqueued_fns = CallbackPoint[JobEnqueuedFn]("job_enqueued", tiers)
        self.job_starving_fns = CallbackPoint[JobTestFn]("job_starving", tiers)
        self.preemptable_fns = CallbackPoint[VictimsFn]("preemptable", tiers)
        self.reclaimable_fns = CallbackPoint[VictimsFn]("reclaimable", tiers)
        self.overused_fns = CallbackPoint[QueueTestFn]("overused", tiers)
        self.allocatable_fns = CallbackPoint[QueueTaskTestFn]("allocatable", tiers)
        self.preemptive_fns = CallbackPoint[QueueTaskTestFn]("preemptive", tiers)
        #: Volcano's victimTasksFns (AddVictimTasksFns): selectors of tasks to evict (shuffle)
        self.victim_tasks_fns = CallbackPoint[VictimTasksFn]("victim_tasks", tiers)
        #: Caldera's: checks every selected victim passes (pdb's budgets), switched by enabledVictim too
        self.victim_guard_fns = CallbackPoint[VictimTasksFn]("victim_guard", tiers)
        # Volcano has no conf switch for it (isEnabled is not asked in Session.UnifiedEvictable)
        self.unified_evictable_fns = CallbackPoint[UnifiedEvictableFn]("unified_evictable", tiers)
        self.sub_job_ready_fns = CallbackPoint[SubJobTestFn]("sub_job_ready", tiers)
        self.sub_job_pipelined_fns = CallbackPoint[SubJobVoteFn]("sub_job_pipelined", tiers)
        self.sub_job_order_fns = CallbackPoint[SubJobOrderFn]("sub_job_order", tiers)
        self.hypernode_order_fns = CallbackPoint[HyperNodeOrderFn]("hypernode_order", tiers)
        #: one point for the job and sub-job gradients: Volcano switches both with one option
        #: (``enabledHyperNodeGradient``) and Caldera's plugin registers one function for both
        self.hypernode_gradient_fns = CallbackPoint[HyperNodeGradientFn]("hypernode_gradient", tiers)
        #: plugin → part → bulk predicate (one plugin may register several)
        self.bulk_predicate_fns: dict[str, dict[str, BulkPred]] = {}
        self._bulk_predicates: list[BulkPred] | None = None
        #: plugin → whether its bulk score is node-local
        self.score_locality: dict[str, Locality] = {}
        #: plugin → part → (bulk score, its locality): the parts add up to the plugin's bulk score
        self.score_parts: dict[str, dict[str, tuple[BulkScore, Locality, Applies | None]]] = {}
        self.event_handlers: list[EventHandler] = []
        #: an event handler may refuse an allocation (``EventHandler.can_fail``): statements check
        self.fallible_events = False
        #: plugin → what its predicates and scores read of a task besides the pod's template
        self.template_qualifiers: dict[str, TemplateQualifier] = {}
        #: a qualifier speaks for the pods' ResourceClaims (``add_template_qualifier``)
        self.claims_qualified = False

    def add_job_order_fn(self, name: str, fn: JobOrderFn) -> None:
        self.job_order_fns.add(name, fn)

    def add_queue_order_fn(self, name: str, fn: QueueOrderFn) -> None:
        self.queue_order_fns.add(name, fn)

    def add_victim_queue_order_fn(self, name: str, fn: VictimQueueOrderFn) -> None:
        self.victim_queue_order_fns.add(name, fn)

    def add_task_order_fn(self, name: str, fn: TaskOrderFn) -> None:
        self.task_order_fns.add(name, fn)

    def add_pre_predicate_fn(self, name: str, fn: PrePredicateFn) -> None:
        self.pre_predicate_fns.add(name, fn)

    def add_predicate_fn(self, name: str, fn: PredicateFn) -> None:
        """A per-node predicate: returns None when the task fits, else the reason (kube-scheduler's words)."""
        self.predicate_fns.add(name, fn)

    def add_bulk_predicate_fn(
        self,
        name: str,
        fn: BulkPredicate,
        explain: BulkExplain | None = None,
        static: bool = False,
        resource: bool = False,
        part: str = "",
        local: Locality = False,
        applies: Applies | None = None,
        releasable: bool = False,
    ) -> None:
        """A vectorised predicate over table rows. ``static`` ones depend only on the pod's template and
        the nodes' specs (labels, taints, affinity) and are cached per template for the session.
        ``resource`` ones fail only for lack of free resources, which evicting pods can resolve
        (preempt and reclaim skip them). One plugin may register several, each under its own ``part``.
        ``local`` (or a per-task test) says a node's result depends on that node alone, which lets the
        placement engine patch cached results row by row. ``applies`` (a per-task test, stable for
        the session) False: the predicate passes every node for that task, so it need not be called.
        ``releasable`` ones may fail for want of what evictions release and follow evictions through
        the statement's events (preempt and reclaim choose nodes without them, then dry-run with them)."""
        self.bulk_predicate_fns.setdefault(name, {})[part] = BulkPred(
            fn, explain, static, resource, local, applies, releasable
        )
        self._bulk_predicates = None

    def bulk_predicates(self) -> list[BulkPred]:
        """Every enabled bulk predicate, in conf order (cached until the next registration)."""
        if self._bulk_predicates is None:
            fns = self.bulk_predicate_fns
            ordered: list[BulkPred] = []
            in_conf = set()
            for tier in self.tiers:
                for p in tier.plugins:
                    in_conf.add(p.name)
                    if p.name in fns and p.enabled("predicate"):
                        ordered.extend(fns[p.name].values())
            for name, parts in fns.items():
                if name not in in_conf:
                    ordered.extend(parts.values())
            self._bulk_predicates = ordered
        return self._bulk_predicates

    def add_node_order_fn(self, name: str, fn: NodeOrderFn) -> None:
        self.node_order_fns.add(name, fn)

    def add_batch_node_order_fn(self, name: str, fn: BatchNodeOrderFn) -> None:
        self.batch_node_order_fns.add(name, fn)

    def add_bulk_node_order_fn(
        self,
        name: str,
        fn: BulkScore,
        local: Locality = False,
        part: str = "",
        applies: Applies | None = None,
    ) -> None:
        """A vectorised score over rows. ``local`` as for predicates: a row's score depends on that
        node alone (no normalisation across the rows given). One plugin may register several
        ``part``s, each with its own locality; they add up to the plugin's score (so the placement
        engine can cache the node-local parts and recompute only the others). ``applies`` as for
        predicates: False means the part scores 0 on every node for that task."""
        parts = self.score_parts.setdefault(name, {})
        parts[part] = (fn, local, applies)
        self.score_locality[name] = local if len(parts) == 1 else False
        if len(parts) == 1:
            self.bulk_node_order_fns.add(name, fn)
            return
        fns = [f for f, _, _ in parts.values()]

        def total(task: TaskInfo, rows: np.ndarray) -> np.ndarray:
            out = fns[0](task, rows)
            for f in fns[1:]:
                out = out + f(task, rows)
            return out

        self.bulk_node_order_fns.add(name, total)

    def split_scores(self, task: TaskInfo) -> tuple[list[BulkScore], list[BulkScore]]:
        """The enabled bulk score parts for this task: (node-local ones, the others)."""
        local: list[BulkScore] = []
        other: list[BulkScore] = []
        for name in self.bulk_node_order_fns.enabled_plugins():
            for fn, locality, applies in self.score_parts.get(name, {}).values():
                if applies_to(applies, task):
                    (local if is_local(locality, task) else other).append(fn)
        return local, other

    def add_best_node_fn(self, name: str, fn: BestNodeFn) -> None:
        self.best_node_fns.add(name, fn)

    def add_job_ready_fn(self, name: str, fn: JobTestFn) -> None:
        self.job_ready_fns.add(name, fn)

    def add_job_pipelined_fn(self, name: str, fn: JobVoteFn) -> None:
        self.job_pipelined_fns.add(name, fn)

    def add_job_valid_fn(self, name: str, fn: JobValidFn) -> None:
        self.job_valid_fns.add(name, fn)

    def add_job_enqueueable_fn(self, name: str, fn: JobVoteFn) -> None:
        self.job_enqueueable_fns.add(name, fn)

    def add_job_enqueued_fn(self, name: str, fn: JobEnqueuedFn) -> None:
        self.job_enqueued_fns.add(name, fn)

    def add_job_starving_fn(self, name: str, fn: JobTestFn) -> None:
        self.job_starving_fns.add(name, fn)

    def add_preemptable_fn(self, name: str, fn: VictimsFn) -> None:
        self.preemptable_fns.add(name, fn)

    def add_reclaimable_fn(self, name: str, fn: VictimsFn) -> None:
        self.reclaimable_fns.add(name, fn)

    def add_overused_fn(self, name: str, fn: QueueTestFn) -> None:
        self.overused_fns.add(name, fn)

    def add_allocatable_fn(self, name: str, fn: QueueTaskTestFn) -> None:
        self.allocatable_fns.add(name, fn)

    def add_preemptive_fn(self, name: str, fn: QueueTaskTestFn) -> None:
        self.preemptive_fns.add(name, fn)

    def add_victim_tasks_fns(self, name: str, fns: list[VictimTasksFn]) -> None:
        """Volcano's ``Session.AddVictimTasksFns`` (pkg/scheduler/framework/session_plugins.go): the
        plugin's functions selecting, from the candidates, tasks to evict; what they select is
        joined (``tier_rules.tiered_victim_tasks``)."""
        fns = list(fns)

        def selected(tasks: list[TaskInfo]) -> list[TaskInfo]:
            return [victim for fn in fns for victim in fn(tasks)]

        self.victim_tasks_fns.add(name, fns[0] if len(fns) == 1 else selected)

    def add_victim_guard_fn(self, name: str, fn: VictimTasksFn) -> None:
        """Caldera's: a filter every victim the selectors chose must pass, in their order (the pdb
        plugin's budgets). Volcano registers pdb's filter as one more selector, whose choice is
        joined with the others' (every running pod the budgets allow would be evicted): see
        ``tier_rules.tiered_victim_tasks``."""
        self.victim_guard_fns.add(name, fn)

    def add_unified_evictable_fn(self, name: str, fn: UnifiedEvictableFn) -> None:
        """A victim filter for the gang-aware actions (gangpreempt, gangreclaim): Volcano's
        ``Session.AddUnifiedEvictableFn`` (pkg/scheduler/framework/session_plugins.go)."""
        self.unified_evictable_fns.add(name, fn)

    def add_sub_job_ready_fn(self, name: str, fn: SubJobTestFn) -> None:
        self.sub_job_ready_fns.add(name, fn)

    def add_sub_job_pipelined_fn(self, name: str, fn: SubJobVoteFn) -> None:
        self.sub_job_pipelined_fns.add(name, fn)

    def add_sub_job_order_fn(self, name: str, fn: SubJobOrderFn) -> None:
        self.sub_job_order_fns.add(name, fn)

    def add_hypernode_order_fn(self, name: str, fn: HyperNodeOrderFn) -> None:
        self.hypernode_order_fns.add(name, fn)

    def add_hypernode_gradient_fn(self, name: str, fn: HyperNodeGradientFn) -> None:
        self.hypernode_gradient_fns.add(name, fn)

    def add_event_handler(self, handler: EventHandler) -> None:
        self.event_handlers.append(handler)
        if handler.can_fail and handler.allocate is not None:
            self.fallible_events = True

    def add_template_qualifier(self, name: str, fn: TemplateQualifier, claims: bool = False) -> None:
        """For a plugin whose predicates or scores read more of a task than its pod template (the
        nodegroup plugin: the queue of the task's job): pods of one template that differ there are
        not interchangeable, so what is cached or remembered per template is kept apart by it.
        ``claims``: the qualifier says all that the session's predicates and scores read of a pod's
        ResourceClaims in what is cached per template for every node (the DRA part's: whether the
        pod has claims, and their shape when a node's answer depends on that node alone), so the
        placement engine keys those caches by the template less its claims part."""
        self.template_qualifiers[name] = fn
        if claims:
            self.claims_qualified = True

    def placement_key(self, task: TaskInfo) -> bytes:
        """The task's template (``TaskInfo.template``: pods with equal keys are interchangeable for
        every predicate and score) with what the session's plugins read besides; b"" when the task
        has no template (nothing is cached for it)."""
        template = task.template
        if not template or not self.template_qualifiers:
            return template
        return template + b"".join(b"\0" + fn(task) for fn in self.template_qualifiers.values())
