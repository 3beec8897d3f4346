"""What the binary remembers of its last cycle, and the read-only debug API built from it
(docs/debug-api.md): ``/debug/queues``, ``/debug/jobs``, ``/debug/jobs/NS/NAME``, ``/debug/nodes``
and ``/debug/scheduler``. Documents are built on request from references kept at the end of a
cycle (no copying on the cycle's path)."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from caldera.cache.indexes import CacheProblems, MissingPodGroup, UngroupedPod, UnreadablePod
from caldera.framework.dra import summary as dra_summary
from caldera.framework.model import (
    ALLOCATED_STATUSES,
    GROUP_NAME_ANNOTATION,
    JobInfo,
    NodeInfo,
    TaskInfo,
    TaskStatus,
)
from caldera.framework.resource import Resource
from caldera.framework.result import Placement, QueueShare, SessionResult
from caldera.metrics.cycle import CycleMetrics
from caldera.scheduler.explain import explain_job, wire
from caldera.scheduler.problems import (
    INVALID_POD_SPEC,
    NO_PODGROUP,
    PODGROUP_GRACE,
    PODGROUP_NOT_FOUND,
    missing_podgroup_reason,
    missing_podgroup_suggestion,
    pending_pods,
    ungrouped_grace,
    ungrouped_reason,
    ungrouped_suggestion,
    unreadable_reason,
    unreadable_suggestion,
)

#: cycles remembered for /debug/scheduler
CYCLE_HISTORY = 600
#: the reason of a job the last cycle's allocate did not reach (``SessionReport.unreached``)
NOT_REACHED = (
    "not reached by the last cycle: its time budget (--cycle-budget) ran out before this job's turn,"
    " or the job had its turn earlier in the pass that cycle went on with; the next cycles take the"
    " jobs not yet taken, in the same order, before any job is taken again"
)


class NotFound(Exception):
    pass


@dataclass
class CycleRecord:
    at: float
    duration_ms: float
    bound: int
    pending_tasks: int


@dataclass
class LastCycle:
    number: int = 0
    result: SessionResult | None = None
    explanations: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: when the cycle began, its snapshot taken then (wall clock, seconds; 0: no cycle yet): its
    #: view cannot show what changed after
    started: float = 0.0


class Observatory:
    """The cycle observer's memory: metrics, the last result and its explanations, cycle history."""

    def __init__(self) -> None:
        self.metrics = CycleMetrics()
        self.last = LastCycle()
        self.cycles: collections.deque[CycleRecord] = collections.deque(maxlen=CYCLE_HISTORY)
        self.number = 0
        #: the cache's pods that no cycle can schedule (set by the binary before each ``on_cycle``)
        self.problems = CacheProblems()

    def on_cycle(self, result: SessionResult | None, duration: float, error: BaseException | None) -> None:
        self.number += 1
        self.metrics.observe(result, duration, error)
        pending = 0
        if result is not None:
            explanations = result.report.explanations
            for doc in explanations.values():
                doc["cycle"] = self.number
            if error is None:
                # the metrics counted the explained jobs' pending tasks just now
                pending = self.metrics.unschedulable_tasks
            else:
                pending = sum(
                    job.count(TaskStatus.PENDING)
                    for uid in explanations
                    if (job := result.jobs.get(uid)) is not None
                )
            self.last = LastCycle(self.number, result, explanations, time.time() - duration)
        self.cycles.append(
            CycleRecord(
                time.time(),
                round(duration * 1000, 3),
                len(result.placements) if result is not None else 0,
                pending,
            )
        )

    def bind_observer(self, inner: Any) -> BindObserverTee:
        return BindObserverTee(inner, self.metrics)


class BindObserverTee:
    """The binder's observer: the status updater, plus bind metrics."""

    def __init__(self, inner: Any, metrics: CycleMetrics) -> None:
        self.inner = inner
        self.metrics = metrics

    def bind_failed(self, task: TaskInfo, node: str, reason: str) -> None:
        self.metrics.bind_failed(task, reason)
        if self.inner is not None:
            self.inner.bind_failed(task, node, reason)

    def bind_found_no_pod(self, task: TaskInfo, node: str, reason: str) -> None:
        self.metrics.bind_failed(task, reason)  # counted as a failure of kind not_found
        if self.inner is not None:
            self.inner.bind_found_no_pod(task, node, reason)

    def gang_bound(self, job: str, placements: list[Placement]) -> None:
        if self.inner is not None:
            self.inner.gang_bound(job, placements)

    def gang_partly_bound(self, job: str, bound: list[Placement], failed: dict[str, str]) -> None:
        if self.inner is not None:
            self.inner.gang_partly_bound(job, bound, failed)

    def pod_bound(self, task: TaskInfo, node: str) -> None:
        self.metrics.bound(task)
        if self.inner is not None:
            self.inner.pod_bound(task, node)


# ------------------------------------------------------------------------------------------------
# documents
# ------------------------------------------------------------------------------------------------
def _rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts)) if ts > 0 else ""


def _job_phase(job: JobInfo) -> str:
    if job.tasks and job.ready_task_num() >= job.min_available and job.roles_satisfied():
        return "Running"
    return job.phase or "Pending"


class DebugApi:
    """Builds the debug API's documents. ``scheduler`` supplies what is not in a cycle's result
    (identity, leadership, the conf)."""

    def __init__(
        self,
        observatory: Observatory,
        scheduler: Callable[[], dict[str, Any]] | None = None,
        pod_lookup: Callable[[str, str], TaskInfo | None] | None = None,
        controllers: bool = True,
        grace: float = PODGROUP_GRACE,
        bind_progress: Callable[[str], str | None] | None = None,
    ) -> None:
        self.obs = observatory
        #: where the binder has a pod's bind (``Binder.progress``), for a pod placed and not yet bound
        self.bind_progress = bind_progress
        self.scheduler_info = scheduler
        #: finds a pod the cache holds, by namespace and name (for /debug/pods)
        self.pod_lookup = pod_lookup
        #: whether the binary's PodGroup controller runs (explains a pod left without a PodGroup)
        self.controllers = controllers
        #: a pod without a PodGroup is a problem once it has waited this long (as for its Event)
        self.grace = grace

    def _waited(self, u: UngroupedPod, now: float) -> tuple[float, float]:
        """How long an ungrouped pod has waited for its PodGroup, and the grace it has."""
        return now - u.since, ungrouped_grace(u, self.controllers, self.grace)

    def _ungrouped(self) -> list[UngroupedPod]:
        """The ungrouped pods past their grace: a problem."""
        now = time.monotonic()
        return [u for u in self.obs.problems.ungrouped_pods if (w := self._waited(u, now))[0] >= w[1]]

    @property
    def _result(self) -> SessionResult:
        return self.obs.last.result or SessionResult()

    # -- /debug/queues ---------------------------------------------------------------------------
    def queues(self) -> dict[str, Any]:
        result = self._result
        shares = result.report.queue_shares
        scaled = result.report.queue_guarantee_scaled
        counts: dict[str, dict[str, int]] = {}
        # Placed this cycle on resources still being released (Volcano's Statement.Pipeline fires
        # AllocateFunc, so proportion and capacity count them in "allocated" until the next session
        # opens, where they are pending again): to tell them from bound pods in "allocated".
        pipelined: dict[str, Resource] = {}
        for job in result.jobs.values():
            for t in job.tasks_in(TaskStatus.PIPELINED):
                pipelined.setdefault(job.queue, Resource()).add(t.resreq)
            c = counts.setdefault(job.queue, {"pending": 0, "inqueue": 0, "running": 0})
            phase = _job_phase(job)
            if phase == "Running":
                c["running"] += 1
            elif phase == "Inqueue":
                c["inqueue"] += 1
            elif phase == "Pending":
                c["pending"] += 1
        out = []
        for name, q in sorted(result.queues.items()):
            s = shares.get(name) or QueueShare()
            allocated: dict[str, float] | None = s.allocated if name in shares else None
            if allocated is None:
                alloc = Resource()
                for job in result.jobs.values():
                    if job.queue == name:
                        for t in job.tasks_in(*ALLOCATED_STATUSES):
                            alloc.add(t.resreq)
                allocated = alloc.to_dict()
            out.append(
                {
                    "name": name,
                    "parent": q.parent,
                    "state": q.state,
                    "weight": q.weight,
                    "guarantee": wire(q.guarantee),
                    "capability": wire(q.capability) if q.capability is not None else None,
                    "deserved": _wire_dict(s.deserved),
                    "allocated": _wire_dict(allocated),
                    "pipelined": wire(pipelined[name]) if name in pipelined else {},
                    "request": _wire_dict(s.request),
                    "share": s.share,
                    "overused": s.overused,
                    "guarantee_scaled": scaled.get(name),
                    "jobs": counts.get(name, {"pending": 0, "inqueue": 0, "running": 0}),
                }
            )
        return {"cycle": self.obs.last.number, "queues": out}

    # -- /debug/jobs -----------------------------------------------------------------------------
    def jobs(
        self, state: str = "pending", queue: str = "", offset: int = 0, limit: int = 100
    ) -> dict[str, Any]:
        if state not in ("pending", "running", "all"):
            raise ValueError(f"state must be pending, running or all, not {state!r}")
        limit = max(0, min(int(limit), 1000))
        offset = max(0, int(offset))
        result = self._result
        explanations = self.obs.last.explanations
        chosen = []
        for job in result.jobs.values():
            if queue and job.queue != queue:
                continue
            running = _job_phase(job) == "Running"
            if (state == "pending" and running) or (state == "running" and not running):
                continue
            chosen.append(job)
        # newest pending first: pending before running, then the newest
        chosen.sort(key=lambda j: (_job_phase(j) == "Running", -j.creation, j.uid))
        # Pods no cycle sees (their PodGroup is missing, their spec unreadable) come first: they wait
        # for a person, not for resources.
        problems = self._problem_entries() if state != "running" and not queue else []
        unreadable_by_job = self._unreadable_by_job()
        now = time.time()
        page = []
        for entry in problems[offset : offset + limit]:
            page.append(entry)
        for job in chosen[max(0, offset - len(problems)) : max(0, offset + limit - len(problems))]:
            doc = explanations.get(job.uid)
            reason = doc["reason"] if doc else ""
            unreadable = unreadable_by_job.get(job.uid)
            if unreadable:
                reason = "; ".join([unreadable_reason(unreadable[0]), *([reason] if reason else [])])
            page.append(
                {
                    "kind": "job",
                    "namespace": job.namespace,
                    "name": job.name,
                    #: a scheduling.k8s.io/v1alpha2 PodGroup (Kubernetes' own), not a Volcano one
                    "native": job.native is not None,
                    "queue": job.queue,
                    "priority": job.priority,
                    "min_member": job.min_available,
                    "phase": _job_phase(job),
                    "created": _rfc3339(job.creation),
                    "age_seconds": round(max(0.0, now - job.creation), 3) if job.creation > 0 else 0.0,
                    "tasks": {
                        "pending": job.count(TaskStatus.PENDING),
                        "gated": len(job.gated_tasks()),
                        "bound": job.count(TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND),
                        "running": job.count(TaskStatus.RUNNING),
                        "succeeded": job.count(TaskStatus.SUCCEEDED),
                        "failed": job.count(TaskStatus.FAILED),
                    },
                    "reason": reason,
                }
            )
        return {"cycle": self.obs.last.number, "total": len(problems) + len(chosen), "jobs": page}

    def _unreadable_by_job(self) -> dict[str, list[UnreadablePod]]:
        out: dict[str, list[UnreadablePod]] = {}
        for pod in self.obs.problems.unreadable_pods:
            if pod.job:
                out.setdefault(pod.job, []).append(pod)
        return out

    def _problem_entries(self) -> list[dict[str, Any]]:
        """/debug/jobs rows for a missing PodGroup (named like the job it would be) and an unreadable
        pod (``kind: pod``), with the same reason as their Events."""
        out: list[dict[str, Any]] = []
        now = time.time()
        for missing in self.obs.problems.missing_podgroups:
            pending = pending_pods(missing)
            if not pending:
                continue
            oldest = min((t.creation for t in missing.pods if t.creation > 0), default=0.0)
            out.append(
                {
                    "kind": "job",
                    "problem": PODGROUP_NOT_FOUND,
                    "namespace": missing.namespace,
                    "name": missing.name,
                    "native": missing.native,
                    "queue": "",
                    "priority": 0,
                    "min_member": 0,
                    "phase": "Pending",
                    "created": _rfc3339(oldest),
                    "age_seconds": round(max(0.0, now - oldest), 3) if oldest > 0 else 0.0,
                    "tasks": {
                        "pending": pending,
                        "gated": 0,
                        "bound": 0,
                        "running": 0,
                        "succeeded": 0,
                        "failed": 0,
                    },
                    "reason": missing_podgroup_reason(missing),
                }
            )
        for ungrouped in self._ungrouped():
            task = ungrouped.task
            out.append(
                {
                    "kind": "pod",
                    "problem": NO_PODGROUP,
                    "namespace": task.namespace,
                    "name": task.name,
                    "job": "",
                    "queue": ungrouped.queue,
                    "priority": task.priority,
                    "min_member": 0,
                    "phase": "Pending",
                    "created": _rfc3339(task.creation),
                    "age_seconds": round(max(0.0, now - task.creation), 3) if task.creation > 0 else 0.0,
                    "tasks": {
                        "pending": 1,
                        "gated": 0,
                        "bound": 0,
                        "running": 0,
                        "succeeded": 0,
                        "failed": 0,
                    },
                    "reason": ungrouped_reason(ungrouped, self.controllers),
                }
            )
        for pod in self.obs.problems.unreadable_pods:
            out.append(
                {
                    "kind": "pod",
                    "problem": INVALID_POD_SPEC,
                    "namespace": pod.namespace,
                    "name": pod.name,
                    "job": pod.job,
                    "queue": "",
                    "priority": 0,
                    "min_member": 0,
                    "phase": "Pending",
                    "created": "",
                    "age_seconds": 0.0,
                    "tasks": {
                        "pending": 1,
                        "gated": 0,
                        "bound": 0,
                        "running": 0,
                        "succeeded": 0,
                        "failed": 0,
                    },
                    "reason": unreadable_reason(pod),
                }
            )
        return out

    def job(self, namespace: str, name: str) -> dict[str, Any]:
        uid = f"{namespace}/{name}"
        doc = self._job(uid)
        unreadable = self._unreadable_by_job().get(uid)
        if unreadable:
            # The gang waits for pods that no cycle sees: say that before anything about resources.
            doc = dict(doc)
            doc["unreadable_pods"] = [{"name": p.name, "reason": p.reason} for p in unreadable]
            doc["reason"] = "; ".join(
                [unreadable_reason(unreadable[0]), *([doc["reason"]] if doc["reason"] else [])]
            )
            doc["suggestion"] = unreadable_suggestion(unreadable[0])
            doc["problem"] = INVALID_POD_SPEC
        waits = [w for w in self.obs.problems.claim_waits if w.task.job == uid]
        if waits:
            # pods whose ResourceClaims do not exist yet: no node will do until they do
            doc = dict(doc)
            doc["claim_waits"] = [{"name": w.task.name, "reason": w.reason} for w in waits]
        return doc

    def _job(self, uid: str) -> dict[str, Any]:
        doc = self.obs.last.explanations.get(uid)
        if doc is not None:
            return {k: v for k, v in doc.items() if not k.startswith("_")}
        job = self._result.jobs.get(uid)
        if job is None:
            missing = next((m for m in self.obs.problems.missing_podgroups if m.key == uid), None)
            if missing is not None:
                return self._missing_podgroup_doc(missing)
            raise NotFound(f"job {uid} is not known to the scheduler's last cycle")
        return {
            "namespace": job.namespace,
            "name": job.name,
            "native": job.native is not None,
            "queue": job.queue,
            "phase": _job_phase(job),
            "cycle": self.obs.last.number,
            "reason": NOT_REACHED if uid in self._result.report.unreached else "",
            "gang": {
                "min_member": job.min_available,
                "ready": job.ready_task_num(),
                "pipelined": job.count(TaskStatus.PIPELINED),
                "pending": job.count(TaskStatus.PENDING),
                "valid": job.valid_task_num(),
                "min_task_member": dict(job.task_min_available),
            },
            "queue_state": {"name": job.queue, "state": "", "held": False, "message": ""},
            "roles": [],
            "topology": None,
            "sub_groups": self._result.report.sub_groups.get(uid),
            "gated": [
                {"pod": t.name, "gates": t.gates} for t in sorted(job.gated_tasks(), key=lambda t: t.name)
            ],
            "suggestion": "",
        }

    def _missing_podgroup_doc(self, missing: MissingPodGroup) -> dict[str, Any]:
        return {
            "namespace": missing.namespace,
            "name": missing.name,
            "native": missing.native,
            "queue": "",
            "phase": "Pending",
            "cycle": self.obs.last.number,
            "problem": PODGROUP_NOT_FOUND,
            "reason": missing_podgroup_reason(missing),
            "gang": {
                "min_member": 0,
                "ready": 0,
                "pipelined": 0,
                "pending": pending_pods(missing),
                "valid": 0,
                "min_task_member": {},
            },
            "queue_state": {"name": "", "state": "", "held": False, "message": ""},
            "roles": [],
            "topology": None,
            "sub_groups": None,
            "gated": [],
            "suggestion": missing_podgroup_suggestion(missing),
            "pods": [t.name for t in missing.pods],
        }

    # -- /debug/pods/NS/NAME ---------------------------------------------------------------------
    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        """Why one pod is where it is: a problem that keeps it from every cycle, else its job's
        explanation and the pod's own fit error."""
        key = f"{namespace}/{name}"
        doc: dict[str, Any] = {
            "kind": "Pod",
            "namespace": namespace,
            "name": name,
            "cycle": self.obs.last.number,
            "status": "",
            "node": "",
            "job": "",
            "problem": "",
            "reason": "",
            "job_reason": "",
            "suggestion": "",
            "explain_job": False,
        }
        for pod in self.obs.problems.unreadable_pods:
            if pod.key == key:
                doc.update(
                    status="Pending",
                    job=pod.job,
                    problem=INVALID_POD_SPEC,
                    reason=unreadable_reason(pod),
                    suggestion=unreadable_suggestion(pod),
                )
                return doc
        for missing in self.obs.problems.missing_podgroups:
            for task in missing.pods:
                if task.name == name and task.namespace == namespace:
                    doc.update(
                        status=_status(task),
                        node=task.node_name,
                        job=missing.key,
                        problem=PODGROUP_NOT_FOUND,
                        reason=missing_podgroup_reason(missing) if task.status == TaskStatus.PENDING else "",
                        suggestion=missing_podgroup_suggestion(missing),
                    )
                    return doc
        now = time.monotonic()
        for ungrouped in self.obs.problems.ungrouped_pods:
            if ungrouped.key == key:
                waited, grace = self._waited(ungrouped, now)
                if waited >= grace:
                    doc.update(
                        status="Pending",
                        problem=NO_PODGROUP,
                        reason=ungrouped_reason(ungrouped, self.controllers),
                        suggestion=ungrouped_suggestion(ungrouped, self.controllers),
                    )
                else:
                    # held by the cache, not yet a problem: its PodGroup is expected any moment
                    doc.update(
                        status="Pending",
                        reason=f"{ungrouped_reason(ungrouped, self.controllers)} (for"
                        f" {waited:.0f}s; a problem after {grace:.0f}s)",
                    )
                return doc
        found = self.pod_lookup(namespace, name) if self.pod_lookup is not None else None
        if found is None:
            raise NotFound(f"pod {key} is not known to the scheduler (not in its cache)")
        task = found
        doc.update(
            status=_status(task),
            node=task.node_name,
            job=task.job,
            resourceVersion=task.pod.metadata.resource_version,
        )
        if task.status == TaskStatus.BOUND and task.pod.spec.node_name:
            doc["reason"] = f"bound to {task.node_name}; its kubelet has not reported it running yet"
        elif task.status in (TaskStatus.BINDING, TaskStatus.BOUND) and self.bind_progress is not None:
            # placed, and the pod watch has not shown it bound: how far its bind has come
            doc["reason"] = self.bind_progress(task.uid) or ""
        if not task.job:
            if task.status == TaskStatus.PENDING:
                doc["reason"] = (
                    "the pod belongs to no PodGroup yet (no annotation "
                    f"{GROUP_NAME_ANNOTATION}), or is not scheduled by this scheduler"
                )
                doc["suggestion"] = (
                    "check spec.schedulerName; with --enable-controllers a PodGroup is made for the pod's owner"
                )
            return doc
        doc["explain_job"] = True
        try:
            job_doc = self.job(*task.job.split("/", 1))
        except NotFound:
            job_doc = {}
        job = self._result.jobs.get(task.job)
        cycle_task = job.tasks.get(task.uid) if job is not None else None
        fit_error = job.fit_errors.get(task.uid, "") if job is not None else ""
        doc["job_reason"] = job_doc.get("reason", "")
        if task.status == TaskStatus.PENDING and (
            cycle_task is None or cycle_task.status == TaskStatus.PENDING
        ):
            doc["reason"] = fit_error or doc["job_reason"]
            doc["suggestion"] = job_doc.get("suggestion", "")
            if task.pod.spec.resource_claims and job_doc.get("devices"):
                doc["devices"] = job_doc["devices"]
        return doc

    # -- /debug/nodes ----------------------------------------------------------------------------
    def nodes(self, group_by: str = "") -> dict[str, Any]:
        result = self._result
        node_list: list[NodeInfo] = result.report.node_list
        devices = _node_devices(result)

        def _node(node: NodeInfo) -> dict[str, Any]:
            return _node_doc(node, devices.get(node.name, []))

        published = result.report.topology
        topo = published[0] if published else None
        tiers: list[str] = [topo.tier_label(t) for t in topo.tiers] if topo is not None else []
        groups: list[dict[str, Any]] = []
        grouped: set[int] = set()
        if topo is not None and topo.tiers:
            tier = topo.tiers[0]
            if group_by:
                match = [t for t in topo.tiers if topo.tier_label(t) == group_by or str(t) == group_by]
                if not match:
                    raise ValueError(f"no topology tier {group_by!r}; tiers: {', '.join(tiers)}")
                tier = match[0]
            for g in topo.groups(tier):
                rows = [int(r) for r in g.rows if int(r) < len(node_list)]
                grouped.update(rows)
                groups.append(
                    {
                        "name": g.name,
                        "tier": topo.tier_label(tier),
                        "nodes": [_node(node_list[r]) for r in rows],
                    }
                )
        elif group_by:
            by_value: dict[str, list[int]] = {}
            for r, n in enumerate(node_list):
                value = n.labels.get(group_by) if n.labels else None
                if value is not None:
                    by_value.setdefault(value, []).append(r)
            tiers = [group_by]
            for value, rows in sorted(by_value.items()):
                grouped.update(rows)
                groups.append({"name": value, "tier": group_by, "nodes": [_node(node_list[r]) for r in rows]})
        rest = [_node(n) for r, n in enumerate(node_list) if r not in grouped]
        if rest:
            groups.append({"name": "", "tier": "", "nodes": rest})
        return {
            "cycle": self.obs.last.number,
            "cycle_started": self.obs.last.started,
            "tiers": tiers,
            "groups": groups,
        }

    def node(self, name: str) -> dict[str, Any]:
        """One node as the last cycle saw it (``/debug/nodes/NAME``): its row of ``nodes()`` and the pods
        it counted there, each with its status and requests."""
        result = self._result
        found = next((n for n in result.report.node_list if n.name == name), None)
        if found is None:
            raise NotFound(f"node {name} is not in the last cycle's view")
        doc = _node_doc(found, _node_devices(result).get(name, []))
        doc["pods"] = [
            {
                "namespace": t.namespace,
                "name": t.name,
                "uid": t.uid,
                "status": _status(t),
                "cpu": t.resreq.cpu / 1000,
                "memory": t.resreq.memory,
            }
            for t in sorted(found.tasks.values(), key=lambda t: (t.namespace, t.name))
        ]
        return {"cycle": self.obs.last.number, "node": doc}

    # -- /debug/scheduler ------------------------------------------------------------------------
    def scheduler(self) -> dict[str, Any]:
        info = self.scheduler_info() if self.scheduler_info is not None else {}
        return {
            "cycle": self.obs.last.number,
            "identity": info.get("identity", ""),
            "leader": bool(info.get("leader", False)),
            "leader_identity": info.get("leader_identity", ""),
            "conf": info.get("conf", {"text": "", "source": "", "loaded_at": 0, "last_reload": None}),
            "lag": info.get("lag", {}),
            "cycles": [
                {"at": c.at, "duration_ms": c.duration_ms, "bound": c.bound, "pending_tasks": c.pending_tasks}
                for c in self.obs.cycles
            ],
        }


def _status(task: TaskInfo) -> str:
    return task.status.name.capitalize()


def _wire_dict(values: dict[str, float] | None) -> dict[str, float]:
    if not values:
        return {}
    res = Resource()
    for name, value in values.items():
        if value == value and value not in (float("inf"), float("-inf")):
            res.set(name, value)
    return wire(res)


def _node_devices(result: SessionResult) -> dict[str, list[dict[str, object]]]:
    """Per node and driver: DRA devices published and allocated (this cycle's placements included)."""
    view = result.report.dra
    if view is None:
        return {}
    held = dra_summary.in_use(view, (ca.allocation for p in result.placements for ca in p.claims or ()))
    return dra_summary.node_devices(view, held)


def _node_doc(node: NodeInfo, devices: list[dict[str, object]]) -> dict[str, Any]:
    alloc = node.allocatable
    used = node.used
    gpu: list[float] | None = None
    for name in ("nvidia.com/gpu", "volcano.sh/vgpu-number"):
        if alloc.scalars.get(name):
            gpu = [used.scalars.get(name, 0.0) / 1000, alloc.scalars[name] / 1000]
            break
    return {
        "name": node.name,
        "ready": bool(node.ready),
        "unschedulable": bool(node.unschedulable),
        "cpu": [used.cpu / 1000, alloc.cpu / 1000],
        "memory": [used.memory, alloc.memory],
        "gpu": gpu,
        "devices": devices,
    }


__all__ = ["BindObserverTee", "DebugApi", "NotFound", "Observatory", "explain_job"]
