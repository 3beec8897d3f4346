"""Why a job is pending: one line for the PodGroup condition and the FailedScheduling event, and a
document with the detail (per role predicate counts, the queue or gang condition that held it,
the topology groups tried, and what would make it fit).

Built once per cycle after the actions ran, for jobs that failed only (a job with a recorded
reason, or one its queue held back), never for jobs that were placed. The result is left in
``ssn.report.explanations`` as ``{job uid: document}``; the binary stores and serves it. Role
detail is computed once per pod template per session, and for at most ``DETAILED_JOBS`` jobs per
cycle, so an unschedulable backlog costs one evaluation per template, not per job.

Not an action: the binary's loop runs it on a finished session (``SchedulerLoop._explain``), and
the status updater, ``/debug/jobs`` and ``caldera-scheduler explain`` (``scheduler/explain_cli.py``)
read what it wrote.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from caldera.actions.helpers import SessionWorld, gated_message, resource_reasons
from caldera.actions.subjobs import job_tier, narrowest_group, outcomes, sub_job_tier
from caldera.actions.topology import TopologyDecision, session_topology
from caldera.framework.carry import JobGeneration, carry_user, job_generation
from caldera.framework.dra import summary as dra_summary
from caldera.framework.dra.view import DraView, pod_claims
from caldera.framework.model import ALLOCATED_STATUSES, JobInfo, TaskInfo, TaskStatus
from caldera.framework.quantity import format_quantity
from caldera.framework.resource import MIN_RESOURCE, Resource
from caldera.framework.result import QueueShare
from caldera.framework.session import Session
from caldera.framework.subjobs import sub_jobs

#: per cycle, at most this many jobs get per-role detail (the rest keep the one-line reason)
DETAILED_JOBS = 1000
#: how long a job's detailed document is reused while its one-line reason stays the same
REUSE_SECONDS = 5.0
#: private key of a document: when it was built (monotonic seconds); not part of the wire format
BUILT_AT = "_built_at"
#: at most this many topology groups are listed per job, closest first
MAX_GROUPS = 20


def one_line(job: JobInfo) -> str:
    """The job's reason in one line, Volcano's wording: ``3/4 tasks in gang unschedulable: pod group
    is not ready, 0 ready, 4 minAvailable; 0/5 nodes are available: 5 Insufficient cpu.``"""
    pending = job.count(TaskStatus.PENDING)
    total = len(job.tasks)
    ready = job.ready_task_num()
    detail = job.job_fit_error
    if not detail:
        reasons: dict[str, int] = {}
        for msg in job.fit_errors.values():
            reasons[msg] = reasons.get(msg, 0) + 1
        detail = "; ".join(list(reasons)[:3])
    head = (
        f"{pending}/{total} tasks in gang unschedulable: pod group is not ready, "
        f"{ready} ready, {job.min_available} minAvailable"
    )
    text = (
        f"{head}; {detail}"
        if detail and not detail.startswith(f"{pending}/{total} tasks")
        else (detail or head)
    )
    return " ".join(text.split())


# ------------------------------------------------------------------------------------------------
# units
# ------------------------------------------------------------------------------------------------
def wire(res: Resource | None) -> dict[str, float]:
    """A Resource in the units Kubernetes uses on the wire: cpu in cores, memory in bytes, pods as a
    count, extended resources in their own units (internally they are kept in thousandths)."""
    if res is None:
        return {}
    out: dict[str, float] = {}
    for name, value in res.to_dict().items():
        if value != value or value in (float("inf"), float("-inf")):  # NaN or unlimited
            continue
        if name == "cpu" or name not in ("memory", "pods"):
            out[name] = round(value / 1000, 6)
        else:
            out[name] = value
    return out


def human(res: Resource) -> str:
    """``8 cpu and 32Gi memory``: the dimensions a request asks for, in short human form."""
    parts = []
    if res.cpu >= MIN_RESOURCE:
        parts.append(f"{format_quantity(res.cpu, 'cpu')} cpu")
    if res.memory >= MIN_RESOURCE:
        parts.append(f"{format_quantity(res.memory, 'memory')} memory")
    for name, value in sorted(res.scalars.items()):
        if value >= MIN_RESOURCE:
            parts.append(f"{value / 1000:g} {name}")
    if not parts:
        return "no resources"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# ------------------------------------------------------------------------------------------------
# the pass over a session
# ------------------------------------------------------------------------------------------------
def explain_session(
    ssn: Session,
    limit: int = DETAILED_JOBS,
    previous: dict[str, dict[str, Any]] | None = None,
    now: float | None = None,
    max_age: float = REUSE_SECONDS,
) -> dict[str, dict[str, Any]]:
    """Explain every job this cycle left pending with a reason; jobs held by a missing, closed or
    overused queue get that reason first (``job.job_fit_error``), so that the PodGroup condition
    and the event say it too.

    ``previous`` (last cycle's documents; by default what the last applied cycle kept,
    ``framework.carry``): a job whose one-line reason has not changed keeps its document for up to
    ``max_age`` seconds, so an unschedulable backlog is not re-analysed in detail every cycle."""
    out = ssn.report.explanations
    if previous is None:
        carried = ssn.carry.carried(_AgedDocuments)
        previous = carried if isinstance(carried, dict) else None
    ssn.carry.keep(_AgedDocuments, out)
    roles_cache: dict[bytes, dict[str, Any]] = {}
    detailed = 0
    now = time.monotonic() if now is None else now
    exact = _ExactReuse(ssn)
    candidates = ssn.pending_candidates()
    unreached = ssn.unreached
    for job in ssn.jobs.values():
        if job.sub_groups is not None:  # (running or not: /debug/jobs shows where they went)
            ssn.report.sub_groups[job.uid] = _sub_groups(ssn, job)
        # (membership first: a set lookup is cheaper than counting, for every job of the cluster)
        if candidates is not None and job.uid not in candidates and not job.job_fit_error:
            continue
        if job.uid in unreached:
            continue  # its turn did not come this cycle (the cycle budget): nothing to explain yet
        pending = job.count(TaskStatus.PENDING)
        if not pending and not job.job_fit_error:
            continue
        # (a document with sub-groups is built afresh: their state changes with the pods placed)
        doc = exact.reuse(job, detailed < limit) if job.sub_groups is None else None
        if doc is not None:
            out[job.uid] = doc
            detailed += detailed < limit
            continue
        fit_in = exact.fit_state(job)
        if job.waits_for_gates():
            # Gated, not unschedulable: the gang waits for its pods' gates (actions/helpers.job_valid),
            # whatever else a plugin said about it this cycle.
            job.job_fit_error = gated_message(job)
            job.fit_errors.clear()
        if not job.job_fit_error and not job.fit_errors:
            held = _queue_hold(ssn, job)
            if held is None:
                continue  # pending without a failure this cycle (best effort, not reached, ...)
            job.job_fit_error = held
        if not pending and not job.tasks:
            continue
        old = previous.get(job.uid) if previous else None
        if (
            old is not None
            and job.sub_groups is None
            and now - old.get(BUILT_AT, -1e18) < max_age
            and old.get("reason") == one_line(job)
        ):
            out[job.uid] = old
            continue
        with_roles = detailed < limit
        detailed += with_roles
        doc = explain_job(ssn, job, roles_cache if with_roles else None)
        doc[BUILT_AT] = now
        out[job.uid] = doc
        exact.record(job, fit_in, doc, with_roles)
    return out


def queue_shares(ssn: Session) -> dict[str, QueueShare]:
    """The queues' figures: the closed session's report, or (explaining runs before the close) as
    the plugins that keep them have them now, found once per session."""
    return ssn.report.queue_shares or ssn.memo(queue_shares, ssn.queue_shares_now)


def quota_refused(error: str, queue: str) -> bool:
    """Whether a job's fit error is its queue's quota: proportion's "queue resource quota
    insufficient", capacity's "queue NAME resource quota insufficient"."""
    return (
        "queue resource quota insufficient" in error or f"queue {queue} resource quota insufficient" in error
    )


def _reads_queue_figures(job: JobInfo, fit_in: tuple[str, dict[str, str]]) -> bool:
    """Whether explaining the job reads its queue's figures (share, overuse): a job the actions
    left without a failure is asked whether its queue holds it (``_queue_hold``); a failure that
    names the queue's quota or share is detailed from them (``_queue_state``). Any other document
    says the same whatever the figures."""
    if not (fit_in[0] or fit_in[1]):
        return True
    error = job.job_fit_error
    return (
        quota_refused(error, job.queue)
        or f"queue {job.queue} is at its share" in error
        or f"queue {job.queue} is overused" in error
    )


class _Explained:
    __slots__ = ("context", "doc", "fit_in", "fit_out", "token", "with_roles")

    def __init__(
        self,
        token: JobGeneration,
        context: tuple[object, ...] | None,
        fit_in: tuple[str, dict[str, str]],
        fit_out: tuple[str, dict[str, str]],
        doc: dict[str, Any],
        with_roles: bool,
    ) -> None:
        self.with_roles = with_roles
        self.token = token
        self.context = context
        self.fit_in = fit_in
        self.fit_out = fit_out
        self.doc = doc


class _ExplainCarry:
    __slots__ = ("entries", "world")

    def __init__(self, world: SessionWorld, entries: dict[str, _Explained]) -> None:
        self.world = world
        self.entries = entries


class _ExactReuse:
    """Last cycle's document of a job, taken over when building it again would give the same
    document: the same job (``framework.carry.job_generation``), the same cluster (``SessionWorld``), the same queue
    figures when the document reads them (``Session.queue_state`` and the report's share and
    scaling of the queue; ``_reads_queue_figures``), no topology
    decision on it, the same failure recorded on it by the actions, and no change in either
    session (``Session.changes`` zero: the nodes as at the session's start), and the same answer to
    whether the job gets role detail (``DETAILED_JOBS``: a document taken over with detail counts
    toward the cycle's limit as one built). Everything a document says is derived from those; its
    ``_built_at`` stays the time it was built."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.world = SessionWorld(ssn)
        self.on = self.world.known and not ssn.changes
        carried = ssn.carry.carried(_ExactReuse)
        self.previous: dict[str, _Explained] = {}
        if self.on and isinstance(carried, _ExplainCarry) and self.world.same(carried.world):
            self.previous = carried.entries
        self.current: dict[str, _Explained] = {}
        ssn.carry.keep(_ExactReuse, _ExplainCarry(self.world, self.current))
        self._contexts: dict[str, tuple[object, ...] | None] = {}

    def _context(self, name: str) -> tuple[object, ...] | None:
        try:
            return self._contexts[name]
        except KeyError:
            ssn = self.ssn
            queue = ssn.queues.get(name)
            state = None if queue is None else ssn.queue_state(queue)
            context = self._contexts[name] = (
                None
                if state is None
                # (not the queue's figures: they move with every placement in the queue, and an
                # explanation that only quotes them is reused for up to max_age all the same)
                else (state, ssn.report.queue_guarantee_scaled.get(name))
            )
            return context

    @staticmethod
    def fit_state(job: JobInfo) -> tuple[str, dict[str, str]]:
        return job.job_fit_error, dict(job.fit_errors)

    def reuse(self, job: JobInfo, with_roles: bool) -> dict[str, Any] | None:
        if not self.on:
            return None
        old = self.previous.get(job.uid)
        if (
            old is None
            or old.with_roles != with_roles
            or old.fit_in[0] != job.job_fit_error
            or old.fit_in[1] != job.fit_errors
        ):
            return None
        token = job_generation(job)
        if token is None or token != old.token or job.uid in self.ssn.report.topology_failures:
            return None
        if old.context is not None and self._context(job.queue) != old.context:
            return None
        # what building the document would have done to the job (gated or held by its queue)
        job.job_fit_error = old.fit_out[0]
        if not old.fit_out[1]:
            job.fit_errors.clear()
        self.current[job.uid] = old
        return old.doc

    def record(
        self, job: JobInfo, fit_in: tuple[str, dict[str, str]], doc: dict[str, Any], with_roles: bool
    ) -> None:
        if not self.on or job.uid in self.ssn.report.topology_failures:
            return
        token = job_generation(job)
        context = self._context(job.queue) if _reads_queue_figures(job, fit_in) else None
        if token is None or (context is None and _reads_queue_figures(job, fit_in)):
            return
        self.current[job.uid] = _Explained(token, context, fit_in, self.fit_state(job), doc, with_roles)


class _AgedDocuments:
    """Key of the last cycle's documents, taken over by age (``explain_session``'s ``previous``)."""


carry_user(_ExactReuse, "explain's documents of pending jobs, with the world they were built in")
carry_user(_AgedDocuments, "explain's documents of pending jobs, reused by age while the reason stands")


def _queue_hold(ssn: Session, job: JobInfo) -> str | None:
    queue = ssn.queues.get(job.queue)
    if queue is None:
        return f"queue {job.queue} not found"
    if not queue.is_open:
        return f"queue {job.queue} is not open"
    if job.count(TaskStatus.PENDING) and any(not t.best_effort for t in job.tasks_in(TaskStatus.PENDING)):
        if ssn.overused(queue):
            return f"queue {queue.name} is overused: its allocated resources reach its deserved share"
    return None


def explain_job(
    ssn: Session, job: JobInfo, roles_cache: dict[bytes, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The document of one pending job (see docs/debug-api.md)."""
    reason = one_line(job)
    queue_state = _queue_state(ssn, job)
    roles = _roles(ssn, job, roles_cache) if roles_cache is not None else []
    topology = _topology(ssn, job)
    gang = {
        "min_member": job.min_available,
        "ready": job.ready_task_num(),
        "pipelined": job.count(TaskStatus.PIPELINED),
        "pending": job.count(TaskStatus.PENDING),
        "valid": job.valid_task_num(),
        "min_task_member": dict(job.task_min_available),
    }
    gated = sorted(job.gated_tasks(), key=lambda t: t.name)
    doc: dict[str, Any] = {
        "namespace": job.namespace,
        "name": job.name,
        "native": job.native is not None,
        "queue": job.queue,
        "phase": job.phase,
        "reason": reason,
        "gang": gang,
        "queue_state": queue_state,
        "roles": roles,
        "topology": topology,
        "gated": [{"pod": t.name, "gates": t.gates} for t in gated],
        "victims_refused": [
            {"action": action, "victim": victim, "plugin": plugin}
            for (action, victim), plugin in ssn.victim_refusals.get(job.uid, {}).items()
        ],
    }
    devices = _devices(ssn, job)
    if devices is not None:
        doc["devices"] = devices
    if job.sub_groups is None:
        doc["sub_groups"] = None
    else:
        doc["sub_groups"] = ssn.report.sub_groups.get(job.uid) or _sub_groups(ssn, job)
    doc["suggestion"] = _suggestion(ssn, job, doc)
    return doc


def _devices(ssn: Session, job: JobInfo) -> dict[str, Any] | None:
    """For a job whose pending pods use ResourceClaims: the cluster's devices of each DeviceClass their
    claims ask for, and of those classes' drivers, with how many are allocated (framework/dra/summary.py;
    this cycle's placements count as allocated). None for a job without claims."""
    view = ssn.snapshot.dra
    if view is None:
        return None
    classes: set[str] = set()
    with_claims = False
    for task in job.tasks_in(TaskStatus.PENDING):
        if not task.pod.spec.resource_claims:
            continue
        with_claims = True
        keys, _reason = pod_claims(task.pod)
        for key in keys:
            claim = view.claims.get(key)
            if claim is not None:
                classes |= dra_summary.requested_classes(claim)
    if not with_claims:
        return None
    # The same for every job asking for these classes, once the session's actions are done: found
    # once per session (a job waiting for its claims' devices is explained each cycle, and each
    # summary walks every device of the cluster)
    summary: dict[str, Any] = ssn.memo(
        (_devices, frozenset(classes)), lambda: _device_summary(ssn, view, classes)
    )
    return dict(summary)


def _device_summary(ssn: Session, view: DraView, classes: set[str]) -> dict[str, Any]:
    held = ssn.memo(
        _device_summary,
        lambda: dra_summary.in_use(view, (ca.allocation for p in ssn.placements for ca in p.claims or ())),
    )
    summary: dict[str, Any] = dra_summary.cluster_summary(view, classes, held)
    summary["summary"] = dra_summary.summary_line(summary)
    return summary


# ------------------------------------------------------------------------------------------------
# parts
# ------------------------------------------------------------------------------------------------
def _queue_state(ssn: Session, job: JobInfo) -> dict[str, Any]:
    queue = ssn.queues.get(job.queue)
    state = {"name": job.queue, "state": "", "held": False, "message": ""}
    if queue is None:
        state.update(state="Missing", held=True, message=f"queue {job.queue} does not exist")
        return state
    state["state"] = queue.state
    if not queue.is_open:
        state.update(held=True, message=f"queue {queue.name} is {queue.state}: nothing is scheduled from it")
        return state
    error = job.job_fit_error
    shares = queue_shares(ssn).get(queue.name) or QueueShare()
    if quota_refused(error, queue.name):
        need = job.min_resources or Resource()
        cap = Resource.from_resource_list(None)
        for name, value in shares.real_capability.items():
            cap.set(name, value)
        allocated = _resource(shares.allocated)
        inqueue = _resource(shares.inqueue)
        state.update(
            held=True,
            message=(
                f"queue {queue.name} cannot take the job's minimum ({human(need)}): "
                f"{human(allocated)} allocated and {human(inqueue)} inqueue, "
                f"capability {_human_capped(queue.capability, cap)}"
            ),
        )
    elif f"queue {queue.name} is at its share" in error or f"queue {queue.name} is overused" in error:
        deserved = _resource(shares.deserved)
        allocated = _resource(shares.allocated)
        message = (
            f"queue {queue.name} is at its deserved share: {human(allocated)} allocated "
            f"of {human(deserved)} deserved (weight {queue.weight})"
        )
        # Written by the proportion (and capacity) plugin: {queue: {resource: factor}} for this cycle.
        factors = ssn.report.queue_guarantee_scaled.get(queue.name)
        if factors:
            asked = queue.guarantee or Resource()
            parts = ", ".join(
                f"{_one(d, asked.get(d))} to {_one(d, asked.get(d) * f)}" for d, f in sorted(factors.items())
            )
            message += (
                f"; its guarantee was scaled down ({parts}) because the guarantees of all queues add up "
                "to more than the cluster has, so nothing is left over to share by weight"
            )
            state["guarantee_scaled"] = dict(factors)
        elif _capped(queue.capability, deserved):
            message += f"; that is its capability ({human(queue.capability or Resource())})"
            state["at_capability"] = True
        state.update(held=True, message=message)
    return state


def _one(name: str, value: float) -> str:
    """One dimension in short human form: ``4 cpu``, ``16Gi memory``, ``2 nvidia.com/gpu``."""
    res = Resource()
    res.set(name, value)
    return human(res)


def _capped(capability: Resource | None, deserved: Resource) -> bool:
    """The deserved share reaches the queue's capability in every dimension the capability limits:
    a larger weight cannot raise it."""
    if capability is None:
        return False
    dims = [d for d in capability.names() if 0 < capability.get(d) < float("inf")]
    return bool(dims) and all(deserved.get(d) >= capability.get(d) - MIN_RESOURCE for d in dims)


def _resource(values: dict[str, float] | None) -> Resource:
    res = Resource()
    for name, value in (values or {}).items():
        if value == value and value not in (float("inf"), float("-inf")):
            res.set(name, value)
    return res


def _human_capped(capability: Resource | None, real: Resource) -> str:
    if capability is not None and not capability.is_empty():
        return human(capability)
    finite = _resource(real.to_dict())
    return human(finite) if not finite.is_empty() else "unlimited"


def _roles(ssn: Session, job: JobInfo, cache: dict[bytes, dict[str, Any]]) -> list[dict[str, Any]]:
    by_role: dict[str, list[TaskInfo]] = {}
    for task in job.tasks_in(TaskStatus.PENDING):
        if task.gated:
            continue  # not evaluated against nodes: it is not in the scheduling queue at all
        by_role.setdefault(task.role, []).append(task)
    out = []
    for role, tasks in sorted(by_role.items()):
        tasks.sort(key=lambda t: t.name)
        rep = tasks[0]
        key = ssn.placement_key(rep) or rep.uid.encode()
        detail = cache.get(key)
        if detail is None:
            detail = cache[key] = _role_detail(ssn, rep)
        out.append({"role": role, "pending": len(tasks), **detail})
    return out


def _role_detail(ssn: Session, task: TaskInfo) -> dict[str, Any]:
    rows = ssn.all_rows
    counts = ssn.explain_predicates(task, rows)
    passed = ssn.feasible_rows(task, rows)
    for reason, n in resource_reasons(ssn, task, passed).items():
        counts[reason] = counts.get(reason, 0) + n
    static = ssn.feasible_rows(task, rows, resources=False)
    feasible = int(ssn.table.fits(task.init_resreq, passed, True).sum()) if len(passed) else 0
    return {
        "request": {k: v for k, v in wire(task.init_resreq).items() if k != "pods"},
        "nodes": len(rows),
        "feasible": feasible,
        "predicates": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        # not in the contract's role fields, but what the suggestion is derived from
        "static_feasible": len(static),
        "slots": _slots(ssn, task, static),
    }


def _slots(ssn: Session, task: TaskInfo, rows: np.ndarray) -> int:
    """How many pods like ``task`` the given nodes could take one by one with their free resources."""
    if len(rows) == 0:
        return 0
    table = ssn.table
    cols, vals = table.request_vector(task.init_resreq)
    keep = vals > MIN_RESOURCE
    cols, vals = cols[keep], vals[keep]
    if len(cols) == 0:
        return len(rows) * 1000
    free = np.maximum(table.future[rows][:, cols], 0.0)
    per_node = np.floor((free + MIN_RESOURCE) / vals).min(axis=1)
    return int(per_node.sum())


def _topology(ssn: Session, job: JobInfo) -> dict[str, Any] | None:
    decision: TopologyDecision | None = ssn.report.topology_failures.get(job.uid)
    if decision is None:
        return None
    topo = decision.topology or session_topology(ssn)[0]
    need = max(decision.need, 1)
    trials = [t for t in decision.trials if t.outcome in ("infeasible", "pruned")]
    trials.sort(key=lambda t: (t.outcome != "infeasible", -t.placed, t.deficit, t.group.tier, t.group.name))
    groups = []
    for t in trials[:MAX_GROUPS]:
        if t.outcome == "infeasible":
            shortfall = f"{t.placed}/{need} pods placed in a dry run" + (f": {t.detail}" if t.detail else "")
        else:
            shortfall = t.detail
        groups.append(
            {
                "name": t.group.name,
                "tier": t.group.tier,
                "tier_label": topo.tier_label(t.group.tier),
                "outcome": "short" if t.outcome == "pruned" else "infeasible",
                "placed": t.placed,
                "shortfall": shortfall,
            }
        )
    return {
        "mode": decision.requirement.mode,
        "highest_tier": decision.requirement.highest_tier,
        "tiers_tried": [{"tier": t, "label": topo.tier_label(t)} for t in decision.tiers_tried],
        "need": decision.need,
        "groups": groups,
        "groups_tried": len(trials),
    }


def _sub_groups(ssn: Session, job: JobInfo) -> dict[str, Any]:
    """A job with sub-group policies: each policy's ``minSubGroups`` and how many of its sub-groups
    are whole, and each sub-group's state: whole or not (``SubJobInfo.IsReady``; pipelined), the
    HyperNode it sits in (``hypernode``: the narrowest group holding its placed pods), its tier
    bound, and from this cycle's allocate (``actions.subjobs.outcomes``) the group its last try
    fitted it in (``fit_in``; kept only if the whole job could start) or why it fitted nowhere."""
    subs = sub_jobs(ssn, job)
    topo, settings = session_topology(ssn)
    bound = job_tier(ssn, job, topo, settings)
    tried = outcomes(ssn, job)
    whole = subs.counts(lambda sub: ssn.sub_job_ready(job, sub))
    rows: list[dict[str, Any]] = []
    for sub in sorted(subs, key=lambda s: (s.policy == "", s.policy, s.match_index, s.uid)):
        placed = [
            t
            for t in sub.tasks.values()
            if t.status in ALLOCATED_STATUSES or t.status == TaskStatus.PIPELINED
        ]
        group = narrowest_group(topo, ssn, placed)
        outcome = tried.get(sub.uid)
        rows.append(
            {
                "name": sub.uid[len(job.uid) + 1 :] or "(default)",
                "policy": sub.policy,
                "size": sub.min_available,
                "pods": len(sub.tasks),
                "ready": sub.ready_num(),
                "pipelined": sum(1 for t in sub.tasks.values() if t.status == TaskStatus.PIPELINED),
                "pending": sum(1 for _ in sub.pending()),
                "whole": ssn.sub_job_ready(job, sub),
                "highest_tier": sub_job_tier(ssn, job, sub, topo, bound),
                "hypernode": group.name if group is not None else "",
                "fit_in": outcome.placed_in if outcome is not None else "",
                "reason": outcome.reason if outcome is not None else "",
            }
        )
    policies = [
        {"policy": gid.rpartition("/")[2], "min_sub_groups": need, "whole": whole.get(gid, 0)}
        for gid, need in subs.min_sub_jobs.items()
    ]
    return {"highest_tier": bound, "policies": policies, "groups": rows}


# ------------------------------------------------------------------------------------------------
# what would make it fit
# ------------------------------------------------------------------------------------------------
def _suggestion(ssn: Session, job: JobInfo, doc: dict[str, Any]) -> str:
    qs = doc["queue_state"]
    gang = doc["gang"]
    error = job.job_fit_error
    if qs["state"] == "Missing":
        return f"create queue {job.queue} or submit the job to an existing queue"
    if qs["held"] and qs["state"] not in ("", "Open"):
        return f"open queue {job.queue} (it is {qs['state']})"
    if doc["gated"] and job.waits_for_gates():
        gates = sorted({g for t in doc["gated"] for g in t["gates"]})
        return (
            f"remove the scheduling gates ({', '.join(gates)}) from the gated pods; the gang waits for them"
        )
    if gang["valid"] < job.min_available:
        missing = job.min_available - gang["valid"]
        return (
            f"needs {_plural(missing, 'more pod')} to reach minMember {job.min_available} "
            f"(or lower minMember to {gang['valid']})"
        )
    if error.startswith("Not enough valid tasks") or "minTaskMember" in error or "min task" in error.lower():
        short = [
            f"{role}: {have}/{need_}"
            for role, need_ in sorted(job.task_min_available.items())
            if (have := sum(1 for t in job.tasks.values() if t.role == role)) < need_
        ]
        if short:
            return "needs more pods in role " + ", ".join(short)
    if qs["held"]:
        if "cannot take the job's minimum" in qs["message"]:
            return (
                f"raise queue {job.queue}'s capability or wait for its running jobs to finish "
                f"(the job's minimum is {human(job.min_resources or Resource())})"
            )
        if qs.get("guarantee_scaled"):
            return (
                "the queues' guarantees together ask more than the cluster has: lower the other queues' "
                f"guarantees or add nodes, or wait for queue {job.queue}'s running jobs to finish "
                "(raising its weight does not help while guarantees take the whole cluster)"
            )
        if qs.get("at_capability"):
            return (
                f"raise queue {job.queue}'s capability or wait for its running jobs to finish "
                "(its weight does not help: the queue is at its capability)"
            )
        return f"wait for queue {job.queue}'s running jobs to finish, or raise its weight or deserved share"
    topo = doc["topology"]
    decision: TopologyDecision | None = ssn.report.topology_failures.get(job.uid)
    if topo is not None and decision is not None and topo["groups"]:
        closest = topo["groups"][0]
        missing = max(1, decision.need - int(closest["placed"]))
        req = _first_request(job)
        label = closest["tier_label"]
        return (
            f"needs {_plural(missing, 'more node')} with {human(req)} free in one {label} "
            f"(closest: {closest['name']}, room for {closest['placed']} of {decision.need} pods)"
        )
    for role in doc["roles"]:
        if role["feasible"] >= role["pending"]:
            continue
        req = _resource_from_wire(role["request"])
        if role["static_feasible"] == 0:
            top = next(iter(role["predicates"]), "")
            hint = ""
            if "taint" in top:
                hint = ": add a toleration for the nodes' taints, or add untainted nodes"
            elif "selector" in top or "affinity" in top:
                hint = ": relax the pods' node selector or affinity, or label more nodes"
            return f"no node passes the pods' predicates ({top}){hint}"
        need = _role_need(job, role)
        missing = need - min(role["slots"], need)
        if missing <= 0:
            continue
        where = f" for role {role['role']}" if role["role"] else ""
        return f"needs {_plural(missing, 'more node')} with {human(req)} free{where}"
    return ""


def _role_need(job: JobInfo, role: dict[str, Any]) -> int:
    """How many pending pods of the role must be placed for the job to start."""
    gang_need = max(0, job.min_available - job.ready_task_num() - job.count(TaskStatus.PIPELINED))
    role_min = job.task_min_available.get(role["role"])
    if role_min is not None:
        have = sum(1 for t in job.tasks.values() if t.role == role["role"] and t.status != TaskStatus.PENDING)
        return max(0, min(role["pending"], role_min - have))
    return max(1, min(role["pending"], gang_need or role["pending"]))


def _first_request(job: JobInfo) -> Resource:
    for task in sorted(job.tasks_in(TaskStatus.PENDING), key=lambda t: t.name):
        return task.init_resreq
    return Resource()


def _resource_from_wire(values: dict[str, float]) -> Resource:
    res = Resource()
    for name, value in values.items():
        res.set(name, value if name in ("memory", "pods") else value * 1000)
    return res
