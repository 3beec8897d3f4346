"""Evicting pods chosen by preempt and reclaim: the ``eviction`` subresource first (it honours
PodDisruptionBudgets), else a delete with a uid precondition (never removes a same-named successor).

A 429 from the eviction subresource is the API server saying a PodDisruptionBudget allows no
disruption now: it is retried (honouring Retry-After) for up to ``budget_wait`` seconds, never
answered with a delete (that would bypass the budget). When the budget still refuses, the eviction
is given up and ``on_abandoned`` lets the cache take the pod back as running, so the next cycles
see its resources held (and the pdb plugin will not pick it while the budget is spent).

``on_evicted`` hears of each eviction carried out (the eviction subresource, or the delete it
falls back to): what the cycle decided is not yet done, and may be refused.

Before each request the evictor asks ``may_write`` (the leader lease still held:
``LeaderElector.holds``); when it says no, the eviction is not sent, it is given up the same way (the
cache takes the pod back as running) and counted in ``caldera_writes_withheld_total{writer="eviction"}``.
A replica that cannot prove it leads must not take pods away: another may lead by then.

What each finished eviction came to (``done``) is kept for the last ``DONE_KEPT`` evictions only.

The marks on the pod. Volcano's evictor (pkg/scheduler/cache/cache.go, ``defaultEvictor.Evict``)
writes one status update, ``Ready`` False (reason ``Evict``, message ``Pod is evicted, because of
<reason>``) and ``DisruptionTarget`` True (reason ``PreemptionByScheduler``, message ``<scheduler>:
preempting to accommodate a higher priority pod``), then deletes the pod; when the update fails it
does not delete (the cache re-reads the pod: ``SchedulerCache.Evict`` calls ``resyncTask``). Here:

- through the eviction subresource, the API server itself writes ``DisruptionTarget`` (True,
  ``EvictionByEvictionAPI``) as it deletes the pod, after its budget check (kube-apiserver
  pkg/registry/core/pod/storage/eviction.go, ``addConditionAndDeletePod``, which replaces any such
  condition already there): the evictor writes none of its own, so one eviction gets one. ``Ready``
  False is written once the eviction is accepted, while the pod terminates, never before: the
  subresource deletes a pod that is not ready without charging its PodDisruptionBudget
  (``EvictionREST.Create``: ``!IsPodReady(pod) && CurrentHealthy >= DesiredHealthy``), so marking
  it first would let every eviction past a spent budget. A failed write is logged; the eviction
  stands;
- by the delete it falls back to, Volcano's write exactly (both conditions, one status patch)
  before the delete; when it fails, the pod is not deleted and the eviction is given up as a
  refusal is (``on_abandoned``), as Volcano does."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from caldera.cache.client import ApiClient, ApiError, backoff_delay
from caldera.cache.supervise import stop_workers, supervise
from caldera.framework.model import TaskInfo
from caldera.framework.result import Eviction
from caldera.metrics import scheduler as m
from caldera.scheduler.events import now_rfc3339
from caldera.scheduler.leader import always

log = logging.getLogger("caldera.evictor")

#: how many finished evictions' outcomes ``Evictor.done`` keeps (the oldest are forgotten first)
DONE_KEPT = 1000
#: the outcome of an eviction the lease gate kept back
WITHHELD = "withheld: the leader lease may no longer be held"
#: the reason of the ``Ready`` condition Volcano writes on a pod it evicts, and of its
#: ``DisruptionTarget`` (core/v1 ``PodReasonPreemptionByScheduler``)
EVICT_REASON = "Evict"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
STRATEGIC = "application/strategic-merge-patch+json"


def evict_conditions(task: TaskInfo, reason: str, disruption: bool) -> list[dict[str, str]]:
    """The conditions Volcano's ``defaultEvictor.Evict`` writes on a pod it evicts: ``Ready``
    False, and with ``disruption`` ``DisruptionTarget`` True. As ``UpdatePodCondition``, a
    condition whose status the pod already shows keeps its ``lastTransitionTime``."""
    wanted = [("Ready", "False", EVICT_REASON, f"Pod is evicted, because of {reason}")]
    if disruption:
        wanted.append(
            (
                "DisruptionTarget",
                "True",
                PREEMPTION_BY_SCHEDULER,
                f"{task.pod.spec.scheduler_name}: preempting to accommodate a higher priority pod",
            )
        )
    shown = {c.type: c for c in task.pod.status.conditions}
    now = now_rfc3339()
    out = []
    for type_, status, why, message in wanted:
        old = shown.get(type_)
        since = old.last_transition_time if old is not None and old.status == status else None
        out.append(
            {
                "type": type_,
                "status": status,
                "reason": why,
                "message": message,
                "lastTransitionTime": since or now,
            }
        )
    return out


class Evictor:
    def __init__(
        self,
        client: ApiClient,
        *,
        workers: int = 4,
        max_attempts: int = 6,
        budget_wait: float = 60.0,
        on_abandoned: Callable[[str], object] | None = None,
        may_write: Callable[[], bool] = always,
        on_evicted: Callable[[Eviction], object] | None = None,
    ) -> None:
        self.client = client
        self.workers = workers
        self.max_attempts = max_attempts
        self.budget_wait = budget_wait
        self.on_abandoned = on_abandoned
        #: asked before every request (the leader lease still held: ``LeaderElector.holds``)
        self.may_write = may_write
        self.on_evicted = on_evicted
        self._queue: asyncio.Queue[Eviction] = asyncio.Queue()
        self._issued: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self.done: dict[str, str] = {}

    def evict(self, evictions: list[Eviction]) -> None:
        for eviction in evictions:
            if eviction.task.uid in self._issued:
                continue
            self._issued.add(eviction.task.uid)
            self._queue.put_nowait(eviction)

    def remembered(self) -> list[tuple[str, int]]:
        """The sizes of the maps kept per pod (``caldera_remembered_objects``)."""
        return [("issued", len(self._issued)), ("done", len(self.done))]

    def start(self) -> None:
        for i in range(self.workers):
            self._tasks.append(supervise(f"evictor-{i}", self._worker))

    async def drain(self, timeout: float = 10.0) -> None:
        try:
            async with asyncio.timeout(timeout):
                await self._queue.join()
        except TimeoutError:
            pass
        await self.stop()

    async def stop(self) -> None:
        await stop_workers(self._tasks)
        self._tasks.clear()

    async def _worker(self) -> None:
        while True:
            eviction = await self._queue.get()
            try:
                outcome = await self.evict_one(eviction)
            except asyncio.CancelledError:
                self._queue.task_done()
                raise
            except Exception as exc:
                log.exception("eviction of %s crashed", eviction.task.key)
                outcome = f"error: {exc}"
            self.done[eviction.task.uid] = outcome
            if len(self.done) > DONE_KEPT:
                del self.done[next(iter(self.done))]
            if outcome in ("evicted", "deleted") and self.on_evicted is not None:
                try:
                    self.on_evicted(eviction)
                except Exception:
                    log.exception("reporting the eviction of %s failed", eviction.task.key)
            self._issued.discard(eviction.task.uid)
            m.EVICTIONS.labels(outcome.split(":")[0]).inc()
            self._queue.task_done()

    async def evict_one(self, eviction: Eviction) -> str:
        task = eviction.task
        base = f"/api/v1/namespaces/{task.namespace}/pods/{task.name}"
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": task.name, "namespace": task.namespace},
            "deleteOptions": {"preconditions": {"uid": task.uid}},
        }
        use_delete = False
        marked = False
        attempt = 0
        budget_since: float | None = None
        while attempt < self.max_attempts:
            attempt += 1
            if not self.may_write():
                m.WRITES_WITHHELD.labels("eviction").inc()
                log.warning("eviction of %s not sent: %s", task.key, WITHHELD)
                self._abandon(task.uid)
                return WITHHELD
            try:
                if use_delete and not marked:
                    refused = await self._mark(eviction, disruption=True)
                    if refused is not None:
                        return refused
                    marked = True
                    attempt -= 1  # the mark spends no attempt; the lease is asked again first
                    continue
                if use_delete:
                    await self.client.request(
                        "DELETE",
                        base,
                        body={
                            "apiVersion": "v1",
                            "kind": "DeleteOptions",
                            "preconditions": {"uid": task.uid},
                        },
                    )
                    return "deleted"
                await self.client.request("POST", base + "/eviction", body=body)
                log.info("evicted %s: %s", task.key, eviction.reason)
                if self.may_write():
                    await self._mark(eviction, disruption=False)
                else:
                    m.WRITES_WITHHELD.labels("eviction").inc()
                return "evicted"
            except ApiError as exc:
                if exc.code in (404, 405, 501) and not use_delete:
                    # No eviction subresource here, or the pod is gone: a uid-checked delete tells which.
                    use_delete = True
                    continue
                if exc.code == 404:
                    return "gone"
                if exc.code == 409:
                    return "gone: replaced by another pod of the same name"
                if exc.code == 429 and not use_delete:
                    # A disruption budget (or the server's rate limit) says not now: wait and retry,
                    # without spending an attempt, for as long as ``budget_wait``.
                    now = time.monotonic()
                    budget_since = now if budget_since is None else budget_since
                    if now - budget_since >= self.budget_wait:
                        log.info(
                            "eviction of %s still refused after %.0fs: %s", task.key, now - budget_since, exc
                        )
                        self._abandon(task.uid)
                        return f"blocked: {exc.message or exc}"
                    attempt -= 1
                    pause = (
                        exc.retry_after
                        if exc.retry_after is not None
                        else backoff_delay(attempt + 1, 0.5, 2.0)
                    )
                    await asyncio.sleep(max(0.05, min(pause, 5.0)))
                    continue
                if exc.transient:
                    await asyncio.sleep(exc.retry_after or backoff_delay(attempt, 0.1, 5.0))
                    continue
                log.warning("eviction of %s failed: %s; deleting instead", task.key, exc)
                use_delete = True
        self._abandon(task.uid)
        return "failed: gave up after retries"

    async def _mark(self, eviction: Eviction, disruption: bool) -> str | None:
        """One status patch with Volcano's marks (``evict_conditions``). Before a delete
        (``disruption``) a failure is the eviction's outcome: the pod gone, else given up (it is
        not deleted, as Volcano does not); after an accepted eviction it is logged only. None when
        written, or when the failure changes nothing."""
        task = eviction.task
        body = {
            # the uid a precondition (the generic store's Update): never a same-named successor
            "metadata": {"uid": task.uid},
            "status": {"conditions": evict_conditions(task, eviction.reason, disruption)},
        }
        path = f"/api/v1/namespaces/{task.namespace}/pods/{task.name}/status"
        try:
            await self.client.request("PATCH", path, body=body, content_type=STRATEGIC)
        except ApiError as exc:
            if not disruption:
                log.log(
                    logging.DEBUG if exc.code == 404 else logging.WARNING,
                    "marking evicted pod %s not ready failed: %s",
                    task.key,
                    exc,
                )
                return None
            if exc.code == 404:
                return "gone"
            if exc.code == 409:
                return "gone: replaced by another pod of the same name"
            log.warning("marking %s for eviction failed: %s; not deleting it", task.key, exc)
            self._abandon(task.uid)
            return f"failed: marking the pod: {exc.message or exc}"
        return None

    def _abandon(self, uid: str) -> None:
        if self.on_abandoned is not None:
            try:
                self.on_abandoned(uid)
            except Exception:
                log.exception("taking back the abandoned eviction of %s failed", uid)
