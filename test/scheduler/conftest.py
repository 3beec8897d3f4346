"""Fixtures of the scheduler's tests: ``server``, a fake API server for the binder's ResourceClaim
writes (claims by name with a resourceVersion, as the real server keeps them) and an ApiClient to it;
``recorder``, a server that answers every request 200 and records it (the status updater's writes)."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from aiohttp import web

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.framework.dra.objects import ResourceClaim


class DraServer:
    """Claims by name with a resourceVersion; pods' bindings; every write in order in ``log``."""

    def __init__(self) -> None:
        self.claims: dict[str, dict[str, Any]] = {}
        self.log: list[tuple[str, str]] = []
        self.patches: list[dict[str, Any]] = []
        #: the Content-Type of each claim write (finalizer or status), in order
        self.content_types: list[str] = []
        self.accepted: list[dict[str, Any]] = []
        self.bind_codes: dict[str, int] = {}
        self.claim_codes: list[int] = []
        #: before the n-th claim write is answered, someone else changes the claim (a 409 follows)
        self.interfere: dict[str, Any] | None = None

    def add(self, claim: ResourceClaim) -> None:
        raw = msgspec.to_builtins(claim)
        raw["metadata"]["resourceVersion"] = "1"
        self.claims[claim.metadata.name] = raw

    async def get_claim(self, request: web.Request) -> web.Response:
        return web.json_response(self.claims[request.match_info["name"]])

    async def patch_status(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        patch = await request.json()
        self.patches.append(patch)
        self.content_types.append(request.content_type)
        self.log.append(("claim", name))
        claim = self.claims[name]
        if self.interfere is not None:
            claim["status"] = self.interfere
            claim["metadata"]["resourceVersion"] = str(int(claim["metadata"]["resourceVersion"]) + 1)
            self.interfere = None
        if self.claim_codes:
            return _status(self.claim_codes.pop(0))
        if patch["metadata"].get("resourceVersion") != claim["metadata"]["resourceVersion"]:
            return _status(409)
        status = copy.deepcopy(claim.get("status") or {})
        for key, value in patch["status"].items():
            if value is None:
                status.pop(key, None)
            else:
                status[key] = value
        if status.get("reservedFor") and not status.get("allocation"):
            return _status(422)
        claim["status"] = status
        claim["metadata"]["resourceVersion"] = str(int(claim["metadata"]["resourceVersion"]) + 1)
        self.accepted.append(patch)
        return web.json_response(claim)

    async def patch_claim(self, request: web.Request) -> web.Response:
        """A merge patch of the claim itself (the finalizer), resourceVersion a precondition."""
        name = request.match_info["name"]
        patch = await request.json()
        self.content_types.append(request.content_type)
        self.log.append(("finalizer", name))
        claim = self.claims[name]
        if patch["metadata"].get("resourceVersion") != claim["metadata"]["resourceVersion"]:
            return _status(409)
        claim["metadata"]["finalizers"] = patch["metadata"]["finalizers"]
        claim["metadata"]["resourceVersion"] = str(int(claim["metadata"]["resourceVersion"]) + 1)
        return web.json_response(claim)

    async def bind(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.log.append(("bind", name))
        code = self.bind_codes.get(name, 201)
        return web.Response(status=201, body=b"{}") if code == 201 else _status(code)


def _status(code: int) -> web.Response:
    reasons = {409: "Conflict", 422: "Invalid", 404: "NotFound", 403: "Forbidden", 429: "TooManyRequests"}
    body = msgspec.json.encode(
        {"kind": "Status", "code": code, "reason": reasons.get(code, ""), "message": f"scripted {code}"}
    )
    return web.Response(status=code, body=body)


@contextlib.asynccontextmanager
async def _serving(app: web.Application) -> AsyncIterator[ApiClient]:
    """``app`` served on a free local port, and an ApiClient to it."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = ApiClient(ClusterConfig(host=f"http://127.0.0.1:{port}"))
    try:
        yield client
    finally:
        await client.close()
        await runner.cleanup()


@pytest.fixture
async def server() -> AsyncIterator[tuple[DraServer, ApiClient]]:
    srv = DraServer()
    app = web.Application()
    base = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}"
    app.router.add_get(base, srv.get_claim)
    app.router.add_patch(base, srv.patch_claim)
    app.router.add_patch(base + "/status", srv.patch_status)
    app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", srv.bind)
    async with _serving(app) as client:
        yield srv, client


class Recorder:
    """Answers every request 200 ``{}`` and keeps each (method, path, body) in order."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        #: a request whose path ends so is answered with this code instead (a ``Status`` body)
        self.codes: dict[str, int] = {}

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path, await request.json()))
        for suffix, code in self.codes.items():
            if request.path.endswith(suffix):
                return _status(code)
        return web.Response(status=200, body=b"{}")

    def of(self, method: str, fragment: str) -> list[Any]:
        return [body for m, path, body in self.requests if m == method and fragment in path]


@pytest.fixture
async def recorder() -> AsyncIterator[tuple[Recorder, ApiClient]]:
    rec = Recorder()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", rec.handle)
    async with _serving(app) as client:
        yield rec, client
