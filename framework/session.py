"""A Session: one scheduling cycle over a snapshot, with the callback points plugins register.

Tier semantics follow Volcano's: order functions ask plugins tier by tier and the first that
decides wins; predicates must all pass; node scores add up; vote functions (enqueueable,
pipelined) stop at the first tier that permits; victim selection intersects within a tier and
the first tier that selects wins. Each callback kind can be switched off per plugin in the conf.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from caldera.framework.model import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from caldera.framework.nodetable import NodeTable
from caldera.framework.plugin import Plugin
from caldera.framework.resource import Resource
from caldera.framework.snapshot import Snapshot
from caldera.framework.tiers import PluginOption, Tier

if TYPE_CHECKING:
    from caldera.framework.statement import Statement

log = logging.getLogger("caldera.session")

PERMIT = 1
ABSTAIN = 0
REJECT = -1

#: A bulk predicate: (task, rows) → boolean mask over ``rows`` (True: the node passes).
BulkPredicate = Callable[[TaskInfo, np.ndarray], np.ndarray]
#: Its explanation: (task, rows) → reason → mask of the rows that fail for that reason.
BulkExplain = Callable[[TaskInfo, np.ndarray], dict[str, np.ndarray]]
#: A bulk score: (task, rows) → float score per row.
BulkScore = Callable[[TaskInfo, np.ndarray], np.ndarray]


@dataclass
class Event:
    task: TaskInfo


@dataclass
class EventHandler:
    allocate: Callable[[Event], None] | None = None
    deallocate: Callable[[Event], None] | None = None


@dataclass
class ValidateResult:
    passed: bool
    reason: str = ""
    message: str = ""


@dataclass
class _BulkPred:
    fn: BulkPredicate
    explain: BulkExplain | None
    static: bool
    resource: bool = False
    #: the result for a node depends on that node alone (for this task): results can be patched
    #: row by row as nodes change, instead of recomputed over every node
    local: bool | Callable[[TaskInfo], bool] = False


def _is_local(local: bool | Callable[[TaskInfo], bool], task: TaskInfo) -> bool:
    return local(task) if callable(local) else local


class _Placement:
    """Per pod template: feasibility (future and now) and scores over every row, at a table version."""

    __slots__ = ("feasible", "now", "scores", "version")

    def __init__(self, feasible: np.ndarray, now: np.ndarray, scores: np.ndarray, version: int) -> None:
        self.feasible = feasible
        self.now = now
        self.scores = scores
        self.version = version


@dataclass
class Placement:
    task: TaskInfo
    node: str
    #: annotations to write on the pod before it is bound (device assignments and the like)
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass
class Eviction:
    task: TaskInfo
    reason: str


@dataclass
class SessionResult:
    """What a closed session hands back to the cache and the binder."""

    placements: list[Placement] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    jobs: dict[str, JobInfo] = field(default_factory=dict)
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    node_count: int = 0
    duration: float = 0.0
    #: the session's ``data`` (explanations, queue shares, timings) for the binary to publish
    data: dict[str, Any] = field(default_factory=dict)


class Session:
    """One cycle. Actions read jobs/nodes/queues and change them only through statements."""

    def __init__(
        self,
        snapshot: Snapshot,
        tiers: list[Tier],
        plugins: dict[str, Plugin] | None = None,
        configurations: dict[str, Any] | None = None,
    ) -> None:
        self.started = time.monotonic()
        self.snapshot = snapshot
        self.jobs: dict[str, JobInfo] = snapshot.jobs
        self.nodes: dict[str, NodeInfo] = snapshot.nodes
        self.table: NodeTable = snapshot.table
        self.node_list: list[NodeInfo] = snapshot.node_list
        self.queues: dict[str, QueueInfo] = snapshot.queues
        self.priority_classes = snapshot.priority_classes
        self.tiers = tiers
        self.plugins: dict[str, Plugin] = plugins or {}
        self.configurations = configurations or {}
        self.all_rows = self.table.all_rows
        self._fns: dict[str, dict[str, Any]] = {}
        self._chains: dict[str, list[list[Any]]] = {}
        self._bulk_chains: list[list[_BulkPred]] | None = None
        self._static_masks: dict[bytes, np.ndarray] = {}
        self._score_local: dict[str, bool | Callable[[TaskInfo], bool]] = {}
        self._placements: dict[bytes, _Placement] = {}
        self._incremental: dict[bytes, bool] = {}
        self.table.log = []
        self.event_handlers: list[EventHandler] = []
        self.placements: list[Placement] = []
        #: pod annotations plugins decide with a placement (set in allocate handlers, dropped in
        #: deallocate handlers); a committed placement carries its task's entry to the binder
        self.task_annotations: dict[str, dict[str, str]] = {}
        self.evictions: list[Eviction] = []
        self.total_resource = Resource()
        for node in self.nodes.values():
            if node.ready:
                self.total_resource.add(node.allocatable)
        self._name_rank = self._rank_names()
        self.plugin_errors: list[str] = []
        self.data: dict[str, Any] = {}  # per-session scratch space for actions (explanations, stats)

    def _rank_names(self) -> np.ndarray:
        order = sorted(range(self.table.rows), key=lambda r: self.table.names[r])
        rank = np.empty(self.table.rows, dtype=np.int64)
        rank[order] = np.arange(self.table.rows)
        return rank

    # ---------------------------------------------------------------------------------------------
    # registration
    # ---------------------------------------------------------------------------------------------
    def _add(self, kind: str, name: str, fn: Any) -> None:
        self._fns.setdefault(kind, {})[name] = fn
        self._chains.pop(kind, None)

    def add_job_order_fn(self, name: str, fn: Callable[[JobInfo, JobInfo], int]) -> None:
        self._add("job_order", name, fn)

    def add_queue_order_fn(self, name: str, fn: Callable[[QueueInfo, QueueInfo], int]) -> None:
        self._add("queue_order", name, fn)

    def add_victim_queue_order_fn(
        self, name: str, fn: Callable[[QueueInfo, QueueInfo, QueueInfo], int]
    ) -> None:
        self._add("victim_queue_order", name, fn)

    def add_task_order_fn(self, name: str, fn: Callable[[TaskInfo, TaskInfo], int]) -> None:
        self._add("task_order", name, fn)

    def add_namespace_order_fn(self, name: str, fn: Callable[[str, str], int]) -> None:
        self._add("namespace_order", name, fn)

    def add_pre_predicate_fn(self, name: str, fn: Callable[[TaskInfo], str | None]) -> None:
        self._add("pre_predicate", name, fn)

    def add_predicate_fn(self, name: str, fn: Callable[[TaskInfo, NodeInfo], str | None]) -> None:
        """A per-node predicate: returns None when the task fits, else the reason (kube-scheduler's words)."""
        self._add("predicate", name, fn)

    def add_bulk_predicate_fn(
        self,
        name: str,
        fn: BulkPredicate,
        explain: BulkExplain | None = None,
        static: bool = False,
        resource: bool = False,
        part: str = "",
        local: bool | Callable[[TaskInfo], bool] = False,
    ) -> None:
        """A vectorised predicate over table rows. ``static`` ones depend only on the pod's template and
        the nodes' specs (labels, taints, affinity) and are cached per template for the session.
        ``resource`` ones fail only for lack of free resources, which evicting pods can resolve
        (preempt and reclaim skip them). One plugin may register several, each under its own ``part``.
        ``local`` (or a per-task test) says a node's result depends on that node alone, which lets the
        session patch cached results row by row (:meth:`best_placement`)."""
        self._fns.setdefault("bulk_predicate", {}).setdefault(name, {})[part] = _BulkPred(
            fn, explain, static, resource, local
        )
        self._bulk_chains = None

    def add_node_order_fn(self, name: str, fn: Callable[[TaskInfo, NodeInfo], float]) -> None:
        self._add("node_order", name, fn)

    def add_batch_node_order_fn(
        self, name: str, fn: Callable[[TaskInfo, list[NodeInfo]], dict[str, float]]
    ) -> None:
        self._add("batch_node_order", name, fn)

    def add_bulk_node_order_fn(
        self, name: str, fn: BulkScore, local: bool | Callable[[TaskInfo], bool] = False
    ) -> None:
        """A vectorised score over rows. ``local`` as for predicates: a row's score depends on that
        node alone (no normalisation across the rows given)."""
        self._add("bulk_node_order", name, fn)
        self._score_local[name] = local

    def add_best_node_fn(
        self, name: str, fn: Callable[[TaskInfo, dict[float, list[NodeInfo]]], NodeInfo | None]
    ) -> None:
        self._add("best_node", name, fn)

    def add_job_ready_fn(self, name: str, fn: Callable[[JobInfo], bool]) -> None:
        self._add("job_ready", name, fn)

    def add_job_pipelined_fn(self, name: str, fn: Callable[[JobInfo], int]) -> None:
        self._add("job_pipelined", name, fn)

    def add_job_valid_fn(self, name: str, fn: Callable[[JobInfo], ValidateResult | None]) -> None:
        self._add("job_valid", name, fn)

    def add_job_enqueueable_fn(self, name: str, fn: Callable[[JobInfo], int]) -> None:
        self._add("job_enqueueable", name, fn)

    def add_job_enqueued_fn(self, name: str, fn: Callable[[JobInfo], None]) -> None:
        self._add("job_enqueued", name, fn)

    def add_job_starving_fn(self, name: str, fn: Callable[[JobInfo], bool]) -> None:
        self._add("job_starving", name, fn)

    def add_preemptable_fn(
        self, name: str, fn: Callable[[TaskInfo, list[TaskInfo]], tuple[list[TaskInfo], int]]
    ) -> None:
        self._add("preemptable", name, fn)

    def add_reclaimable_fn(
        self, name: str, fn: Callable[[TaskInfo, list[TaskInfo]], tuple[list[TaskInfo], int]]
    ) -> None:
        self._add("reclaimable", name, fn)

    def add_victim_tasks_fn(self, name: str, fn: Callable[[list[TaskInfo]], list[TaskInfo]]) -> None:
        self._add("victim_tasks", name, fn)

    def add_overused_fn(self, name: str, fn: Callable[[QueueInfo], bool]) -> None:
        self._add("overused", name, fn)

    def add_allocatable_fn(self, name: str, fn: Callable[[QueueInfo, TaskInfo], bool]) -> None:
        self._add("allocatable", name, fn)

    def add_preemptive_fn(self, name: str, fn: Callable[[QueueInfo, TaskInfo], bool]) -> None:
        self._add("preemptive", name, fn)

    def add_target_job_fn(self, name: str, fn: Callable[[list[JobInfo]], JobInfo | None]) -> None:
        self._add("target_job", name, fn)

    def add_reserved_nodes_fn(self, name: str, fn: Callable[[], None]) -> None:
        self._add("reserved_nodes", name, fn)

    def add_event_handler(self, handler: EventHandler) -> None:
        self.event_handlers.append(handler)

    # ---------------------------------------------------------------------------------------------
    # tier walking
    # ---------------------------------------------------------------------------------------------
    def _chain(self, kind: str) -> list[list[Any]]:
        """Per tier, the enabled plugins' functions of one kind, in conf order (cached)."""
        chain = self._chains.get(kind)
        if chain is None:
            fns = self._fns.get(kind, {})
            chain = []
            for tier in self.tiers:
                level = [fns[p.name] for p in tier.plugins if p.name in fns and p.enabled(kind)]
                chain.append(level)
            # Plugins registered outside the conf (tests, tools) form a last tier of their own.
            in_conf = {p.name for t in self.tiers for p in t.plugins}
            extra = [fn for name, fn in fns.items() if name not in in_conf]
            if extra:
                chain.append(extra)
            self._chains[kind] = chain
        return chain

    def _flat(self, kind: str) -> list[Any]:
        return [fn for level in self._chain(kind) for fn in level]

    def _order(self, kind: str, left: Any, right: Any) -> int:
        chain = self._chains.get(kind)
        if chain is None:
            chain = self._chain(kind)
        for level in chain:
            for fn in level:
                result = fn(left, right)
                if result != 0:
                    return -1 if result < 0 else 1
        return 0

    def job_order(self, left: JobInfo, right: JobInfo) -> bool:
        """True when ``left`` goes before ``right``: plugins first, then creation time, then uid."""
        result = self._order("job_order", left, right)
        if result:
            return result < 0
        if left.creation != right.creation:
            return left.creation < right.creation
        return left.uid < right.uid

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> bool:
        result = self._order("queue_order", left, right)
        if result:
            return result < 0
        if left.creation != right.creation:
            return left.creation < right.creation
        return left.name < right.name

    def victim_queue_order(self, left: QueueInfo, right: QueueInfo, preemptor: QueueInfo) -> bool:
        for level in self._chain("victim_queue_order"):
            for fn in level:
                result = fn(left, right, preemptor)
                if result != 0:
                    return result < 0
        return left.name > right.name

    def task_order(self, left: TaskInfo, right: TaskInfo) -> bool:
        result = self._order("task_order", left, right)
        if result:
            return result < 0
        if left.creation != right.creation:
            return left.creation < right.creation
        return left.uid < right.uid

    def namespace_order(self, left: str, right: str) -> bool:
        result = self._order("namespace_order", left, right)
        if result:
            return result < 0
        return left < right

    def _cmp_key(self, less: Callable[[Any, Any], bool]) -> Callable[[Any], Any]:
        def cmp(a: Any, b: Any) -> int:
            if less(a, b):
                return -1
            if less(b, a):
                return 1
            return 0

        return functools.cmp_to_key(cmp)

    @property
    def job_key(self) -> Callable[[JobInfo], Any]:
        """A sort key giving job order (for ``sorted`` and heaps)."""
        return self._cmp_key(self.job_order)

    @property
    def task_key(self) -> Callable[[TaskInfo], Any]:
        return self._cmp_key(self.task_order)

    @property
    def queue_key(self) -> Callable[[QueueInfo], Any]:
        return self._cmp_key(self.queue_order)

    # -- predicates ------------------------------------------------------------------------------
    def pre_predicate(self, task: TaskInfo) -> str | None:
        for fn in self._flat("pre_predicate"):
            reason = fn(task)
            if reason:
                return str(reason)
        return None

    def predicate(self, task: TaskInfo, node: NodeInfo) -> str | None:
        """All predicates on one node: None when the task fits, else the first failing reason."""
        rows = np.asarray([node.row], dtype=np.intp)
        for bp in self._bulk_predicates():
            if not bool(bp.fn(task, rows)[0]):
                reasons = self._explain_one(bp, task, rows)
                return reasons or "node(s) didn't match a predicate"
        for fn in self._flat("predicate"):
            reason = fn(task, node)
            if reason:
                return str(reason)
        return None

    def _explain_one(self, bp: _BulkPred, task: TaskInfo, rows: np.ndarray) -> str:
        if bp.explain is None:
            return ""
        for reason, fails in bp.explain(task, rows).items():
            if bool(fails[0]):
                return reason
        return ""

    def _bulk_predicates(self) -> list[_BulkPred]:
        if self._bulk_chains is None:
            fns = self._fns.get("bulk_predicate", {})
            ordered: list[_BulkPred] = []
            in_conf = set()
            for tier in self.tiers:
                for p in tier.plugins:
                    in_conf.add(p.name)
                    if p.name in fns and p.enabled("predicate"):
                        ordered.extend(fns[p.name].values())
            for name, parts in fns.items():
                if name not in in_conf:
                    ordered.extend(parts.values())
            self._bulk_chains = [ordered]
        return self._bulk_chains[0]

    def feasible_mask(
        self, task: TaskInfo, rows: np.ndarray | None = None, resources: bool = True
    ) -> np.ndarray:
        """Which of ``rows`` (default: every node) pass every predicate, as a boolean mask.
        ``resources=False`` leaves out the predicates that only check free resources (preemption)."""
        if rows is None:
            rows = self.all_rows
            mask = self._static_mask(task).copy()
        else:
            mask = self._static_mask(task)[rows]
        dynamic = [bp for bp in self._bulk_predicates() if not bp.static and (resources or not bp.resource)]
        if dynamic:
            passing = int(np.count_nonzero(mask))
            if passing == 0:
                return mask
            if passing * 2 < len(rows):
                # Few nodes left after the template-level predicates: evaluate the rest on those only.
                index = np.flatnonzero(mask)
                sub_rows = rows[index]
                sub = np.ones(len(sub_rows), dtype=bool)
                for bp in dynamic:
                    sub &= bp.fn(task, sub_rows)
                    if not sub.any():
                        break
                mask[index] = sub
            else:
                for bp in dynamic:
                    mask &= bp.fn(task, rows)
                    if not mask.any():
                        return mask
        scalar = self._flat("predicate")
        if scalar and mask.any():
            node_list = self.node_list
            for i in np.flatnonzero(mask):
                node = node_list[int(rows[i])]
                for fn in scalar:
                    if fn(task, node):
                        mask[i] = False
                        break
        return mask

    @property
    def checks_resources(self) -> bool:
        """Whether an enabled predicate already checks free resources (so actions need not)."""
        return any(bp.resource for bp in self._bulk_predicates())

    def _static_mask(self, task: TaskInfo) -> np.ndarray:
        """Template-level predicates over all nodes, cached per pod template for the session."""
        key = task.template
        mask = self._static_masks.get(key) if key else None
        if mask is None:
            mask = np.ones(self.table.rows, dtype=bool)
            for bp in self._bulk_predicates():
                if bp.static and mask.any():
                    mask &= bp.fn(task, self.all_rows)
            if key:
                self._static_masks[key] = mask
        return mask

    def feasible_rows(
        self, task: TaskInfo, rows: np.ndarray | None = None, resources: bool = True
    ) -> np.ndarray:
        rows_ = self.all_rows if rows is None else rows
        return rows_[self.feasible_mask(task, rows, resources)]

    def explain_predicates(
        self, task: TaskInfo, rows: np.ndarray | None = None, resources: bool = True
    ) -> dict[str, int]:
        """How many of ``rows`` fail each predicate reason (kube-scheduler style counts)."""
        rows = self.all_rows if rows is None else rows
        counts: dict[str, int] = {}
        remaining = np.ones(len(rows), dtype=bool)
        for bp in self._bulk_predicates():
            if bp.resource and not resources:
                continue
            if bp.explain is not None:
                for reason, fails in bp.explain(task, rows).items():
                    hit = fails & remaining
                    n = int(hit.sum())
                    if n:
                        counts[reason] = counts.get(reason, 0) + n
                    remaining &= ~fails
            else:
                fails = ~bp.fn(task, rows) & remaining
                n = int(fails.sum())
                if n:
                    counts["node(s) didn't match a predicate"] = (
                        counts.get("node(s) didn't match a predicate", 0) + n
                    )
                remaining &= ~fails
        scalar = self._flat("predicate")
        if scalar:
            node_list = self.node_list
            for i in np.flatnonzero(remaining):
                node = node_list[int(rows[i])]
                for fn in scalar:
                    reason = fn(task, node)
                    if reason:
                        counts[str(reason)] = counts.get(str(reason), 0) + 1
                        break
        return counts

    # -- scores ------------------------------------------------------------------------------------
    def node_scores(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """Sum of every enabled node-order score for each of ``rows``."""
        scores = np.zeros(len(rows))
        for fn in self._flat("bulk_node_order"):
            scores += fn(task, rows)
        scalar = self._flat("node_order")
        batch = self._flat("batch_node_order")
        if scalar or batch:
            node_list = self.node_list
            nodes = [node_list[int(r)] for r in rows]
            for fn in scalar:
                scores += np.fromiter((fn(task, n) for n in nodes), dtype=float, count=len(nodes))
            for fn in batch:
                by_name = fn(task, nodes)
                scores += np.fromiter(
                    (by_name.get(n.name, 0.0) for n in nodes), dtype=float, count=len(nodes)
                )
        return scores

    def best_row(self, task: TaskInfo, rows: np.ndarray, scores: np.ndarray) -> int:
        """The highest-scoring row; ties go to the node whose name sorts first (deterministic)."""
        best_fns = self._flat("best_node")
        if best_fns:
            node_list = self.node_list
            by_score: dict[float, list[NodeInfo]] = {}
            for r, s in zip(rows.tolist(), scores.tolist(), strict=True):
                by_score.setdefault(s, []).append(node_list[r])
            for fn in best_fns:
                node = fn(task, by_score)
                if node is not None:
                    return node.row
        top = scores.max()
        ties = rows[scores >= top]
        if len(ties) == 1:
            return int(ties[0])
        return int(ties[np.argmin(self._name_rank[ties])])

    # -- choosing a node ----------------------------------------------------------------------------
    def _incremental_ok(self, task: TaskInfo) -> bool:
        """Whether every predicate and score for this task is node-local and vectorised."""
        key = task.template
        ok = self._incremental.get(key)
        if ok is None:
            ok = bool(key) and not (
                self._flat("predicate")
                or self._flat("node_order")
                or self._flat("batch_node_order")
                or self._flat("best_node")
            )
            if ok:
                ok = all(bp.static or _is_local(bp.local, task) for bp in self._bulk_predicates())
            if ok:
                fns = self._fns.get("bulk_node_order", {})
                enabled = set(map(id, self._flat("bulk_node_order")))
                ok = all(
                    _is_local(self._score_local.get(name, False), task)
                    for name, fn in fns.items()
                    if id(fn) in enabled
                )
            self._incremental[key] = ok
        return ok

    def _placement_entry(self, task: TaskInfo) -> _Placement:
        table = self.table
        entry = self._placements.get(task.template)
        log = table.log
        if entry is not None and entry.version == table.version:
            return entry
        if (
            entry is not None
            and log is not None
            and table.version - entry.version <= max(8, table.rows // 16)
        ):
            changed = np.unique(np.asarray(log[len(log) - (table.version - entry.version) :], dtype=np.intp))
            entry.feasible[changed] = self.feasible_mask(task, changed)
            entry.now[changed] = table.fits(task.init_resreq, changed, future=False)
            entry.scores[changed] = self.node_scores(task, changed)
            entry.version = table.version
            return entry
        rows = self.all_rows
        feasible = self.feasible_mask(task)
        if not self.checks_resources:
            feasible &= table.fits(task.init_resreq, rows)
        entry = _Placement(
            feasible,
            table.fits(task.init_resreq, rows, future=False),
            self.node_scores(task, rows),
            table.version,
        )
        self._placements[task.template] = entry
        return entry

    def best_placement(self, task: TaskInfo, rows: np.ndarray | None = None) -> tuple[int, bool] | None:
        """The best node for a task: (row, True) when it fits the node's idle resources now, (row,
        False) when only once releasing pods are gone (pipeline), None when no node passes.

        For a pod template whose predicates and scores are all node-local, results are cached for
        the session and patched only on the rows that changed since: per-pod work independent of
        the node count."""
        if rows is None and self._incremental_ok(task):
            entry = self._placement_entry(task)
            now = entry.feasible & entry.now
            allocate = bool(now.any())
            pick = now if allocate else entry.feasible
            if not allocate and not pick.any():
                return None
            scores = np.where(pick, entry.scores, -np.inf)
            top = scores.max()
            ties = np.flatnonzero(scores >= top)
            best = int(ties[0]) if len(ties) == 1 else int(ties[np.argmin(self._name_rank[ties])])
            return best, allocate
        cand = self.feasible_rows(task, rows)
        if len(cand) and not self.checks_resources:
            cand = cand[self.table.fits(task.init_resreq, cand)]
        if not len(cand):
            return None
        fits_now = self.table.fits(task.init_resreq, cand, future=False)
        allocate = bool(fits_now.any())
        pick = cand[fits_now] if allocate else cand
        return self.best_row(task, pick, self.node_scores(task, pick)), allocate

    # -- job-level votes ---------------------------------------------------------------------------
    def job_ready(self, job: JobInfo) -> bool:
        for fn in self._flat("job_ready"):
            if not fn(job):
                return False
        return True

    def _vote(self, kind: str, job: JobInfo) -> bool:
        for level in self._chain(kind):
            found = False
            for fn in level:
                vote = fn(job)
                if vote < 0:
                    return False
                if vote > 0:
                    found = True
            if found:
                return True
        return True

    def job_pipelined(self, job: JobInfo) -> bool:
        return self._vote("job_pipelined", job)

    def job_enqueueable(self, job: JobInfo) -> bool:
        return self._vote("job_enqueueable", job)

    def job_enqueued(self, job: JobInfo) -> None:
        for fn in self._flat("job_enqueued"):
            fn(job)

    def job_valid(self, job: JobInfo) -> ValidateResult | None:
        for fn in self._flat("job_valid"):
            result = fn(job)
            if result is not None and not result.passed:
                return result
        return None

    def job_starving(self, job: JobInfo) -> bool:
        for level in self._chain("job_starving"):
            found = False
            for fn in level:
                found = True
                if not fn(job):
                    return False
            if found:
                return True
        return False

    # -- victims -----------------------------------------------------------------------------------
    def _victims(self, kind: str, actor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        for level in self._chain(kind):
            init = False
            selected: list[TaskInfo] = []
            for fn in level:
                chosen, vote = fn(actor, candidates)
                if vote == ABSTAIN:
                    continue
                if not chosen:
                    selected = []
                    break
                if not init:
                    selected = list(chosen)
                    init = True
                else:
                    keep = {t.uid for t in chosen}
                    selected = [t for t in selected if t.uid in keep]
            if selected:
                return selected
        return []

    def preemptable(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> list[TaskInfo]:
        return self._victims("preemptable", preemptor, preemptees)

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> list[TaskInfo]:
        return self._victims("reclaimable", reclaimer, reclaimees)

    def victim_tasks(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        out: dict[str, TaskInfo] = {}
        for fn in self._flat("victim_tasks"):
            for t in fn(tasks):
                out[t.uid] = t
        return list(out.values())

    # -- queue-level -------------------------------------------------------------------------------
    def overused(self, queue: QueueInfo) -> bool:
        return any(fn(queue) for fn in self._flat("overused"))

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return all(fn(queue, task) for fn in self._flat("allocatable"))

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return all(fn(queue, task) for fn in self._flat("preemptive"))

    def target_job(self, jobs: list[JobInfo]) -> JobInfo | None:
        for fn in self._flat("target_job"):
            return fn(jobs)  # type: ignore[no-any-return]
        return None

    def reserved_nodes(self) -> None:
        for fn in self._flat("reserved_nodes"):
            fn()

    # ---------------------------------------------------------------------------------------------
    # state changes (called by Statement only)
    # ---------------------------------------------------------------------------------------------
    def _fire(self, allocate: bool, task: TaskInfo) -> None:
        event = Event(task)
        for handler in self.event_handlers:
            fn = handler.allocate if allocate else handler.deallocate
            if fn is not None:
                fn(event)

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

    def record_job_error(self, job: JobInfo, message: str) -> None:
        job.job_fit_error = message

    def result(self) -> SessionResult:
        return SessionResult(
            placements=list(self.placements),
            evictions=list(self.evictions),
            jobs=self.jobs,
            queues=self.queues,
            node_count=len(self.nodes),
            duration=time.monotonic() - self.started,
            data=self.data,
        )


def open_session(
    snapshot: Snapshot,
    tiers: list[Tier],
    plugin_classes: dict[str, type[Plugin]],
    configurations: dict[str, Any] | None = None,
) -> Session:
    """Build the conf's plugins, open a session, and let every plugin register its callbacks."""
    plugins: dict[str, Plugin] = {}
    options: list[PluginOption] = [p for t in tiers for p in t.plugins]
    for option in options:
        cls = plugin_classes.get(option.name)
        if cls is None:
            raise KeyError(f"plugin {option.name!r} is not registered")
        plugins[option.name] = cls(option.arguments)
    ssn = Session(snapshot, tiers, plugins, configurations)
    timings: list[tuple[str, str, float]] = ssn.data.setdefault("plugin_seconds", [])
    for option in options:
        started = time.perf_counter()
        plugins[option.name].on_session_open(ssn)
        timings.append((option.name, "OnSessionOpen", time.perf_counter() - started))
    return ssn


def close_session(ssn: Session) -> SessionResult:
    timings: list[tuple[str, str, float]] = ssn.data.setdefault("plugin_seconds", [])
    for plugin in ssn.plugins.values():
        started = time.perf_counter()
        try:
            plugin.on_session_close(ssn)
        except Exception:  # a plugin's close must not lose the cycle's committed work
            log.exception("plugin %s failed on session close", plugin.name)
        timings.append((plugin.name, "OnSessionClose", time.perf_counter() - started))
    return ssn.result()
