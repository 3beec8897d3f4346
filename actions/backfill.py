"""backfill: best-effort pods (no requests) onto the best node that passes the predicates."""

from __future__ import annotations

from typing import ClassVar

from caldera.actions.helpers import explain, job_considered, job_valid, pending_jobs, pending_tasks
from caldera.framework.model import TaskStatus
from caldera.framework.plugin import Action, unsupported
from caldera.framework.session import Session


class BackfillAction(Action):
    name: ClassVar[str] = "backfill"
    # Volcano's conf.EnablePredicateErrCacheKey: Caldera always caches a pod template's failures per cycle
    arguments_schema: ClassVar[dict[str, type]] = {
        "predicateErrorCacheEnable": unsupported(
            bool, "predicate failures are always cached per pod template", True
        ),
    }

    def execute(self, ssn: Session) -> None:
        node_list = ssn.node_list
        # Only jobs with a pending best-effort task are sorted: ordering every job of the cluster
        # (plugin comparators, O(J log J)) each cycle was most of an idle cycle's cost.
        candidates = [
            job
            for job in pending_jobs(ssn)
            if job.count(TaskStatus.PENDING) and any(t.best_effort for t in job.tasks_in(TaskStatus.PENDING))
        ]
        for job in sorted(candidates, key=ssn.job_key):
            if job_considered(ssn, job) is None:
                continue
            tasks = pending_tasks(ssn, job, best_effort=True)
            if not tasks or not job_valid(ssn, job):
                continue
            stmt = ssn.statement()
            for task in tasks:
                if ssn.pre_predicate(task):
                    continue
                rows = ssn.feasible_rows(task)
                if not len(rows):
                    job.fit_errors[task.uid] = message = explain(ssn, task)
                    job.job_fit_error = message
                    continue
                best = ssn.best_row(task, rows, ssn.node_scores(task, rows))
                refused = stmt.allocate(task, node_list[best].name)
                if refused is not None:
                    # Volcano's backfill: the node's error is the task's fit error, next task
                    job.job_fit_error = refused
            if ssn.job_ready(job):
                stmt.commit()
            elif not ssn.job_pipelined(job):
                stmt.discard()
