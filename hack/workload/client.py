"""A small, fast client for the Kubernetes API the workloads and the soak talk to: raw aiohttp over one
keep-alive session, transient answers retried; and the paths of the objects they create."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

#: Volcano's API group and version (PodGroups, Queues).
VG = "/apis/scheduling.volcano.sh/v1beta1"


def pods_path(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods"


#: Kubernetes' own gang API (PodGroups, Workloads)
NATIVE = "/apis/scheduling.k8s.io/v1alpha2"


def podgroups_path(ns: str, native: bool = False) -> str:
    """Volcano's PodGroups, or (``native``) Kubernetes' own."""
    return f"{NATIVE if native else VG}/namespaces/{ns}/podgroups"


class ApiError(Exception):
    def __init__(self, status: int, body: bytes = b"") -> None:
        super().__init__(f"{status}: {body[:200]!r}")
        self.status = status


class Api:
    """Raw aiohttp over one keep-alive session; transient answers (429, 5xx, resets) are retried."""

    def __init__(self, url: str, token: str, concurrency: int = 64) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.concurrency = concurrency
        self._session: aiohttp.ClientSession | None = None
        self.retries = 0

    @classmethod
    def from_kubeconfig(cls, path: str | Path, concurrency: int = 64) -> Api:
        cfg = yaml.safe_load(Path(path).read_text())
        return cls(
            cfg["clusters"][0]["cluster"]["server"], cfg["users"][0]["user"].get("token", ""), concurrency
        )

    async def __aenter__(self) -> Api:
        self._session = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {self.token}"},
            connector=aiohttp.TCPConnector(limit=self.concurrency + 8),
            timeout=aiohttp.ClientTimeout(total=60),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use `async with Api(...)`"
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        attempts: int = 12,
    ) -> tuple[int, bytes]:
        data = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": content_type} if data is not None else None
        delay = 0.05
        for attempt in range(attempts):
            try:
                async with self.session.request(
                    method, self.url + path, data=data, params=params, headers=headers
                ) as resp:
                    raw = await resp.read()
                    if resp.status == 429 or resp.status >= 500:
                        raise ApiError(resp.status, raw)
                    return resp.status, raw
            except (TimeoutError, ApiError, aiohttp.ClientError) as exc:
                if attempt == attempts - 1:
                    if isinstance(exc, ApiError):
                        raise
                    raise ApiError(0, str(exc).encode()) from exc
                self.retries += 1
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    async def create(self, path: str, body: dict[str, Any]) -> bool:
        """True when created; an existing object (409, e.g. a retried create that landed) is not an error."""
        status, raw = await self.request("POST", path, body)
        if status in (200, 201, 202):
            return True
        if status == 409:
            return False
        raise ApiError(status, raw)

    async def delete(self, path: str, grace: int | None = None) -> None:
        body = {"gracePeriodSeconds": grace} if grace is not None else None
        status, raw = await self.request("DELETE", path, body)
        if status not in (200, 202, 404, 409):
            raise ApiError(status, raw)

    async def patch(self, path: str, body: dict[str, Any]) -> None:
        status, raw = await self.request("PATCH", path, body, content_type="application/merge-patch+json")
        if status not in (200, 201, 404):
            raise ApiError(status, raw)

    async def list(self, path: str, **params: str) -> tuple[list[dict[str, Any]], str]:
        status, raw = await self.request("GET", path, params=params or None)
        if status != 200:
            raise ApiError(status, raw)
        doc = orjson.loads(raw)
        return doc.get("items") or [], doc["metadata"].get("resourceVersion", "")
