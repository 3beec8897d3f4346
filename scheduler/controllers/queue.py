"""The Queue controller: the default queue exists; every queue's status says its state and how many
PodGroups it holds per phase; a closed queue takes nothing new; a deleted queue drains first.

States follow Volcano's design: ``spec.state`` empty or ``Open`` gives ``Open``; ``Closed`` gives
``Closing`` while PodGroups remain in the queue, then ``Closed``. A queue being deleted is ``Closing``
until its last PodGroup is gone; only then does the controller release its finalizer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec

from caldera.cache.client import ApiClient, ApiError
from caldera.scheduler.controllers.api import BoundedCalls
from caldera.scheduler.controllers.state import QUEUE_FINALIZER, ControllerState, Queue
from caldera.scheduler.leader import always

log = logging.getLogger("caldera.controllers.queue")

API = "/apis/scheduling.volcano.sh/v1beta1"
MERGE_PATCH = "application/merge-patch+json"

_PHASE_FIELD = {
    "Pending": "pending",
    "": "pending",
    "Inqueue": "inqueue",
    "Running": "running",
    "Completed": "completed",
}


def queue_path(name: str = "", sub: str = "") -> str:
    path = f"{API}/queues"
    if name:
        path += f"/{name}"
    if sub:
        path += f"/{sub}"
    return path


class QueueStats(msgspec.Struct):
    created: int = 0
    status_updates: int = 0
    finalizers_added: int = 0
    drained: int = 0


class QueueController:
    def __init__(
        self,
        client: ApiClient,
        state: ControllerState,
        *,
        request_concurrency: int = 4,
        timeout: float = 10.0,
        drain_finalizer: bool = True,
        may_write: Callable[[], bool] = always,
    ) -> None:
        self.client = client
        self.state = state
        self.timeout = timeout
        self.drain_finalizer = drain_finalizer
        self._call = BoundedCalls(client, request_concurrency, timeout, may_write)
        self.stats = QueueStats()

    async def ensure_default(self) -> None:
        name = self.state.default_queue
        if name in self.state.queues:
            return
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": 1, "reclaimable": True},
        }
        if self.drain_finalizer:
            body["metadata"] = {"name": name, "finalizers": [QUEUE_FINALIZER]}
        try:
            await self._call("POST", queue_path(), body)
            self.stats.created += 1
            log.info("created the default queue %r", name)
        except ApiError as exc:
            if exc.code != 409:
                raise
            # AlreadyExists: there it is (our watch has not caught up yet).

    async def reconcile(self, name: str) -> float | None:
        queue = self.state.queues.get(name)
        if queue is None:
            if name == self.state.default_queue:
                await self.ensure_default()
            return None
        groups = self.state.podgroups_in(name)
        deleting = bool(queue.metadata.deletion_timestamp)
        if deleting:
            state = "Closing"
        elif (queue.spec.state or "Open") == "Closed":
            state = "Closing" if groups else "Closed"
        else:
            if queue.spec.state not in ("", "Open"):
                log.warning("queue %s: unknown spec.state %r; treating it as Open", name, queue.spec.state)
            state = "Open"
        counts = {"pending": 0, "inqueue": 0, "running": 0, "unknown": 0, "completed": 0}
        for pg in groups:
            counts[_PHASE_FIELD.get(pg.status.phase, "unknown")] += 1
        await self._update_status(queue, state, counts)
        if deleting:
            if not groups and QUEUE_FINALIZER in queue.metadata.finalizers:
                await self._set_finalizer(queue, present=False)
                self.stats.drained += 1
                log.info("queue %s drained; letting it go", name)
            return None
        if self.drain_finalizer and QUEUE_FINALIZER not in queue.metadata.finalizers:
            await self._set_finalizer(queue, present=True)
        return None

    async def _update_status(self, queue: Queue, state: str, counts: dict[str, int]) -> None:
        s = queue.status
        current = {
            "pending": s.pending,
            "inqueue": s.inqueue,
            "running": s.running,
            "unknown": s.unknown,
            "completed": s.completed,
        }
        if s.state == state and current == counts:
            return
        body = {"metadata": {"uid": queue.metadata.uid}, "status": {"state": state, **counts}}
        try:
            await self._call("PATCH", queue_path(queue.metadata.name, "status"), body, MERGE_PATCH)
            self.stats.status_updates += 1
        except ApiError as exc:
            if exc.code in (404, 409):
                return
            raise

    async def _set_finalizer(self, queue: Queue, *, present: bool) -> None:
        finalizers = [f for f in queue.metadata.finalizers if f != QUEUE_FINALIZER]
        if present:
            finalizers.append(QUEUE_FINALIZER)
        # The resourceVersion makes this a compare-and-swap: other finalizers added meanwhile survive.
        body = {
            "metadata": {
                "uid": queue.metadata.uid,
                "resourceVersion": queue.metadata.resource_version,
                "finalizers": finalizers,
            }
        }
        try:
            await self._call("PATCH", queue_path(queue.metadata.name), body, MERGE_PATCH)
            if present:
                self.stats.finalizers_added += 1
        except ApiError as exc:
            if exc.code in (404, 409):
                return  # changed meanwhile: the watch brings the new version and we look again
            raise
