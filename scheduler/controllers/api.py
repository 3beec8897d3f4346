"""The controllers' API calls: the shared client, with a bound on requests in flight per controller,
and no write while the leader lease may no longer be held (``may_write``: ``LeaderElector.holds``):
such a write is answered, unsent, with the ``NotLeader`` error and counted in
``caldera_writes_withheld_total{writer="controller"}``; reads go on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from caldera.cache.client import ApiClient
from caldera.metrics import scheduler as m
from caldera.scheduler.leader import always, not_leader


class BoundedCalls:
    def __init__(
        self, client: ApiClient, concurrency: int, timeout: float, may_write: Callable[[], bool] = always
    ) -> None:
        self.client = client
        self.may_write = may_write
        self.timeout = timeout
        self._requests = asyncio.Semaphore(concurrency)

    async def __call__(
        self, method: str, path: str, body: object = None, content_type: str = "application/json"
    ) -> bytes:
        async with self._requests:
            if method != "GET" and not self.may_write():
                m.WRITES_WITHHELD.labels("controller").inc()
                raise not_leader()
            return await self.client.request(
                method, path, body=body, content_type=content_type, timeout=self.timeout
            )
