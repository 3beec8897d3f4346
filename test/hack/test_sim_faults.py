"""Each fault kind: 429 and 500 answers, latency, dropped watches, compaction forcing a re-list."""

from __future__ import annotations

import asyncio

import aiohttp
import aiohttp.web
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from caldera.hack.sim import Faults, SimCluster
from caldera.hack.sim.testing import kube_client, pod_manifest


def auth(sim: SimCluster) -> dict[str, str]:
    return {"Authorization": f"Bearer {sim.token}"}


async def test_429_answers_carry_retry_after(sim: SimCluster, core: client.CoreV1Api) -> None:
    sim.set_faults(error_429_rate=1.0)
    async with aiohttp.ClientSession(headers=auth(sim)) as http:
        async with http.get(f"{sim.url}/api/v1/namespaces/default/pods") as resp:
            assert resp.status == 429
            assert resp.headers["Retry-After"] == "1"
            body = await resp.json()
            assert body["reason"] == "TooManyRequests" and body["code"] == 429
        # Discovery is never faulted: clients can still find their way.
        async with http.get(f"{sim.url}/api/v1") as resp:
            assert resp.status == 200
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_pod("default")
    assert err.value.status == 429
    sim.set_faults(error_429_rate=0.0)
    await core.list_namespaced_pod("default")


async def test_error_rates_are_fractions_of_requests() -> None:
    faults = Faults(error_429_rate=0.2, error_500_rate=0.3, seed=7)
    async with SimCluster(faults=faults, kubelet=False) as sim:
        codes: dict[int, int] = {}
        async with aiohttp.ClientSession(headers=auth(sim)) as http:
            for _ in range(400):
                async with http.get(f"{sim.url}/api/v1/namespaces/default/configmaps") as resp:
                    codes[resp.status] = codes.get(resp.status, 0) + 1
                    if resp.status == 500:
                        assert (await resp.json())["reason"] == "InternalError"
    assert set(codes) == {200, 429, 500}
    assert 40 <= codes[429] <= 120
    assert 80 <= codes[500] <= 160


async def test_latency_is_added_to_requests(sim: SimCluster, core: client.CoreV1Api) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    await core.list_namespaced_pod("default")
    fast = loop.time() - start
    sim.set_faults(latency=0.15)
    start = loop.time()
    await core.list_namespaced_pod("default")
    slow = loop.time() - start
    assert slow >= 0.15 > fast


async def test_kubernetes_asyncio_watch_survives_dropped_connections(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    rv = (await core.list_namespaced_pod("default")).metadata.resource_version
    names: list[str] = []

    async def consume() -> None:
        w = watch.Watch()
        async for event in w.stream(core.list_namespaced_pod, "default", resource_version=rv):
            names.append(event["object"].metadata.name)
            if len(names) == 3:
                w.stop()
                return

    task = asyncio.create_task(consume())
    await core.create_namespaced_pod("default", pod_manifest("a"))
    await asyncio.sleep(0.1)
    assert sim.drop_watches() == 1
    await core.create_namespaced_pod("default", pod_manifest("b"))
    await asyncio.sleep(0.1)
    sim.drop_watches()
    await core.create_namespaced_pod("default", pod_manifest("c"))
    await asyncio.wait_for(task, 3)
    assert names == ["a", "b", "c"]  # resumed from the last version seen: nothing lost, nothing repeated


async def test_periodic_watch_drops_end_streams(sim: SimCluster) -> None:
    sim.set_faults(drop_watches_every=0.1)
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with aiohttp.ClientSession(headers=auth(sim)) as http:
        async with http.get(f"{sim.url}/api/v1/pods?watch=1&resourceVersion=1") as resp:
            body = await asyncio.wait_for(resp.read(), 2)  # returns when the server ends the stream
    assert loop.time() - start < 1.5
    assert b"ERROR" not in body


async def test_aborted_watch_resets_the_connection(sim: SimCluster) -> None:
    async with aiohttp.ClientSession(headers=auth(sim)) as http:
        async with http.get(f"{sim.url}/api/v1/pods?watch=1") as resp:
            await asyncio.sleep(0.05)
            sim.drop_watches(abort=True)
            with pytest.raises(aiohttp.ClientError):
                await asyncio.wait_for(resp.read(), 2)


async def test_periodic_compaction_forces_a_relist(sim: SimCluster) -> None:
    async with await kube_client(sim) as api:
        core = client.CoreV1Api(api)
        rv = (await core.list_namespaced_pod("default")).metadata.resource_version
        await core.create_namespaced_pod("default", pod_manifest("a"))
        sim.set_faults(compact_every=0.05)
        await asyncio.sleep(0.15)
        sim.set_faults(compact_every=0.0)
        with pytest.raises(ApiException) as err:
            async for _event in watch.Watch().stream(
                core.list_namespaced_pod, "default", resource_version=rv
            ):
                pass
        assert err.value.status == 410
        relisted = await core.list_namespaced_pod("default")
        assert [p.metadata.name for p in relisted.items] == ["a"]


async def test_faults_can_target_chosen_requests(sim: SimCluster, core: client.CoreV1Api) -> None:
    sim.set_faults(error_500_rate=1.0, target=lambda method, path: method == "DELETE")
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    with pytest.raises(ApiException) as err:
        await core.delete_namespaced_config_map("c", "default")
    assert err.value.status == 500
    assert (await core.read_namespaced_config_map("c", "default")).metadata.name == "c"


async def test_request_hooks_see_every_resource_request(sim: SimCluster, core: client.CoreV1Api) -> None:
    from caldera.hack.sim import ApiError

    seen: list[str] = []

    async def hook(request: aiohttp.web.Request) -> None:
        seen.append(f"{request.method} {request.path}")
        if request.method == "POST" and request.path.endswith("/binding"):
            raise ApiError(503, "ServiceUnavailable", "injected")

    sim.add_request_hook(hook)
    await core.create_namespaced_pod("default", pod_manifest("p"))
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod_binding(
            "p", "default", {"metadata": {"name": "p"}, "target": {"name": "node-0"}}
        )
    assert err.value.status == 503
    assert seen == ["POST /api/v1/namespaces/default/pods", "POST /api/v1/namespaces/default/pods/p/binding"]
    assert sim.get("pods", "p")["spec"].get("nodeName") is None


async def test_a_running_server_is_controlled_over_http(sim: SimCluster, core: client.CoreV1Api) -> None:
    async with aiohttp.ClientSession(headers=auth(sim)) as http:
        async with http.post(f"{sim.url}/sim/faults", json={"error_429_rate": 1.0}) as resp:
            assert resp.status == 200 and (await resp.json())["error_429_rate"] == 1.0
        with pytest.raises(ApiException) as err:
            await core.list_namespaced_pod("default")
        assert err.value.status == 429
        async with http.post(f"{sim.url}/sim/faults", json={"error_429_rate": 0.0, "latency": 0.0}) as resp:
            assert resp.status == 200
        async with http.post(f"{sim.url}/sim/faults", json={"nonsense": 1}) as resp:
            assert resp.status == 400
        rv = (await core.list_namespaced_pod("default")).metadata.resource_version
        await core.create_namespaced_pod("default", pod_manifest("a"))
        async with http.post(f"{sim.url}/sim/compact") as resp:
            assert resp.status == 200
        async with http.get(f"{sim.url}/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}") as resp:
            assert b'"code":410' in await resp.content.readline()
        async with http.get(f"{sim.url}/api/v1/pods?watch=1") as watch_resp:
            await asyncio.sleep(0.05)
            async with http.post(f"{sim.url}/sim/drop-watches") as resp:
                assert (await resp.json())["dropped"] == 1
            await asyncio.wait_for(watch_resp.read(), 2)
        async with http.get(f"{sim.url}/sim/stats") as resp:
            stats = await resp.json()
        assert stats["kinds"]["pods"]["objects"] == 1 and stats["requests"]["POST"] >= 1
    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.post(f"{sim.url}/sim/compact") as resp:
            assert resp.status == 401
