"""The scheduler's own HTTP endpoints: /metrics, /healthz, /readyz and a little /debug."""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Callable
from typing import Any

import msgspec
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from caldera.config.address import parse_listen_address
from caldera.scheduler import ui as scheduler_ui
from caldera.scheduler.debug import DebugApi, NotFound

log = logging.getLogger("caldera.http")


class ListenError(Exception):
    """The HTTP endpoints cannot listen where they were told to; the message says what to do."""


class HttpServer:
    def __init__(
        self,
        address: str,
        ready: Callable[[], tuple[bool, str]],
        debug: Callable[[], dict[str, Any]] | None = None,
        debug_api: DebugApi | None = None,
        ui: bool = True,
        before_scrape: Callable[[], object] | None = None,
    ) -> None:
        """``before_scrape``: called before each /metrics answer is generated (series set from the
        cache's state at that moment, such as the vGPU device series)."""
        self.address = address
        self.host, self.port = parse_listen_address(address)
        self.ready = ready
        self.debug = debug
        self.debug_api = debug_api
        self.ui = ui
        self.before_scrape = before_scrape
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/debug/state", self._debug)
        app.router.add_get("/debug/queues", self._debug_queues)
        app.router.add_get("/debug/jobs", self._debug_jobs)
        app.router.add_get("/debug/jobs/{namespace}/{name}", self._debug_job)
        app.router.add_get("/debug/pods/{namespace}/{name}", self._debug_pod)
        app.router.add_get("/debug/nodes", self._debug_nodes)
        app.router.add_get("/debug/nodes/{name}", self._debug_node)
        app.router.add_get("/debug/scheduler", self._debug_scheduler)
        if self.ui:
            scheduler_ui.mount(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            self._runner = None
            raise ListenError(_listen_advice(self.address, exc)) from None
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        log.info("serving /metrics, /healthz, /readyz on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.before_scrape is not None:
            try:
                self.before_scrape()
            except Exception:  # the scrape still answers, with the series as they were
                log.exception("setting the series from the cache before a scrape failed")
        body = generate_latest(REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        ok, detail = self.ready()
        return web.Response(text=detail + "\n", status=200 if ok else 503)

    async def _debug(self, request: web.Request) -> web.Response:
        state = self.debug() if self.debug is not None else {}
        return web.Response(body=msgspec.json.encode(state), content_type="application/json")

    # -- the debug API (docs/debug-api.md) ---------------------------------------------------------
    @staticmethod
    def _json(doc: Any, status: int = 200) -> web.Response:
        return web.Response(body=msgspec.json.encode(doc), status=status, content_type="application/json")

    def _api(self) -> DebugApi:
        if self.debug_api is None:
            raise web.HTTPServiceUnavailable(
                body=msgspec.json.encode({"error": "no debug API"}), content_type="application/json"
            )
        return self.debug_api

    async def _debug_queues(self, request: web.Request) -> web.Response:
        return self._json(self._api().queues())

    async def _debug_jobs(self, request: web.Request) -> web.Response:
        q = request.query
        try:
            doc = self._api().jobs(
                state=q.get("state", "pending"),
                queue=q.get("queue", ""),
                offset=int(q.get("offset", "0")),
                limit=int(q.get("limit", "100")),
            )
        except ValueError as exc:
            return self._json({"error": str(exc)}, 400)
        return self._json(doc)

    async def _debug_job(self, request: web.Request) -> web.Response:
        try:
            doc = self._api().job(request.match_info["namespace"], request.match_info["name"])
        except NotFound as exc:
            return self._json({"error": str(exc)}, 404)
        return self._json(doc)

    async def _debug_pod(self, request: web.Request) -> web.Response:
        try:
            doc = self._api().pod(request.match_info["namespace"], request.match_info["name"])
        except NotFound as exc:
            return self._json({"error": str(exc)}, 404)
        return self._json(doc)

    async def _debug_nodes(self, request: web.Request) -> web.Response:
        try:
            doc = self._api().nodes(request.query.get("group_by", ""))
        except ValueError as exc:
            return self._json({"error": str(exc)}, 400)
        return self._json(doc)

    async def _debug_node(self, request: web.Request) -> web.Response:
        try:
            doc = self._api().node(request.match_info["name"])
        except NotFound as exc:
            return self._json({"error": str(exc)}, 404)
        return self._json(doc)

    async def _debug_scheduler(self, request: web.Request) -> web.Response:
        return self._json(self._api().scheduler())


def _listen_advice(address: str, exc: OSError) -> str:
    why = exc.strerror or str(exc)
    if exc.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {address}: the address is already in use (another caldera-scheduler?); "
            "stop that process or choose another --listen-address"
        )
    if exc.errno == errno.EADDRNOTAVAIL or isinstance(exc, socket.gaierror):
        return (
            f"cannot listen on {address}: {why}; give an address of this machine in --listen-address "
            "(127.0.0.1:8080, or 0.0.0.0:8080 inside a pod)"
        )
    if exc.errno == errno.EACCES:
        return f"cannot listen on {address}: {why}; ports below 1024 need privileges, use a port such as 8080"
    return f"cannot listen on {address}: {why}; choose another --listen-address"
