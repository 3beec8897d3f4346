"""The built-in web view (``/ui``): static pages, shipped in the package, that read the ``/debug`` API.

No build step and nothing fetched from the network at run time: one HTML page, one stylesheet and one
plain-JavaScript file, served by the scheduler's own HTTP server. The pages are read-only; every figure
they show comes from the JSON endpoints described in ``docs/debug-api.md``.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

STATIC = Path(__file__).parent / "static"
ASSETS = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "style.css": "text/css",
}
# The page is a view of live state; assets are small, so never let a stale copy outlive an upgrade.
_HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
_PAGE_HEADERS = {
    **_HEADERS,
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
}


def _asset(name: str) -> bytes:
    return (STATIC / name).read_bytes()


async def _redirect(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("/ui/")


async def _index(request: web.Request) -> web.Response:
    return web.Response(body=_asset("index.html"), content_type="text/html", headers=_PAGE_HEADERS)


async def _static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    kind = ASSETS.get(name)
    if kind is None or name == "index.html":
        raise web.HTTPNotFound()
    return web.Response(body=_asset(name), content_type=kind, headers=_HEADERS)


def mount(app: web.Application) -> None:
    """Add the ``/ui`` routes (GET only) to ``app``."""
    app.router.add_get("/ui", _redirect)
    app.router.add_get("/ui/", _index)
    app.router.add_get("/ui/{name}", _static)
