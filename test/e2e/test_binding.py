"""caldera-scheduler against a cluster: what gets bound, what does not, and what the API then shows."""

from __future__ import annotations

import asyncio

from .conftest import Api, eventually


async def test_binds_pods_of_our_scheduler_name_and_leaves_others_alone(api: Api, start_scheduler) -> None:
    await api.node("n1")
    await api.node("n2")
    await api.gang("train", 3)
    await api.pod("foreign", scheduler="default-scheduler")
    await start_scheduler()

    async def gang_bound() -> dict[str, str]:
        nodes = await api.node_of()
        return nodes if all(nodes[f"train-{i}"] for i in range(3)) else {}

    nodes = await eventually(gang_bound)
    assert {nodes[f"train-{i}"] for i in range(3)} <= {"n1", "n2"}
    await asyncio.sleep(0.5)
    assert (await api.node_of())["foreign"] == ""

    async def running() -> bool:
        return (await api.read_podgroup("train")).get("status", {}).get("phase") == "Running"

    await eventually(running)
    scheduled = [e for e in await api.events() if e["reason"] == "Scheduled"]
    assert scheduled and scheduled[0]["involvedObject"]["kind"] == "PodGroup"
    assert "3 pods" in scheduled[0]["message"]


async def test_a_gang_that_does_not_fit_stays_wholly_unbound_and_says_why(api: Api, start_scheduler) -> None:
    await api.node("n1", cpu="4")
    await api.node("n2", cpu="4")
    await api.gang("big", 3, cpu="3")  # 9 cpu in 3-cpu pieces: only two fit
    await start_scheduler()

    async def unschedulable() -> dict:
        pg = await api.read_podgroup("big")
        conds = {c["type"]: c for c in pg.get("status", {}).get("conditions", [])}
        return conds.get("Unschedulable", {})

    cond = await eventually(unschedulable)
    assert cond["status"] == "True" and cond["reason"] == "NotEnoughResources"
    assert "unschedulable" in cond["message"]
    events = await eventually(lambda: _events_with(api, "FailedScheduling"))
    assert events[0]["involvedObject"]["kind"] == "PodGroup" and events[0]["type"] == "Warning"
    pod = await api.get(f"/api/v1/namespaces/{api.ns}/pods/big-0")
    conds = {c["type"]: c for c in pod["status"].get("conditions", [])}
    assert conds["PodScheduled"]["status"] == "False" and conds["PodScheduled"]["reason"] == "Unschedulable"
    assert conds["PodScheduled"]["message"], "the pod says why it is not scheduled"
    await asyncio.sleep(0.5)
    assert not any((await api.node_of()).values())
    assert (await api.read_podgroup("big"))["status"]["phase"] in ("Pending", "Inqueue")


async def _events_with(api: Api, reason: str) -> list:
    return [e for e in await api.events() if e["reason"] == reason]


async def test_resources_of_other_schedulers_pods_are_respected(api: Api, start_scheduler) -> None:
    await api.node("n1", cpu="4")
    await api.pod("squatter", cpu="3", scheduler="default-scheduler", node="n1")
    await api.gang("pair", 2, cpu="1")
    await start_scheduler()
    await asyncio.sleep(1.0)
    assert (await api.node_of())["pair-0"] == "", "the gang needs 2 cpu; only 1 is free"
    await api.delete(
        f"/api/v1/namespaces/{api.ns}/pods/squatter",
        {"gracePeriodSeconds": 0, "kind": "DeleteOptions", "apiVersion": "v1"},
    )

    async def bound() -> bool:
        nodes = await api.node_of()
        return nodes.get("pair-0") == "n1" and nodes.get("pair-1") == "n1"

    await eventually(bound)


async def test_a_pod_waits_for_its_podgroup(api: Api, start_scheduler) -> None:
    await api.node("n1")
    await api.pod("late-0", group="late")
    running = await start_scheduler()
    await asyncio.sleep(0.6)
    assert (await api.node_of())["late-0"] == ""
    assert running.app.cache.waiting
    await api.podgroup("late", 1)
    await eventually(lambda: _bound(api, "late-0"))


async def _bound(api: Api, name: str) -> str:
    return (await api.node_of()).get(name, "")


async def test_http_endpoints(api: Api, start_scheduler) -> None:
    import aiohttp

    await api.node("n1")
    await api.gang("m", 1)
    running = await start_scheduler()
    await eventually(lambda: _bound(api, "m-0"))
    port = running.app.http.port  # type: ignore[union-attr]
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/readyz") as resp:
            assert resp.status == 200 and "synced" in await resp.text()
        async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
            assert resp.status == 200
        async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:
            text = await resp.text()
    assert 'volcano_schedule_attempts_total{result="scheduled"}' in text
    assert 'caldera_binds_total{result="bound"}' in text
