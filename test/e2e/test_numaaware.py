"""The numa-aware plugin end to end on caldera-sim: two nodes publish their CPU/NUMA topology as
Volcano's resource-exporter does (``nodeinfo.volcano.sh/v1alpha1`` Numatopology objects, single-numa-node
kubelets). A Guaranteed pod asking ``single-numa-node`` for 6 CPUs goes to the node whose NUMA node
holds 6 CPUs; one asking for 10 fits no NUMA node anywhere and stays Pending with Volcano's reason."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.hack.scenario import cpu_detail, numatopology_dict

from .conftest import SCHEDULER, Api, eventually

pytestmark = pytest.mark.e2e

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: numa-aware
"""
TOPOLOGIES = "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies"


async def guaranteed(api: Api, name: str, cpus: str) -> None:
    """A Guaranteed pod (requests equal limits) of its own one-pod gang, asking single-numa-node."""
    await api.podgroup(name, 1)
    resources = {"cpu": cpus, "memory": "1Gi"}
    await api.create(
        f"/api/v1/namespaces/{api.ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "annotations": {
                    "scheduling.k8s.io/group-name": name,
                    "volcano.sh/numa-topology-policy": "single-numa-node",
                },
            },
            "spec": {
                "schedulerName": SCHEDULER,
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"requests": resources, "limits": resources},
                    }
                ],
            },
        },
    )


async def test_a_single_numa_node_pod_lands_where_a_numa_node_holds_it_and_one_too_big_waits(
    api: Api, start_scheduler: Any, conf_file: Any
) -> None:
    _, path = conf_file
    path.write_text(CONF)
    # "wide": 2 NUMA nodes of 8 CPUs; "narrow": 4 NUMA nodes of 4 CPUs (16 CPUs each)
    wide, narrow = f"wide-{api.ns}", f"narrow-{api.ns}"
    await api.node(wide, cpu="16", memory="64Gi")
    await api.node(narrow, cpu="16", memory="64Gi")
    created: list[str] = []
    try:
        for name, numa_nodes, cores in ((wide, 2, 4), (narrow, 4, 2)):
            await api.create(TOPOLOGIES, numatopology_dict(name, cpu_detail(numa_nodes, cores)))
            created.append(name)
        running = await start_scheduler()

        async def seen() -> bool:
            view = running.app.cache.numa_view()
            return view is not None and {wide, narrow} <= set(view.nodes)

        await eventually(seen)
        await guaranteed(api, "six", "6")
        await guaranteed(api, "ten", "10")

        async def six_placed() -> str:
            return (await api.node_of()).get("six", "")

        assert await eventually(six_placed) == wide

        reason = "0/2 nodes are available: 2 container main cannot be assigned by numa."

        async def ten_held() -> list[dict[str, Any]]:
            conditions = (await api.read_podgroup("ten")).get("status", {}).get("conditions", [])
            return [c for c in conditions if reason in c.get("message", "")]

        await eventually(ten_held)
        assert not (await api.node_of()).get("ten")
        # the CPUs "six" took stay taken in the scheduler's cache until the exporter reports the pod
        assumed = running.app.cache.numa_assumed[wide]
        assert [(p.name, len(s["cpu"])) for p, s in assumed.items()] == [("six", 6)]
    finally:
        for name in created:
            await api.delete(f"{TOPOLOGIES}/{name}")
