"""Sub-jobs: a job's pods split by its PodGroup's ``spec.subGroupPolicy`` (Volcano 1.14's
multi-level gang), as Volcano's scheduler splits them (pkg/scheduler/api/sub_job_info.go and the
sub-job part of pkg/scheduler/api/job_info.go).

- A pod belongs to the first policy whose ``labelSelector`` it matches (no selector: every pod)
  and for which it carries a non-empty value of every ``matchLabelKeys`` key
  (``getSubJobMatchValues``; ``getOrCreateSubJob`` takes a policy only when that gives at least
  one value, so a policy without ``matchLabelKeys`` matches no pod). Each distinct tuple of values
  is one sub-job (``getSubJobID``: ``job/policy-v1-v2``), of ``subGroupSize`` pods (unset: 1),
  with the policy's ``networkTopology``; its ``MatchIndex`` is the first value read as an integer.
- Every other pod is in the job's default sub-job (``getOrCreateDefaultSubJob``): min 1 (a job
  with policies), the job's own ``networkTopology``; it counts toward no policy.
- A policy's ``minSubGroups`` (unset: 0) is how many of its sub-jobs must be ready for the job to
  be (``JobInfo.MinSubJobs``, ``CheckSubJobReady``, ``CheckSubJobPipelined``), and how many must
  exist for the job to be valid (``CheckSubJobValid``).
- A sub-job is ready when its ready pods and pending best-effort pods reach its min
  (``SubJobInfo.IsReady``); pipelined counting pipelined pods too (``IsPipelined``).
- A sub-job's allocated HyperNode is the narrowest group holding its allocated pods
  (``Session.recoverAllocatedHyperNode`` in pkg/scheduler/framework/session.go): derived from the
  pods each time, so a dry run discarded leaves nothing behind.

Only jobs with policies are split (``sub_jobs``); the split is made once per session (tasks are
neither added nor removed during a session, only their statuses change, which the counts read).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from caldera.framework.model import ALLOCATED_STATUSES, READY_STATUSES, JobInfo, TaskInfo, TaskStatus
from caldera.framework.objects import NetworkTopologySpec, SubGroupPolicySpec
from caldera.framework.resource import Resource
from caldera.framework.subgroups import selector_matches

if TYPE_CHECKING:
    from caldera.framework.session import Session

__all__ = ["SubJob", "SubJobs", "match_values", "sub_jobs"]


class SubJob:
    """One sub-group of a job's pods (Volcano's ``SubJobInfo``)."""

    __slots__ = ("gid", "job", "match_index", "min_available", "network_topology", "policy", "tasks", "uid")

    def __init__(
        self,
        gid: str,
        uid: str,
        job: JobInfo,
        min_available: int,
        network_topology: NetworkTopologySpec | None,
        policy: str = "",
        match_index: int = 0,
    ) -> None:
        self.gid = gid
        self.uid = uid
        self.job = job
        self.min_available = min_available
        self.network_topology = network_topology
        #: the policy's name ("" for the default sub-job)
        self.policy = policy
        self.match_index = match_index
        #: task uid → the session's task (statuses change in place)
        self.tasks: dict[str, TaskInfo] = {}

    def _count(self, statuses: frozenset[TaskStatus] | tuple[TaskStatus, ...]) -> int:
        return sum(1 for t in self.tasks.values() if t.status in statuses)

    def ready_num(self) -> int:
        return self._count(READY_STATUSES)

    def pending_best_effort(self) -> int:
        return sum(1 for t in self.tasks.values() if t.status == TaskStatus.PENDING and t.best_effort)

    def is_ready(self) -> bool:
        """``SubJobInfo.IsReady``: ready pods plus pending best-effort pods reach the min."""
        return self.ready_num() + self.pending_best_effort() >= self.min_available

    def is_pipelined(self) -> bool:
        """``SubJobInfo.IsPipelined``: pipelined pods count too."""
        waiting = self._count((TaskStatus.PIPELINED,))
        return waiting + self.ready_num() + self.pending_best_effort() >= self.min_available

    @property
    def priority(self) -> int:
        """The highest priority of its pods, never below 0 (``SubJobInfo.getTaskHighestPriority``
        starts from 0)."""
        return max(0, max((t.priority for t in self.tasks.values()), default=0))

    def pending(self) -> Iterator[TaskInfo]:
        return (t for t in self.tasks.values() if t.status == TaskStatus.PENDING)

    def allocated(self) -> Iterator[TaskInfo]:
        return (t for t in self.tasks.values() if t.status in ALLOCATED_STATUSES)

    def min_resources(self) -> Resource:
        """``SubJobInfo.GetMinResources``: the init requests of its pending pods."""
        total = Resource()
        for t in self.pending():
            total.add(t.init_resreq)
        return total

    def __repr__(self) -> str:
        return f"SubJob({self.uid}, min={self.min_available}, tasks={len(self.tasks)})"


def match_values(policy: SubGroupPolicySpec, labels: dict[str, str], broken: bool) -> list[str] | None:
    """``getSubJobMatchValues``: None when the pod is not the policy's, else the values of its
    ``matchLabelKeys`` (empty for a policy without keys). ``broken``: the selector does not parse."""
    if policy.label_selector is not None:
        if broken or not selector_matches(policy.label_selector, labels):
            return None
    values = []
    for key in policy.match_label_keys:
        value = labels.get(key)
        if not value:
            return None
        values.append(value)
    return values


def _index(values: list[str]) -> int:
    try:
        return int(values[0], 10)
    except ValueError:
        return 0


class SubJobs:
    """A job's sub-jobs (Volcano's ``JobInfo.SubJobs``, ``TaskToSubJob``, ``MinSubJobs``)."""

    __slots__ = ("by_uid", "default_uid", "min_sub_jobs", "of_task")

    def __init__(self, job: JobInfo) -> None:
        self.by_uid: dict[str, SubJob] = {}
        self.of_task: dict[str, str] = {}
        self.min_sub_jobs: dict[str, int] = {}
        self.default_uid = job.uid
        groups = job.sub_groups
        policies = groups.policies if groups is not None else ()
        broken = groups.broken_selectors if groups is not None else frozenset()
        for policy in policies:
            self.min_sub_jobs[f"{job.uid}/{policy.name}"] = policy.min_sub_groups or 0
        for task in job.tasks.values():
            sub = self._sub_job_of(job, task, policies, broken)
            sub.tasks[task.uid] = task
            self.of_task[task.uid] = sub.uid

    def _sub_job_of(
        self, job: JobInfo, task: TaskInfo, policies: tuple[SubGroupPolicySpec, ...], broken: frozenset[int]
    ) -> SubJob:
        labels = task.pod.metadata.labels
        for i, policy in enumerate(policies):
            values = match_values(policy, labels, i in broken)
            if values:
                uid = f"{job.uid}/{policy.name}-{'-'.join(values)}"
                sub = self.by_uid.get(uid)
                if sub is None:
                    sub = self.by_uid[uid] = SubJob(
                        f"{job.uid}/{policy.name}",
                        uid,
                        job,
                        policy.sub_group_size or 1,
                        policy.network_topology,
                        policy.name,
                        _index(values),
                    )
                return sub
        sub = self.by_uid.get(self.default_uid)
        if sub is None:
            min_available = 1 if policies else job.min_available
            sub = self.by_uid[self.default_uid] = SubJob(
                job.uid, self.default_uid, job, min_available, job.network_topology
            )
        return sub

    def __iter__(self) -> Iterator[SubJob]:
        return iter(self.by_uid.values())

    def __len__(self) -> int:
        return len(self.by_uid)

    def of(self, task: TaskInfo) -> SubJob | None:
        uid = self.of_task.get(task.uid)
        return self.by_uid.get(uid) if uid is not None else None

    def counts(self, condition: object = None) -> dict[str, int]:
        """Per policy (gid), how many of its sub-jobs exist, or meet ``condition``."""
        out: dict[str, int] = {}
        for sub in self.by_uid.values():
            if condition is None or condition(sub):  # type: ignore[operator]
                out[sub.gid] = out.get(sub.gid, 0) + 1
        return out

    def valid(self) -> bool:
        """``JobInfo.CheckSubJobValid``: every policy has at least its minSubGroups sub-jobs."""
        have = self.counts()
        return all(have.get(gid, 0) >= need for gid, need in self.min_sub_jobs.items())

    def short_of(self, pipelined: bool = False) -> str:
        """``JobInfo.checkSubJobCondition``: "" when every policy has its minSubGroups sub-jobs
        ready (or pipelined), else which is short."""
        have = self.counts(SubJob.is_pipelined if pipelined else SubJob.is_ready)
        for gid, need in self.min_sub_jobs.items():
            if need and have.get(gid, 0) < need:
                return (
                    f"{have.get(gid, 0)} of the {need} subGroups subGroupPolicy {gid.rpartition('/')[2]} "
                    f"needs are {'pipelined' if pipelined else 'ready'}"
                )
        return ""

    def need_continue_allocating(self, job: JobInfo, sub: SubJob) -> bool:
        """``JobInfo.NeedContinueAllocating`` for a job with policies: stop when every pod of the
        job, or of the sub-job, must run; otherwise go on with the sub-job's other pods."""
        if job.min_available == len(job.tasks):
            return False
        return sub.min_available < len(sub.tasks)


class _SubJobsKey:
    """``Session.memo`` key: the session's sub-jobs, by job uid."""


def sub_jobs(ssn: Session, job: JobInfo) -> SubJobs:
    """The job's sub-jobs in this session (made on first use)."""
    made: dict[str, SubJobs] = ssn.memo(_SubJobsKey, dict)
    found = made.get(job.uid)
    if found is None:
        found = made[job.uid] = SubJobs(job)
    return found
