"""The kubelet simulation and the Deployment/ReplicaSet controllers make workloads behave."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from caldera.hack.sim import SimCluster
from caldera.hack.sim.testing import pod_manifest


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 3.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def bind(core: client.CoreV1Api, name: str, node: str) -> None:
    await core.create_namespaced_pod_binding(
        name,
        "default",
        {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}},
        _preload_content=False,
    )


async def phase(core: client.CoreV1Api, name: str) -> str:
    return (await core.read_namespaced_pod(name, "default")).status.phase


async def test_bound_pod_becomes_running_after_the_kubelet_delay(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("p"))
    await asyncio.sleep(0.1)
    assert await phase(core, "p") == "Pending"  # nobody runs an unbound pod
    await bind(core, "p", "node-1")

    async def running() -> bool:
        return await phase(core, "p") == "Running"

    await eventually(running)
    pod = await core.read_namespaced_pod("p", "default")
    assert pod.status.pod_ip and pod.status.host_ip and pod.status.start_time
    assert {c.type for c in pod.status.conditions if c.status == "True"} >= {"PodScheduled", "Ready"}
    assert pod.status.container_statuses[0].state.running is not None


async def test_run_seconds_annotation_makes_the_pod_succeed(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(
        "default", pod_manifest("job", annotations={"sim.caldera.io/run-seconds": "0.2"})
    )
    await bind(core, "job", "node-0")
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def succeeded() -> bool:
        return await phase(core, "job") == "Succeeded"

    await eventually(succeeded)
    assert loop.time() - start >= 0.2
    pod = await core.read_namespaced_pod("job", "default")
    assert pod.status.container_statuses[0].state.terminated.reason == "Completed"
    # A finished pod is deleted at once, even though it was bound.
    await core.delete_namespaced_pod("job", "default")
    try:
        await core.read_namespaced_pod("job", "default")
        raise AssertionError("terminal pod should be gone")
    except ApiException as exc:
        assert exc.status == 404


async def test_pod_on_missing_node_stays_pending(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("p"))
    await bind(core, "p", "no-such-node")
    await asyncio.sleep(0.2)
    assert await phase(core, "p") == "Pending"


async def test_kubelet_finishes_graceful_deletion(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("p", node_name="node-2"))

    async def running() -> bool:
        return await phase(core, "p") == "Running"

    await eventually(running)
    await core.delete_namespaced_pod("p", "default")

    async def gone() -> bool:
        try:
            await core.read_namespaced_pod("p", "default")
        except ApiException as exc:
            return exc.status == 404
        return False

    await eventually(gone)


async def deployment_pods(core: client.CoreV1Api) -> list[client.V1Pod]:
    pods = await core.list_namespaced_pod("default", label_selector="app=web")
    return [p for p in pods.items if p.metadata.deletion_timestamp is None]


async def test_deployment_scales_one_zero_one(core: client.CoreV1Api, apps: client.AppsV1Api) -> None:
    await apps.create_namespaced_deployment(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"schedulerName": "caldera", "containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        },
    )

    async def count_is(n: int) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return len(await deployment_pods(core)) == n

        return check

    await eventually(await count_is(1))
    pods = await deployment_pods(core)
    owner = pods[0].metadata.owner_references[0]
    assert owner.kind == "ReplicaSet" and owner.controller
    rs = await apps.read_namespaced_replica_set(owner.name, "default")
    assert rs.metadata.owner_references[0].kind == "Deployment"
    assert pods[0].spec.scheduler_name == "caldera" and pods[0].spec.node_name is None
    first = pods[0].metadata.name

    await apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 0}})

    async def none_left() -> bool:
        all_pods = await core.list_namespaced_pod("default", label_selector="app=web")
        return not all_pods.items  # unbound pods are deleted at once

    await eventually(none_left)
    await apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 1}})
    await eventually(await count_is(1))
    second = (await deployment_pods(core))[0]
    assert second.metadata.name != first
    # The pod runs once something binds it, and the Deployment reports it.
    await bind(core, second.metadata.name, "node-0")

    async def available() -> bool:
        dep = await apps.read_namespaced_deployment("web", "default")
        return dep.status.ready_replicas == 1 and dep.status.observed_generation == dep.metadata.generation

    await eventually(available)
    dep = await apps.read_namespaced_deployment("web", "default")
    assert dep.metadata.generation == 3


async def test_deleting_a_deployment_collects_its_replicasets_and_pods(
    core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    await apps.create_namespaced_deployment(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "x"}]},
                },
            },
        },
    )

    async def two() -> bool:
        return len(await deployment_pods(core)) == 2

    await eventually(two)
    await apps.delete_namespaced_deployment("web", "default")

    async def all_gone() -> bool:
        rs = await apps.list_namespaced_replica_set("default")
        pods = await core.list_namespaced_pod("default")
        return not rs.items and not pods.items

    await eventually(all_gone)


async def test_replicaset_replaces_a_deleted_pod(
    core: client.CoreV1Api, apps: client.AppsV1Api, sim: SimCluster
) -> None:
    await apps.create_namespaced_replica_set(
        "default",
        {
            "metadata": {"name": "rs"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "x"}]},
                },
            },
        },
    )

    async def two() -> bool:
        return len(await deployment_pods(core)) == 2

    await eventually(two)
    victim = (await deployment_pods(core))[0].metadata.name
    await core.delete_namespaced_pod(victim, "default")
    await eventually(two)
    assert victim not in {p.metadata.name for p in await deployment_pods(core)}


async def test_kubelet_refuses_pods_that_do_not_fit_the_node() -> None:
    from caldera.hack.sim.testing import kube_client

    async with SimCluster(nodes=1, node_cpu="2", node_memory="4Gi", node_pods=3, kubelet_delay=0.01) as sim:
        async with await kube_client(sim) as api:
            core = client.CoreV1Api(api)
            await core.create_namespaced_pod(
                "default", pod_manifest("a", node_name="node-0", requests={"cpu": "1500m"})
            )

            async def a_running() -> bool:
                return await phase(core, "a") == "Running"

            await eventually(a_running)
            await core.create_namespaced_pod(
                "default", pod_manifest("b", node_name="node-0", requests={"cpu": "1"})
            )

            async def b_failed() -> bool:
                return await phase(core, "b") == "Failed"

            await eventually(b_failed)
            refused = await core.read_namespaced_pod("b", "default")
            assert refused.status.reason == "OutOfcpu"
            assert "requested: 1, used: 1.5, capacity: 2" in refused.status.message
            assert sim.kubelet is not None and sim.kubelet.used("node-0")["cpu"] == 1.5
            # Once a is gone, its share is free again.
            await core.delete_namespaced_pod("a", "default", grace_period_seconds=0)
            await core.create_namespaced_pod(
                "default", pod_manifest("c", node_name="node-0", requests={"cpu": "2"})
            )

            async def c_running() -> bool:
                return await phase(core, "c") == "Running"

            await eventually(c_running)
            # The pod count is a resource too: c plus the failed b do not count against it; d and e fit, f does not.
            for name in ("d", "e", "f"):
                await core.create_namespaced_pod("default", pod_manifest(name, node_name="node-0"))

            async def f_refused() -> bool:
                return await phase(core, "f") == "Failed"

            await eventually(f_refused)
            assert (await core.read_namespaced_pod("f", "default")).status.reason == "OutOfpods"


async def test_limits_default_requests_and_extended_resources_are_admitted(
    core: client.CoreV1Api, sim: SimCluster
) -> None:
    from caldera.hack.sim import NodeTemplate

    sim.add_nodes(
        [
            NodeTemplate(
                name="gpu",
                count=1,
                capacity={"cpu": "8", "memory": "16Gi", "pods": "10", "nvidia.com/gpu": "2"},
            )
        ]
    )
    body = pod_manifest("g", node_name="gpu-0")
    body["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "2", "cpu": "1"}}
    created = await core.create_namespaced_pod("default", body)
    assert created.spec.containers[0].resources.requests == {"nvidia.com/gpu": "2", "cpu": "1"}
    assert created.status.qos_class == "Burstable"

    async def running() -> bool:
        return await phase(core, "g") == "Running"

    await eventually(running)
    other = pod_manifest("h", node_name="gpu-0")
    other["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    await core.create_namespaced_pod("default", other)

    async def refused() -> bool:
        return await phase(core, "h") == "Failed"

    await eventually(refused)
    assert (await core.read_namespaced_pod("h", "default")).status.reason == "OutOfnvidia.com/gpu"


async def test_pods_on_a_not_ready_node_stay_pending(core: client.CoreV1Api, sim: SimCluster) -> None:
    from caldera.hack.sim import NodeTemplate

    sim.add_nodes([NodeTemplate(name="down", count=1, ready=False)])
    await core.create_namespaced_pod("default", pod_manifest("p", node_name="down-0"))
    await asyncio.sleep(0.2)
    assert await phase(core, "p") == "Pending"


async def test_pods_of_a_deleted_node_are_collected(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("p", node_name="node-2"))
    await core.create_namespaced_pod("default", pod_manifest("q", node_name="node-1"))
    await core.delete_node("node-2")

    async def collected() -> bool:
        names = {p.metadata.name for p in (await core.list_namespaced_pod("default")).items}
        return names == {"q"}

    await eventually(collected)
