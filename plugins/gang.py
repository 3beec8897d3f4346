"""gang: a PodGroup runs with at least ``minMember`` pods (and its per-role minimums) or not at all.

Jobs that cannot reach their minimum are invalid; victims are chosen only above a running job's
minimum; jobs not yet ready go first; a job is ready / pipelined once enough of it is placed.

Sub-groups (a PodGroup's ``spec.subGroupPolicy``, framework/subjobs.py), as Volcano's gang plugin
(pkg/scheduler/plugins/gang/gang.go) has them: a job is valid only with at least ``minSubGroups``
sub-groups of each policy (``CheckSubJobValid``), ready / pipelined only when at least that many
are ready / pipelined (``CheckSubJobReady``, ``CheckSubJobPipelined``) besides its own minimum; a
sub-group is ready when ``subGroupSize`` of its pods are (``AddSubJobReadyFn``,
``AddSubJobPipelinedFn``); sub-groups not yet ready go first (``AddSubJobOrderFn``). A policy the
API server would refuse makes the job invalid; it and a label selector that does not parse are
published as a Warning Event on the PodGroup (framework/subgroups.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from caldera.framework.carry import JobCarry, carry_user, job_generation
from caldera.framework.model import JobInfo, TaskInfo
from caldera.framework.plugin import Plugin
from caldera.framework.subjobs import SubJob, sub_jobs

if TYPE_CHECKING:
    from caldera.framework.session import Session

PERMIT = 1
REJECT = -1


class GangPlugin(Plugin):
    name: ClassVar[str] = "gang"

    def on_session_open(self, ssn: Session) -> None:
        from caldera.framework.session import ValidateResult

        # A job's validity depends on the job alone: kept from one cycle to the next for every
        # job copy of the same generation (``framework.carry``), so a backlog is not counted
        # through again.
        answers: JobCarry[ValidateResult | None] = JobCarry(ssn.carry, GangPlugin)

        def job_valid(job: JobInfo) -> ValidateResult | None:
            if job.sub_groups is not None:
                for problem in job.sub_groups.problems():
                    ssn.report.events.append(("PodGroup", job.uid, "InvalidSubGroupPolicy", problem))
            generation = job_generation(job)
            found, result = answers.get(job, generation)
            if found:
                return result
            result = validate(job)
            answers.put(job, generation, result)
            return result

        def validate(job: JobInfo) -> ValidateResult | None:
            valid = job.valid_task_num()
            if valid < job.min_available:
                return ValidateResult(
                    False,
                    "NotEnoughPods",
                    f"Not enough valid tasks for gang-scheduling, valid: {valid}, min: {job.min_available}",
                )
            if not job.check_task_min_available():
                return ValidateResult(
                    False, "NotEnoughPods", "Not enough valid pods of each role for gang-scheduling"
                )
            groups = job.sub_groups
            if groups is not None:
                if groups.invalid:
                    return ValidateResult(False, "InvalidSubGroupPolicy", groups.invalid)
                if not sub_jobs(ssn, job).valid():
                    return ValidateResult(
                        False, "NotEnoughPods", "Not enough valid subGroups of each task for gang-scheduling"
                    )
            return None

        def victims(preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            occupied: dict[str, int] = {}
            out = []
            for t in preemptees:
                job = ssn.jobs.get(t.job)
                if job is None:  # a pod with no PodGroup has no gang to break
                    out.append(t)
                    continue
                if t.job not in occupied:
                    occupied[t.job] = job.ready_task_num()
                if occupied[t.job] > job.min_available:
                    occupied[t.job] -= 1
                    out.append(t)
            return out, PERMIT

        def job_order(left: JobInfo, right: JobInfo) -> int:
            lr, rr = left.is_ready(), right.is_ready()
            if lr == rr:
                return 0
            return 1 if lr else -1

        def job_ready(job: JobInfo) -> bool:
            return job.is_ready() and (job.sub_groups is None or not sub_jobs(ssn, job).short_of())

        def job_pipelined(job: JobInfo) -> int:
            if not job.is_pipelined():
                return REJECT
            if job.sub_groups is not None and sub_jobs(ssn, job).short_of(pipelined=True):
                return REJECT
            return PERMIT

        def sub_job_order(left: SubJob, right: SubJob) -> int:
            lr, rr = left.is_ready(), right.is_ready()
            if lr == rr:
                return 0
            return 1 if lr else -1

        def job_starving(job: JobInfo) -> bool:
            return job.waiting_task_num() + job.ready_task_num() < job.min_available

        ssn.add_job_valid_fn(self.name, job_valid)
        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_reclaimable_fn(self.name, victims)
        # Volcano gang.go: the gang actions keep minAvailable through their bundles (safe/whole),
        # so gang's unified evictable function permits every candidate
        ssn.add_unified_evictable_fn(self.name, lambda _ctx, tasks: (tasks, PERMIT))
        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_job_ready_fn(self.name, job_ready)
        ssn.add_job_pipelined_fn(self.name, job_pipelined)
        ssn.add_job_starving_fn(self.name, job_starving)
        ssn.add_sub_job_ready_fn(self.name, SubJob.is_ready)
        ssn.add_sub_job_pipelined_fn(self.name, lambda sub: PERMIT if sub.is_pipelined() else REJECT)
        ssn.add_sub_job_order_fn(self.name, sub_job_order)


carry_user(GangPlugin, "gang: each job's validity (enough valid tasks for its minimum)")
