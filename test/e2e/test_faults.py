"""Surviving a flaky API server: dropped watches, 410 after an outage, 429/500 storms."""

from __future__ import annotations

import asyncio

import msgspec

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.hack.sim import SimCluster
from caldera.hack.sim.resources import NODES, PODS, resource

from .conftest import SCHEDULER, Api, eventually, needs_sim

PODGROUPS = resource("podgroups", "scheduling.volcano.sh")


def _create_pod(sim: SimCluster, name: str, cpu: str = "1") -> None:
    sim.store.create(
        PODGROUPS,
        "default",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": 1},
        },
    )
    sim.store.create(PODS, "default", _pod_body(name, cpu))


def _pod_body(name: str, cpu: str = "1") -> dict:
    """A pod of its own one-member gang (the PodGroup is created with it)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"scheduling.k8s.io/group-name": name},
        },
        "spec": {
            "schedulerName": SCHEDULER,
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
        },
    }


async def test_an_outage_with_a_410_loses_nothing(sim: SimCluster | None, api: Api, start_scheduler) -> None:
    sim = needs_sim(sim)
    await api.node("n1")
    await api.node("doomed")
    running = await start_scheduler()
    cache = running.app.cache
    await eventually(lambda: _has_nodes(cache, {"n1", "doomed"}))

    # The outage: every request fails and every stream is cut, so the scheduler cannot resume...
    sim.set_faults(error_500_rate=1.0)
    sim.drop_watches(abort=True)
    await asyncio.sleep(0.3)
    # ...while the cluster moves on without it.
    sim.store.delete(NODES, "", "doomed", {"gracePeriodSeconds": 0})
    _create_pod(sim, "born-in-outage")
    sim.compact()  # the history is gone: resuming from the old resourceVersion answers 410
    await asyncio.sleep(0.3)
    sim.set_faults(error_500_rate=0.0)

    assert await eventually(lambda: _bound_to(api, "born-in-outage"), timeout=15) == "n1"
    await eventually(lambda: _forgot(cache, "doomed"), timeout=5)
    pods = running.app.informers.reflectors["pods"].stats  # type: ignore[union-attr]
    assert pods.expired >= 1 or pods.lists >= 2, "the pods watch re-listed after the 410"


async def test_dropped_watches_resume_and_miss_nothing(
    sim: SimCluster | None, api: Api, start_scheduler
) -> None:
    sim = needs_sim(sim)
    await api.node("n1", cpu="64")
    await start_scheduler()
    sim.set_faults(drop_watches_every=0.15)
    for i in range(30):
        await api.podgroup(f"p{i}", 1)
        await api.pod(f"p{i}", cpu="100m", group=f"p{i}")
        await asyncio.sleep(0.02)
    await eventually(lambda: _all_bound(api, 30), timeout=20)
    sim.set_faults(drop_watches_every=0.0)


async def test_429_and_500_storms_bind_every_pod_exactly_once(
    sim: SimCluster | None, api: Api, start_scheduler, admin_kubeconfig: str
) -> None:
    sim = needs_sim(sim)
    for i in range(4):
        await api.node(f"n{i}", cpu="16")
    # A watcher of our own counts how often each pod goes from no node to a node.
    bindings: dict[str, int] = {}
    watch_client = ApiClient(await ClusterConfig.load(admin_kubeconfig))
    rv = msgspec.json.decode(await watch_client.request("GET", "/api/v1/namespaces/default/pods"))[
        "metadata"
    ]["resourceVersion"]

    async def count_bindings() -> None:
        seen: dict[str, str] = {}
        params = {"watch": "1", "resourceVersion": rv}
        async for line in watch_client.stream_lines("/api/v1/namespaces/default/pods", params):
            obj = msgspec.json.decode(line)["object"]
            name, node = obj["metadata"]["name"], obj["spec"].get("nodeName", "")
            if node and not seen.get(name):
                bindings[name] = bindings.get(name, 0) + 1
            seen[name] = node

    watcher = asyncio.create_task(count_bindings())
    running = await start_scheduler()
    sim.set_faults(error_429_rate=0.25, error_500_rate=0.25, retry_after=0)
    for i in range(40):
        _create_pod(sim, f"s{i}", cpu="500m")
    try:
        await eventually(lambda: _all_bound(api, 40, faults=sim), timeout=40, interval=0.2)
    finally:
        sim.set_faults(error_429_rate=0.0, error_500_rate=0.0)
    await asyncio.sleep(0.3)
    watcher.cancel()
    await watch_client.close()
    assert len(bindings) == 40 and set(bindings.values()) == {1}
    binder = running.app.binder
    assert binder is not None and binder.bound_count == 40
    assert not any("409" in f.reason for f in binder.failures.values()), "no pod was bound twice"


async def _has_nodes(cache, names: set[str]) -> bool:
    return names <= set(cache.nodes)


async def _forgot(cache, name: str) -> bool:
    return name not in cache.nodes


async def _bound_to(api: Api, name: str) -> str:
    return (await api.node_of()).get(name, "")


async def _all_bound(api: Api, n: int, faults: SimCluster | None = None) -> bool:
    if faults is not None:
        # Read straight from the store: our own reads would be failed by the storm too.
        pods = faults.store.objects(PODS, "default")
        return len(pods) == n and all(p["spec"].get("nodeName") for p in pods)
    nodes = await api.node_of()
    return len(nodes) == n and all(nodes.values())
