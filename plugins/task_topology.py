"""task-topology: affinity, anti-affinity and bucket placement between the tasks (roles) of one job,
Volcano's ``task-topology`` plugin (pkg/scheduler/plugins/task-topology/).

A job asks for it with PodGroup annotations (``readTopologyFromPgAnnotations`` in topology.go):
``volcano.sh/task-topology-affinity`` ("ps,worker;ps,chief": groups of roles that want to share nodes;
a group of one role, that role's pods with each other), ``volcano.sh/task-topology-anti-affinity``
(likewise, to keep apart) and ``volcano.sh/task-topology-task-order`` ("ps,worker,chief": which roles
go first). A role is the pod's ``volcano.sh/task-spec`` annotation; a role named that is not a role of
the job, or named twice in one group, makes the job's annotations invalid (``affinityCheck``: a log
line, the job is left alone); empty names are skipped.

Per job with pending pods (``initBucket``, manager.go ``ApplyTaskTopology``, ``ConstructBucket``):
the pods of roles with a topology are sorted (placed pods first, by node; then by the task order,
then by the rule's priority: self anti-affinity 4, inter affinity 3, self affinity 2, inter
anti-affinity 1; then by name: ``TaskOrder.Less`` reversed) and put into *buckets*: placed pods into
one bucket per node, each pending pod into the bucket whose pods it has the most affinity minus
anti-affinity with (ties: the bucket asking for less, 1 cpu = 1 Mi = 1 unit), or a new bucket when
that is negative. Pods of roles without a topology are out of any bucket.

- task order (``TaskOrderFn``): pods in a bucket before pods out of one; within a job, the bucket with
  more pending pods first, then the older bucket; in one bucket, the role order above;
- score (``NodeOrderFn`` / ``calcBucketScore``): 0 where the pod cannot fit idle plus releasing
  resources; else the bucket's pods already on the node, minus the pod's anti-affinity with the
  roles placed there this session, plus the bucket's pending pods, less one for each of them that
  would not fit beside it (taken out in the bucket's order until the rest fits); times
  ``task-topology.weight`` (int, default 1) and 100, over the largest bucket. A placement (allocate or
  pipeline) moves the pod from its bucket's pending pods to the node (``AllocateFunc``).

Where Caldera differs: Volcano takes a bucket's pods out "randomly (by map)" and sorts with an
unstable sort; here the order is the bucket's (the order the pods were put in), so the score is
deterministic. Volcano registers no deallocate handler, so a discarded statement's placements stay
counted for the rest of its session; here they are taken back.

The score depends on what the session placed anywhere in the bucket, so it is a bulk score part
that is not node-local (evaluated afresh on the rows a placement considers).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from caldera.framework.model import JobInfo, TaskInfo, TaskStatus
from caldera.framework.plugin import Plugin
from caldera.framework.resource import MIN_RESOURCE, Resource

if TYPE_CHECKING:
    from caldera.framework.session import Session

log = logging.getLogger("caldera.plugins.task-topology")

AFFINITY_ANNOTATION = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY_ANNOTATION = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER_ANNOTATION = "volcano.sh/task-topology-task-order"
#: batch v1alpha1.TaskSpecKey: the pod's role
TASK_SPEC = "volcano.sh/task-spec"
MAX_NODE_SCORE = 100.0

# affinityPriority (manager.go): the larger, the earlier
SELF_ANTI_AFFINITY, INTER_AFFINITY, SELF_AFFINITY, INTER_ANTI_AFFINITY = 4, 3, 2, 1


@dataclass
class TaskTopology:
    """Volcano's ``TaskTopology``: the three annotations split."""

    affinity: list[list[str]] | None = None
    anti_affinity: list[list[str]] | None = None
    task_order: list[str] | None = None


class TopologyError(ValueError):
    pass


def _check(job: JobInfo, groups: list[list[str]]) -> None:
    """``affinityCheck``: every non-empty name is a role of the job, at most once per group."""
    roles = {t.role for t in job.tasks.values()}
    for group in groups:
        seen: set[str] = set()
        for name in group:
            if not name:
                continue
            if name not in roles:
                raise TopologyError(f"task {name} do not exist in job <{job.namespace}/{job.name}>")
            if name in seen:
                raise TopologyError(f"task {name} is duplicate in job <{job.namespace}/{job.name}>")
            seen.add(name)


def read_topology(job: JobInfo) -> TaskTopology | None:
    """``readTopologyFromPgAnnotations``: None when the PodGroup has none of the annotations; raises
    :class:`TopologyError` (Volcano's message) when one names what the job does not have."""
    annotations = job.podgroup.metadata.annotations if job.podgroup is not None else {}
    keys = (AFFINITY_ANNOTATION, ANTI_AFFINITY_ANNOTATION, TASK_ORDER_ANNOTATION)
    if not any(k in annotations for k in keys):
        return None
    out = TaskTopology()
    if AFFINITY_ANNOTATION in annotations:
        out.affinity = [part.split(",") for part in annotations[AFFINITY_ANNOTATION].split(";")]
        _check(job, out.affinity)
    if ANTI_AFFINITY_ANNOTATION in annotations:
        out.anti_affinity = [part.split(",") for part in annotations[ANTI_AFFINITY_ANNOTATION].split(";")]
        _check(job, out.anti_affinity)
    if TASK_ORDER_ANNOTATION in annotations:
        out.task_order = annotations[TASK_ORDER_ANNOTATION].split(",")
        _check(job, [out.task_order])
    return out


def task_name(task: TaskInfo) -> str:
    """``getTaskName``: the pod's task-spec annotation (not the label)."""
    return task.pod.metadata.annotations.get(TASK_SPEC, "")


def request_score(req: Resource) -> float:
    """``Bucket.CalcResReq``: millicores + Mi of memory + scalar units (thousandths)."""
    return req.cpu + req.memory / 1024 / 1024 + sum(req.scalars.values())


@dataclass
class Bucket:
    """Volcano's ``Bucket``."""

    index: int
    #: pending pods (uid → task), in the order they were put in
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    names: dict[str, int] = field(default_factory=dict)
    req_score: float = 0.0
    request: Resource = field(default_factory=Resource)
    bound: int = 0
    #: node name → this bucket's pods on it
    node: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, task: TaskInfo) -> None:
        self.names[name] = self.names.get(name, 0) + 1
        if task.node_name:
            self.node[task.node_name] = self.node.get(task.node_name, 0) + 1
            self.bound += 1
            return
        self.tasks[task.uid] = task
        self.req_score += request_score(task.resreq)
        self.request.add(task.resreq)

    def placed(self, task: TaskInfo, sign: int) -> None:
        """``Bucket.TaskBound`` (sign 1), and its undo (sign -1, Caldera's own)."""
        self.node[task.node_name] = self.node.get(task.node_name, 0) + sign
        self.bound += sign
        if sign > 0:
            self.tasks.pop(task.uid, None)
            self.req_score -= request_score(task.resreq)
            self.request = self.request.clone().sub(task.resreq)
        else:
            self.tasks[task.uid] = task
            self.req_score += request_score(task.resreq)
            self.request = self.request.clone().add(task.resreq)


class JobManager:
    """Volcano's ``JobManager`` (manager.go): one job's rules and buckets."""

    def __init__(self, topology: TaskTopology) -> None:
        self.buckets: list[Bucket] = []
        self.in_bucket: dict[str, int] = {}
        self.in_task: dict[str, str] = {}
        self.priority: dict[str, int] = {}
        self.order: dict[str, int] = {}
        self.inter: dict[str, set[str]] = {}
        self.self_: set[str] = set()
        self.inter_anti: dict[str, set[str]] = {}
        self.self_anti: set[str] = set()
        self.max_size = 0
        #: node → role → pods of the role placed there this session (``nodeTaskSet``)
        self.node_roles: dict[str, dict[str, int]] = {}
        self._apply(topology)

    def _mark(self, name: str, priority: int) -> None:
        if priority > self.priority.get(name, 0):
            self.priority[name] = priority

    def _apply(self, topology: TaskTopology) -> None:
        """``ApplyTaskTopology``."""
        for groups, pairs, single, inter_p, self_p in (
            (topology.affinity, self.inter, self.self_, INTER_AFFINITY, SELF_AFFINITY),
            (
                topology.anti_affinity,
                self.inter_anti,
                self.self_anti,
                INTER_ANTI_AFFINITY,
                SELF_ANTI_AFFINITY,
            ),
        ):
            for group in groups or ():
                if len(group) == 1:
                    single.add(group[0])
                    self._mark(group[0], self_p)
                    continue
                for i, src in enumerate(group):
                    for dst in group[:i]:
                        pairs.setdefault(src, set()).add(dst)
                        pairs.setdefault(dst, set()).add(src)
                    self._mark(src, inter_p)
        order = topology.task_order or []
        for i, name in enumerate(order):
            self.order[name] = len(order) - i

    def affinity_order(self, left: TaskInfo, right: TaskInfo) -> int:
        """``taskAffinityOrder``: 1 when ``left``'s role ranks higher, -1 lower, 0 the same."""
        ln, rn = self.in_task.get(left.uid, ""), self.in_task.get(right.uid, "")
        if ln == rn:
            return 0
        lo, ro = self.order.get(ln, 0), self.order.get(rn, 0)
        if lo != ro:
            return 1 if lo > ro else -1
        lp, rp = self.priority.get(ln, 0), self.priority.get(rn, 0)
        if lp != rp:
            return 1 if lp > rp else -1
        return 0

    def set_affinity(self, name: str, names: dict[str, int], only_anti: bool) -> int:
        """``checkTaskSetAffinity``: pods of roles it wants to share with, less those it avoids."""
        score = 0
        if not name:
            return score
        for other, count in names.items():
            same = other == name
            if not only_anti:
                if (name in self.self_) if same else (other in self.inter.get(name, ())):
                    score += count
            if (name in self.self_anti) if same else (other in self.inter_anti.get(name, ())):
                score -= count
        return score

    def construct(self, tasks: list[TaskInfo]) -> None:
        """``buildTaskInfo`` + ``ConstructBucket`` + ``buildBucket``."""
        with_topology = []
        for task in tasks:
            name = task_name(task)
            if not name or name not in self.priority:
                self.in_bucket[task.uid] = -1
                continue
            self.in_task[task.uid] = name
            with_topology.append(task)

        def before(a: TaskInfo, b: TaskInfo) -> int:
            # sort.Reverse(TaskOrder): a goes first when TaskOrder.Less(b, a)
            return -1 if self._less(b, a) else (1 if self._less(a, b) else 0)

        with_topology.sort(key=functools.cmp_to_key(before))
        by_node: dict[str, Bucket] = {}
        for task in with_topology:
            name = task_name(task)
            selected: Bucket | None = None
            best = -(2**31)
            if task.node_name:
                best = 0
                selected = by_node.get(task.node_name)
            else:
                for bucket in self.buckets:
                    aff = self.set_affinity(name, bucket.names, False)
                    if aff > best:
                        best, selected = aff, bucket
                    elif aff == best and selected is not None and bucket.req_score < selected.req_score:
                        selected = bucket
            if best < 0 or selected is None:
                selected = Bucket(len(self.buckets))
                self.buckets.append(selected)
                if task.node_name:
                    by_node[task.node_name] = selected
            self.in_bucket[task.uid] = selected.index
            selected.add(name, task)
            self.max_size = max(self.max_size, len(selected.tasks) + selected.bound)

    def _less(self, left: TaskInfo, right: TaskInfo) -> bool:
        """``TaskOrder.Less`` (util.go)."""
        if left.node_name or right.node_name:
            if bool(left.node_name) != bool(right.node_name):
                return not left.node_name
            return left.node_name > right.node_name
        result = self.affinity_order(left, right)
        if result == 0:
            return left.name > right.name
        return result < 0

    def bucket(self, task: TaskInfo) -> Bucket | None:
        index = self.in_bucket.get(task.uid, -1)
        return None if index < 0 else self.buckets[index]

    def placed(self, task: TaskInfo, sign: int) -> None:
        """``TaskBound`` (sign 1) and its undo (-1)."""
        name = task_name(task)
        if name:
            roles = self.node_roles.setdefault(task.node_name, {})
            roles[name] = roles.get(name, 0) + sign
        bucket = self.bucket(task)
        if bucket is not None:
            bucket.placed(task, sign)


class TaskTopologyPlugin(Plugin):
    name: ClassVar[str] = "task-topology"
    arguments_schema: ClassVar[dict[str, type]] = {"task-topology.weight": int}

    def on_session_open(self, ssn: Session) -> None:
        from caldera.framework.session import EventHandler

        self.weight = self.arguments.int("task-topology.weight", 1)
        self.ssn = ssn
        self.managers: dict[str, JobManager] = {}
        for uid, job in ssn.jobs.items():
            if not any(t.status == TaskStatus.PENDING for t in job.tasks.values()):
                continue
            try:
                topology = read_topology(job)
            except TopologyError as exc:
                log.info("job %s/%s: task topology annotations ignored: %s", job.namespace, job.name, exc)
                continue
            if topology is None:
                continue
            manager = JobManager(topology)
            manager.construct(list(job.tasks.values()))
            self.managers[uid] = manager
        #: uids of the tasks this session placed that the managers counted (undone on deallocate)
        self._counted: set[str] = set()
        if not self.managers:
            return
        ssn.add_task_order_fn(self.name, self.task_order)
        ssn.add_bulk_node_order_fn(self.name, self.score)
        ssn.add_event_handler(EventHandler(allocate=self._allocated, deallocate=self._deallocated))

    def _allocated(self, event: object) -> None:
        task: TaskInfo = event.task  # type: ignore[attr-defined]
        manager = self.managers.get(task.job)
        if manager is not None and task.status in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
            manager.placed(task, 1)
            self._counted.add(task.uid)

    def _deallocated(self, event: object) -> None:
        task: TaskInfo = event.task  # type: ignore[attr-defined]
        if task.uid in self._counted:
            self._counted.discard(task.uid)
            self.managers[task.job].placed(task, -1)

    # -- task order --------------------------------------------------------------------------------
    def task_order(self, left: TaskInfo, right: TaskInfo) -> int:
        """``TaskOrderFn``: -1 when ``left`` goes first."""
        lm, rm = self.managers.get(left.job), self.managers.get(right.job)
        if lm is None or rm is None:
            return 0
        lb, rb = lm.bucket(left), rm.bucket(right)
        if (lb is None) != (rb is None):
            return -1 if lb is not None else 1
        if left.job != right.job or lb is None or rb is None:
            return 0
        if len(lb.tasks) != len(rb.tasks):
            return -1 if len(lb.tasks) > len(rb.tasks) else 1
        if lb.index == rb.index:
            return -lm.affinity_order(left, right)
        return -1 if lb.index < rb.index else 1

    # -- score -------------------------------------------------------------------------------------
    def score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """``NodeOrderFn`` over ``rows``."""
        out = np.zeros(len(rows))
        manager = self.managers.get(task.job)
        bucket = manager.bucket(task) if manager is not None else None
        if manager is None or bucket is None or not len(rows):
            return out
        t = self.ssn.table
        # the table's dimensions (not pods), and any the pods ask for that no node has (room 0)
        asked = {n for res in (task.resreq, bucket.request) for n, v in res.items() if v > 0}
        names = sorted((set(t.dims) - {"pods"}) | asked)
        room = np.zeros((len(rows), len(names)))
        for i, n in enumerate(names):
            col = t.dims.get(n)
            if col is not None:
                room[:, i] = t.idle[rows, col] + t.releasing[rows, col]

        def vector(res: Resource) -> np.ndarray:
            return np.array([res.get(n) for n in names])

        # maxResource.LessPartly(req): the pod could never fit the node
        fits = ~np.any(room < vector(task.resreq), axis=1)
        score = np.zeros(len(rows))
        for node_name, count in bucket.node.items():
            node = self.ssn.nodes.get(node_name)
            if node is not None and count:
                score += count * (rows == node.row)
        name = task_name(task)
        for node_name, roles in manager.node_roles.items():
            node = self.ssn.nodes.get(node_name)
            aff = manager.set_affinity(name, roles, True)
            if node is not None and aff < 0:
                score += aff * (rows == node.row)
        score += len(bucket.tasks)
        # take the bucket's other pending pods out, in its order, until the rest fits
        # (Resource.LessEqual: within the minimum resource)
        others = [o for o in bucket.tasks.values() if o.uid != task.uid]
        steps = [vector(bucket.request)]
        for other in others:
            steps.append(steps[-1] - vector(other.resreq))
        stack = np.stack(steps)  # (k+1) x dims
        ok = np.all(stack[None, :, :] < room[:, None, :] + MIN_RESOURCE, axis=2)  # rows x (k+1)
        first = np.where(ok.any(axis=1), ok.argmax(axis=1), len(others))
        score = score - first
        result = np.where(fits, score * self.weight, 0.0)
        if manager.max_size:
            result = result * MAX_NODE_SCORE / manager.max_size
        return result  # type: ignore[no-any-return]
