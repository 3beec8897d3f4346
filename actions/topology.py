"""Topology-aware gang allocation: choose one node group for a whole gang, knowing every predicate.

For a job with a network topology requirement (its PodGroup's ``networkTopology``, or the
``network-topology-aware`` plugin's default), the allocate action asks :func:`allocate_in_topology`
instead of placing the job cluster-wide. Tier by tier, narrowest first, up to the job's highest
allowed tier:

1. candidate groups: every group of the tier, or, for a job that already runs somewhere, only the
   groups holding all of its placed pods (restarted and added pods go back to where the job runs);
2. pruning without per-node dry runs: the predicates of every enabled plugin are evaluated once
   over all nodes for the first pod of each of the job's templates (static parts come from the
   session's per-template cache); from that mask and the nodes' idle resources, numpy gives each
   group its aggregate usable room and an upper bound of how many of the gang's pods its nodes can
   take one by one. A group short of either is dropped;
3. the rest are ranked by an upper bound of their score, and dry-run in that order: the job's pods
   are placed inside the group through a statement with every enabled predicate and node order
   score (the allocate action's own per-job placement). The score of a feasible group is exact
   once placed: by default the tightest fit (least idle left in the group, so large groups stay
   free for large jobs), or the opposite (``spread``). Ties go to the group whose name sorts first.
   Branch and bound: once no unevaluated group's bound can beat the best feasible one, the others
   are never dry-run, so the result is the same as evaluating all of them, in a fraction of the time;
4. the best group's statement is handed back live (the caller commits it); every other dry run is
   discarded. If no group of a tier fits, the next tier is tried. In hard mode a job that fits
   nowhere stays pending with a reason naming the tiers and the closest group's shortfall; in soft
   mode the caller falls back to the cluster-wide allocate.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from caldera.framework.model import JobInfo, TaskInfo, TaskStatus
from caldera.framework.nodetable import NodeTable
from caldera.framework.objects import NetworkTopologySpec
from caldera.framework.resource import MIN_RESOURCE
from caldera.framework.session import EventHandler, Session
from caldera.framework.statement import Op, Statement
from caldera.framework.topology import (
    HARD,
    SOFT,
    NodeGroup,
    Requirement,
    Segments,
    Topology,
    TopologySettings,
    label_domains,
    session_topology_of,
    tier_allowed,
)

log = logging.getLogger("caldera.topology")

__all__ = [
    "GroupTrial",
    "PlaceFn",
    "TopologyDecision",
    "allocate_in_topology",
    "allocate_topology_job",
    "job_requirement",
    "job_topology",
    "place_gang",
    "session_topology",
    "spec_tier",
]

#: Places a job's pending pods on the given node rows through a new statement; returns the live
#: statement when the job's gang is satisfied, else None with nothing changed.
PlaceFn = Callable[[Session, JobInfo, np.ndarray], "Statement | None"]

BINPACK = "binpack"
SPREAD = "spread"


@dataclass
class GroupTrial:
    """What happened to one candidate group (for reasons, debugging and tests)."""

    group: NodeGroup
    outcome: str  # "pruned", "infeasible", "feasible", "skipped" (bound could not win)
    bound: float = 0.0
    score: float | None = None
    placed: int = 0
    detail: str = ""
    deficit: float = 0.0


@dataclass
class TopologyDecision:
    requirement: Requirement
    #: the chosen group's live statement (uncommitted); None when nothing was placed
    statement: Statement | None = None
    group: NodeGroup | None = None
    #: soft mode found no group: the caller places the job cluster-wide
    fallback: bool = False
    reason: str = ""
    tiers_tried: list[int] = field(default_factory=list)
    #: how many more of the gang's pods had to be placed together
    need: int = 0
    #: the selector whose trials these are (made on first read of ``trials``)
    selector: _Selector | None = field(default=None, repr=False)
    #: the topology the groups were taken from (the session's, or a job's own label domains)
    topology: Topology | None = field(default=None, repr=False)

    @property
    def trials(self) -> list[GroupTrial]:
        """What happened to each candidate group (see ``_Selector.trials``)."""
        return self.selector.trials if self.selector is not None else []


# ------------------------------------------------------------------------------------------------
# the session's topology and a job's requirement
# ------------------------------------------------------------------------------------------------
def session_topology(ssn: Session) -> tuple[Topology, TopologySettings]:
    """The topology the network-topology-aware plugin published, else (Volcano's behaviour) one
    built from the HyperNode objects alone; built once per session."""
    published = ssn.report.topology
    if published is None:
        topo = session_topology_of(ssn)
        published = ssn.report.topology = (topo, TopologySettings())
    return published


def spec_tier(ssn: Session, job: JobInfo, spec: NetworkTopologySpec, where: str) -> int | None:
    """``tier_allowed`` over the session's topology; a ``highestTierName`` naming no tier is logged
    once per topology and published as a Warning Event on the job's PodGroup every session it is
    read (the status writer sends an Event only when it changes)."""
    topo, _ = session_topology(ssn)
    tier, problem = tier_allowed(spec, topo)
    if problem:
        key = (job.uid, where, spec.highest_tier_name)
        if key not in topo.unknown_names_logged:
            topo.unknown_names_logged.add(key)
            log.warning("job %s: %s: %s; no tier bound applied", job.uid, where, problem)
        published: set[tuple[str, str, str]] = ssn.memo(_TierNamesReported, set)
        if key not in published:
            published.add(key)
            ssn.report.events.append(("PodGroup", job.uid, "UnknownHighestTierName", f"{where}: {problem}"))
    return tier


class _TierNamesReported:
    """``Session.memo`` key: the unknown tier names this session published an Event for."""


class _LabelDomains:
    """``ssn.node_memo`` key: the label-domain topologies of this node layout, by label keys."""


def job_topology(ssn: Session, req: Requirement) -> tuple[Topology, TopologySettings]:
    """The topology a requirement is placed over: the session's, or for label keys (a Kubernetes
    PodGroup's topology constraint) their domains (``label_domains``), built once per node layout."""
    topo, settings = session_topology(ssn)
    if not req.label_keys:
        return topo, settings
    made: dict[tuple[str, ...], Topology] = ssn.node_memo(_LabelDomains, dict)
    domains = made.get(req.label_keys)
    if domains is None:
        domains = made[req.label_keys] = label_domains(ssn.node_list, req.label_keys)
    return domains, settings


def job_requirement(
    job: JobInfo, settings: TopologySettings, ssn: Session | None = None
) -> Requirement | None:
    """A Kubernetes PodGroup's topology keys (hard: one domain of them, KEP-5732), else the job's
    own ``networkTopology``, else the conf default for gangs (more than one pod). A
    ``highestTierName`` is read through the session's topology (``tier_allowed``); one that names
    no tier bounds nothing, as in Volcano: the job has no requirement (reported once, by
    ``report_tier_name``)."""
    if job.topology_keys:
        return Requirement(HARD, 1, label_keys=job.topology_keys)
    spec = job.network_topology
    if spec is not None:
        mode = (spec.mode or HARD).lower()
        if mode not in (HARD, SOFT):
            mode = HARD
        highest = spec.highest_tier_allowed
        if highest is None and spec.highest_tier_name and ssn is not None:
            highest = spec_tier(ssn, job, spec, "networkTopology")
            if highest is None:
                return None
        if highest is None:
            highest = settings.default_highest_tier
        return Requirement(mode, max(1, int(highest)))
    if settings.default_mode and job.min_available > 1:
        return Requirement(settings.default_mode, max(1, settings.default_highest_tier), from_default=True)
    return None


# ------------------------------------------------------------------------------------------------
# a simple per-job placer (the allocate action passes its own)
# ------------------------------------------------------------------------------------------------
def _pending(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    tasks = [t for t in job.tasks_in(TaskStatus.PENDING) if not t.pod.spec.scheduling_gates]
    if len(tasks) > 1:
        tasks.sort(key=ssn.task_key)
    return tasks


def _explain(ssn: Session, task: TaskInfo, rows: np.ndarray) -> str:
    counts = ssn.explain_predicates(task, rows)
    if not counts:
        return f"0/{len(rows)} nodes are available."
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    return f"0/{len(rows)} nodes are available: {parts}."


def place_gang(ssn: Session, job: JobInfo, rows: np.ndarray) -> Statement | None:
    """Task by task in task order: feasible rows within ``rows``, best-scoring node, allocate (or
    pipeline where only releasing resources make room). The statement stands when the job is
    ready (or pipelined) afterwards; otherwise it is discarded."""
    stmt = ssn.statement()
    table = ssn.table
    node_list = ssn.node_list
    for task in _pending(ssn, job):
        if ssn.pre_predicate(task):
            break
        feasible = ssn.feasible_rows(task, rows)
        if len(feasible) == 0:
            job.fit_errors[task.uid] = _explain(ssn, task, rows)
            break
        row = ssn.best_row(task, feasible, ssn.node_scores(task, feasible))
        cols, vals = table.request_vector(task.init_resreq)
        node = node_list[row]
        now = len(cols) == 0 or bool((table.idle[row, cols] >= vals - MIN_RESOURCE).all())
        # a task an event handler refuses is left pending, the others go on (Volcano's allocate)
        (stmt.allocate if now else stmt.pipeline)(task, node.name)
    if len(stmt) and ((job.is_ready() and ssn.job_ready(job)) or job.is_pipelined()):
        return stmt
    stmt.discard()
    return None


# ------------------------------------------------------------------------------------------------
# group selection
# ------------------------------------------------------------------------------------------------
class _Gang:
    """The job's pending pods as vectors over the node table's columns."""

    def __init__(self, ssn: Session, job: JobInfo) -> None:
        self.tasks = _pending(ssn, job)
        self.index = {t.uid: i for i, t in enumerate(self.tasks)}
        self.need = max(0, job.min_available - job.ready_task_num() - job.waiting_task_num())
        # the vectors depend on nothing but the pods' templates (in order) and the need: made once
        # per session for gangs alike
        templates = tuple(t.template for t in self.tasks)
        known: dict[tuple[object, ...], _Requests] = ssn.memo(_Requests, dict)
        key = (len(ssn.table.dims), self.need, templates) if all(templates) else None
        vectors = known.get(key) if key is not None else None
        if vectors is None:
            vectors = _Requests(ssn, self.tasks, self.need)
            if key is not None:
                if len(known) >= 1024:
                    known.clear()  # (a backlog of gangs of a shape each: kept small)
                known[(vectors.width, self.need, templates)] = vectors
        self.vectors = vectors
        #: each pending pod's request over the table's columns (row ``index[uid]``)
        self.req = vectors.req
        self.width = vectors.width
        self.full = vectors.full
        self.minimum = vectors.minimum
        self.smallest = vectors.smallest
        self.weight = vectors.weight
        # one representative per pod template: the static predicates depend on nothing else
        reps: dict[bytes, TaskInfo] = {}
        for t in self.tasks:
            reps.setdefault(t.template or t.uid.encode(), t)
        self.templates = list(reps.values())
        self.one_per_node = bool(self.templates) and all(_one_per_node(t) for t in self.templates)


class _Requests:
    """A gang's pods' requests over the node table's columns and what ``run_tier`` bounds by."""

    __slots__ = ("bounding", "full", "minimum", "need", "req", "smallest", "weight", "width")

    def __init__(self, ssn: Session, tasks: list[TaskInfo], need: int) -> None:
        table = ssn.table
        # request_vector may add a column for a scalar no node has: size after asking. Pods of one
        # template ask alike: asked once per template.
        vectors = []
        by_template: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        for t in tasks:
            got = by_template.get(t.template) if t.template else None
            if got is None:
                got = table.request_vector(t.resreq)
                if t.template:
                    by_template[t.template] = got
            vectors.append(got)
        width = len(table.dims)
        req = np.zeros((len(tasks), width))
        for i, (cols, vals) in enumerate(vectors):
            req[i, cols] = vals
        self.req = req
        self.width = width
        self.need = need
        self.full = req.sum(axis=0)
        # a lower bound of what any satisfying placement takes: the `need` smallest, per dimension
        self.minimum = np.sort(req, axis=0)[:need].sum(axis=0) if need else np.zeros(width)
        # no pod of the gang takes less than this, per dimension: bounds how many fit on a node
        self.smallest = req.min(axis=0) if len(tasks) else np.zeros(width)
        asked = np.flatnonzero(self.smallest > 0)
        #: the dimensions every pod asks for, and the least one asks there (what bounds the slots)
        self.bounding = (asked, self.smallest[asked])
        # dimensions that count for fit scores: what the gang asks for, except the pod count
        dims: np.ndarray = np.asarray(req.any(axis=0), dtype=bool)
        pods_col = table.dims.get("pods")
        if pods_col is not None and pods_col < width:
            dims[pods_col] = False
        total = ssn.memo((_Gang, width), lambda: table.allocatable[: table.rows, :width].sum(axis=0))
        weight = np.zeros(width)
        ok = dims & (total > 0)
        weight[ok] = 1.0 / total[ok]
        self.weight = weight


HOSTNAME = "kubernetes.io/hostname"


def _selects_itself(term_selector: object, labels: dict[str, str]) -> bool:
    match_labels = getattr(term_selector, "match_labels", None) or {}
    expressions = getattr(term_selector, "match_expressions", None) or []
    if not match_labels and not expressions:
        return term_selector is not None
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    for req in expressions:
        have = labels.get(req.key)
        if req.operator == "In" and have not in req.values:
            return False
        if req.operator == "NotIn" and have in req.values:
            return False
        if req.operator == "Exists" and have is None:
            return False
        if req.operator == "DoesNotExist" and have is not None:
            return False
    return True


def _one_per_node(task: TaskInfo) -> bool:
    """Two such pods never share a node: a host port, or required anti-affinity to pods like
    itself per hostname (the usual MPI and training worker spec)."""
    spec = task.pod.spec
    if any(p.host_port for c in spec.containers for p in c.ports):
        return True
    anti = spec.affinity.pod_anti_affinity if spec.affinity else None
    if anti is None:
        return False
    labels = task.pod.metadata.labels
    return any(
        term.topology_key == HOSTNAME
        and (not term.namespaces or task.namespace in term.namespaces)
        and _selects_itself(term.label_selector, labels)
        for term in anti.required_during_scheduling_ignored_during_execution
    )


def _usable_rows_mask(ssn: Session, gang: _Gang, rows: np.ndarray | None = None) -> np.ndarray:
    """Rows (of ``rows``, default every row) where at least one of the job's pod templates can go
    now, by every predicate (static parts come from the session's per-template cache). Placing more
    of the gang only takes room, ports and anti-affinity away, so a row that fails now stays failed;
    required pod affinity is the exception (the gang's own pods may satisfy it), so for such
    templates only the static predicates count."""
    static = ssn.static_mask
    mask = np.zeros(ssn.table.rows if rows is None else len(rows), dtype=bool)
    for t in gang.templates:
        if _needs_pod_affinity(t):
            mask |= static(t) if rows is None else static(t)[rows]
        else:
            mask |= ssn.feasible_mask(t, rows)
    return mask


def _needs_pod_affinity(task: TaskInfo) -> bool:
    affinity = task.pod.spec.affinity
    pa = affinity.pod_affinity if affinity else None
    return bool(pa and pa.required_during_scheduling_ignored_during_execution)


class _Room:
    """Per session: every row's room for a gang (idle plus releasing less pipelined, never below
    zero) and the same on schedulable nodes only, kept in step with the node table through its
    write log: a gang placed rewrites its few rows, not the table (the next job asks again)."""

    __slots__ = ("all_schedulable", "idle", "idle_all", "version", "width")

    def __init__(self) -> None:
        self.version = -1
        self.width = -1
        self.idle = np.zeros((0, 0))
        self.idle_all = np.zeros((0, 0))
        #: every row ready and schedulable (then ``idle_all`` equals ``idle``; a node's readiness
        #: and cordon are its spec's, unchanged within a session)
        self.all_schedulable = False

    def of(self, table: NodeTable) -> _Room:
        n, width = table.rows, len(table.dims)
        behind = table.version - self.version
        log = table.log
        if self.width == width and behind == 0:
            return self
        if self.width == width and log is not None and 0 < behind <= max(8, n // 16) and behind <= len(log):
            # (a handful of rows: a set is cheaper than np.unique's sort machinery)
            rows = np.fromiter(sorted(set(log[len(log) - behind :])), dtype=np.intp)
            self._fill(table, rows)
        else:
            self.idle = np.zeros((n, width))
            self.idle_all = np.zeros((n, width))
            self._fill(table, np.arange(n, dtype=np.intp))
            self.width = width
            self.all_schedulable = bool((table.ready[:n] & ~table.unschedulable[:n]).all())
        self.version = table.version
        return self

    def _fill(self, table: NodeTable, rows: np.ndarray) -> None:
        self.idle[rows], self.idle_all[rows] = _room_rows(table, rows, self.idle.shape[1])


def _room_rows(table: NodeTable, rows: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray]:
    """The room of ``rows`` for a gang (idle plus releasing less pipelined, never below zero, over
    the first ``w`` columns), and the same where the node is schedulable (zero elsewhere)."""
    idle = table.idle[rows, :w] + table.releasing[rows, :w] - table.pipelined[rows, :w]
    np.maximum(idle, 0.0, out=idle)
    schedulable = table.ready[rows] & ~table.unschedulable[rows]
    return idle, idle * schedulable[:, None]


def _group_sums(per_row: np.ndarray, segments: Segments) -> np.ndarray:
    """Each group's sums of a per-row array (rows along axis 0), one ``np.add.reduceat`` over the
    groups' rows laid end to end. The groups' slices are summed one by one, each by the same
    operation on a contiguous copy of the same values, whichever other groups are laid out with it
    and whichever other columns lie beside: a group's sums computed alone (``_TierSums.refresh``)
    are the very floats of the full pass."""
    return np.add.reduceat(np.ascontiguousarray(segments.laid_out(per_row)), segments.starts, axis=0)


#: ``np.add.reduceat``'s indices for one segment from the start (one group's sums, alone)
_FIRST = np.zeros(1, dtype=np.intp)

#: gang shapes (and request shapes per tier) whose rows a session keeps, the most recently used:
#: each is a few arrays over every row, and most gangs of a real cluster have a shape of their own
_KEPT = 16


def _group_of(ssn: Session, segments: Segments) -> np.ndarray | None:
    """Each row's group in ``segments`` (-1: none), made once per session and segments; None when a
    row is in two groups (overlapping HyperNodes of one tier: no per-row map)."""
    made: dict[int, tuple[Segments, np.ndarray | None]] = ssn.memo(_group_of, dict)
    got = made.get(id(segments))
    if got is not None and got[0] is segments:
        return got[1]
    group_of = np.full(ssn.table.rows, -1, dtype=np.intp)
    group_of[segments.rows] = np.repeat(np.arange(len(segments.groups), dtype=np.intp), segments.sizes)
    one_each = int(np.count_nonzero(group_of >= 0)) == len(segments.rows)
    made[id(segments)] = (segments, group_of if one_each else None)
    return made[id(segments)][1]


class _TierSums:
    """One tier's per-group sums for a gang shape (the columns of ``_GangRows.packed``: room on usable
    rows, room on schedulable rows, slots), which group each row is in (-1: none), and the groups'
    rankings for the gangs' requests (``ranking``)."""

    __slots__ = ("group_of", "kept", "packed", "rankings", "segments", "width")

    def __init__(
        self, segments: Segments, rows: _GangRows, kept: bool = False, group_of: np.ndarray | None = None
    ) -> None:
        self.segments = segments
        self.width = rows.width
        self.packed = _group_sums(rows.packed, segments)
        #: kept with the rows and refreshed with them (so are the rankings)
        self.kept = kept
        #: (kept) each row's group; None: summed afresh on every refresh
        self.group_of = group_of
        self.rankings: dict[tuple[int, bool, bool], _Ranking] = {}

    @property
    def agg_usable(self) -> np.ndarray:
        """Each group's room on its usable rows."""
        return self.packed[:, : self.width]

    @property
    def agg_all(self) -> np.ndarray:
        """Each group's room on its schedulable rows."""
        return self.packed[:, self.width : 2 * self.width]

    @property
    def slots(self) -> np.ndarray:
        """Each group's bound of how many of the gang's pods its nodes take one by one."""
        return self.packed[:, 2 * self.width]

    def ranking(self, vectors: _Requests, spread: bool, scored: bool) -> _Ranking:
        """Every group's shortfall, pruning and bound for gangs of these requests (for kept sums:
        kept with them and brought up to date with them)."""
        if not self.kept:
            return _Ranking(vectors, spread, scored, self.packed, self.width)
        key = (id(vectors), spread, scored)
        got = self.rankings.get(key)
        if got is None or got.vectors is not vectors:
            if len(self.rankings) >= _KEPT:
                self.rankings.clear()  # (gangs of many sizes: the arrays kept stay bounded)
            got = self.rankings[key] = _Ranking(vectors, spread, scored, self.packed, self.width)
        return got

    def refresh(self, rows: _GangRows, changed: np.ndarray) -> None:
        """Re-sum the groups holding ``changed`` rows from ``rows``' (already refreshed) per-row
        columns, group by group (the sums replaced, not written: a decision's trials keep them);
        the rankings follow."""
        if self.group_of is None:
            self.packed = _group_sums(rows.packed, self.segments)
            self.rankings = {}
            return
        dirty = sorted(i for i in set(self.group_of[changed].tolist()) if i >= 0)
        if not dirty:
            return
        groups = self.segments.groups
        per_row = rows.packed
        packed = self.packed = self.packed.copy()
        for i in dirty:
            packed[i] = np.add.reduceat(per_row[groups[i].rows], _FIRST, axis=0)[0]
        at = np.asarray(dirty, dtype=np.intp)
        for ranking in self.rankings.values():
            ranking.refresh(packed, at)


class _Ranking:
    """Per group, for gangs of one request shape: how far its usable room falls short of the least
    the gang takes (``short``), whether it is pruned (short of room or of slots), and an upper bound
    of its score (``bounds``: room left after the whole gang, tightest first, or after the least it
    takes for ``spread``). Each group's figures are its own row's (no sum across groups), so the
    groups whose sums changed are recomputed alone."""

    __slots__ = ("bounds", "pruned", "scored", "short", "spread", "vectors", "width")

    def __init__(
        self, vectors: _Requests, spread: bool, scored: bool, packed: np.ndarray, width: int
    ) -> None:
        self.vectors = vectors
        self.spread = spread
        self.scored = scored
        self.width = width
        self.short, self.pruned, self.bounds = self._of(packed)

    def _of(self, packed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The figures of the groups whose sums are ``packed``'s rows."""
        vectors, w = self.vectors, self.width
        short = vectors.minimum - packed[:, :w]
        pruned = packed[:, 2 * w] < vectors.need
        for j in range(w):  # (column by column: numpy's any along a short axis is slow)
            pruned |= short[:, j] > MIN_RESOURCE
        if not self.scored:
            return short, pruned, np.zeros(len(packed))
        target = vectors.minimum if self.spread else vectors.full
        raw = ((packed[:, w : 2 * w] - target) * vectors.weight).sum(axis=1)
        return short, pruned, (raw if self.spread else -raw).round(9)  # (np.round's own, less a call)

    def refresh(self, packed: np.ndarray, dirty: np.ndarray) -> None:
        """Recompute the ``dirty`` groups' figures (the arrays replaced: a decision's trials keep them)."""
        short, pruned, bounds = self._of(packed[dirty])
        self.short = self.short.copy()
        self.short[dirty] = short
        self.pruned = self.pruned.copy()
        self.pruned[dirty] = pruned
        self.bounds = self.bounds.copy()
        self.bounds[dirty] = bounds


class _GangRows:
    """Per row, what ``run_tier`` prunes and bounds groups by, for one gang shape: whether one of the
    gang's pod templates can go there (``usable``); and side by side in ``packed``, its room if
    usable, its room if schedulable, and an upper bound of how many of the gang's pods fit there
    (slots); and the per-group sums of those of the tiers asked (``tier_sums``).

    Made afresh for every gang, these cost work over every node (some 0.1 ms at 5,000 nodes, per
    gang whatever its size). So for gangs whose every predicate is vectorised and node-local
    (``PlacementEngine.row_local``: a row's answer changes only when that row is written), they are
    kept per session and shape (the set of the gang's pods' placement keys, at one table width) and
    brought up to date through the node table's write log: the rows written since (the nodes the
    previous gang took, a discarded dry run's) are recomputed by the same per-row operations, the
    groups holding them re-summed; every other row and group is reused. ``usable`` is replaced, not
    written, on refresh (a decision's trials read it later)."""

    __slots__ = ("gang", "kept", "packed", "sums", "usable", "version", "width")

    def __init__(self, ssn: Session, gang: _Gang, room: _Room, kept: bool) -> None:
        w = self.width = gang.width
        self.gang = gang
        #: kept in the session and refreshed (else made for one gang)
        self.kept = kept
        self.version = ssn.table.version
        self.sums: dict[int, _TierSums] = {}
        self.usable = _usable_rows_mask(ssn, gang)
        self.packed = self._packed(room.idle[:, :w], room.idle_all[:, :w], self.usable)

    def _packed(self, idle: np.ndarray, idle_all: np.ndarray, usable: np.ndarray) -> np.ndarray:
        """Per row (of ``idle``): its room if usable, its room if schedulable, and an upper bound of
        how many of the gang's pods fit there (node-by-node fit, which aggregate room alone does not
        see: 8 nodes with 3 cpu free hold no 4-cpu pod)."""
        gang = self.gang
        w = self.width
        out = np.empty((len(idle), 2 * w + 1))
        np.multiply(idle, usable[:, None], out=out[:, :w])
        out[:, w : 2 * w] = idle_all
        dims, smallest = gang.vectors.bounding
        if len(dims):
            per_dim = np.floor((idle[:, dims] + MIN_RESOURCE) / smallest)
            # column by column: numpy's min along a short axis costs 30 times as much
            slots = per_dim[:, 0].copy()
            for j in range(1, per_dim.shape[1]):
                np.minimum(slots, per_dim[:, j], out=slots)
            slots = slots * usable
        else:
            slots = np.where(usable, float(len(gang.tasks)), 0.0)
        if gang.one_per_node:
            np.minimum(slots, 1.0, out=slots)
        out[:, 2 * w] = slots
        return out

    @classmethod
    def of(cls, ssn: Session, gang: _Gang) -> _GangRows:
        """The gang's rows: the session's kept ones for its shape, refreshed, when its predicates
        allow; else made for it alone."""
        key = _shape_key(ssn, gang)
        if key is None:
            return cls(ssn, gang, ssn.memo(_Room, _Room).of(ssn.table), kept=False)
        kept: OrderedDict[tuple[object, ...], _GangRows] = ssn.memo(_GangRows, OrderedDict)
        rows = kept.get(key)
        if rows is not None and rows.refresh(ssn, gang):
            kept.move_to_end(key)
            return rows
        rows = kept[key] = cls(ssn, gang, ssn.memo(_Room, _Room).of(ssn.table), kept=True)
        kept.move_to_end(key)
        while len(kept) > _KEPT:
            kept.popitem(last=False)
        return rows

    def refresh(self, ssn: Session, gang: _Gang) -> bool:
        """Bring the rows up to the table's version from its write log; False when the log does not
        reach back far enough (or the table changed shape): then the caller makes them afresh."""
        table = ssn.table
        n = table.rows
        behind = table.version - self.version
        log = table.log
        if len(self.usable) != n or self.width != gang.width:
            return False
        self.gang = gang
        if behind == 0:
            return True
        if log is None or behind > max(8, n // 16) or behind > len(log):
            return False
        changed = np.fromiter(sorted(set(log[len(log) - behind :])), dtype=np.intp)
        w = self.width
        usable = _usable_rows_mask(ssn, gang, changed)
        self.usable = self.usable.copy()
        self.usable[changed] = usable
        # (the rows' room read from the table as _Room reads it: the session's _Room, kept for
        # gangs made afresh, is not brought up to date for a kept shape's gangs)
        idle, idle_all = _room_rows(table, changed, w)
        self.packed[changed] = self._packed(idle, idle_all, usable)
        for sums in self.sums.values():
            sums.refresh(self, changed)
        self.version = table.version
        return True

    def tier_sums(self, ssn: Session, segments: Segments, keep: bool) -> _TierSums:
        """The per-group sums over ``segments`` (``keep``, for a tier's own segments: kept with the
        rows, when they are kept)."""
        if not (keep and self.kept):
            return _TierSums(segments, self)
        sums = self.sums.get(id(segments))
        if sums is None or sums.segments is not segments:
            sums = self.sums[id(segments)] = _TierSums(segments, self, True, _group_of(ssn, segments))
        return sums


def _shape_key(ssn: Session, gang: _Gang) -> tuple[object, ...] | None:
    """What a gang's ``_GangRows`` depend on: its pods' placement keys (as a set: ``usable`` is any
    of them, ``slots`` their smallest request) at the table's width, and the count of its pods
    where no request bounds the slots. None when they may not be kept: a pod without a template,
    or a predicate that is not node-local for it (one pod placed changes other rows' answers)."""
    keys = set()
    row_local = ssn.placement.row_local
    for t in gang.templates:
        key = ssn.placement_key(t)
        if not key or not row_local(t):
            return None
        keys.add(key)
    bounded = bool(len(gang.vectors.bounding[0]))
    return (gang.width, tuple(sorted(keys)), 0 if bounded else len(gang.tasks))


class _Selector:
    def __init__(
        self,
        ssn: Session,
        job: JobInfo,
        topo: Topology,
        settings: TopologySettings,
        place: PlaceFn,
    ) -> None:
        self.ssn = ssn
        self.job = job
        self.topo = topo
        self.place = place
        self.spread = settings.score_policy == SPREAD
        #: network-topology-aware registered its group order with ``enabledHyperNodeOrder: false``:
        #: groups are not scored, the first that fits (by name) is taken
        self.scored = ssn.hypernode_order_on()
        self.gang = _Gang(ssn, job)
        rows = self.rows = _GangRows.of(ssn, self.gang)
        self.usable = rows.usable
        #: what each tier tried (see ``trials``)
        self._tiers: list[_TierTrials] = []

    # -- scores ----------------------------------------------------------------------------------
    def _leftover(self, agg: np.ndarray, placed: np.ndarray) -> float:
        return float(((agg - placed) * self.gang.weight).sum())

    def _score(self, agg_all: np.ndarray, stmt: Statement) -> tuple[float, int]:
        table = self.ssn.table
        gang = self.gang
        placed = np.zeros(gang.width)
        count = 0
        rows: list[int] = []
        for op in stmt.operations:
            if op.op in (Op.ALLOCATE, Op.PIPELINE):
                i = gang.index.get(op.task.uid)
                if i is not None:
                    rows.append(i)
                else:  # (not one of the pods the gang was made of)
                    cols, vals = table.request_vector(op.task.resreq)
                    keep = cols < gang.width
                    placed[cols[keep]] += vals[keep]
                count += 1
        if rows:
            placed += gang.req[rows].sum(axis=0)
        if not self.scored:
            return 0.0, count
        left = self._leftover(agg_all, placed)
        return _round9(left if self.spread else -left), count

    # -- one dry run -----------------------------------------------------------------------------
    def _dry_run(self, group: NodeGroup, usable_rows: np.ndarray) -> tuple[Statement | None, int, str]:
        ssn = self.ssn
        job = self.job
        peak = [0, 0]

        def on_alloc(e: object) -> None:
            peak[0] += 1
            peak[1] = max(peak[1], peak[0])

        def on_dealloc(e: object) -> None:
            peak[0] -= 1

        handler = EventHandler(allocate=on_alloc, deallocate=on_dealloc)  # type: ignore[arg-type]
        saved = dict(job.fit_errors)
        saved_error = job.job_fit_error
        job.fit_errors.clear()
        ssn.add_event_handler(handler)
        try:
            stmt = self.place(ssn, job, usable_rows)
        finally:
            ssn.event_handlers.remove(handler)
        detail = ""
        if stmt is None:
            detail = "; ".join(dict.fromkeys(job.fit_errors.values()))
        job.fit_errors.clear()
        job.fit_errors.update(saved)
        job.job_fit_error = saved_error
        return stmt, peak[1], detail

    # -- a tier ----------------------------------------------------------------------------------
    def run_tier(self, tier: int, candidates: list[NodeGroup]) -> tuple[NodeGroup, Statement] | None:
        """Prune and rank every candidate group of the tier at once (numpy over the groups' rows laid
        end to end, ``Topology.segments``: per-job work does not loop over groups in Python), then
        dry-run in bound order until no bound can beat the best group found."""
        gang = self.gang
        whole = candidates is self.topo.groups(tier)
        segments = self.topo.segments(tier) if whole else Segments.of(candidates)
        groups = segments.groups
        record = _TierTrials(self, groups)
        self._tiers.append(record)
        if not groups:
            return None
        starts = segments.starts
        laid_out = segments.laid_out
        # (kept for the tier's own segments, re-summed only where rows changed: _GangRows)
        sums = self.rows.tier_sums(self.ssn, segments, keep=whole)
        rank = sums.ranking(gang.vectors, self.spread, self.scored)
        pruned, bounds = rank.pruned, rank.bounds
        usable = self.usable
        record.pruned(
            pruned, rank.short, sums.slots, lambda: np.add.reduceat(laid_out(usable).astype(np.int64), starts)
        )
        # by bound, best first; ties by name (candidates come sorted by name): the best bound left,
        # its first group, one at a time (the order of the groups never reached is not needed)
        left = np.where(pruned, -np.inf, bounds)
        best: tuple[float, NodeGroup, Statement | None] | None = None
        while True:
            i = int(left.argmax())
            if left[i] == -np.inf:
                break  # (every group not pruned was dry-run)
            g = groups[i]
            bound = float(bounds[i])
            if best is not None and (bound < best[0] or (bound == best[0] and g.name > best[1].name)):
                # every later group's bound is no better: none can win
                record.skipped(left)
                break
            left[i] = -np.inf
            if best is not None and best[2] is not None:
                # only one dry run can be live at a time: the best one is re-run if it stays best
                best[2].discard()
                best = (best[0], best[1], None)
            stmt, placed, detail = self._dry_run(g, g.rows)
            if stmt is None:
                record.trials.append(GroupTrial(g, "infeasible", bound=bound, placed=placed, detail=detail))
                continue
            score, count = self._score(sums.agg_all[i], stmt)
            record.trials.append(GroupTrial(g, "feasible", bound=bound, score=score, placed=count))
            if best is None or score > best[0] or (score == best[0] and g.name < best[1].name):
                best = (score, g, stmt)
            else:
                stmt.discard()
        if best is None:
            return None
        stmt = best[2]
        if stmt is None:
            stmt, _, _ = self._dry_run(best[1], best[1].rows)
            if stmt is None:  # pragma: no cover - placement is deterministic for the same state
                return None
        return best[1], stmt

    @property
    def trials(self) -> list[GroupTrial]:
        """What happened to every candidate group, tier by tier: the pruned ones in candidate order,
        then the dry runs in the order they ran, then those skipped (made on first read: a job
        that is placed seldom needs them)."""
        out: list[GroupTrial] = []
        for record in self._tiers:
            out.extend(record.all())
        return out

    def _short_text(self, short: np.ndarray, usable_nodes: int, slots: int) -> str:
        need = self.gang.need
        if need and usable_nodes == 0:
            return "no node passes the pods' node predicates (selector, affinity, taints, readiness)"
        text = f"room for {slots} of {need} pods" if slots < need else ""
        names = {v: k for k, v in self.ssn.table.dims.items()}
        parts = []
        for col in np.flatnonzero(short > MIN_RESOURCE).tolist():
            name = names.get(col, str(col))
            value = float(short[col])
            if name == "cpu":
                parts.append(f"{value / 1000:g} cpu")
            elif name == "memory":
                parts.append(f"{value / 2**30:.3g}Gi memory")
            elif name == "pods":
                parts.append(f"{value:g} pod slots")
            else:
                parts.append(f"{value:g} {name}")
        if parts:
            text += (", " if text else "") + "short of " + ", ".join(parts)
        return text + " on its usable nodes"


def _round9(value: float) -> float:
    """Bounds and scores rounded alike (numpy's rounding, as the bounds are rounded in bulk), so
    that a bound equal to a score compares equal."""
    return float(np.round(value, 9))


class _TierTrials:
    """One tier's trials: the pruned groups kept as arrays until someone reads them."""

    def __init__(self, selector: _Selector, groups: list[NodeGroup]) -> None:
        self.selector = selector
        self.groups = groups
        self._pruned: tuple[np.ndarray, np.ndarray, np.ndarray, Callable[[], np.ndarray]] | None = None
        self.trials: list[GroupTrial] = []
        self._skipped: np.ndarray | None = None

    def pruned(
        self, mask: np.ndarray, short: np.ndarray, slots: np.ndarray, usable: Callable[[], np.ndarray]
    ) -> None:
        """``usable``: each group's count of usable nodes, counted when the trials are read."""
        self._pruned = (mask, short, slots, usable)

    def skipped(self, left: np.ndarray) -> None:
        """The groups whose bounds could not beat the best: those whose bound in ``left`` (by index
        into ``groups``) is above -inf (ordered when read: by bound, best first, then name)."""
        self._skipped = left

    def all(self) -> list[GroupTrial]:
        out: list[GroupTrial] = []
        if self._pruned is not None:
            mask, short, slots, count_usable = self._pruned
            usable = count_usable()
            gang = self.selector.gang
            for i in np.flatnonzero(mask).tolist():
                out.append(
                    GroupTrial(
                        self.groups[i],
                        "pruned",
                        placed=min(int(slots[i]), gang.need),
                        detail=self.selector._short_text(short[i], int(usable[i]), int(slots[i])),
                        deficit=float((np.maximum(short[i], 0.0) * gang.weight).sum()),
                    )
                )
        out.extend(self.trials)
        if self._skipped is not None:
            left = self._skipped
            indices = np.flatnonzero(left > -np.inf)
            bounds = left[indices]
            order = np.lexsort((indices, -bounds))
            out.extend(
                GroupTrial(self.groups[i], "skipped", bound=b)
                for i, b in zip(indices[order].tolist(), bounds[order].tolist(), strict=True)
            )
        return out


def _candidates(topo: Topology, tier: int, job_rows: np.ndarray) -> list[NodeGroup]:
    groups = topo.groups(tier)
    if len(job_rows) == 0:
        return groups
    return [g for g in groups if g.contains_rows(job_rows)]


def allocate_in_topology(
    ssn: Session,
    job: JobInfo,
    place: PlaceFn | None = None,
    requirement: Requirement | None = None,
) -> TopologyDecision | None:
    """Choose the job's group and place it there (see the module's text). None when the job has no
    topology requirement: the caller allocates it as usual."""
    published = ssn.report.topology
    req = requirement or job_requirement(
        job, published[1] if published is not None else TopologySettings(), ssn
    )
    if req is None:
        return None  # (without building a topology: most jobs of most clusters have no requirement)
    topo, settings = job_topology(ssn, req)
    decision = TopologyDecision(req, topology=topo)
    if not job.count(TaskStatus.PENDING):
        return decision
    selector = _Selector(ssn, job, topo, settings, place or place_gang)
    job_rows = topo.job_rows(job, ssn.nodes)
    tiers = [t for t in [*topo.tiers, topo.top_tier] if t <= req.highest_tier]
    if not req.label_keys and gradient_off(ssn):
        tiers = [topo.top_tier]  # no gradient: the whole cluster, as Volcano's [[clusterTop]]
    for tier in tiers:
        decision.tiers_tried.append(tier)
        candidates = _candidates(topo, tier, job_rows)
        found = selector.run_tier(tier, candidates)
        if found is not None:
            decision.group, decision.statement = found
            decision.selector = selector
            return decision
    decision.selector = selector
    decision.need = selector.gang.need
    decision.reason = _reason(topo, req, decision.tiers_tried, selector, job_rows)
    # kept for the job's explanation (scheduler/explain.py): failures only
    ssn.report.topology_failures[job.uid] = decision
    if req.mode == SOFT:
        decision.fallback = True
    else:
        ssn.record_job_error(job, decision.reason)
    return decision


def _reason(
    topo: Topology, req: Requirement, tiers: list[int], selector: _Selector, job_rows: np.ndarray
) -> str:
    tried = ", ".join(
        f"tier {t} ({topo.tier_label(t)}, {len(_candidates(topo, t, job_rows))} groups)" for t in tiers
    )
    head = f"{req.mode} network topology: no node group up to tier {req.highest_tier} can hold the gang"
    if not tiers:
        return f"{head}: the topology has no tier at or below {req.highest_tier} ({topo.describe()})"
    if len(job_rows) and not any(_candidates(topo, t, job_rows) for t in tiers):
        return f"{head}: the job already runs on nodes that no group up to tier {req.highest_tier} holds together"
    closest = _closest(selector.trials, selector.gang.need)
    text = f"{head} (tried {tried})"
    if closest is not None:
        text += f"; closest: tier {closest.group.tier} group {closest.group.name}: "
        if closest.outcome == "infeasible":
            need = max(selector.gang.need, 1)
            text += f"{closest.placed}/{need} pods placed"
            if closest.detail:
                text += f", {closest.detail}"
        else:
            text += closest.detail
    return text


def _closest(trials: list[GroupTrial], need: int) -> GroupTrial | None:
    """The group that came nearest: most pods placed in a dry run, else room for the most pods and
    the smallest resource deficit; ties by the narrower tier, then the name."""
    tried = [t for t in trials if t.outcome == "infeasible"]
    if tried:
        return min(tried, key=lambda t: (-t.placed, t.group.tier, t.group.name))
    pruned = [t for t in trials if t.outcome == "pruned"]
    if pruned:
        return min(pruned, key=lambda t: (-t.placed, t.deficit, t.group.tier, t.group.name))
    return None


def gradient_off(ssn: Session) -> bool:
    """network-topology-aware registered its gradient function with ``enabledHyperNodeGradient:
    false``: Volcano's ``HyperNodeGradientForJobFn`` then answers the root alone (the whole
    cluster), so a hard requirement bounds nothing (``Session.hypernode_gradients``)."""
    point = ssn.hypernode_gradient_fns
    return point.registered() and not point


def allocate_topology_job(ssn: Session, job: JobInfo, place: PlaceFn) -> bool:
    """The allocate action's hook: True when the job was dealt with here (placed inside one group,
    or left pending in hard mode); False when it is to be allocated cluster-wide as usual (no
    requirement, or soft mode found no group: then not asked again this session)."""
    fell_back = ssn.topology_fell_back
    if job.uid in fell_back:
        return False
    decision = allocate_in_topology(ssn, job, place)
    if decision is None:
        return False
    if decision.fallback:
        fell_back.add(job.uid)
        return False
    stmt = decision.statement
    if stmt is not None:
        if ssn.job_ready(job):
            stmt.commit()
        elif not ssn.job_pipelined(job):
            stmt.discard()
        # only pipelined: the statement's reservations stay in the session, as allocate does
    return True
