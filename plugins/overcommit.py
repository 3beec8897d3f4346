"""overcommit: let jobs in (enqueue) while their minimum resources fit in the cluster's capacity
times ``overcommit-factor`` (default 1.2), minus what is used and already let in."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, ClassVar

from caldera.framework.model import JobInfo
from caldera.framework.plugin import Plugin
from caldera.framework.resource import Resource
from caldera.plugins.helpers import safe_sub

if TYPE_CHECKING:
    from caldera.framework.session import Session

log = logging.getLogger("caldera.plugins.overcommit")
PERMIT = 1
REJECT = -1


class OvercommitPlugin(Plugin):
    name: ClassVar[str] = "overcommit"
    arguments_schema: ClassVar[dict[str, type]] = {"overcommit-factor": float}

    def on_session_open(self, ssn: Session) -> None:
        factor = self.arguments.float("overcommit-factor", 1.2)
        if factor < 1.0:
            log.warning("overcommit-factor %g is below 1; using 1.2", factor)
            factor = 1.2
        used = ssn.table.total(ssn.table.used)
        self.idle = safe_sub(ssn.total_resource.clone().multiply(factor), used)
        self.inqueue = Resource()
        for job in ssn.jobs.values():
            if job.phase == "Inqueue" and job.min_resources is not None:
                self.inqueue.add(safe_sub(job.min_resources, job.allocated))

        def enqueueable(job: JobInfo) -> int:
            need = job.min_resources
            if need is None or need.is_empty():
                return PERMIT
            if need.clone().add(self.inqueue).less_equal_in(self.idle, list(need.names())):
                return PERMIT
            job.job_fit_error = (
                "job is not enqueueable: the cluster (with overcommit) has not enough idle resources"
            )
            return REJECT

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is not None:
                self.inqueue.add(job.min_resources)

        ssn.add_job_enqueueable_fn(self.name, enqueueable)
        ssn.add_job_enqueued_fn(self.name, enqueued)
