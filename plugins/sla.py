"""sla: a job that has waited longer than its ``sla-waiting-time`` goes first and is let in.

Argument ``sla-waiting-time`` (a duration such as ``1h30m``) applies to every job; a PodGroup
annotation ``sla-waiting-time`` overrides it per job.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar

from caldera.config.duration import parse_duration
from caldera.framework.model import JobInfo
from caldera.framework.plugin import Plugin

if TYPE_CHECKING:
    from caldera.framework.session import Session

PERMIT = 1
ABSTAIN = 0
ANNOTATION = "sla-waiting-time"


def waiting_time(text: str) -> float | None:
    """A ``sla-waiting-time`` in seconds: a Go duration (``1h30m``, ``90s``, ``500ms``), as Volcano's sla
    plugin reads it with time.ParseDuration; None when unreadable or not positive."""
    try:
        seconds = parse_duration(text)
    except ValueError:
        return None
    return seconds if seconds > 0 else None


class SlaPlugin(Plugin):
    name: ClassVar[str] = "sla"
    arguments_schema: ClassVar[dict[str, type]] = {"sla-waiting-time": str}

    def on_session_open(self, ssn: Session) -> None:
        default = waiting_time(self.arguments.str(ANNOTATION, ""))
        now = time.time()

        def waiting(job: JobInfo) -> float | None:
            if job.podgroup is not None:
                own = job.podgroup.metadata.annotations.get(ANNOTATION)
                if own:
                    return waiting_time(own)
            return default

        def deadline(job: JobInfo) -> float | None:
            w = waiting(job)
            return None if w is None else job.creation + w

        def job_order(left: JobInfo, right: JobInfo) -> int:
            ld, rd = deadline(left), deadline(right)
            if ld is None and rd is None:
                return 0
            if ld is None:
                return 1
            if rd is None:
                return -1
            if ld == rd:
                return 0
            return -1 if ld < rd else 1

        def permit(job: JobInfo) -> int:
            d = deadline(job)
            return PERMIT if d is not None and now >= d else ABSTAIN

        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_job_enqueueable_fn(self.name, permit)
        ssn.add_job_pipelined_fn(self.name, permit)
