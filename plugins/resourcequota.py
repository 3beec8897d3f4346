"""resourcequota: a job is not enqueued when its minResources would exceed a Kubernetes ResourceQuota
of its namespace. Volcano's ``resourcequota`` plugin (pkg/scheduler/plugins/resourcequota/
resourcequota.go, ``resourceQuotaPlugin.OnSessionOpen``).

The quotas are the cache's ``v1 ResourceQuota`` objects (``Snapshot.resource_quotas``); what is read
of each is its ``status`` as the quota controller keeps it, as Volcano's cache does
(pkg/scheduler/api/namespace_info.go ``NamespaceCollection.Update`` stores ``quota.Status``): ``hard``
as enforced and ``used`` as counted. A quota the controller has not synced yet (no ``status.hard``)
limits nothing, in Volcano as in the API server's quota admission.

``AddJobEnqueueableFn``: a job whose PodGroup sets no ``spec.minResources``, or whose namespace has no
quota, is permitted. Otherwise, for every quota of the namespace, with the quota arithmetic of
k8s.io/apiserver/pkg/quota/v1 (``ResourceNames``, ``Mask``, ``Add``, ``LessThanOrEqual``):
``requested`` = minResources masked to the names in ``hard``; ``used`` = ``status.used`` plus what jobs
enqueued earlier in this session reserved in the namespace; the new usage, masked to the requested
names, must be at most ``hard`` for each name in ``hard``. Else the vote is a rejection, and the job
says why (its PodGroup condition and one Event, as Volcano's ``RecordPodGroupEvent``):
``resource quota insufficient, requested: cpu=20, used: cpu=0, limited: cpu=2``, each list masked to
the names exceeded. Volcano prints Go maps of quantities there; this prints ``name=quantity`` pairs
sorted by name, as the API server's own quota admission message does.

``AddJobEnqueuedFn``: a job let in adds its whole minResources to its namespace's reservation for the
rest of the session (only namespaces with a quota), so two jobs that each fit but not together are
not both let in by one cycle; a job another plugin rejected reserves nothing (the enqueue action
calls this only for a job every vote let in).

Names are compared as written: a quota on ``requests.cpu`` does not limit a minResources ``cpu``, as
in Volcano. A quantity that does not parse (the API server validates them, so only a broken object)
is left out of the comparison with one log line.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, ClassVar

from caldera.framework.model import JobInfo
from caldera.framework.objects import ResourceQuota
from caldera.framework.plugin import Plugin
from caldera.framework.quantity import QuantityError, parse_quantity

if TYPE_CHECKING:
    from caldera.framework.session import Session

log = logging.getLogger("caldera.plugins.resourcequota")

PERMIT = 1
REJECT = -1
#: Volcano's PodGroupUnschedulableType, the reason of the PodGroup Event
UNSCHEDULABLE = "Unschedulable"

Quantities = dict[str, Decimal]

#: (object, field, name, value) already reported as unreadable (one log line each)
_reported: set[tuple[str, str, str, str]] = set()


def quantities(where: str, field: str, items: Mapping[str, str | int | float] | None) -> Quantities:
    """A ResourceList as exact numbers; an entry that does not parse is left out (one log line)."""
    out: Quantities = {}
    for name, value in (items or {}).items():
        try:
            out[name] = parse_quantity(value)
        except QuantityError as exc:
            key = (where, field, name, str(value))
            if key not in _reported:
                _reported.add(key)
                log.warning("%s: %s[%s] left out: %s", where, field, name, exc)
    return out


def mask(items: Quantities, names: object) -> Quantities:
    """quotav1.Mask: only the entries named."""
    return {k: v for k, v in items.items() if k in names}  # type: ignore[operator]


def add(a: Quantities, b: Quantities) -> Quantities:
    """quotav1.Add: every name of either, summed where both have it."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, Decimal(0)) + v
    return out


def exceeded(usage: Quantities, hard: Quantities) -> list[str]:
    """quotav1.LessThanOrEqual's second answer: the names of ``hard`` that ``usage`` exceeds (a name
    ``usage`` lacks is not exceeded)."""
    return sorted(k for k, limit in hard.items() if k in usage and usage[k] > limit)


def pretty(items: Mapping[str, str | int | float] | None, names: list[str]) -> str:
    """``cpu=2,memory=1G``: the entries named (sorted) that ``items`` has, as written there."""
    items = items or {}
    return ",".join(f"{k}={items[k]}" for k in names if k in items)


class _Quota:
    """One quota's figures, read once per session."""

    __slots__ = ("hard", "quota", "used")

    def __init__(self, quota: ResourceQuota) -> None:
        self.quota = quota
        where = f"resourcequota {quota.metadata.namespace}/{quota.metadata.name}"
        self.hard = quantities(where, "status.hard", quota.status.hard)
        self.used = quantities(where, "status.used", quota.status.used)


class ResourceQuotaPlugin(Plugin):
    name: ClassVar[str] = "resourcequota"

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.quotas: dict[str, list[_Quota]] = {}
        for quota in ssn.snapshot.resource_quotas.values():
            self.quotas.setdefault(quota.metadata.namespace, []).append(_Quota(quota))
        #: per namespace, the minResources of the jobs enqueued so far this session
        self.pending: dict[str, Quantities] = {}
        ssn.add_job_enqueueable_fn(self.name, self.enqueueable)
        ssn.add_job_enqueued_fn(self.name, self.enqueued)

    @staticmethod
    def _raw(job: JobInfo) -> Mapping[str, str | int | float] | None:
        """The job's PodGroup ``spec.minResources`` (None: not set, or not a Volcano PodGroup)."""
        return job.podgroup.spec.min_resources if job.podgroup is not None else None

    def enqueueable(self, job: JobInfo) -> int:
        raw = self._raw(job)
        requests = None if raw is None else quantities(f"podgroup {job.uid}", "spec.minResources", raw)
        quotas = self.quotas.get(job.namespace)
        if requests is None or not quotas:
            return PERMIT
        pending = self.pending.get(job.namespace)
        for quota in quotas:
            requested = mask(requests, quota.hard)
            used = add(pending, quota.used) if pending is not None else quota.used
            over = exceeded(mask(add(used, requested), requested), quota.hard)
            if over:
                status = quota.quota.status
                message = (
                    f"resource quota insufficient, requested: {pretty(raw, over)}"
                    f", used: {pretty(status.used, over)}, limited: {pretty(status.hard, over)}"
                )
                log.debug("job %s not enqueueable: %s", job.uid, message)
                job.job_fit_error = message
                self.ssn.report.events.append(("PodGroup", job.uid, UNSCHEDULABLE, message))
                return REJECT
        return PERMIT

    def enqueued(self, job: JobInfo) -> None:
        raw = self._raw(job)
        if raw is None or not self.quotas.get(job.namespace):
            return
        requests = quantities(f"podgroup {job.uid}", "spec.minResources", raw)
        self.pending[job.namespace] = add(self.pending.get(job.namespace, {}), requests)
