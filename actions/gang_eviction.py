"""What Volcano 1.15's gang-aware actions share (gangpreempt, gangreclaim): a starving job asks for
room for all its pending pods at once, inside one domain (node group), and victims are taken in
bundles that never leave a victim gang partly running.

As Volcano's ``Action.Execute`` of pkg/scheduler/actions/gangpreempt/gangpreempt.go and
gangreclaim/gangreclaim.go, and the helpers of pkg/scheduler/actions/utils/ (bundle.go,
simulate.go, util.go):

- starving jobs per queue, queues in queue order and jobs in job order (as preempt and reclaim);
  each job's turn is one statement, committed only when the job is then pipelined;
- the job's need is the sum of its pending pods' requests (``CollectPendingTasksForGangEviction``:
  gated and best-effort pods are left out);
- candidate domains (``GetCandidateDomains``): for a job with a network-topology requirement, its
  eviction gradients (the groups up to its tier whose allocatable holds its minimum, or that hold
  its placed pods; widest tier first, at most network-topology-aware's
  ``hypernode.gradient.evict.max-hypernodes``; a soft job reaches the cluster), at most
  ``maxDomains``; else, or when none and nothing of the job is hard-bound, the whole cluster;
- in each domain, the candidate victims of each victim job split into bundles
  (``CreateJobBundles``): a "safe" bundle of the pods its gang can spare (its surplus over
  minAvailable, and over each role's minimum when the roles' minimums fit in minAvailable) and a
  "whole" bundle of the rest, which is taken only all together (and frees the whole gang's room);
  bundles are ordered safe first, then by the action's victim order, then by how much of the need
  they free for what they cost (``bundleROI``); the plugins' unified evictable functions filter
  them (a whole bundle survives only entire); ``allowWholeBundle: false`` drops whole bundles;
- bundles are added one by one until the domain's idle and releasing room plus the victims hold
  the need; then a dry run (``BuildNominationPlanInDomain``) evicts the victims and places every
  pending pod inside the domain (queue allocatable, pre-predicates, predicates, node order; a node
  idle now before one that frees up later); if the job is then pipelined the plan is kept, else
  the next bundle is added, then the next domain.

A job with sub-group policies (``subGroupPolicy``): its victims' bundles keep each policy's
``minSubGroups`` whole sub-groups, and its dry run places it sub-group by sub-group, each inside
one group of its eviction gradients when it or its job is hard-bound. Not modelled: Volcano's
sub-group nominations (``ApplySubJobNominations``: the HyperNode each sub-group was planned in,
which Volcano's next allocate tries first); Caldera's next allocate searches the gradients again.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from caldera.actions.helpers import (
    EVICTABLE_STATUSES,
    OrderedHeap,
    job_preemptable_for_gang,
    pending_tasks,
    resreq_of,
)
from caldera.actions.preempt import starving_jobs
from caldera.actions.subjobs import job_tier, narrowest_group, organize, sub_job_tier
from caldera.actions.topology import job_requirement, job_topology, session_topology
from caldera.framework.callbacks import EvictionContext
from caldera.framework.model import ALLOCATED_STATUSES, JobInfo, QueueInfo, TaskInfo, TaskStatus
from caldera.framework.plugin import Action, Arguments
from caldera.framework.resource import Resource
from caldera.framework.session import Session
from caldera.framework.statement import Statement
from caldera.framework.subjobs import SubJob, SubJobs, sub_jobs
from caldera.framework.topology import GradientRequest, NodeGroup

log = logging.getLogger("caldera.actions")

#: Volcano's defaultMaxDomains and defaultWholeBundleOn (gangpreempt.go, gangreclaim.go)
DEFAULT_MAX_DOMAINS = 8
DEFAULT_ALLOW_WHOLE = True


@dataclass
class Bundle:
    """Victims of one job taken together: ``whole`` ones only all at once (Volcano's utils.Bundle)."""

    whole: bool
    job: JobInfo
    tasks: list[TaskInfo]
    #: what evicting the bundle frees in the domain
    local: Resource = field(default_factory=Resource)
    #: what it costs: for a whole bundle, every pod of the gang; nothing for a safe one
    total: Resource = field(default_factory=Resource)


def job_bundles(job: JobInfo, local: list[TaskInfo], subs: SubJobs | None = None) -> list[Bundle]:
    """Volcano ``CreateJobBundles`` (pkg/scheduler/actions/utils/bundle.go): the candidates lowest
    priority first (then uid); each is safe while the job keeps a surplus over minAvailable, its
    role over its own minimum (roles counted only when their minimums fit in minAvailable, as the
    gang plugin's CheckTaskReady) and, for a job with sub-group policies (``subs``), its sub-group's
    policy a ready sub-group to spare over ``minSubGroups`` (``groupSurplus``; a sub-group already
    missing a pod costs nothing more, and the first pod taken from a whole one costs its policy one
    ready sub-group); a job already below its minimum has nothing left to protect: all its
    candidates are safe. A native PodGroup of ``disruptionMode:
    PodGroup`` (KEP-5710) is one whole bundle of every running pod of the group, wherever it runs
    (none when one of them may not be a victim)."""
    if not local:
        return []
    if job.disrupt_whole:
        everyone = sorted(job.tasks_in(*EVICTABLE_STATUSES), key=lambda t: (t.priority, t.uid))
        if not all(t.preemptable for t in everyone):
            return []
        return [Bundle(True, job, everyone, resreq_of(local), resreq_of(list(job.tasks.values())))]
    local = sorted(local, key=lambda t: (t.priority, t.uid))
    surplus = job.ready_task_num() - job.min_available
    if surplus < 0:
        return [Bundle(False, job, local, resreq_of(local))]
    role_surplus: dict[str, int] = {}
    if job.min_available >= sum(job.task_min_available.values()):
        ready: dict[str, int] = {}
        for t in job.tasks.values():
            held = t.status in ALLOCATED_STATUSES or t.status == TaskStatus.SUCCEEDED
            if held or (t.status == TaskStatus.PENDING and t.init_resreq.is_empty()):
                ready[t.role] = ready.get(t.role, 0) + 1
        role_surplus = {role: ready.get(role, 0) - n for role, n in job.task_min_available.items()}
    broken: set[str] = set()
    group_surplus: dict[str, int] = {}
    enforce = subs is not None and bool(subs.min_sub_jobs)
    if subs is not None and enforce:
        for each in subs:
            if each.is_ready():
                group_surplus[each.gid] = group_surplus.get(each.gid, 0) + 1
            else:
                broken.add(each.uid)
        for gid, need in subs.min_sub_jobs.items():
            group_surplus[gid] = group_surplus.get(gid, 0) - need
    safe: list[TaskInfo] = []
    whole: list[TaskInfo] = []
    for t in local:
        role_left = role_surplus.get(t.role)
        sub = subs.of(t) if subs is not None and enforce else None
        if sub is None:
            sub_safe = not enforce  # (a pod in no sub-group: Volcano routes it to whole defensively)
        else:
            sub_safe = sub.uid in broken or group_surplus.get(sub.gid, 0) > 0
        if surplus > 0 and (role_left is None or role_left > 0) and sub_safe:
            safe.append(t)
            surplus -= 1
            if role_left is not None:
                role_surplus[t.role] = role_left - 1
            if sub is not None and sub.uid not in broken:
                broken.add(sub.uid)
                group_surplus[sub.gid] = group_surplus.get(sub.gid, 0) - 1
        else:
            whole.append(t)
    out = []
    if safe:
        out.append(Bundle(False, job, safe, resreq_of(safe)))
    if whole:
        out.append(Bundle(True, job, whole, resreq_of(whole), resreq_of(list(job.tasks.values()))))
    return out


def _score(res: Resource, need: Resource, cap: bool) -> float:
    score = 0.0
    for name, n in need.items():
        if n <= 0:
            continue
        v = res.get(name)
        score += (min(v, n) if cap else v) / n
    return score


def bundle_roi(bundle: Bundle, need: Resource) -> float:
    """Volcano ``bundleROI``: the share of the need the bundle frees here over what it costs in
    all (infinite for a safe bundle, which costs no gang)."""
    cost = _score(bundle.total, need, False)
    return math.inf if cost == 0 else _score(bundle.local, need, True) / cost


def sort_bundles(
    bundles: list[Bundle], need: Resource, victim_first: Callable[[Bundle, Bundle], int]
) -> None:
    """Volcano ``SortBundlesForPreempt`` / ``SortBundlesForReclaim``: safe before whole, then the
    action's victim order (``victim_first``: <0 when the left bundle goes first, 0 when it does not
    decide), then the higher ROI, then job uid, first pod uid and size."""

    def cmp(left: Bundle, right: Bundle) -> int:
        if left.whole != right.whole:
            return 1 if left.whole else -1
        if left.job.uid != right.job.uid:
            decided = victim_first(left, right)
            if decided:
                return decided
        lr, rr = bundle_roi(left, need), bundle_roi(right, need)
        if lr != rr:
            return -1 if lr > rr else 1
        lkey = (left.job.uid, left.tasks[0].uid if left.tasks else "", len(left.tasks))
        rkey = (right.job.uid, right.tasks[0].uid if right.tasks else "", len(right.tasks))
        return (lkey > rkey) - (lkey < rkey)

    bundles.sort(key=functools.cmp_to_key(cmp))


def decided(left_first: bool, right_first: bool) -> int:
    """A less-function's two answers as a comparison: 0 when they agree (it does not decide)."""
    return 0 if left_first == right_first else (-1 if left_first else 1)


def apply_allowed(bundles: list[Bundle], allowed: set[str]) -> list[Bundle]:
    """Volcano ``ApplyAllowedTasks``: a whole bundle stays only if every pod is allowed; a safe
    one keeps its allowed pods."""
    out = []
    for b in bundles:
        kept = [t for t in b.tasks if t.uid in allowed]
        if b.whole:
            if kept and len(kept) == len(b.tasks):
                out.append(b)
        elif kept:
            out.append(Bundle(False, b.job, kept, resreq_of(kept)))
    return out


def pick_domains(gradients: list[list[str]], max_domains: int, fallback: str) -> list[str]:
    """Volcano ``PickDomainsFromGradients`` (pkg/scheduler/actions/utils/util.go): the domains of
    the gradients in order, each once, at most ``max_domains``; ``fallback`` when there are none."""
    seen: set[str] = set()
    out: list[str] = []
    for level in gradients:
        for name in level:
            if name in seen:
                continue
            seen.add(name)
            out.append(name)
            if 0 < max_domains <= len(out):
                return out
    if not out and fallback:
        out.append(fallback)
    return out


def candidate_domains(ssn: Session, job: JobInfo, max_domains: int) -> list[NodeGroup]:
    """Volcano ``GetCandidateDomains`` (pkg/scheduler/actions/utils/util.go): the job's HyperNode
    gradients for eviction (``HyperNodeGradientForJobFn`` with ``PurposeEvict``: the groups up to
    its tier whose allocatable holds its minimum, or that hold its placed pods, widest tier first,
    capped by network-topology-aware's ``hypernode.gradient.evict.max-hypernodes``), each once, at
    most ``max_domains`` (``PickDomainsFromGradients``); the whole cluster when there are none and
    neither the job nor a sub-group of it is hard-bound (``ContainsHardTopology``). A job without a
    topology requirement: the cluster. A Kubernetes PodGroup's topology keys: their domains that
    hold its placed pods, in name order."""
    topo, settings = session_topology(ssn)
    req = job_requirement(job, settings, ssn)
    if req is None and job.sub_groups is None:
        return [topo.cluster]
    if req is not None and req.label_keys:
        domains, _ = job_topology(ssn, req)
        placed = domains.job_rows(job, ssn.nodes)
        level = (
            [g for g in domains.groups(domains.tiers[0]) if g.contains_rows(placed)] if domains.tiers else []
        )
        return level[:max_domains] if max_domains > 0 else level
    bound = job_tier(ssn, job, topo, settings)
    allocated = None
    if bound is not None:
        allocated = narrowest_group(topo, ssn, list(job.tasks_in(*ALLOCATED_STATUSES, TaskStatus.PIPELINED)))
    request = GradientRequest(topo, ssn.table, topo.cluster, bound, allocated, job.min_resources, evict=True)
    found = ssn.hypernode_gradients(request) or []
    hard = (
        bound is not None
        or any(sub_job_tier(ssn, job, sub, topo, bound) is not None for sub in sub_jobs(ssn, job))
        if job.sub_groups is not None
        else bound is not None
    )
    by_key = {g.key: g for level in found for g in level}
    by_key[topo.cluster.key] = topo.cluster
    keys = pick_domains(
        [[g.key for g in level] for level in found], max_domains, "" if hard else topo.cluster.key
    )
    return [by_key[k] for k in keys]


def gang_pending(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    """Volcano ``CollectPendingTasksForGangEviction`` (pkg/scheduler/actions/utils/simulate.go):
    the pending pods the job asks room for (gated and best-effort ones left out). For a job with
    sub-group policies, in its worksheet's order (``organizeEvictionWorksheet``): every sub-group's
    while the job is not ready (``collectPendingTasksForJobStartup``), the first sub-group's alone
    once it is (``collectPendingTasksForRunningJob``)."""
    if job.sub_groups is None:
        return pending_tasks(ssn, job)
    sheet = organize(ssn, job)
    order = [sheet.tasks[sub.uid] for sub in sheet.order]
    if ssn.job_ready(job):
        return list(order[0]) if order else []
    return [t for tasks in order for t in tasks]


class GangEvictionAction(Action):
    """The shared walk of gangpreempt and gangreclaim; a subclass says whose pods are candidates
    and in which order victim bundles go."""

    kind: ClassVar[str] = ""
    arguments_schema: ClassVar[dict[str, type]] = {"maxDomains": int, "allowWholeBundle": bool}

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        # Volcano parseArguments (gangpreempt.go, gangreclaim.go)
        max_domains = arguments.int("maxDomains", DEFAULT_MAX_DOMAINS)
        if max_domains <= 0:
            log.warning(
                "action %s: maxDomains %d is not positive; using the default %d",
                self.name,
                max_domains,
                DEFAULT_MAX_DOMAINS,
            )
            max_domains = DEFAULT_MAX_DOMAINS
        self.max_domains = max_domains
        self.allow_whole = arguments.bool("allowWholeBundle", DEFAULT_ALLOW_WHOLE)

    def execute(self, ssn: Session) -> None:
        by_queue = starving_jobs(ssn)
        queues = OrderedHeap(ssn.queue_key, (ssn.queues[n] for n in by_queue))
        while queues:
            queue = queues.pop()
            if not self.queue_may_act(ssn, queue):
                continue
            jobs = OrderedHeap(ssn.job_key, by_queue[queue.name])
            while jobs:
                job = jobs.pop()
                stmt = ssn.statement()
                self.evict_for_job(ssn, stmt, queue, job)
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()

    # -- what the two actions differ in ---------------------------------------------------------
    def queue_may_act(self, ssn: Session, queue: QueueInfo) -> bool:
        return True

    def job_may_act(self, ssn: Session, queue: QueueInfo, pending: list[TaskInfo]) -> bool:
        return True

    def is_candidate(self, ssn: Session, job: JobInfo, task: TaskInfo, victim: JobInfo) -> bool:
        raise NotImplementedError

    def victim_first(self, ssn: Session, job: JobInfo) -> Callable[[Bundle, Bundle], int]:
        raise NotImplementedError

    # -- the shared walk -------------------------------------------------------------------------
    def evict_for_job(self, ssn: Session, stmt: Statement, queue: QueueInfo, job: JobInfo) -> None:
        pending = gang_pending(ssn, job)
        if not pending or not self.job_may_act(ssn, queue, pending):
            return
        need = _sum_init(pending)
        node_list = ssn.node_list
        for group in candidate_domains(ssn, job, self.max_domains):
            domain, rows = group.name, group.rows
            if not len(rows):
                continue
            bundles = self.select_bundles(ssn, job, need, domain, rows)
            if not bundles:
                continue
            room = Resource()
            for r in rows.tolist():
                room.add(node_list[r].idle).add(node_list[r].releasing)
            victims: list[TaskInfo] = []
            taken: list[Bundle] = []
            for bundle in bundles:
                victims.extend(bundle.tasks)
                taken.append(bundle)
                room.add(bundle.local)
                if not need.less_equal(room, "zero"):
                    continue
                plan = self.dry_run(ssn, queue, job, group, victims)
                if plan is not None:
                    if len(taken) > 1 and any(ssn.releasable_applies(t) for t in pending):
                        plan = self.reprieve(ssn, queue, job, group, taken, plan)
                    stmt.merge(plan)
                    return

    def select_bundles(
        self, ssn: Session, job: JobInfo, need: Resource, domain: str, rows: np.ndarray
    ) -> list[Bundle]:
        """Volcano ``selectDomainBundles``: the domain's candidate victims in bundles, filtered by
        the plugins' unified evictable functions, in victim order."""
        by_job: dict[str, list[TaskInfo]] = {}
        node_list = ssn.node_list
        for r in rows.tolist():
            for t in node_list[r].tasks.values():
                if not t.preemptable or t.job == job.uid:
                    continue
                victim = ssn.jobs.get(t.job)
                if victim is None or not job_preemptable_for_gang(victim):
                    continue
                if self.is_candidate(ssn, job, t, victim):
                    by_job.setdefault(t.job, []).append(t)
        bundles = []
        for uid, tasks in by_job.items():
            victim = ssn.jobs[uid]
            subs = sub_jobs(ssn, victim) if victim.sub_groups is not None else None
            bundles.extend(job_bundles(victim, tasks, subs))
        if not bundles:
            return []
        first = self.victim_first(ssn, job)
        sort_bundles(bundles, need, first)
        flat = [t for b in bundles for t in b.tasks]
        allowed = ssn.unified_evictable(EvictionContext(self.kind, job, domain), flat)
        valid = apply_allowed(bundles, {t.uid for t in allowed})
        sort_bundles(valid, need, first)
        return [b for b in valid if self.allow_whole or not b.whole]

    def reprieve(
        self,
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        domain: NodeGroup,
        taken: list[Bundle],
        plan: Statement,
    ) -> Statement:
        """For a job whose pods need what evictions release (DRA devices): bundles were added until
        the dry run placed the job, so the last is needed; each earlier one (latest first) is spared
        when the job is still placed without it, so a gang holding no device the job can use (and
        not needed for its cpu or memory) is not evicted (kube-scheduler's reprieve of victims in
        ``SelectVictimsOnNode``, by bundle). Returns the plan kept (applied in the session)."""
        kept = list(taken)
        for bundle in reversed(taken[:-1]):
            plan.discard()
            trial = [b for b in kept if b is not bundle]
            again = self.dry_run(ssn, queue, job, domain, _victims(trial))
            if again is not None:
                kept, plan = trial, again
                continue
            restored = self.dry_run(ssn, queue, job, domain, _victims(kept))
            if restored is None:  # the same trial placed the job a moment ago: never expected
                log.error("%s: the victims kept no longer place job %s; nothing evicted", self.name, job.uid)
                return ssn.statement()
            plan = restored
        return plan

    def dry_run(
        self, ssn: Session, queue: QueueInfo, job: JobInfo, domain: NodeGroup, victims: list[TaskInfo]
    ) -> Statement | None:
        """Volcano ``BuildNominationPlanInDomain`` (pkg/scheduler/actions/utils/simulate.go): evict
        the victims, place the pending pods inside the domain; the statement when the job is then
        pipelined, else None (and the session as before). A job with sub-group policies is placed
        sub-group by sub-group as allocate orders them (``organizeEvictionWorksheet``: required
        ones first); with a hard-bound job or sub-group each sub-group goes in the first group of
        its eviction gradients within the domain where it fits (``HyperNodeGradientForSubJobFn``
        with ``PurposeEvict``), else in the domain; it stops once the job is pipelined, or after
        one sub-group when the job was already ready."""
        trial = ssn.statement()
        for v in victims:
            if v.status in EVICTABLE_STATUSES:
                trial.evict(v, self.kind)
        if job.sub_groups is not None:
            return self._dry_run_sub_groups(ssn, queue, job, domain, trial)
        placed = _simulate(ssn, queue, pending_tasks(ssn, job), domain.rows, trial)
        if not placed or not ssn.job_pipelined(job):
            trial.discard()
            return None
        return trial

    def _dry_run_sub_groups(
        self, ssn: Session, queue: QueueInfo, job: JobInfo, domain: NodeGroup, trial: Statement
    ) -> Statement | None:
        sheet = organize(ssn, job)
        if not sheet:
            trial.discard()
            return None
        was_ready = ssn.job_ready(job)
        topo, settings = session_topology(ssn)
        bound = job_tier(ssn, job, topo, settings)
        subs = sub_jobs(ssn, job)
        tiers = {sub.uid: sub_job_tier(ssn, job, sub, topo, bound) for sub in subs}
        hard = bound is not None or any(t is not None for t in tiers.values())
        pipelined = False
        while sheet:
            sub = sheet.pop()
            tasks = sheet.tasks[sub.uid]
            groups = [domain]
            if hard:
                tier = tiers[sub.uid]
                allocated = narrowest_group(topo, ssn, list(sub.allocated())) if tier is not None else None
                request = GradientRequest(
                    topo, ssn.table, domain, tier, allocated, sub.min_resources(), evict=True
                )
                groups = [g for level in ssn.hypernode_gradients(request) or [] for g in level]
            if not any(self._try_sub_group(ssn, queue, job, sub, tasks, g, trial) for g in groups):
                trial.discard()
                return None
            pipelined = ssn.job_pipelined(job)
            if was_ready or pipelined:
                break
        if not pipelined:
            trial.discard()
            return None
        return trial

    @staticmethod
    def _try_sub_group(
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        sub: SubJob,
        tasks: list[TaskInfo],
        group: NodeGroup,
        trial: Statement,
    ) -> bool:
        """``runSimulateTrialAtHyperNode``: every pod of the sub-group's worksheet inside the group;
        kept (merged into ``trial``) when something was placed and the sub-group is then ready or
        pipelined."""
        stmt = ssn.statement()
        placed = _simulate(ssn, queue, list(tasks), group.rows, stmt)
        if placed and (ssn.sub_job_ready(job, sub) or ssn.sub_job_pipelined(job, sub)):
            trial.merge(stmt)
            return True
        stmt.discard()
        return False


def _simulate(
    ssn: Session, queue: QueueInfo, tasks: list[TaskInfo], rows: np.ndarray, stmt: Statement
) -> int:
    """Pipeline ``tasks`` inside ``rows`` through ``stmt`` (``runSimulateTrialAtHyperNode``'s
    loop: queue allocatable, pre-predicates, predicates with what evictions release, node order; a
    node idle now before one that frees up later, ``prioritizeNodesForSimulate``): how many were
    placed, 0 when one of them could not be (``stmt`` then still holds the ones before it)."""
    placed = 0
    for task in tasks:
        if not ssn.allocatable(queue, task) or ssn.pre_predicate(task):
            return 0
        feasible = ssn.feasible_rows(task, rows, resources=False)
        fits = feasible[ssn.table.fits(task.init_resreq, feasible, True)]
        if not len(fits):
            return 0
        now = fits[ssn.table.fits(task.init_resreq, fits, False)]
        choice = now if len(now) else fits
        best = ssn.best_row(task, choice, ssn.node_scores(task, choice))
        if stmt.pipeline(task, ssn.node_list[best].name) is not None:
            # an event handler refused: the trial fails (Volcano's runSimulateTrialAtHyperNode)
            return 0
        placed += 1
    return placed


def _victims(bundles: list[Bundle]) -> list[TaskInfo]:
    return [t for b in bundles for t in b.tasks]


def _sum_init(tasks: list[TaskInfo]) -> Resource:
    out = Resource()
    for t in tasks:
        out.add(t.init_resreq)
    return out


__all__ = [
    "DEFAULT_ALLOW_WHOLE",
    "DEFAULT_MAX_DOMAINS",
    "Bundle",
    "GangEvictionAction",
    "apply_allowed",
    "bundle_roi",
    "candidate_domains",
    "gang_pending",
    "job_bundles",
    "pick_domains",
    "sort_bundles",
]
