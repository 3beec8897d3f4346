"""shuffle: evict the running pods the plugins select as victims, so that they are placed again.

As Volcano's ``Action.Execute`` in pkg/scheduler/actions/shuffle/shuffle.go: the candidates are
every task of every job whose status is Running (not Bound, not Releasing); the plugins' victim
functions choose among them (``Session.VictimTasks``: within a tier their choices join, the first
tier that chooses anyone decides; here ``ssn.victim_tasks``, framework/tier_rules.py) and each
victim is evicted with the reason ``shuffle``.

Caldera's evictions go through the same path as preempt's: a statement's ``evict``, committed, then
the binary's evictor (scheduler/evictor.py), which uses the Eviction API, so a PodDisruptionBudget
the API server holds is never overrun; with the pdb plugin in the conf the victims also pass its
budgets before they are chosen (its victim guard). A victim is evicted once: the pods this
session already chose to evict are Releasing, no longer candidates. Each eviction is logged, and a
Warning Event ``Evict`` on the pod says which plugin chose it and why (Volcano records ``Evict`` on
the PodGroup with the reason ``shuffle``).
"""

from __future__ import annotations

import logging
from typing import ClassVar

from caldera.framework.model import TaskInfo, TaskStatus
from caldera.framework.plugin import Action
from caldera.framework.session import Session

log = logging.getLogger("caldera.actions")

#: Volcano's reason for a shuffle eviction (shuffle.go: ``ssn.Evict(victim, "shuffle")``)
REASON = "shuffle"
#: the Event's reason (Volcano's cache.Evict records ``Evict``; the binary's status updater gives
#: other evicted pods that Event, and this one, with the why, instead)
EVENT_REASON = "Evict"


def running_candidates(ssn: Session) -> list[TaskInfo]:
    """Every Running task of the session's jobs, job by job (in the session's order) and by name."""
    out: list[TaskInfo] = []
    for job in ssn.jobs.values():
        running = [t for t in job.tasks.values() if t.status == TaskStatus.RUNNING]
        out.extend(sorted(running, key=lambda t: t.name))
    return out


class ShuffleAction(Action):
    name: ClassVar[str] = "shuffle"

    def execute(self, ssn: Session) -> None:
        if not ssn.victim_tasks_fns:
            return  # no plugin selects victims this session (rescheduling waits for its interval)
        victims = ssn.victim_tasks(running_candidates(ssn))
        if not victims:
            return
        stmt = ssn.statement()
        for victim in victims:
            why = ssn.victim_reasons.get(victim.uid, "chosen by the conf's victim functions")
            log.info("shuffle evicts %s of job %s: %s", victim.key, victim.job, why)
            stmt.evict(victim, REASON)
            ssn.report.events.append(("Pod", victim.key, EVENT_REASON, f"Evicted by shuffle: {why}"))
        stmt.commit()
