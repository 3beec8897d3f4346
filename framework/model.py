"""The scheduling model: tasks (pods), jobs (PodGroups), nodes and queues, as a session sees them."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import msgspec

from caldera.framework.nodetable import NodeTable
from caldera.framework.objects import (
    DISRUPTION_MODE_POD_GROUP,
    NativePodGroup,
    NetworkTopologySpec,
    Node,
    Pod,
    PodGroup,
    PodGroupTemplate,
    Queue,
    Taint,
    Workload,
    parse_timestamp,
)
from caldera.framework.resource import Resource, ResourceError
from caldera.framework.subgroups import SubGroupPolicies, check_policies

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"
PREEMPTABLE_ANNOTATION = "volcano.sh/preemptable"
#: the name part of a job key of a ``scheduling.k8s.io/v1alpha2`` PodGroup starts with this (no
#: Kubernetes name holds a ':'), so a native group and a Volcano PodGroup of the same name never merge
NATIVE_JOB_PREFIX = "k8s:"


def native_job_key(namespace: str, name: str) -> str:
    """The job key of the ``scheduling.k8s.io/v1alpha2`` PodGroup ``namespace/name``."""
    return f"{namespace}/{NATIVE_JOB_PREFIX}{name}"


def is_native_job_key(key: str) -> bool:
    return key.partition("/")[2].startswith(NATIVE_JOB_PREFIX)


def workload_template(pg: NativePodGroup, workloads: Mapping[str, Workload]) -> PodGroupTemplate | None:
    """The Workload template the PodGroup names (``spec.podGroupTemplateRef``), None when it names
    none or the Workload or template is not known. Workloads are keyed ``namespace/name``."""
    ref = pg.spec.pod_group_template_ref
    if ref is None:
        return None
    workload_name, template_name = ref.names()
    workload = workloads.get(f"{pg.metadata.namespace}/{workload_name}")
    if workload is None:
        return None
    for template in workload.spec.pod_group_templates:
        if template.name == template_name:
            return template
    return None


def uncopied_claims_message(pg: NativePodGroup, names: tuple[str, ...]) -> str:
    """Why a native group's pods do not share the claims its Workload template lists
    (``JobInfo.uncopied_claims``)."""
    ref = pg.spec.pod_group_template_ref
    workload, template = ref.names() if ref is not None else ("", "")
    return (
        f"PodGroup {pg.metadata.namespace}/{pg.metadata.name} does not carry the resourceClaims "
        f"{', '.join(names)} of its template {template} (Workload {workload}): a PodGroup's own "
        "spec.resourceClaims are the group's claims, so its pods' entries of these names are "
        "their own claims, one each; the PodGroup must be made with the template's claims copied"
    )


log = logging.getLogger(__name__)

# Go's strconv.ParseBool, which Volcano uses to read boolean annotations and labels.
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_preemptable(annotations: dict[str, str], labels: dict[str, str], default: bool, what: str) -> bool:
    """``volcano.sh/preemptable`` from the annotation, else the label, else ``default``; a value
    that is not a Go boolean is false, with a warning. Volcano: ``GetPodPreemptable`` in
    pkg/scheduler/api/pod_info.go (default true for pods) and ``JobInfo.extractPreemptable`` in
    pkg/scheduler/api/job_info.go (default false for PodGroups)."""
    value = annotations.get(PREEMPTABLE_ANNOTATION)
    if value is None:
        value = labels.get(PREEMPTABLE_ANNOTATION)
        if value is None:
            return default
    if value in _GO_TRUE:
        return True
    if value not in _GO_FALSE:
        log.warning("%s: invalid %s=%s, taken as false", what, PREEMPTABLE_ANNOTATION, value)
    return False


def task_role_of(annotations: dict[str, str], labels: dict[str, str]) -> str:
    """``volcano.sh/task-spec`` from the annotation, else the label (the job controller sets both).
    Volcano: ``getTaskRole`` in pkg/scheduler/api/job_info.go."""
    return annotations.get(TASK_SPEC_ANNOTATION) or labels.get(TASK_SPEC_ANNOTATION) or ""


class TaskStatus(enum.IntEnum):
    PENDING = 1
    ALLOCATED = 2
    PIPELINED = 3
    BINDING = 4
    BOUND = 5
    RUNNING = 6
    RELEASING = 7
    SUCCEEDED = 8
    FAILED = 9
    UNKNOWN = 10


#: Statuses whose resources are held on a node (Volcano's AllocatedStatus).
ALLOCATED_STATUSES = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING}
)
#: Statuses that count toward a gang's minimum (Volcano's ReadyTaskNum).
READY_STATUSES = ALLOCATED_STATUSES | {TaskStatus.SUCCEEDED}
#: Statuses that occupy a node's resources at all (allocated or on their way out).
OCCUPYING_STATUSES = ALLOCATED_STATUSES | {TaskStatus.RELEASING}


def task_status_of(pod: Pod) -> TaskStatus:
    """The task status Volcano derives from a pod's phase, node and deletion."""
    phase = pod.status.phase
    deleting = pod.metadata.deletion_timestamp is not None
    if phase == "Running":
        return TaskStatus.RELEASING if deleting else TaskStatus.RUNNING
    if phase == "Pending":
        if deleting:
            return TaskStatus.RELEASING
        return TaskStatus.BOUND if pod.spec.node_name else TaskStatus.PENDING
    if phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if phase == "Failed":
        return TaskStatus.FAILED
    return TaskStatus.UNKNOWN


def pod_requests(pod: Pod) -> tuple[Resource, Resource]:
    """(request, init request) of a pod; a container's missing request defaults to its limit, as the
    API server does. The init request is the larger of the running request and any init container.
    A bad or negative quantity is a :class:`ResourceError` naming the container and the value."""
    req = Resource()
    for c in pod.spec.containers:
        req.add(_container_list(c.name, c.resources.requests or c.resources.limits))
        if c.resources.requests and c.resources.limits:
            # Extended resources are often given only as limits (vGPU, GPUs): count them too.
            for name, value in c.resources.limits.items():
                if name not in c.resources.requests and name not in ("cpu", "memory"):
                    req.add(_container_list(c.name, {name: value}))
    if pod.spec.overhead:
        req.add(_container_list("", pod.spec.overhead))
    init = req.clone()
    for c in pod.spec.init_containers:
        init.set_max(_container_list(c.name, c.resources.requests or c.resources.limits, init=True))
    req.pods = 1.0
    init.pods = 1.0
    return req, init


def _container_list(container: str, items: Mapping[str, Any] | None, init: bool = False) -> Resource:
    try:
        return Resource.from_resource_list(items, allow_negative=False)
    except ResourceError as exc:
        where = f"{'init ' if init else ''}container {container}" if container else "overhead"
        raise ResourceError(f"{where}: {exc}") from None


_template_encoder = msgspec.json.Encoder()


def template_key(pod: Pod, req: Resource) -> bytes:
    """Pods with equal keys are interchangeable for every predicate and score (one equivalence class)."""
    spec = pod.spec
    ports = [p.host_port for c in spec.containers for p in c.ports if p.host_port]
    # Inter-pod rules (affinity, topology spread) depend on the pod's namespace and labels too;
    # the cluster's default spread constraints on its workload controller.
    inter_pod = bool(
        spec.affinity and (spec.affinity.pod_affinity or spec.affinity.pod_anti_affinity)
    ) or bool(spec.topology_spread_constraints)
    owner = ""
    if not spec.topology_spread_constraints:
        for ref in pod.metadata.owner_references:
            if ref.controller and ref.kind in ("ReplicaSet", "StatefulSet", "ReplicationController"):
                owner = ref.uid
                break
    base = _template_encoder.encode(
        (
            sorted(req.to_dict().items()),
            spec.node_selector,
            spec.affinity,
            spec.tolerations,
            ports,
            pod.metadata.namespace if inter_pod or owner else "",
            pod.metadata.labels if inter_pod else {},
            spec.topology_spread_constraints,
            owner,
            # claims are per namespace: the volume predicates read them
            [pod.metadata.namespace, spec.volumes] if spec.volumes else None,
        )
    )
    if not spec.resource_claims:
        return base
    # ResourceClaims are the pod's own (or shared by name): the DRA predicate reads them. After a
    # NUL (JSON has none), so that what reads only the rest finds it (``claims_free_template``).
    claims = (pod.metadata.namespace, spec.resource_claims, pod.status.resource_claim_statuses)
    return base + TEMPLATE_CLAIMS + _template_encoder.encode(claims)


#: separates the ResourceClaims part of a template key from the rest
TEMPLATE_CLAIMS = b"\0claims\0"


def claims_free_template(template: bytes) -> bytes:
    """A template key less its ResourceClaims part: the same for pods that differ only there."""
    return template.partition(TEMPLATE_CLAIMS)[0]


def _same_template_inputs(old: Pod, new: Pod) -> bool:
    """Equal requests and template key for sure: every field pod_requests and template_key read is
    equal (C-level compares of the decoded structs)."""
    a, b = old.spec, new.spec
    om, nm = old.metadata, new.metadata
    if not (
        om.namespace == nm.namespace
        and om.labels == nm.labels
        and om.owner_references == nm.owner_references
        and old.status.resource_claim_statuses == new.status.resource_claim_statuses
    ):
        return False
    if a is b:
        return True
    return (
        a.containers == b.containers
        and a.init_containers == b.init_containers
        and a.overhead == b.overhead
        and a.node_selector == b.node_selector
        and a.affinity == b.affinity
        and a.tolerations == b.tolerations
        and a.topology_spread_constraints == b.topology_spread_constraints
        and a.volumes == b.volumes
        and a.resource_claims == b.resource_claims
    )


def _same_request_inputs(old: Pod, new: Pod) -> bool:
    """Equal requests for sure: every field pod_requests reads is equal."""
    a, b = old.spec, new.spec
    return a is b or (
        a.containers == b.containers and a.init_containers == b.init_containers and a.overhead == b.overhead
    )


class TaskInfo:
    """One pod as the scheduler sees it."""

    __slots__ = (
        "best_effort",
        "creation",
        "init_resreq",
        "job",
        "name",
        "namespace",
        "node_name",
        "pod",
        "preemptable",
        "priority",
        "resreq",
        "role",
        "status",
        "template",
        "uid",
    )

    def __init__(
        self,
        uid: str,
        name: str,
        namespace: str,
        job: str,
        resreq: Resource,
        init_resreq: Resource | None = None,
        status: TaskStatus = TaskStatus.PENDING,
        node_name: str = "",
        priority: int = 0,
        role: str = "",
        creation: float = 0.0,
        pod: Pod | None = None,
        template: bytes = b"",
        preemptable: bool = True,
    ) -> None:
        self.uid = uid
        self.name = name
        self.namespace = namespace
        self.job = job
        self.resreq = resreq
        self.init_resreq = init_resreq if init_resreq is not None else resreq
        self.status = status
        self.node_name = node_name
        self.priority = priority
        self.role = role
        self.creation = creation
        self.pod = pod if pod is not None else Pod()
        self.template = template
        self.preemptable = preemptable
        self.best_effort = resreq.is_empty()

    @classmethod
    def from_pod(
        cls, pod: Pod, job: str = "", priority: int | None = None, previous: TaskInfo | None = None
    ) -> TaskInfo:
        """Build a task from a pod; :class:`ResourceError` names a bad quantity. ``previous`` is the
        task of an earlier version of the same pod (an update is mostly a status or the binding), or
        of a sibling made from the same template: its requests and template are reused when every
        field they derive from is equal (requests are never changed in place, so sharing is safe)."""
        meta = pod.metadata
        if previous is not None and _same_template_inputs(previous.pod, pod):
            req, init, template = previous.resreq, previous.init_resreq, previous.template
        elif previous is not None and _same_request_inputs(previous.pod, pod):
            # e.g. the resourceclaim controller named the pod's claims in its status: a new template
            req, init = previous.resreq, previous.init_resreq
            template = template_key(pod, init)
        else:
            req, init = pod_requests(pod)
            template = template_key(pod, init)
        prio = priority if priority is not None else (pod.spec.priority or 0)
        annotations = meta.annotations
        return cls(
            uid=meta.uid or f"{meta.namespace}/{meta.name}",
            name=meta.name,
            namespace=meta.namespace,
            job=job,
            resreq=req,
            init_resreq=init,
            status=task_status_of(pod),
            node_name=pod.spec.node_name,
            priority=prio,
            role=task_role_of(annotations, meta.labels),
            creation=parse_timestamp(meta.creation_timestamp),
            pod=pod,
            template=template,
            preemptable=parse_preemptable(
                annotations, meta.labels, True, f"pod {meta.namespace}/{meta.name}"
            ),
        )

    def clone(self) -> TaskInfo:
        t = TaskInfo.__new__(TaskInfo)
        t.uid = self.uid
        t.name = self.name
        t.namespace = self.namespace
        t.job = self.job
        t.resreq = self.resreq  # requests never change for a pod; shared
        t.init_resreq = self.init_resreq
        t.status = self.status
        t.node_name = self.node_name
        t.priority = self.priority
        t.role = self.role
        t.creation = self.creation
        t.pod = self.pod
        t.template = self.template
        t.preemptable = self.preemptable
        t.best_effort = self.best_effort
        return t

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gated(self) -> bool:
        """A pending pod with scheduling gates (``spec.schedulingGates``): kube-scheduler's
        SchedulingGates plugin (plugins/schedulinggates, ``PreEnqueue``) keeps it out of the
        scheduling queue, so no action may place it, reserve room for it or bind it."""
        return bool(self.pod.spec.scheduling_gates) and self.status == TaskStatus.PENDING

    @property
    def gates(self) -> list[str]:
        return [g.name for g in self.pod.spec.scheduling_gates]

    def __repr__(self) -> str:
        return f"Task({self.namespace}/{self.name}, {self.status.name}, node={self.node_name or '-'})"


class JobInfo:
    """One PodGroup and its tasks, indexed by status."""

    __slots__ = (
        "allocated",
        "by_status",
        "creation",
        "disrupt_whole",
        "fit_errors",
        "generation",
        "job_fit_error",
        "min_available",
        "min_resources",
        "name",
        "namespace",
        "native",
        "network_topology",
        "phase",
        "podgroup",
        "preemptable",
        "priority",
        "priority_class",
        "queue",
        "ready_count",
        "sub_groups",
        "task_min_available",
        "tasks",
        "topology_keys",
        "total_request",
        "uid",
        "uncopied_claims",
        "version",
    )

    def __init__(
        self,
        uid: str,
        name: str = "",
        namespace: str = "",
        queue: str = "default",
        priority: int = 0,
        min_available: int = 1,
        task_min_available: dict[str, int] | None = None,
        min_resources: Resource | None = None,
        creation: float = 0.0,
        phase: str = "Pending",
        podgroup: PodGroup | None = None,
        network_topology: NetworkTopologySpec | None = None,
        priority_class: str = "",
    ) -> None:
        self.uid = uid
        self.name = name
        self.namespace = namespace
        self.queue = queue
        self.priority = priority
        self.priority_class = priority_class
        self.min_available = min_available
        self.task_min_available: dict[str, int] = task_min_available or {}
        self.min_resources = min_resources
        self.creation = creation
        self.phase = phase
        self.podgroup = podgroup
        self.network_topology = network_topology
        #: the ``scheduling.k8s.io/v1alpha2`` PodGroup this job is (None: a Volcano PodGroup's job)
        self.native: NativePodGroup | None = None
        #: node label keys the whole job must stay inside one domain of (a native group's
        #: ``schedulingConstraints.topology``)
        self.topology_keys: tuple[str, ...] = ()
        #: evicted only whole, never one pod at a time (a native group's ``disruptionMode: PodGroup``,
        #: KEP-5710)
        self.disrupt_whole = False
        #: the ``resourceClaims`` names of a native group's Workload template that the PodGroup does
        #: not carry (its pods' entries of these names are their own claims, not the group's)
        self.uncopied_claims: tuple[str, ...] = ()
        #: the PodGroup's ``spec.subGroupPolicy``, checked (None: it has none; framework/subjobs.py)
        self.sub_groups: SubGroupPolicies | None = None
        self.preemptable = False
        self.tasks: dict[str, TaskInfo] = {}
        self.by_status: dict[TaskStatus, dict[str, TaskInfo]] = {}
        self.allocated = Resource()
        self.total_request = Resource()
        self.ready_count = 0
        self.fit_errors: dict[str, str] = {}
        self.job_fit_error = ""
        self.version = 0
        #: stamped by the cache whenever anything a decision may read of the job changes (unique
        #: across the cache's jobs and their lifetimes; 0: not a cached job). A copy keeps its
        #: source's: two copies of the same generation hold the same job (``framework.carry``).
        self.generation = 0

    @classmethod
    def from_podgroup(cls, pg: PodGroup, priority: int = 0, default_queue: str = "default") -> JobInfo:
        meta = pg.metadata
        spec = pg.spec
        min_res = None
        if spec.min_resources:
            try:
                min_res = Resource.from_resource_list(spec.min_resources)
            except ResourceError:
                min_res = None
        job = cls(
            uid=f"{meta.namespace}/{meta.name}",
            name=meta.name,
            namespace=meta.namespace,
            queue=spec.queue or default_queue,
            priority=priority,
            min_available=max(0, spec.min_member),
            task_min_available=dict(spec.min_task_member),
            min_resources=min_res,
            creation=parse_timestamp(meta.creation_timestamp),
            phase=pg.status.phase or "Pending",
            podgroup=pg,
            network_topology=spec.network_topology,
            priority_class=spec.priority_class_name,
        )
        job.preemptable = parse_preemptable(
            meta.annotations, meta.labels, False, f"podgroup {meta.namespace}/{meta.name}"
        )
        if spec.sub_group_policy:
            job.sub_groups = check_policies(spec.sub_group_policy, f"podgroup {meta.namespace}/{meta.name}")
        return job

    @classmethod
    def from_native_podgroup(
        cls,
        pg: NativePodGroup,
        priority: int = 0,
        default_queue: str = "default",
        workloads: Mapping[str, Workload] | None = None,
    ) -> JobInfo:
        """A job of Kubernetes' own PodGroup (``scheduling.k8s.io/v1alpha2``; KEP-4671, KEP-5832):
        ``schedulingPolicy.gang.minCount`` is its min member; ``basic`` (or no policy) makes its pods
        independent (min member 1); the policy and constraints come from the Workload template
        ``podGroupTemplateRef`` names when the PodGroup carries none; the queue is the
        ``scheduling.volcano.sh/queue-name`` label or annotation, else the default queue.

        The group's ResourceClaims are the PodGroup's own ``spec.resourceClaims``, never the
        template's: the PodGroup carries a copy of its template's claims (KEP-5729 "API": "The
        PodGroup API will be updated similarly to contain the ResourceClaim references from its
        template"; KEP-5832 "SchedulingPolicy Reference vs. Copy/Inline": a Workload change only
        affects PodGroups made after it), the resourceclaim controller makes a group's claim only
        for an entry of the PodGroup's spec (``PodGroupResourceClaimStatus.name`` must name one,
        ``validatePodGroupResourceClaimStatuses``), and kube-scheduler's DRA plugin matches a pod's
        entry against ``podGroup.Spec.ResourceClaims``. A template entry the PodGroup lacks is kept
        in ``uncopied_claims``, for the status updater to report."""
        meta = pg.metadata
        spec = pg.spec
        policy, constraints = spec.scheduling_policy, spec.scheduling_constraints
        disruption = spec.disruption_mode
        template = workload_template(pg, workloads or {})
        uncopied: tuple[str, ...] = ()
        if template is not None:
            policy = policy or template.scheduling_policy
            constraints = constraints or template.scheduling_constraints
            disruption = disruption or template.disruption_mode
            carried = set(spec.resource_claims)
            uncopied = tuple(c.name for c in template.resource_claims if c not in carried)
        min_available = 1
        if policy is not None and policy.gang is not None:
            min_available = max(1, policy.gang.min_count)
        queue = meta.labels.get(QUEUE_NAME_ANNOTATION) or meta.annotations.get(QUEUE_NAME_ANNOTATION)
        job = cls(
            uid=native_job_key(meta.namespace, meta.name),
            name=meta.name,
            namespace=meta.namespace,
            queue=queue or default_queue,
            priority=priority,
            min_available=min_available,
            creation=parse_timestamp(meta.creation_timestamp),
            priority_class=spec.priority_class_name,
        )
        job.native = pg
        job.topology_keys = constraints.keys() if constraints is not None else ()
        job.disrupt_whole = disruption == DISRUPTION_MODE_POD_GROUP
        job.uncopied_claims = uncopied
        job.preemptable = parse_preemptable(
            meta.annotations, meta.labels, False, f"podgroup {meta.namespace}/{meta.name}"
        )
        return job

    # -- tasks -------------------------------------------------------------------------------------
    def add_task(self, task: TaskInfo) -> None:
        self.tasks[task.uid] = task
        bucket = self.by_status.get(task.status)
        if bucket is None:
            bucket = self.by_status[task.status] = {}
        bucket[task.uid] = task
        self.total_request.add(task.resreq)
        if task.status in ALLOCATED_STATUSES:
            self.allocated.add(task.resreq)
        if task.status in READY_STATUSES:
            self.ready_count += 1
        self.version += 1

    def remove_task(self, task: TaskInfo) -> None:
        existing = self.tasks.pop(task.uid, None)
        if existing is None:
            return
        self.by_status.get(existing.status, {}).pop(existing.uid, None)
        self.total_request.sub(existing.resreq)
        if existing.status in ALLOCATED_STATUSES:
            self.allocated.sub(existing.resreq)
        if existing.status in READY_STATUSES:
            self.ready_count -= 1
        self.version += 1

    def replace_task(self, old: TaskInfo, new: TaskInfo) -> None:
        """Swap ``old`` for ``new``, a newer copy of the same pod with the same requests (its status
        may differ): the same bookkeeping as removing ``old`` and adding ``new``, without redoing the
        sums that cannot change. ``old`` itself is left as it was."""
        uid = new.uid
        tasks = self.tasks
        # Removed and added again, as remove_task + add_task would: the task moves to the end.
        tasks.pop(uid, None)
        tasks[uid] = new
        before, status = old.status, new.status
        by_status = self.by_status
        bucket = by_status.get(before)
        if bucket is not None:
            bucket.pop(uid, None)
        if before != status:
            self._account_move(new.resreq, before, status)
        bucket = by_status.get(status)
        if bucket is None:
            bucket = by_status[status] = {}
        bucket[uid] = new
        self.version += 1

    def _account_move(self, resreq: Resource, before: TaskStatus, status: TaskStatus) -> None:
        """The job's sums as a task of ``resreq`` moves from status ``before`` to ``status``."""
        was_alloc = before in ALLOCATED_STATUSES
        now_alloc = status in ALLOCATED_STATUSES
        if was_alloc and not now_alloc:
            self.allocated.sub(resreq)
        elif now_alloc and not was_alloc:
            self.allocated.add(resreq)
        self.ready_count += (status in READY_STATUSES) - (before in READY_STATUSES)

    def swap_task(self, old: TaskInfo, new: TaskInfo) -> None:
        """Hold ``new`` (a newer copy of the same pod, same requests) where ``old`` was, at the same
        place in ``tasks``: the bookkeeping of ``update_task_status`` to new's status, with ``old``
        left as it was (the cache never changes a task object it may have handed out)."""
        uid = new.uid
        self.tasks[uid] = new
        before, status = old.status, new.status
        bucket = self.by_status.get(before)
        if before == status and bucket is not None:
            bucket[uid] = new  # (same place in its bucket, as a status left unchanged)
        else:
            if bucket is not None:
                bucket.pop(uid, None)
            self._account_move(new.resreq, before, status)
            bucket = self.by_status.get(status)
            if bucket is None:
                bucket = self.by_status[status] = {}
            bucket[uid] = new
        self.version += 1

    def update_task_status(self, task: TaskInfo, status: TaskStatus) -> None:
        old = task.status
        if old == status:
            return
        bucket = self.by_status.get(old)
        if bucket is not None:
            bucket.pop(task.uid, None)
        self._account_move(task.resreq, old, status)
        task.status = status
        bucket = self.by_status.get(status)
        if bucket is None:
            bucket = self.by_status[status] = {}
        bucket[task.uid] = task
        self.version += 1

    def tasks_in(self, *statuses: TaskStatus) -> Iterator[TaskInfo]:
        for status in statuses:
            bucket = self.by_status.get(status)
            if bucket:
                yield from bucket.values()

    def count(self, *statuses: TaskStatus) -> int:
        by_status = self.by_status
        n = 0
        for status in statuses:
            bucket = by_status.get(status)
            if bucket:
                n += len(bucket)
        return n

    # -- gang arithmetic (Volcano's) ---------------------------------------------------------------
    def ready_task_num(self) -> int:
        return self.ready_count

    def waiting_task_num(self) -> int:
        bucket = self.by_status.get(TaskStatus.PIPELINED)
        return len(bucket) if bucket else 0

    def pending_task_num(self) -> int:
        bucket = self.by_status.get(TaskStatus.PENDING)
        return len(bucket) if bucket else 0

    def valid_task_num(self) -> int:
        return self.count(*ALLOCATED_STATUSES, TaskStatus.SUCCEEDED, TaskStatus.PIPELINED, TaskStatus.PENDING)

    def gated_tasks(self) -> list[TaskInfo]:
        """Pending tasks held by scheduling gates."""
        bucket = self.by_status.get(TaskStatus.PENDING)
        if not bucket:
            return []
        return [t for t in bucket.values() if t.pod.spec.scheduling_gates]

    def waits_for_gates(self) -> bool:
        """The gang cannot reach its minimum (or a role its own) without pods that are still gated:
        it waits, without partial placement, until their gates are removed."""
        gated = self.gated_tasks()
        if not gated:
            return False
        if self.valid_task_num() - len(gated) < self.min_available:
            return True
        if self.task_min_available:
            valid: dict[str, int] = {}
            for t in self.tasks_in(
                *ALLOCATED_STATUSES, TaskStatus.SUCCEEDED, TaskStatus.PIPELINED, TaskStatus.PENDING
            ):
                if not t.gated:
                    valid[t.role] = valid.get(t.role, 0) + 1
            return any(valid.get(role, 0) < need for role, need in self.task_min_available.items())
        return False

    def ready_by_role(self, *extra: TaskStatus) -> dict[str, int]:
        out: dict[str, int] = {}
        for task in self.tasks_in(*ALLOCATED_STATUSES, TaskStatus.SUCCEEDED, *extra):
            out[task.role] = out.get(task.role, 0) + 1
        return out

    def roles_bypassed(self) -> bool:
        """Role minimums are not enforced when minMember is below their sum. Volcano:
        ``CheckTaskReady``/``CheckTaskPipelined``/``CheckTaskValid`` in pkg/scheduler/api/job_info.go."""
        return self.min_available < sum(self.task_min_available.values())

    def roles_satisfied(self, *extra: TaskStatus) -> bool:
        if not self.task_min_available or self.roles_bypassed():
            return True
        ready = self.ready_by_role(*extra)
        return all(ready.get(role, 0) >= need for role, need in self.task_min_available.items())

    def is_ready(self) -> bool:
        return self.ready_task_num() >= self.min_available and self.roles_satisfied()

    def is_pipelined(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() >= self.min_available and self.roles_satisfied(
            TaskStatus.PIPELINED
        )

    def is_starving(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() < self.min_available

    def fit_failed_roles(self) -> set[str]:
        """Roles of the tasks that failed to fit in this session (Volcano: ``JobInfo.FitFailedRoles``)."""
        tasks = self.tasks
        return {tasks[uid].role for uid in self.fit_errors if uid in tasks}

    def need_continue_allocating(self) -> bool:
        """After one of its tasks failed to fit, may allocate go on with the job's other tasks?
        Only while the job can still reach its minimum. Volcano: ``JobInfo.NeedContinueAllocating``
        in pkg/scheduler/api/job_info.go."""
        if self.min_available == len(self.tasks):
            return False  # every pod must run: one that cannot fit sinks the gang
        failed = self.fit_failed_roles()
        total_role_min = sum(self.task_min_available.values())
        if self.min_available < total_role_min:
            # role minimums not all enforced: count the pending tasks of roles that have not failed
            left = sum(1 for t in self.tasks_in(TaskStatus.PENDING) if t.role not in failed)
            return self.ready_task_num() + left >= self.min_available
        allocated: dict[str, int] = {}
        for t in self.tasks_in(*ALLOCATED_STATUSES, TaskStatus.SUCCEEDED):
            allocated[t.role] = allocated.get(t.role, 0) + 1
        for t in self.tasks_in(TaskStatus.PENDING):
            if t.init_resreq.is_empty():
                allocated[t.role] = allocated.get(t.role, 0) + 1
        for role in failed:
            need = self.task_min_available.get(role, 0)
            if need and allocated.get(role, 0) < need:
                return False
        return True

    def check_task_min_available(self) -> bool:
        """Enough valid tasks per role to ever satisfy the role minimums."""
        if not self.task_min_available or self.roles_bypassed():
            return True
        valid: dict[str, int] = {}
        for t in self.tasks_in(
            *ALLOCATED_STATUSES, TaskStatus.SUCCEEDED, TaskStatus.PIPELINED, TaskStatus.PENDING
        ):
            valid[t.role] = valid.get(t.role, 0) + 1
        return all(valid.get(role, 0) >= need for role, need in self.task_min_available.items())

    # -- copies ------------------------------------------------------------------------------------
    def clone(self) -> JobInfo:
        j = JobInfo.__new__(JobInfo)
        j.uid = self.uid
        j.name = self.name
        j.namespace = self.namespace
        j.queue = self.queue
        j.priority = self.priority
        j.priority_class = self.priority_class
        j.min_available = self.min_available
        j.task_min_available = self.task_min_available
        j.min_resources = self.min_resources
        j.creation = self.creation
        j.phase = self.phase
        j.podgroup = self.podgroup
        j.network_topology = self.network_topology
        j.native = self.native
        j.topology_keys = self.topology_keys
        j.disrupt_whole = self.disrupt_whole
        j.uncopied_claims = self.uncopied_claims
        j.sub_groups = self.sub_groups
        j.preemptable = self.preemptable
        j.tasks = {}
        j.by_status = {}
        for uid, task in self.tasks.items():
            t = task.clone()
            j.tasks[uid] = t
            bucket = j.by_status.get(t.status)
            if bucket is None:
                bucket = j.by_status[t.status] = {}
            bucket[uid] = t
        j.allocated = self.allocated.clone()
        j.total_request = self.total_request.clone()
        j.ready_count = self.ready_count
        j.fit_errors = {}
        j.job_fit_error = ""
        j.version = 0
        j.generation = self.generation
        return j

    def __repr__(self) -> str:
        return f"Job({self.uid}, queue={self.queue}, min={self.min_available}, tasks={len(self.tasks)})"


class NodeInfo:
    """One node: capacity and usage, kept in step with its row of the snapshot's NodeTable."""

    __slots__ = (
        "_tasks",
        "_tasks_loader",
        "allocatable",
        "idle",
        "labels",
        "name",
        "node",
        "pipelined",
        "ready",
        "releasing",
        "row",
        "table",
        "taints",
        "unschedulable",
        "used",
    )

    def __init__(
        self, name: str, allocatable: Resource, table: NodeTable | None = None, node: Node | None = None
    ) -> None:
        self.name = name
        self.node = node if node is not None else Node()
        self.labels: dict[str, str] = dict(self.node.metadata.labels)
        self.taints: list[Taint] = list(self.node.spec.taints)
        self.unschedulable = self.node.spec.unschedulable
        self.ready = True
        self.allocatable = allocatable
        self.idle = allocatable.clone()
        self.used = Resource()
        self.releasing = Resource()
        self.pipelined = Resource()
        self._tasks: dict[str, TaskInfo] | None = {}
        self._tasks_loader: Callable[[], dict[str, TaskInfo]] | None = None
        self.table = table if table is not None else NodeTable()
        self.row = self.table.add_row(name)
        self.sync_row()

    @classmethod
    def from_node(cls, node: Node, table: NodeTable | None = None) -> NodeInfo:
        """Build from a Node object; :class:`ResourceError` names a bad allocatable quantity."""
        alloc = Resource.from_resource_list(node.status.allocatable or node.status.capacity)
        info = cls(node.metadata.name, alloc, table, node)
        info.ready = node_ready(node)
        info.sync_row()
        return info

    @property
    def tasks(self) -> dict[str, TaskInfo]:
        if self._tasks is None:
            loader = self._tasks_loader
            self._tasks = loader() if loader is not None else {}
            self._tasks_loader = None
        return self._tasks

    @property
    def future_idle(self) -> Resource:
        """Idle now, plus what releasing tasks will free, minus what pipelined tasks will take."""
        return self.idle.clone().add(self.releasing).sub(self.pipelined)

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.unschedulable

    def sync_row(self) -> None:
        self.table.write_node(
            self.row,
            self.allocatable,
            self.idle,
            self.used,
            self.releasing,
            self.pipelined,
            self.ready,
            self.unschedulable,
        )

    def sync_usage(self) -> None:
        """Write this node's usage figures to its table row (after ``add_task(..., sync=False)``)."""
        self._sync_usage()

    def _sync_usage(self) -> None:
        self.table.write_usage(self.row, self.idle, self.used, self.releasing, self.pipelined)

    def add_task(self, task: TaskInfo, sync: bool = True) -> None:
        """Account for a task on this node by its status (Volcano's AddTask). ``sync=False`` leaves
        the table row to the caller (the cache writes each changed row once, before a snapshot)."""
        tasks = self.tasks
        if task.uid in tasks:
            return
        status = task.status
        if status == TaskStatus.PIPELINED:
            self.pipelined.add(task.resreq)
        else:
            if status == TaskStatus.RELEASING:
                self.releasing.add(task.resreq)
            self.idle.sub(task.resreq)
            self.used.add(task.resreq)
        tasks[task.uid] = task
        if sync:
            self._sync_usage()

    def remove_task(self, task: TaskInfo, sync: bool = True) -> None:
        tasks = self.tasks
        existing = tasks.pop(task.uid, None)
        if existing is None:
            return
        status = existing.status
        if status == TaskStatus.PIPELINED:
            self.pipelined.sub(existing.resreq)
        else:
            if status == TaskStatus.RELEASING:
                self.releasing.sub(existing.resreq)
            self.used.sub(existing.resreq)
            self._give_back(existing.resreq)
        if sync:
            self._sync_usage()

    def _give_back(self, req: Resource) -> None:
        """Idle grows by what a leaving task held, up to what the node has less what stays used. Idle
        is the node's allocatable less its used, at least zero: on a node whose pods ask more than it
        has (pods bound by another scheduler or by hand, or its allocatable lowered under them)
        ``add_task`` clamped it at zero, and the excess given back is not free."""
        idle, alloc, used = self.idle, self.allocatable, self.used
        idle.add(req)
        room = alloc.cpu - used.cpu
        if idle.cpu > room:
            idle.cpu = room if room > 0 else 0.0
        room = alloc.memory - used.memory
        if idle.memory > room:
            idle.memory = room if room > 0 else 0.0
        room = alloc.pods - used.pods
        if idle.pods > room:
            idle.pods = room if room > 0 else 0.0
        if req.scalars:
            mine, have, taken = idle.scalars, alloc.scalars, used.scalars
            for name in req.scalars:
                room = have.get(name, 0.0) - taken.get(name, 0.0)
                if mine[name] > room:
                    mine[name] = room if room > 0 else 0.0

    def replace_task(self, old: TaskInfo, new: TaskInfo) -> bool:
        """Hold ``new`` in place of ``old`` (same pod, same requests, and a status that is accounted
        the same way here): no usage changes. False, and nothing done, when ``old`` is not held."""
        tasks = self.tasks
        if tasks.get(old.uid) is not old:
            return False
        del tasks[old.uid]  # then added at the end, as remove_task + add_task would
        tasks[old.uid] = new
        return True

    def update_task(self, task: TaskInfo) -> None:
        """Re-account a task whose status changed (remove with its old accounting, add with the new)."""
        old = self.tasks.get(task.uid)
        if old is not None:
            self.remove_task(old)
        self.add_task(task)

    def clone_into(
        self, table: NodeTable, tasks_loader: Callable[[], dict[str, TaskInfo]] | None
    ) -> NodeInfo:
        """A copy for a snapshot: own usage figures, same row in the (copied) table, tasks loaded lazily."""
        n = NodeInfo.__new__(NodeInfo)
        n.name = self.name
        n.node = self.node
        n.labels = self.labels
        n.taints = self.taints
        n.unschedulable = self.unschedulable
        n.ready = self.ready
        n.allocatable = self.allocatable
        n.idle = self.idle.clone()
        n.used = self.used.clone()
        n.releasing = self.releasing.clone()
        n.pipelined = self.pipelined.clone()
        n.table = table
        n.row = self.row
        n._tasks = None
        n._tasks_loader = tasks_loader
        return n

    def __repr__(self) -> str:
        return f"Node({self.name}, idle={self.idle!r})"


def node_ready(node: Node) -> bool:
    for cond in node.status.conditions:
        if cond.type == "Ready":
            return cond.status == "True"
    return True  # a node without conditions yet (fresh from a simulator or a test) is taken as ready


class QueueInfo:
    """One Volcano Queue."""

    __slots__ = (
        "capability",
        "creation",
        "deserved",
        "guarantee",
        "name",
        "parent",
        "priority",
        "queue",
        "reclaimable",
        "state",
        "weight",
    )

    def __init__(
        self,
        name: str,
        weight: int = 1,
        capability: Resource | None = None,
        guarantee: Resource | None = None,
        deserved: Resource | None = None,
        reclaimable: bool = True,
        state: str = "Open",
        parent: str = "",
        priority: int = 0,
        creation: float = 0.0,
        queue: Queue | None = None,
    ) -> None:
        self.name = name
        self.weight = max(0, weight)
        self.capability = capability
        self.guarantee = guarantee if guarantee is not None else Resource()
        self.deserved = deserved
        self.reclaimable = reclaimable
        self.state = state
        self.parent = parent
        self.priority = priority
        self.creation = creation
        self.queue = queue

    @classmethod
    def from_queue(cls, q: Queue) -> QueueInfo:
        """Build from a Queue object; a bad quantity leaves that limit unset rather than failing the queue."""
        spec = q.spec

        def res(items: dict[str, Any]) -> Resource | None:
            if not items:
                return None
            try:
                return Resource.from_resource_list(items)
            except ResourceError:
                return None

        return cls(
            name=q.metadata.name,
            weight=spec.weight,
            capability=res(spec.capability),
            guarantee=res(spec.guarantee.resource),
            deserved=res(spec.deserved),
            reclaimable=True if spec.reclaimable is None else spec.reclaimable,
            # A queue whose controller has not set a state yet is open: it must not block scheduling forever.
            state=q.status.state or "Open",
            parent=spec.parent,
            priority=spec.priority,
            creation=parse_timestamp(q.metadata.creation_timestamp),
            queue=q,
        )

    @property
    def is_open(self) -> bool:
        return self.state == "Open"

    def __repr__(self) -> str:
        return f"Queue({self.name}, weight={self.weight}, state={self.state})"
