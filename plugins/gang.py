"""gang: a PodGroup runs with at least ``minMember`` pods (and its per-role minimums) or not at all.

Jobs that cannot reach their minimum are invalid; victims are chosen only above a running job's
minimum; jobs not yet ready go first; a job is ready / pipelined once enough of it is placed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from caldera.framework.carry import JobCarry, carry_user, job_generation
from caldera.framework.model import JobInfo, TaskInfo
from caldera.framework.plugin import Plugin

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

        def job_pipelined(job: JobInfo) -> int:
            return PERMIT if job.is_pipelined() else REJECT

        def job_starving(job: JobInfo) -> bool:
            return job.waiting_task_num() + job.ready_task_num() < job.min_available

        ssn.add_job_valid_fn(self.name, job_valid)
        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_reclaimable_fn(self.name, victims)
        # Volcano gang.go: the gang actions keep minAvailable through their bundles (safe/whole),
        # so gang's unified evictable function permits every candidate
        ssn.add_unified_evictable_fn(self.name, lambda _ctx, tasks: (tasks, PERMIT))
        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_job_ready_fn(self.name, lambda job: job.is_ready())
        ssn.add_job_pipelined_fn(self.name, job_pipelined)
        ssn.add_job_starving_fn(self.name, job_starving)


carry_user(GangPlugin, "gang: each job's validity (enough valid tasks for its minimum)")
