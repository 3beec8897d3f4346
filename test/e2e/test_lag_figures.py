"""/debug/scheduler says how far behind the API server this replica runs: every pod it bound was seen
back by its watch (how late: cache/lag.py), and how late its event loop ran (scheduler/looplag.py)."""

from __future__ import annotations

from typing import Any

import aiohttp

from .conftest import Api, eventually


async def get_json(url: str) -> Any:
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        assert resp.status == 200
        return await resp.json()


async def test_binds_seen_back_and_the_loop_lag_are_reported(api: Api, start_scheduler) -> None:
    await api.node("n1", cpu="8")
    await api.gang("train", 3, cpu="1")
    running = await start_scheduler()
    server = f"http://127.0.0.1:{running.app.http.port}"  # type: ignore[union-attr]
    await eventually(lambda: api.placed("train-0", "train-1", "train-2"), timeout=20)

    async def all_seen() -> dict[str, Any] | None:
        lag = (await get_json(f"{server}/debug/scheduler"))["lag"]
        return lag if lag["watch"]["observed"] == 3 and lag["loop"]["observed"] else None

    lag = await eventually(all_seen, timeout=10)
    watch, loop = lag["watch"], lag["loop"]
    assert watch["awaiting"] == 0 and "oldest_awaiting_ms" not in watch
    assert watch["recent"] == 3 and 0 <= watch["p50_ms"] <= watch["p99_ms"] <= watch["max_ms"] < 10_000
    assert loop["recent"] >= 1 and loop["max_ms"] >= 0

    async with aiohttp.ClientSession() as http, http.get(f"{server}/metrics") as resp:
        text = await resp.text()
    assert "caldera_watch_bind_delay_seconds_bucket" in text
    assert "caldera_event_loop_lag_seconds_bucket" in text
    assert 'caldera_remembered_objects{map="binds_unseen",owner="cache"} 0.0' in text
