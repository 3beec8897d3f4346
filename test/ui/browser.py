"""A small WebDriver client for the web view's browser tests: Debian's Chromium driven through
chromedriver's W3C WebDriver HTTP API, with aiohttp (no selenium, no Playwright).

Commands are async on purpose: the page under test fetches from a scheduler running on the test's own
event loop, so a blocking call into the browser would deadlock the page it waits for.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = os.environ.get("CALDERA_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CALDERA_CHROMEDRIVER", "/usr/bin/chromedriver")
WIDTH, HEIGHT = 1280, 800

# This machine's network is closed: without these, Chromium keeps trying (and failing) to reach
# Google's services at start and in the background.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    f"--window-size={WIDTH},{HEIGHT}",
]


class WebDriverError(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sync_call(method: str, url: str, body: dict[str, Any] | None = None, timeout: float = 30) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())["value"]


class ChromeDriver:
    """chromedriver plus one headless Chromium session, for a whole test session."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.profile = tempfile.mkdtemp(prefix="caldera-ui-chromium-")
        self.log = Path(self.profile) / "chromedriver.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.session_id = ""

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [CHROMEDRIVER, f"--port={self.port}", "--allowed-ips=127.0.0.1", f"--log-path={self.log}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                if _sync_call("GET", f"{self.base}/status", timeout=2).get("ready"):
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise WebDriverError(f"chromedriver did not start; see {self.log}")
            time.sleep(0.05)
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "pageLoadStrategy": "normal",
                    "goog:chromeOptions": {
                        "binary": CHROMIUM,
                        "args": [*CHROMIUM_FLAGS, f"--user-data-dir={self.profile}/profile"],
                    },
                }
            }
        }
        value = _sync_call("POST", f"{self.base}/session", caps, timeout=60)
        self.session_id = value["sessionId"]
        # The window's frame takes part of --window-size: grow the window until the page itself
        # (what screenshots show) is WIDTH x HEIGHT.
        url = f"{self.base}/session/{self.session_id}"
        frame = _sync_call(
            "POST",
            f"{url}/execute/sync",
            {"script": "return [outerWidth - innerWidth, outerHeight - innerHeight]", "args": []},
        )
        _sync_call("POST", f"{url}/window/rect", {"width": WIDTH + frame[0], "height": HEIGHT + frame[1]})

    def stop(self) -> None:
        try:
            if self.session_id:
                _sync_call("DELETE", f"{self.base}/session/{self.session_id}", timeout=10)
        except OSError:
            pass
        finally:
            if self.proc is not None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)


class Browser:
    """The async face of a ChromeDriver session, used inside a test's event loop."""

    def __init__(self, driver: ChromeDriver, http: aiohttp.ClientSession, artifacts: Path) -> None:
        self.driver = driver
        self.http = http
        self.artifacts = artifacts
        self.url_base = f"{driver.base}/session/{driver.session_id}"

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        async with self.http.request(method, self.url_base + path, json=body) as resp:
            payload = await resp.json(content_type=None)
        value = payload.get("value")
        if resp.status >= 400:
            message = value.get("message", "") if isinstance(value, dict) else str(value)
            raise WebDriverError(f"{method} {path}: {resp.status} {message[:500]}")
        return value

    async def get(self, url: str) -> None:
        await self._call("POST", "/url", {"url": url})

    async def js(self, script: str, *args: Any) -> Any:
        """Run ``script`` (a function body; ``arguments`` holds ``args``) in the page and return its value."""
        return await self._call("POST", "/execute/sync", {"script": script, "args": list(args)})

    async def wait(self, script: str, *args: Any, timeout: float = 10.0, what: str = "") -> Any:
        """Poll ``script`` until it returns something truthy; return that."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            last = await self.js(script, *args)
            if last:
                return last
            if time.monotonic() > deadline:
                raise AssertionError(f"page never showed {what or script!r} within {timeout}s; last {last!r}")
            await asyncio.sleep(0.1)

    async def loaded(self, view: str, after: int = 0, timeout: float = 10.0) -> int:
        """Wait until ``view`` has rendered more than ``after`` times; return the render count."""
        script = (
            "const s = document.getElementById('view-' + arguments[0]);"
            "const n = parseInt((s && s.dataset.loaded) || '0', 10);"
            "return !s.hidden && n > arguments[1] ? n : 0;"
        )
        return int(await self.wait(script, view, after, timeout=timeout, what=f"the {view} view rendered"))

    async def click(self, selector: str) -> None:
        await self.js(
            "const el = document.querySelector(arguments[0]); if (!el) throw new Error('no ' + arguments[0]);"
            "el.click();",
            selector,
        )

    async def select(self, selector: str, value: str) -> None:
        await self.js(
            "const el = document.querySelector(arguments[0]); el.value = arguments[1];"
            "el.dispatchEvent(new Event('change'));",
            selector,
            value,
        )

    async def screenshot(self, name: str, *, keep_in: Path | None = None) -> Path:
        png = base64.b64decode(await self._call("GET", "/screenshot"))
        self.artifacts.mkdir(parents=True, exist_ok=True)
        path = self.artifacts / f"{name}.png"
        path.write_bytes(png)
        if keep_in is not None:
            keep_in.mkdir(parents=True, exist_ok=True)
            (keep_in / f"{name}.png").write_bytes(png)
        return path

    async def console_errors(self) -> list[str]:
        try:
            logs = await self._call("POST", "/se/log", {"type": "browser"})
        except WebDriverError:
            return []
        return [e["message"] for e in logs if e.get("level") == "SEVERE"]
