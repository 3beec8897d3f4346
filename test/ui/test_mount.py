"""The web view's routes on the scheduler's HTTP server, and its behaviour at scale in a real browser
against a stand-in debug API (5,000 nodes, 10,000 jobs)."""

from __future__ import annotations

import time

import aiohttp
import pytest

from caldera.scheduler.cli import build_parser
from caldera.scheduler.http import HttpServer

from .browser import Browser
from .fake_debug import make_app, serve


async def _get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as s, s.get(url, allow_redirects=False) as r:
        return r.status, r.headers.get("Content-Type", ""), await r.text()


@pytest.mark.parametrize("ui", [True, False])
async def test_ui_is_served_beside_metrics_unless_turned_off(ui: bool) -> None:
    server = HttpServer("127.0.0.1:0", lambda: (True, "ok"), ui=ui)
    await server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        status, kind, body = await _get(f"{base}/ui/")
        if not ui:
            assert status == 404
            assert (await _get(f"{base}/ui/app.js"))[0] == 404
            return
        assert status == 200 and kind.startswith("text/html") and 'src="app.js"' in body
        assert (await _get(f"{base}/ui"))[0] == 302
        for name, want in (("app.js", "text/javascript"), ("style.css", "text/css")):
            s, k, text = await _get(f"{base}/ui/{name}")
            assert s == 200 and k.startswith(want) and text
        assert (await _get(f"{base}/ui/../pyproject.toml"))[0] == 404
        assert (await _get(f"{base}/ui/__init__.py"))[0] == 404
        assert (await _get(f"{base}/metrics"))[0] == 200
    finally:
        await server.stop()


def test_ui_flag() -> None:
    assert build_parser().parse_args([]).ui is True
    assert build_parser().parse_args(["--no-ui"]).ui is False


def test_assets_need_nothing_from_the_network() -> None:
    from caldera.scheduler import ui as scheduler_ui

    for name in scheduler_ui.ASSETS:
        text = (scheduler_ui.STATIC / name).read_text()
        assert "http://" not in text and "https://" not in text, name


async def test_stays_responsive_with_5000_nodes_and_10000_jobs(browser: Browser) -> None:
    runner, base = await serve(make_app(nodes=5000, jobs=10_000))
    try:
        # Nodes: every node drawn, in its leaf group, within a small time budget.
        t0 = time.monotonic()
        await browser.get(f"{base}/ui/?refresh=1#nodes")
        await browser.loaded("nodes", timeout=20)
        first_paint = time.monotonic() - t0
        shown = await browser.js(
            "return {nodes: document.getElementById('nodes-summary').dataset.nodes,"
            " groups: document.querySelectorAll('#node-groups [data-group]').length}"
        )
        assert shown == {"nodes": "5000", "groups": 313}
        assert first_paint < 8, f"5,000 nodes took {first_paint:.1f}s to show"
        # A repaint (colour by memory) of all 5,000 cells is cheap.
        ms = await browser.js(
            "const t = performance.now(); const s = document.getElementById('nodes-metric');"
            "s.value = 'memory'; s.dispatchEvent(new Event('change')); return performance.now() - t;"
        )
        assert ms < 300, f"repainting 5,000 nodes took {ms:.0f} ms"
        await browser.screenshot("nodes-5000")

        # Jobs: the server pages them; the page shows one page and moves between pages.
        await browser.get(f"{base}/ui/?refresh=1#jobs")
        await browser.loaded("jobs", timeout=20)
        page = await browser.js(
            "return {total: document.getElementById('jobs-summary').dataset.total,"
            " rows: document.querySelectorAll('#jobs-table tbody tr').length,"
            " first: document.querySelector('#jobs-table tbody tr').dataset.job}"
        )
        assert page == {"total": "5000", "rows": 50, "first": "team-b/job-00000"}
        n = await browser.loaded("jobs")
        await browser.click("#jobs-next")
        await browser.loaded("jobs", after=n)
        second = await browser.js(
            "return [document.getElementById('jobs-range').textContent,"
            " document.querySelector('#jobs-table tbody tr').dataset.job]"
        )
        assert second == ["51–100 of 5000", "team-a/job-00100"]  # noqa: RUF001
        await browser.screenshot("jobs-10000")
    finally:
        await runner.cleanup()


async def test_queue_bars_tell_the_pipelined_part_of_allocated(browser: Browser) -> None:
    """A queue's allocated figure counts what the last cycle pipelined (pending again next cycle):
    its bar says how much of it that is, and says nothing for a queue without any."""
    runner, base = await serve(make_app(nodes=10, jobs=10))
    try:
        await browser.get(f"{base}/ui/?refresh=1#queues")
        await browser.loaded("queues", timeout=20)
        rows = await browser.js(
            """
            const out = {};
            for (const tr of document.querySelectorAll('#queues-table tbody tr[data-queue]')) {
              const p = tr.querySelector('[data-field="pipelined.cpu"]');
              out[tr.dataset.queue] = {piped: p ? p.textContent : null, title: tr.querySelector('.bar').title};
            }
            return out;
            """
        )
        assert rows["research"]["piped"] == " · p 100"
        assert "allocated 1100 (100 of it pipelined this cycle)" in rows["research"]["title"]
        assert rows["prod"]["piped"] is None and "pipelined" not in rows["prod"]["title"]
    finally:
        await runner.cleanup()
