"""The placement engine: which nodes a task may go to and which is best, independent of node count.

Predicates and scores are evaluated in bulk over rows of the session's columnar node table (numpy),
never node by node in Python, and cached at two levels:

- per pod template, the *static* predicates (labels, taints, affinity to node specs) over every node,
  for the whole session (:meth:`PlacementEngine.static_mask`);
- per pod template whose predicates and scores are all node-local, feasibility and scores over every
  row at a table version; as statements change nodes, the table logs the rows written, and the next
  pod of that template re-evaluates only those rows (:meth:`PlacementEngine.best_placement`). So per-pod
  work grows with the nodes that changed since the template was last placed, not with the cluster.

Predicates and score parts that are not node-local for a task (inter-pod affinity across a topology,
topology spread: a pod placed on one node changes the answer for others) are laid over the cached
node-local results on every call (:meth:`PlacementEngine._overlay`), evaluated on the rows the cache
lets through; the cache of such a template is keyed without what the overlay reads (labels,
namespace, spread constraints, pod affinity terms), so templates that differ only there share it.
Per-node Python predicates and scores work but leave the fast path.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from caldera.framework.callbacks import (
    BulkPred,
    BulkPredicate,
    BulkScore,
    CallbackRegistry,
    applies_to,
    is_local,
)
from caldera.framework.model import NodeInfo, TaskInfo, claims_free_template
from caldera.framework.nodetable import NodeTable


def _name_rank(names: list[str]) -> np.ndarray:
    """Each row's rank when the rows are sorted by node name (read-only)."""
    rank = np.empty(len(names), dtype=np.int64)
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    rank.flags.writeable = False
    return rank


#: the node memo's key of the rows in node-name order (see PlacementEngine.__init__)
_NAME_ORDER = object()


class _Placement:
    """Per pod template: feasibility (future and now) and scores over every row, at a table version,
    and what they are computed from (resolved once, so patching a few rows calls only those)."""

    __slots__ = (
        "best_future",
        "best_now",
        "feasible",
        "fit_future",
        "now",
        "preds",
        "rank",
        "score_parts",
        "scores",
        "static",
        "version",
    )

    def __init__(
        self,
        feasible: np.ndarray,
        now: np.ndarray,
        scores: np.ndarray,
        version: int,
        static: np.ndarray,
        preds: list[BulkPredicate],
        score_parts: list[BulkScore],
        fit_future: bool,
        rank: np.ndarray,
        order: np.ndarray,
    ) -> None:
        self.feasible = feasible
        self.now = now
        self.scores = scores
        self.version = version
        #: each row's rank by node name, and the scores of the rows that pass (fit now; fit at all),
        #: -inf elsewhere, laid out in that rank order: the first maximum is the best node, ties
        #: going to the name that sorts first, in one pass (no masks, no tie search)
        self.rank = rank
        ranked = scores[order]
        self.best_future = np.where(feasible[order], ranked, -np.inf)
        self.best_now = np.where(now[order], self.best_future, -np.inf)
        #: the template's static mask, the dynamic node-local predicates, the node-local score parts
        self.static = static
        self.preds = preds
        self.score_parts = score_parts
        #: no enabled predicate checks free resources: the cache checks future idle itself
        self.fit_future = fit_future

    def patch(self, task: TaskInfo, table: NodeTable, changed: np.ndarray) -> None:
        """Re-evaluate ``changed`` rows exactly as the full evaluation would (same predicates,
        same score parts, same order)."""
        if len(changed) == 1:
            self._patch_one(task, table, changed)
            return
        mask = self.static[changed]
        for fn in self.preds:
            mask &= fn(task, changed)
        if self.fit_future:
            mask &= table.fits(task.init_resreq, changed)
        self.feasible[changed] = mask
        now = table.fits(task.init_resreq, changed, future=False)
        self.now[changed] = now
        parts = self.score_parts
        if parts:
            scores = parts[0](task, changed)
            for part in parts[1:]:
                scores = scores + part(task, changed)
        else:
            scores = np.zeros(len(changed))
        self.scores[changed] = scores
        ranks = self.rank[changed]
        future = np.where(mask, scores, -np.inf)
        self.best_future[ranks] = future
        self.best_now[ranks] = np.where(now, future, -np.inf)

    def _patch_one(self, task: TaskInfo, table: NodeTable, changed: np.ndarray) -> None:
        """:meth:`patch` of a single row (the usual case: the node the last pod went to), with
        scalar reads and writes instead of one-element arrays; the same predicates and parts."""
        row = int(changed[0])
        ok = bool(self.static[row])
        for fn in self.preds:
            if not ok:
                break
            ok = bool(fn(task, changed)[0])
        if ok and self.fit_future:
            ok = bool(table.fits(task.init_resreq, changed)[0])
        now = bool(table.fits(task.init_resreq, changed, future=False)[0])
        parts = self.score_parts
        score = 0.0
        if parts:
            scores = parts[0](task, changed)
            for part in parts[1:]:
                scores = scores + part(task, changed)
            score = float(scores[0])
        self.feasible[row] = ok
        self.now[row] = now
        self.scores[row] = score
        rank = self.rank.item(row)
        future = score if ok else -np.inf
        self.best_future[rank] = future
        self.best_now[rank] = future if now else -np.inf


class PlacementEngine:
    """Feasibility, explanations, scores and the best node for a task, over one session's node table."""

    def __init__(
        self,
        callbacks: CallbackRegistry,
        table: NodeTable,
        node_list: list[NodeInfo],
        node_memo: dict[object, Any] | None = None,
    ) -> None:
        self.callbacks = callbacks
        self.table = table
        self.node_list = node_list
        self.all_rows = table.all_rows
        self._static_masks: dict[bytes, np.ndarray] = {}
        self._placements: dict[bytes, _Placement] = {}
        self._incremental: dict[bytes, bool] = {}
        self._row_local: dict[bytes, bool] = {}
        self._overlays: dict[bytes, tuple[bytes, list[BulkPred], list[BulkScore]]] = {}
        self._score_split: dict[bytes, tuple[list[BulkScore], list[BulkScore]]] = {}
        #: each row's rank by node name: ties between equal scores go to the name that sorts first
        #: (node names and rows change only with the node specs: kept across sessions)
        memo = node_memo if node_memo is not None else {}
        rank = memo.get(_name_rank)
        if rank is None or len(rank) != table.rows:
            rank = memo[_name_rank] = _name_rank(table.names[: table.rows])
            order = memo[_NAME_ORDER] = np.argsort(rank)
            order.flags.writeable = False
        self.name_rank: np.ndarray = rank
        #: the rows in node-name order (``name_order[name_rank[r]] == r``)
        self.name_order: np.ndarray = memo[_NAME_ORDER]

    def pre_predicate(self, task: TaskInfo) -> str | None:
        for fn in self.callbacks.pre_predicate_fns.flat():
            reason = fn(task)
            if reason:
                return str(reason)
        return None

    def predicate(self, task: TaskInfo, node: NodeInfo) -> str | None:
        """All predicates on one node: None when the task fits, else the first failing reason."""
        rows = np.asarray([node.row], dtype=np.intp)
        for bp in self.callbacks.bulk_predicates():
            if not bool(bp.fn(task, rows)[0]):
                reasons = self._explain_one(bp, task, rows)
                return reasons or "node(s) didn't match a predicate"
        for fn in self.callbacks.predicate_fns.flat():
            reason = fn(task, node)
            if reason:
                return str(reason)
        return None

    def _explain_one(self, bp: BulkPred, task: TaskInfo, rows: np.ndarray) -> str:
        if bp.explain is None:
            return ""
        for reason, fails in bp.explain(task, rows).items():
            if bool(fails[0]):
                return reason
        return ""

    def feasible_mask(
        self,
        task: TaskInfo,
        rows: np.ndarray | None = None,
        resources: bool = True,
        local_only: bool = False,
        releasable: bool = True,
    ) -> np.ndarray:
        """Which of ``rows`` (default: every node) pass every predicate, as a boolean mask.
        ``resources=False`` leaves out the predicates that only check free resources (preemption);
        ``local_only`` the dynamic ones that are not node-local for this task (:meth:`_overlay`);
        ``releasable=False`` those that may fail for want of what evictions release (the nodes a
        preemptor may take with victims, before the dry run)."""
        if rows is None:
            rows = self.all_rows
            mask = self.static_mask(task).copy()
        else:
            mask = self.static_mask(task)[rows]
        dynamic = self._dynamic(task, resources, local_only, releasable)
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
        scalar = self.callbacks.predicate_fns.flat()
        if scalar and mask.any():
            node_list = self.node_list
            for i in np.flatnonzero(mask):
                node = node_list[int(rows[i])]
                for fn in scalar:
                    if fn(task, node):
                        mask[i] = False
                        break
        return mask

    def _dynamic(
        self, task: TaskInfo, resources: bool, local_only: bool, releasable: bool = True
    ) -> list[BulkPred]:
        """The enabled predicates that are not static, in order (``resources``: with those that only
        check free resources; ``local_only``: only the node-local ones for this task;
        ``releasable``: with those that may fail for want of what evictions release)."""
        return [
            bp
            for bp in self.callbacks.bulk_predicates()
            if not bp.static
            and (resources or not bp.resource)
            and (releasable or not bp.releasable)
            and applies_to(bp.applies, task)
            and (not local_only or is_local(bp.local, task))
        ]

    def row_local(self, task: TaskInfo) -> bool:
        """Whether the task's answer on a row (:meth:`feasible_mask`) changes only when that row is
        written in the node table: every enabled predicate is vectorised and node-local for it (no
        inter-pod term across a topology domain, no per-node Python predicate). Then a mask of it
        over every row may be kept in step with the table's write log."""
        key = self.callbacks.placement_key(task)
        ok = self._row_local.get(key) if key else None
        if ok is None:
            ok = not self.callbacks.predicate_fns.flat() and all(
                is_local(bp.local, task) for bp in self._dynamic(task, resources=True, local_only=False)
            )
            if key:
                self._row_local[key] = ok
        return ok

    def releasable_applies(self, task: TaskInfo) -> bool:
        """Whether a predicate that may fail for want of what evictions release applies to the task."""
        return any(
            bp.releasable and not bp.static and applies_to(bp.applies, task)
            for bp in self.callbacks.bulk_predicates()
        )

    @property
    def checks_resources(self) -> bool:
        """Whether an enabled predicate already checks free resources (so actions need not)."""
        return any(bp.resource for bp in self.callbacks.bulk_predicates())

    def _template_key(self, task: TaskInfo) -> bytes:
        """The key of what the engine caches per template for every node (static masks, the score
        split, the overlays): the placement key, less the pod's ResourceClaims part when a plugin's
        qualifier speaks for the claims (pods that differ only in their claims' names share them)."""
        key = self.callbacks.placement_key(task)
        if self.callbacks.claims_qualified and task.pod.spec.resource_claims:
            template = task.template
            return claims_free_template(template) + key[len(template) :]
        return key

    def static_mask(self, task: TaskInfo) -> np.ndarray:
        """Template-level predicates over all nodes, cached per pod template for the session."""
        key = self._template_key(task)
        mask = self._static_masks.get(key) if key else None
        if mask is None:
            mask = np.ones(self.table.rows, dtype=bool)
            for bp in self.callbacks.bulk_predicates():
                if bp.static and mask.any():
                    mask &= bp.fn(task, self.all_rows)
            if key:
                self._static_masks[key] = mask
        return mask

    def feasible_rows(
        self, task: TaskInfo, rows: np.ndarray | None = None, resources: bool = True, releasable: bool = True
    ) -> np.ndarray:
        rows_ = self.all_rows if rows is None else rows
        return rows_[self.feasible_mask(task, rows, resources, releasable=releasable)]

    def explain_predicates(
        self, task: TaskInfo, rows: np.ndarray | None = None, resources: bool = True
    ) -> dict[str, int]:
        """How many of ``rows`` fail each predicate reason (kube-scheduler style counts)."""
        rows = self.all_rows if rows is None else rows
        counts: dict[str, int] = {}
        remaining = np.ones(len(rows), dtype=bool)
        for bp in self.callbacks.bulk_predicates():
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
        scalar = self.callbacks.predicate_fns.flat()
        if scalar:
            node_list = self.node_list
            for i in np.flatnonzero(remaining):
                node = node_list[int(rows[i])]
                for predicate in scalar:
                    failed = predicate(task, node)
                    if failed:
                        counts[failed] = counts.get(failed, 0) + 1
                        break
        return counts

    # -- scores ------------------------------------------------------------------------------------
    def node_scores(self, task: TaskInfo, rows: np.ndarray, local_only: bool = False) -> np.ndarray:
        """Sum of every enabled node-order score for each of ``rows`` (``local_only``: the node-local
        bulk score parts alone, see :meth:`_overlay`)."""
        scores = np.zeros(len(rows))
        if local_only:
            for part in self._local_scores(task)[0]:
                scores += part(task, rows)
            return scores
        for bulk in self.callbacks.bulk_node_order_fns.flat():
            scores += bulk(task, rows)
        scalar = self.callbacks.node_order_fns.flat()
        batch = self.callbacks.batch_node_order_fns.flat()
        if scalar or batch:
            node_list = self.node_list
            nodes = [node_list[int(r)] for r in rows]
            for score in scalar:
                scores += np.fromiter((score(task, n) for n in nodes), dtype=np.float64, count=len(nodes))
            for batch_score in batch:
                by_name = batch_score(task, nodes)
                scores += np.fromiter(
                    (by_name.get(n.name, 0.0) for n in nodes), dtype=np.float64, count=len(nodes)
                )
        return scores

    def best_row(self, task: TaskInfo, rows: np.ndarray, scores: np.ndarray) -> int:
        """The highest-scoring row; ties go to the node whose name sorts first (deterministic)."""
        best_fns = self.callbacks.best_node_fns.flat()
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
        return int(ties[np.argmin(self.name_rank[ties])])

    # -- choosing a node ----------------------------------------------------------------------------
    def _incremental_ok(self, task: TaskInfo) -> bool:
        """Whether every predicate and score for this task is vectorised (no per-node callbacks):
        then node-local parts are cached per template and patched row by row, and the parts that
        are not node-local are laid over them on each call (:meth:`_overlay`)."""
        key = self.callbacks.placement_key(task)
        ok = self._incremental.get(key)
        if ok is None:
            ok = bool(key) and not (
                self.callbacks.predicate_fns.flat()
                or self.callbacks.node_order_fns.flat()
                or self.callbacks.batch_node_order_fns.flat()
                or self.callbacks.best_node_fns.flat()
            )
            self._incremental[key] = ok
        return ok

    def _local_scores(self, task: TaskInfo) -> tuple[list[BulkScore], list[BulkScore]]:
        """The enabled bulk score parts for this task: (node-local ones, the others); per template."""
        template = self._template_key(task)
        got = self._score_split.get(template) if template else None
        if got is None:
            got = self.callbacks.split_scores(task)
            if template:
                self._score_split[template] = got
        return got

    def _overlay(self, task: TaskInfo) -> tuple[bytes, list[BulkPred], list[BulkScore]]:
        """The dynamic predicates and the score parts that are not node-local for this task: a pod
        placed on one node changes their answer for others (its topology domain, a global minimum,
        a normalisation), so they are evaluated afresh on every call instead of cached. Also the
        key of the task's cached node-local results: templates that differ only in what the
        overlay reads (labels, namespace, spread constraints, pod affinity terms) share them."""
        template = self._template_key(task)
        got = self._overlays.get(template)
        if got is None:
            preds = [
                bp
                for bp in self.callbacks.bulk_predicates()
                if not bp.static and applies_to(bp.applies, task) and not is_local(bp.local, task)
            ]
            scores = self._local_scores(task)[1]
            spec = task.pod.spec
            if preds or scores or spec.resource_claims:
                # (a pod's claims make its template its own: what the node-local results read of
                # them comes from the plugins' qualifiers, e.g. the DRA part's claim shape)
                node_affinity = spec.affinity.node_affinity if spec.affinity else None
                ports = [p.host_port for c in spec.containers for p in c.ports if p.host_port]
                key = _key_encoder.encode(
                    (
                        sorted(task.init_resreq.to_dict().items()),
                        spec.node_selector,
                        node_affinity,
                        spec.tolerations,
                        ports,
                        [task.namespace, spec.volumes] if spec.volumes else None,
                        [id(bp) for bp in preds],
                        [id(fn) for fn in scores],
                    )
                )
                # what plugins read besides the template (add_template_qualifier) keeps caches apart
                key += self.callbacks.placement_key(task)[len(task.template) :]
            else:
                key = template
            got = self._overlays[template] = (key, preds, scores)
        return got

    def _placement_entry(self, task: TaskInfo, key: bytes) -> _Placement:
        table = self.table
        entry = self._placements.get(key)
        log = table.log
        if entry is not None and entry.version == table.version:
            return entry
        if (
            entry is not None
            and log is not None
            and table.version - entry.version <= max(8, table.rows // 16)
        ):
            written = log[len(log) - (table.version - entry.version) :]
            changed = np.array(written if len(written) == 1 else sorted(set(written)), dtype=np.intp)
            entry.patch(task, table, changed)
            entry.version = table.version
            return entry
        rows = self.all_rows
        fit_future = not self.checks_resources
        feasible = self.feasible_mask(task, local_only=True)
        if fit_future:
            feasible &= table.fits(task.init_resreq, rows)
        entry = _Placement(
            feasible,
            table.fits(task.init_resreq, rows, future=False),
            self.node_scores(task, rows, local_only=True),
            table.version,
            self.static_mask(task),
            [bp.fn for bp in self._dynamic(task, resources=True, local_only=True)],
            self._local_scores(task)[0],
            fit_future,
            self.name_rank,
            self.name_order,
        )
        self._placements[key] = entry
        return entry

    def best_placement(self, task: TaskInfo, rows: np.ndarray | None = None) -> tuple[int, bool] | None:
        """The best node for a task: (row, True) when it fits the node's idle resources now, (row,
        False) when only once releasing pods are gone (pipeline), None when no node passes.

        For a pod template whose predicates and scores are all vectorised, node-local results are
        cached for the session and patched only on the rows that changed since (per-pod work
        independent of the node count); the rest (:meth:`_overlay`) is evaluated on the rows the
        cache lets through, giving the same answer as a full evaluation. Given ``rows`` (a node
        group's, as the topology-aware allocate's dry runs ask), the cache is read on those rows
        only (:meth:`_cached_placement_in`)."""
        if self._incremental_ok(task):
            key, preds, extra_scores = self._overlay(task)
            entry = self._placement_entry(task, key)
            if rows is not None:
                return self._cached_placement_in(task, rows, entry, preds, extra_scores)
            if not preds and not extra_scores:
                # Everything is in the cache: the first maximum in name order is the answer.
                order = self.name_order
                k = int(entry.best_now.argmax())
                if entry.best_now[k] > -np.inf:
                    return int(order[k]), True
                k = int(entry.best_future.argmax())
                if entry.best_future[k] > -np.inf:
                    return int(order[k]), False
                return None
            feasible = entry.feasible
            if preds:
                passing = int(np.count_nonzero(feasible))
                if passing * 2 > len(feasible):
                    # most nodes left: evaluate over every row (column views, no gathers)
                    feasible = feasible.copy()
                    for bp in preds:
                        feasible &= bp.fn(task, self.all_rows)
                elif passing:
                    cand = np.flatnonzero(feasible)
                    ok = np.ones(len(cand), dtype=bool)
                    for bp in preds:
                        ok &= bp.fn(task, cand)
                        if not ok.any():
                            break
                    feasible = feasible.copy()
                    feasible[cand[~ok]] = False
            now = feasible & entry.now
            allocate = bool(now.any())
            pick = now if allocate else feasible
            if not allocate and not pick.any():
                return None
            if extra_scores:
                picked = np.flatnonzero(pick)
                sub = entry.scores[picked]
                for fn in extra_scores:
                    sub = sub + fn(task, picked)
                top = sub.max()
                ties = picked[sub >= top]
            else:
                scores = np.where(pick, entry.scores, -np.inf)
                top = scores.max()
                ties = np.flatnonzero(scores >= top)
            best = int(ties[0]) if len(ties) == 1 else int(ties[np.argmin(self.name_rank[ties])])
            return best, allocate
        return self.full_placement(task, rows)

    def _cached_placement_in(
        self,
        task: TaskInfo,
        rows: np.ndarray,
        entry: _Placement,
        preds: list[BulkPred],
        extra_scores: list[BulkScore],
    ) -> tuple[int, bool] | None:
        """:meth:`best_placement` on ``rows`` from the template's cached node-local results: the
        non-local predicates and scores evaluated on those rows only, as the full evaluation does."""
        rows = np.asarray(rows, dtype=np.intp)
        if not preds and not extra_scores:
            # Everything is in the cache: the rows' ranked scores of those that fit now; the best,
            # ties to the name that sorts first (the lowest rank). Only when one of them scores
            # above -inf (else the general reading below, which also reads pipelining). (argmax and
            # argmin: a group's rows are few, and numpy's max and min reductions cost several times
            # as much on a few values)
            ranks = self.name_rank[rows]
            ranked = entry.best_now[ranks]
            top = ranked[ranked.argmax()]
            if top > -np.inf:
                tied = ranks[ranked == top]
                return int(self.name_order[tied[tied.argmin()]]), True
        feasible = entry.feasible[rows]
        for bp in preds:
            if not feasible.any():
                break
            feasible &= bp.fn(task, rows)
        now = feasible & entry.now[rows]
        allocate = bool(now.any())
        picked = rows[now if allocate else feasible]
        if not len(picked):
            return None
        scores = entry.scores[picked]
        for fn in extra_scores:
            scores = scores + fn(task, picked)
        ties = picked[scores >= scores.max()]
        best = int(ties[0]) if len(ties) == 1 else int(ties[np.argmin(self.name_rank[ties])])
        return best, allocate

    def full_placement(self, task: TaskInfo, rows: np.ndarray | None = None) -> tuple[int, bool] | None:
        """:meth:`best_placement` by evaluating every predicate and score on ``rows`` (default: every
        node) afresh, without the per-template cache (the path of tasks whose plugins are not all
        vectorised, and the yardstick the cache is tested against)."""
        cand = self.feasible_rows(task, rows)
        if len(cand) and not self.checks_resources:
            cand = cand[self.table.fits(task.init_resreq, cand)]
        if not len(cand):
            return None
        fits_now = self.table.fits(task.init_resreq, cand, future=False)
        allocate = bool(fits_now.any())
        pick = cand[fits_now] if allocate else cand
        return self.best_row(task, pick, self.node_scores(task, pick)), allocate


_key_encoder = msgspec.json.Encoder()
