"""Why is my job pending? The same one line in the PodGroup condition, the FailedScheduling event,
the debug API and `caldera-scheduler explain`, against the running binary."""

from __future__ import annotations

import asyncio
import json
import sys

import aiohttp

from .conftest import Api, eventually

CLI = "from caldera.scheduler.cli import main; raise SystemExit(main())"


async def run_cli(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLI, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    return proc.returncode or 0, out.decode()


async def test_pending_gang_is_explained_the_same_way_everywhere(api: Api, start_scheduler) -> None:
    await api.node("n1", cpu="4")
    await api.node("n2", cpu="4")
    await api.gang("big", 3, cpu="3")
    running = await start_scheduler()
    server = f"http://127.0.0.1:{running.app.http.port}"  # type: ignore[union-attr]

    async def condition() -> dict:
        pg = await api.read_podgroup("big")
        return {c["type"]: c for c in pg.get("status", {}).get("conditions", [])}.get("Unschedulable", {})

    cond = await eventually(condition)

    async def doc() -> dict:
        async with aiohttp.ClientSession() as http, http.get(f"{server}/debug/jobs/{api.ns}/big") as resp:
            return await resp.json() if resp.status == 200 else {}

    explanation = await eventually(doc)
    reason = explanation["reason"]
    assert "Insufficient cpu" in reason and "\n" not in reason
    assert reason in cond["message"]
    events = await eventually(lambda: _reasons(api, "FailedScheduling"))
    assert any(reason in message for message in events)
    assert explanation["gang"]["min_member"] == 3
    role = explanation["roles"][0]
    assert role["nodes"] == 2 and role["pending"] == 3

    code, text = await run_cli("explain", f"{api.ns}/big", "--server", server)
    assert code == 0, text
    assert reason in text
    code, raw = await run_cli("explain", f"{api.ns}/big", "--server", server, "--json")
    assert code == 0 and json.loads(raw)["reason"] == reason
    code, text = await run_cli("explain", f"{api.ns}/nope", "--server", server)
    assert code == 1 and text.strip()

    async with aiohttp.ClientSession() as http, http.get(f"{server}/debug/queues") as resp:
        queues = {q["name"]: q for q in (await resp.json())["queues"]}
    assert queues["default"]["weight"] == 1


async def _reasons(api: Api, reason: str) -> list[str]:
    return [e.get("message", "") for e in await api.events() if e.get("reason") == reason]
