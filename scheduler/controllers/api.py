"""The controllers' API calls: the shared client, with a bound on requests in flight per controller."""

from __future__ import annotations

import asyncio

from caldera.cache.client import ApiClient


class BoundedCalls:
    def __init__(self, client: ApiClient, concurrency: int, timeout: float) -> None:
        self.client = client
        self.timeout = timeout
        self._requests = asyncio.Semaphore(concurrency)

    async def __call__(
        self, method: str, path: str, body: object = None, content_type: str = "application/json"
    ) -> bytes:
        async with self._requests:
            return await self.client.request(
                method, path, body=body, content_type=content_type, timeout=self.timeout
            )
