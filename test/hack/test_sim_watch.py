"""Watches: resume from a resourceVersion, bookmarks, 410 Gone after compaction, selector transitions."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from caldera.hack.sim import SimCluster
from caldera.hack.sim.testing import pod_manifest


async def raw_watch(sim: SimCluster, path: str, count: int, timeout: float = 3.0) -> list[dict]:
    """Read `count` events of a watch with plain aiohttp, one JSON decode per line."""
    events: list[dict] = []
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {sim.token}"}) as http:
        async with http.get(f"{sim.url}{path}") as resp:
            assert resp.status == 200
            async with asyncio.timeout(timeout):
                while len(events) < count:
                    line = await resp.content.readline()
                    if not line:
                        break
                    events.append(orjson.loads(line))
    return events


async def test_watch_resumes_from_a_list_resource_version(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("before"))
    listed = await core.list_namespaced_pod("default")
    await core.create_namespaced_pod("default", pod_manifest("after-1"))
    await core.create_namespaced_pod("default", pod_manifest("after-2"))
    await core.delete_namespaced_pod("after-1", "default")
    seen = []
    w = watch.Watch()
    async for event in w.stream(
        core.list_namespaced_pod,
        "default",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=1,
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 3:
            w.stop()
    assert seen == [("ADDED", "after-1"), ("ADDED", "after-2"), ("DELETED", "after-1")]


async def test_watch_without_version_starts_with_current_state(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod("default", pod_manifest("a"))
    events = await raw_watch(sim, "/api/v1/namespaces/default/pods?watch=true", 1)
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "a"


async def test_watch_streams_live_changes_and_bookmarks(sim: SimCluster, core: client.CoreV1Api) -> None:
    listed = await core.list_namespaced_pod("default")
    sim.server.bookmark_interval = 0.05

    async def make_changes() -> None:
        await asyncio.sleep(0.1)
        await core.create_namespaced_pod("default", pod_manifest("live"))

    task = asyncio.create_task(make_changes())
    path = f"/api/v1/namespaces/default/pods?watch=1&allowWatchBookmarks=true&resourceVersion={listed.metadata.resource_version}"
    events = await raw_watch(sim, path, 4)
    await task
    kinds = [e["type"] for e in events]
    assert "BOOKMARK" in kinds
    added = [e for e in events if e["type"] == "ADDED"]
    assert added and added[0]["object"]["metadata"]["name"] == "live"
    bookmark = next(e for e in events if e["type"] == "BOOKMARK")
    assert bookmark["object"]["kind"] == "Pod" and int(bookmark["object"]["metadata"]["resourceVersion"]) > 0


async def test_send_initial_events_ends_with_a_marked_bookmark(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod("default", pod_manifest("a"))
    path = "/api/v1/namespaces/default/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
    events = await raw_watch(sim, path, 2)
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_watch_from_compacted_version_is_410(sim: SimCluster, core: client.CoreV1Api) -> None:
    old = (await core.list_namespaced_pod("default")).metadata.resource_version
    await core.create_namespaced_pod("default", pod_manifest("a"))
    sim.compact()
    events = await raw_watch(sim, f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={old}", 1)
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
    # kubernetes-asyncio retries once, then raises 410: the caller must re-list.
    w = watch.Watch()
    with pytest.raises(ApiException) as err:
        async for _event in w.stream(core.list_namespaced_pod, "default", resource_version=old):
            pass
    assert err.value.status == 410
    relisted = await core.list_namespaced_pod("default")
    await core.create_namespaced_pod("default", pod_manifest("b"))
    async for event in w.stream(
        core.list_namespaced_pod, "default", resource_version=relisted.metadata.resource_version
    ):
        assert event["object"].metadata.name == "b"
        w.stop()


async def test_bounded_history_expires_old_versions(core: client.CoreV1Api, sim: SimCluster) -> None:
    sim.store.set_history_size(3)
    start = (await core.list_namespaced_config_map("default")).metadata.resource_version
    for i in range(5):
        await core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
    events = await raw_watch(sim, f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={start}", 1)
    assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410
    # A continue token from before the horizon is expired too.
    page = await core.list_namespaced_config_map("default", limit=2)
    for i in range(5, 9):
        await core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_config_map("default", limit=2, _continue=page.metadata._continue)
    assert err.value.status == 410


async def test_selector_watch_sees_objects_enter_and_leave(sim: SimCluster, core: client.CoreV1Api) -> None:
    rv = (await core.list_namespaced_pod("default")).metadata.resource_version
    await core.create_namespaced_pod("default", pod_manifest("p"))
    await core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"role": "x"}}})
    await core.patch_namespaced_pod(
        "p", "default", {"metadata": {"labels": {"role": None}}}, _content_type="application/merge-patch+json"
    )
    events = await raw_watch(
        sim, f"/api/v1/namespaces/default/pods?watch=1&labelSelector=role%3Dx&resourceVersion={rv}", 2
    )
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]


async def test_unscheduled_pods_watch_by_field_selector(sim: SimCluster, core: client.CoreV1Api) -> None:
    rv = (await core.list_pod_for_all_namespaces()).metadata.resource_version
    await core.create_namespaced_pod("default", pod_manifest("p", scheduler_name="caldera"))
    await core.create_namespaced_pod_binding(
        "p", "default", {"metadata": {"name": "p"}, "target": {"name": "node-0"}}, _preload_content=False
    )
    path = f"/api/v1/pods?watch=1&fieldSelector=spec.schedulerName%3Dcaldera%2Cspec.nodeName%3D&resourceVersion={rv}"
    events = await raw_watch(sim, path, 2)
    # Binding moves the pod out of the selection: a watcher of pending pods sees it leave.
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]
    assert events[1]["object"]["spec"]["nodeName"] == "node-0"


async def test_watch_timeout_seconds_ends_the_stream(sim: SimCluster, core: client.CoreV1Api) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    events = await raw_watch(sim, "/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=1", 10)
    assert events == []
    assert 0.9 <= loop.time() - start < 3


async def test_a_client_that_goes_away_releases_its_watch(sim: SimCluster) -> None:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {sim.token}"}) as http:
        async with http.get(f"{sim.url}/api/v1/pods?watch=1") as resp:
            assert resp.status == 200
            await asyncio.sleep(0.05)
            assert len(sim.server.watches) == 1
    for _ in range(100):
        if not sim.server.watches:
            break
        await asyncio.sleep(0.01)
    assert not sim.server.watches
    assert not any(ks.watchers for ks in sim.store.kinds.values())


async def test_a_consumer_too_far_behind_is_cut_off(sim: SimCluster) -> None:
    from caldera.hack.sim.resources import resource

    watcher = sim.store.watch(resource("configmaps"), "default")
    watcher.max_lines = 5
    for i in range(10):
        sim.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "default"}}
        )
    assert watcher.closed


async def test_watch_from_a_version_never_issued_asks_for_a_relist(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    future = sim.store.rv + 1000
    events = await raw_watch(sim, f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={future}", 1)
    assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 504
    assert events[0]["object"]["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
