"""Evicting pods chosen by preempt and reclaim: the ``eviction`` subresource first (it honours
PodDisruptionBudgets), else a delete with a uid precondition (never removes a same-named successor)."""

from __future__ import annotations

import asyncio
import logging

from caldera.cache.client import ApiClient, ApiError, backoff_delay
from caldera.framework.session import Eviction
from caldera.framework.supervise import stop_workers, supervise
from caldera.metrics import scheduler as m

log = logging.getLogger("caldera.evictor")


class Evictor:
    def __init__(self, client: ApiClient, *, workers: int = 4, max_attempts: int = 6) -> None:
        self.client = client
        self.workers = workers
        self.max_attempts = max_attempts
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

    def start(self) -> None:
        for i in range(self.workers):
            self._tasks.append(supervise(f"evictor-{i}", self._worker))

    async def drain(self, timeout: float = 10.0) -> None:
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
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
        for attempt in range(self.max_attempts):
            try:
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
                if exc.transient or exc.code == 429:
                    await asyncio.sleep(exc.retry_after or backoff_delay(attempt, 0.1, 5.0))
                    continue
                log.warning("eviction of %s failed: %s; deleting instead", task.key, exc)
                use_delete = True
        return "failed: gave up after retries"
