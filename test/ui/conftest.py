"""Browser fixtures for the web view's tests: Debian's Chromium, installed by the project's own
``hack/install-browser.sh`` once per session, driven through chromedriver."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from caldera.hack.sim import SimCluster
from caldera.scheduler.app import Options, SchedulerApp

from .browser import Browser, ChromeDriver

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts" / "ui"
# Screenshots shown in docs/ui.md are refreshed only on request, so a test run leaves the tree clean.
DOC_SCREENSHOTS = REPO / "docs" / "screenshots" if os.environ.get("CALDERA_UPDATE_SCREENSHOTS") else None


@pytest.fixture(scope="session")
def chrome() -> Iterator[ChromeDriver]:
    script = REPO / "hack" / "install-browser.sh"
    try:
        done = subprocess.run([str(script)], capture_output=True, text=True, timeout=900)
        code, why = done.returncode, (done.stderr.strip().splitlines() or ["no output"])[-1]
    except (OSError, subprocess.TimeoutExpired) as exc:
        code, why = -1, str(exc)
    if code != 0:
        message = f"hack/install-browser.sh failed (exit {code}): {why}"
        # Only a developer's machine without root may skip; in CI a missing browser is a failure.
        if code == 2 and os.environ.get("CI", "").lower() != "true":
            pytest.skip(message)
        pytest.fail(message)
    driver = ChromeDriver()
    try:
        driver.start()
    except Exception:
        driver.stop()
        raise
    yield driver
    driver.stop()


@pytest.fixture
async def browser(chrome: ChromeDriver) -> AsyncIterator[Browser]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
        b = Browser(chrome, http, ARTIFACTS)
        await b.get("about:blank")
        yield b


@contextlib.asynccontextmanager
async def running_scheduler(
    sim: SimCluster, conf: Path, scheduler: str, cycles: int = 0
) -> AsyncIterator[str]:
    """caldera-scheduler in this process against ``sim`` with the conf file ``conf``, ready and past
    ``cycles`` scheduling cycles: yields its base URL, and stops it after."""
    opts = Options(
        kubeconfig=str(sim.kubeconfig_path),
        scheduler_names=[scheduler],
        scheduler_conf=str(conf),
        schedule_period=0.2,
        listen_address="127.0.0.1:0",
        conf_poll_interval=0.2,
    )
    app = SchedulerApp(opts)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    try:
        for _ in range(100):
            if app.http is not None and app.readiness()[0] and app.observatory.number > cycles:
                break
            await asyncio.sleep(0.1)
        assert app.http is not None
        yield f"http://127.0.0.1:{app.http.port}"
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
