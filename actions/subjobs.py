"""Allocate for a job with sub-groups (its PodGroup's ``spec.subGroupPolicy``), in the order of
Volcano's allocate action (pkg/scheduler/actions/allocate/allocate.go), which routes every job with
sub-group policies through ``allocateForJob``:

1. the job's worksheet (``organizeJobWorksheet``): its sub-jobs that are not ready, in sub-job
   order (``Session.sub_job_order``), the first ``minSubGroups`` of each policy marked required;
   required ones go first, then sub-job order; each holds its pending pods (not gated, not
   best-effort) in task order. It lives for the whole action: a job that becomes ready with pods
   left goes back into its queue and goes on from where it stopped;
2. ``allocateForJob``: the job's gradients (``Session.hypernode_gradients`` from the cluster:
   tier by tier up to the job's own hard ``networkTopology``, else the cluster alone). In each
   gradient, every group is tried on a copy of the worksheet: sub-jobs are popped in order and
   each is placed inside the group (step 3); a sub-job placed with pods left is pushed back; the
   try stops once the job is ready. A try that leaves the job ready or pipelined scores the sum
   of its sub-jobs' scores. The best-scoring group of the first gradient with any wins (ties: the
   first by name; Volcano picks among ties at random) and its placements stand; else the next
   gradient;
3. ``allocateForSubJob``: the sub-job's gradients within the job's group (tier by tier up to
   its own hard ``networkTopology``, narrowed to the groups above the pods it already has placed,
   else the job's group alone). Every group of a gradient is dry-run (``allocateResourcesForTasks``:
   pods in task order, each on its best node in the group, stopping once the sub-job is ready;
   kept when the sub-job is ready or pipelined); the groups that fit are ranked by the HyperNode
   order (``Session.hypernode_scores``) and the best is placed for real; else the next gradient.

Dry runs are undone before the next one starts; the winner is placed again (placement is
deterministic for the same state), so only one dry run is ever live.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from caldera.actions.topology import job_requirement, session_topology, spec_tier
from caldera.framework.model import JobInfo, TaskInfo
from caldera.framework.session import Session
from caldera.framework.statement import Statement
from caldera.framework.subgroups import HARD, SOFT
from caldera.framework.subjobs import SubJob, SubJobs, sub_jobs
from caldera.framework.topology import GradientRequest, NodeGroup, Topology, TopologySettings

__all__ = [
    "PlaceTasks",
    "SubGroupOutcome",
    "Worksheet",
    "allocate_for_job",
    "job_tier",
    "narrowest_group",
    "organize",
    "outcomes",
    "sub_job_tier",
]

#: the allocate action's task placer (``actions.allocate.place_tasks``), handed in as the topology
#: allocate is handed ``allocate_job``
PlaceTasks = Callable[..., bool]


class Worksheet:
    """A job's sub-jobs still to place, in order, with their pending pods (Volcano's
    ``JobWorksheet`` / ``SubJobWorksheet``)."""

    __slots__ = ("key", "order", "tasks")

    def __init__(self, key: Callable[[SubJob], Any], order: list[SubJob], tasks: dict[str, list[TaskInfo]]):
        self.key = key
        self.order = order
        self.tasks = tasks

    def pop(self) -> SubJob:
        return self.order.pop(0)

    def push(self, sub: SubJob) -> None:
        bisect.insort(self.order, sub, key=self.key)

    def __bool__(self) -> bool:
        return bool(self.order)

    def clone(self) -> Worksheet:
        return Worksheet(self.key, list(self.order), {uid: list(t) for uid, t in self.tasks.items()})

    def take(self, other: Worksheet) -> None:
        """Become ``other`` (``ShallowCopyFrom``)."""
        self.order, self.tasks = other.order, other.tasks


def organize(ssn: Session, job: JobInfo) -> Worksheet:
    """``organizeJobWorksheet`` (see the module's text)."""
    subs = sub_jobs(ssn, job)
    ready: dict[str, int] = {}
    waiting: list[SubJob] = []
    for sub in subs:
        if ssn.sub_job_ready(job, sub):
            ready[sub.gid] = ready.get(sub.gid, 0) + 1
        else:
            waiting.append(sub)
    order_key = ssn.sub_job_key
    waiting.sort(key=order_key)
    required: set[str] = set()
    for sub in waiting:
        if ready.get(sub.gid, 0) < subs.min_sub_jobs.get(sub.gid, 0):
            required.add(sub.uid)
            ready[sub.gid] = ready.get(sub.gid, 0) + 1

    def key(sub: SubJob) -> tuple[bool, Any]:
        return sub.uid not in required, order_key(sub)

    tasks: dict[str, list[TaskInfo]] = {}
    for sub in subs:
        pending = [t for t in sub.pending() if not t.gated and not t.best_effort]
        if pending:
            pending.sort(key=ssn.task_key)
            tasks[sub.uid] = pending
    order = sorted((subs.by_uid[uid] for uid in tasks), key=key)
    return Worksheet(key, order, tasks)


@dataclass(frozen=True)
class SubGroupOutcome:
    """How a sub-group's last placement try of this session went (for explain): the job's group it
    was tried within, its highest tier (None: that group alone), how many groups were tried, the
    group it was placed in ("" when none) and why not."""

    within: str
    highest: int | None
    tried: int
    placed_in: str
    reason: str = ""


class _Outcomes:
    """``Session.memo`` key: per job uid, each sub-group's last ``SubGroupOutcome``."""


def outcomes(ssn: Session, job: JobInfo) -> dict[str, SubGroupOutcome]:
    """The session's sub-group outcomes of ``job`` (empty when allocate did not try it)."""
    made: dict[str, dict[str, SubGroupOutcome]] = ssn.memo(_Outcomes, dict)
    return made.setdefault(job.uid, {})


def job_tier(ssn: Session, job: JobInfo, topo: Topology, settings: TopologySettings) -> int | None:
    """The highest tier the job's gradient may reach (None: the whole cluster alone), after
    Volcano's ``adjustNetworkTopologySpec`` (pkg/scheduler/framework/session.go): a
    ``highestTierName`` is translated (``spec_tier``); a soft job becomes hard up to the cluster's
    top tier (``convertSoftToHardTopology``), so it is tried narrowest tier first and may end up
    anywhere; a hard job without a tier is not bounded (``JobInfo.IsHardTopologyMode``)."""
    req = job_requirement(job, settings, ssn)
    if req is None:
        return None
    return topo.top_tier if req.mode == SOFT else req.highest_tier


def sub_job_tier(
    ssn: Session, job: JobInfo, sub: SubJob, topo: Topology, job_bound: int | None
) -> int | None:
    """The highest tier a sub-job's gradient may reach inside its job's group (None: that group
    alone), after ``adjustNetworkTopologySpec``: its ``highestTierName`` translated; soft made hard
    up to the job's tier, or the cluster's top tier when the job has none
    (``convertSoftToHardTopology``, ``SubJobInfo.ConvertToHardTopology``); hard bounded only with a
    tier (``SubJobInfo.IsHardTopologyMode``)."""
    nt = sub.network_topology
    if nt is None:
        return None
    if nt.mode == SOFT:
        return job_bound if job_bound is not None else topo.top_tier
    if nt.mode != HARD:
        return None
    if nt.highest_tier_allowed is None and nt.highest_tier_name:
        where = f"subGroupPolicy {sub.policy} networkTopology" if sub.policy else "networkTopology"
        return spec_tier(ssn, job, nt, where)
    return nt.highest_tier_allowed


def narrowest_group(topo: Topology, ssn: Session, tasks: list[TaskInfo]) -> NodeGroup | None:
    """The narrowest group holding the nodes of ``tasks`` (None when none is placed)."""
    rows = sorted({ssn.nodes[t.node_name].row for t in tasks if t.node_name in ssn.nodes})
    if not rows:
        return None
    found = topo.containing(np.asarray(rows, dtype=np.intp))
    return found[0] if found else None


def _rows(topo: Topology, group: NodeGroup) -> np.ndarray | None:
    return None if group is topo.cluster else group.rows


def _place_sub_job(
    ssn: Session,
    place_tasks: PlaceTasks,
    job: JobInfo,
    subs: SubJobs,
    sub: SubJob,
    tasks: list[TaskInfo],
    rows: np.ndarray | None,
) -> Statement | None:
    """``allocateResourcesForTasks``: the sub-job's pods (consumed from ``tasks``) inside ``rows``;
    the statement when the sub-job is then ready or pipelined, else nothing changed."""
    queue = ssn.queues.get(job.queue)
    if queue is None:
        return None
    for task in sub.tasks:
        job.fit_errors.pop(task, None)  # ``ResetSubJobFitErr``
    stmt = ssn.statement()
    place_tasks(
        ssn,
        job,
        queue,
        tasks,
        stmt,
        rows,
        ready=lambda: ssn.sub_job_ready(job, sub),
        keep_going=lambda: subs.need_continue_allocating(job, sub),
    )
    if ssn.sub_job_ready(job, sub) or ssn.sub_job_pipelined(job, sub):
        return stmt
    stmt.discard()
    return None


def _allocate_sub_job(
    ssn: Session,
    place: PlaceTasks,
    topo: Topology,
    job: JobInfo,
    sub: SubJob,
    tasks: list[TaskInfo],
    within: NodeGroup,
    job_bound: int | None,
) -> tuple[Statement | None, float]:
    """``allocateForSubJob`` (see the module's text): the statement and the winning group's score."""
    if not tasks:
        return None, 0.0
    subs = sub_jobs(ssn, job)
    highest = sub_job_tier(ssn, job, sub, topo, job_bound)
    allocated = narrowest_group(topo, ssn, list(sub.allocated())) if highest is not None else None
    request = GradientRequest(topo, ssn.table, within, highest, allocated, sub.min_resources())
    found = ssn.hypernode_gradients(request)
    tried = 0
    for gradient in found or []:
        fits: list[NodeGroup] = []
        for group in gradient:
            tried += 1
            stmt = _place_sub_job(ssn, place, job, subs, sub, list(tasks), _rows(topo, group))
            if stmt is not None and len(stmt):
                fits.append(group)
            if stmt is not None:
                stmt.discard()
        if not fits:
            continue
        scores = ssn.hypernode_scores(sub, fits)
        best = max(fits, key=lambda g: scores[g.name])
        outcomes(ssn, job)[sub.uid] = SubGroupOutcome(within.name, highest, tried, best.name)
        return _place_sub_job(ssn, place, job, subs, sub, tasks, _rows(topo, best)), scores[best.name]
    if found is None:
        why = f"its placed pods span more than tier {highest} allows"
    else:
        bound = f" up to tier {highest}" if highest is not None else ""
        if tried:
            why = f"fits in none of the {tried} group(s){bound} tried within {within.name}"
        else:  # (the gradient's pre-filter: no group's idle or soon idle room holds its requests)
            why = f"no group{bound} within {within.name} has the room its pods ask for"
        failed = next((job.fit_errors[t.uid] for t in sub.tasks.values() if t.uid in job.fit_errors), "")
        why += f" ({failed})" if failed else ""
    outcomes(ssn, job)[sub.uid] = SubGroupOutcome(within.name, highest, tried, "", why)
    return None, 0.0


def _try_job_in(
    ssn: Session,
    place: PlaceTasks,
    topo: Topology,
    job: JobInfo,
    sheet: Worksheet,
    group: NodeGroup,
    job_bound: int | None,
) -> tuple[Statement | None, float]:
    """One group of ``allocateForJob``: sub-jobs popped in order and placed inside ``group``."""
    job.fit_errors.clear()  # ``ResetFitErr``
    stmts: list[Statement] = []
    score = 0.0
    while sheet:
        sub = sheet.pop()
        stmt, gained = _allocate_sub_job(ssn, place, topo, job, sub, sheet.tasks[sub.uid], group, job_bound)
        if stmt is None:
            continue
        if not len(stmt):
            stmt.discard()
            continue
        stmts.append(stmt)
        score += gained
        if sheet.tasks[sub.uid]:
            sheet.push(sub)
        if ssn.job_ready(job):
            break
    merged = ssn.statement()
    for stmt in stmts:
        merged.merge(stmt)
    if len(merged) and (ssn.job_ready(job) or ssn.job_pipelined(job)):
        return merged, score
    merged.discard()
    return None, 0.0


def allocate_for_job(ssn: Session, job: JobInfo, sheet: Worksheet, place: PlaceTasks) -> Statement | None:
    """``allocateForJob`` (see the module's text): the winning group's statement, live and not
    committed, with ``sheet`` left as that try left it; None when no group of any gradient works
    (the reason is recorded on the job)."""
    if not sheet:
        return None
    topo, settings = session_topology(ssn)
    highest = job_tier(ssn, job, topo, settings)
    allocated = None
    if highest is not None:
        allocated = narrowest_group(topo, ssn, [t for s in sub_jobs(ssn, job) for t in s.allocated()])
    request = GradientRequest(topo, ssn.table, topo.cluster, highest, allocated, job.min_resources)
    for gradient in ssn.hypernode_gradients(request) or []:
        scores: dict[str, float] = {}
        for group in gradient:
            stmt, score = _try_job_in(ssn, place, topo, job, sheet.clone(), group, highest)
            if stmt is not None:
                scores[group.name] = score
                stmt.discard()
        if not scores:
            continue
        best = max((g for g in gradient if g.name in scores), key=lambda g: scores[g.name])
        trial = sheet.clone()
        stmt, _ = _try_job_in(ssn, place, topo, job, trial, best, highest)
        sheet.take(trial)
        return stmt
    short = sub_jobs(ssn, job).short_of() or "the job's minimum is not reached"
    where = f" within tier {highest}" if highest is not None else ""
    ssn.record_job_error(job, f"sub-groups cannot be placed whole{where}: {short}")
    return None
