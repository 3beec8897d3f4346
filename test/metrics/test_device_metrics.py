"""vGPU device metrics follow the pods' lifecycle: set from the cache's truth, gone with the pod, the
last sharer, the device or the node, and repaired (and counted) by the reconciliation."""

from __future__ import annotations

import asyncio
import functools
import random

import msgspec
from prometheus_client import CollectorRegistry

from caldera.cache.store import ClusterCache
from caldera.framework.devices import ASSIGNED_IDS, NODE_REGISTER
from caldera.framework.objects import Pod
from caldera.hack.scenario import load, node, pod, podgroup
from caldera.metrics.devices import DeviceMetrics

DEVICE_METRICS = (
    "volcano_vgpu_device_shared_number",
    "volcano_vgpu_device_allocated_memory",
    "volcano_vgpu_device_allocated_cores",
    "volcano_vgpu_device_memory_limit",
)
POD_METRICS = (
    "volcano_vgpu_device_memory_allocation_for_a_certain_pod",
    "volcano_vgpu_device_core_allocation_for_a_certain_pod",
)


def gpu_node(name, devices):
    """devices: (uuid, memory MiB); each shareable by 10."""
    text = "".join(f"{u},10,{m},NVIDIA-A100,true,hami-core:" for u, m in devices)
    extra = {
        "volcano.sh/vgpu-number": str(10 * len(devices)),
        "volcano.sh/vgpu-memory": str(sum(m for _, m in devices)),
        "volcano.sh/vgpu-cores": str(100 * len(devices)),
    }
    return node(name, extra=extra, annotations={NODE_REGISTER: text})


def bound_pod(name, node_name, grants, phase="Running", namespace="default"):
    """A pod as the API shows it once bound: its assignment annotation, node and phase.
    grants: per container, [(uuid, mem, cores)]."""
    text = ";".join("".join(f"{u},NVIDIA,{m},{c}:" for u, m, c in container) for container in grants)
    return pod(
        name,
        group=name,
        namespace=namespace,
        node_name=node_name,
        phase=phase,
        limits={"volcano.sh/vgpu-number": "1"},
        annotations={ASSIGNED_IDS: text},
    )


def with_phase(p: Pod, phase: str) -> Pod:
    return msgspec.structs.replace(p, status=msgspec.structs.replace(p.status, phase=phase))


def exported(registry: CollectorRegistry) -> dict[str, dict[tuple, float]]:
    """Everything the registry exports for the six vGPU metrics, by metric and label values."""
    out: dict[str, dict[tuple, float]] = {name: {} for name in DEVICE_METRICS + POD_METRICS}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name in out:
                out[sample.name][tuple(sorted(sample.labels.items()))] = sample.value
    return out


def expected(
    nodes: dict[str, dict[str, int]], pods: dict[str, tuple[str, str, list]]
) -> dict[str, dict[tuple, float]]:
    """Recomputed here, independently of the code under test: nodes → {uuid: memory}; pods: the live,
    running pods as key → (namespace, node, grants)."""
    out: dict[str, dict[tuple, float]] = {name: {} for name in DEVICE_METRICS + POD_METRICS}
    per_dev: dict[tuple[str, str], dict[str, list[int]]] = {}
    for key, (_namespace, node_name, grants) in pods.items():
        if node_name not in nodes:
            continue
        for container in grants:
            for uuid, mem, cores in container:
                if uuid not in nodes[node_name]:
                    continue
                acc = per_dev.setdefault((node_name, uuid), {}).setdefault(key, [0, 0])
                acc[0] += mem
                acc[1] += cores
    for node_name, devices in nodes.items():
        for uuid, memory in devices.items():
            dev = (("NodeName", node_name), ("devID", uuid))
            out["volcano_vgpu_device_memory_limit"][dev] = float(memory)
            sharers = per_dev.get((node_name, uuid), {})
            if not sharers:
                continue
            out["volcano_vgpu_device_shared_number"][dev] = float(len(sharers))
            out["volcano_vgpu_device_allocated_memory"][dev] = float(sum(v[0] for v in sharers.values()))
            out["volcano_vgpu_device_allocated_cores"][dev] = float(sum(v[1] for v in sharers.values()))
            for key, (mem, cores) in sharers.items():
                namespace, _, name = key.partition("/")
                labels = (
                    ("NodeName", node_name),
                    ("devID", uuid),
                    ("podName", name),
                    ("podNamespace", namespace),
                )
                out["volcano_vgpu_device_memory_allocation_for_a_certain_pod"][labels] = float(mem)
                out["volcano_vgpu_device_core_allocation_for_a_certain_pod"][labels] = float(cores)
    return out


def repairs(registry: CollectorRegistry) -> float:
    return registry.get_sample_value("caldera_device_metrics_repairs_total") or 0.0


def test_a_scheduled_pod_shows_on_its_device_and_every_way_of_ending_removes_it():
    nodes = {"g1": {"GPU-1": 40000, "GPU-2": 40000}}
    cache = load(ClusterCache(), nodes=[gpu_node("g1", list(nodes["g1"].items()))])
    registry = CollectorRegistry()
    metrics = DeviceMetrics(registry)
    metrics.update(cache)
    assert exported(registry) == expected(nodes, {})  # only the cards' memory limits

    for ending in ("deleted", "Failed", "Succeeded"):
        stay = bound_pod(f"stay-{ending}", "g1", [[("GPU-1", 5000, 20)]])
        leave = bound_pod(f"leave-{ending}", "g1", [[("GPU-1", 7000, 30)], [("GPU-2", 1000, 10)]])
        for p in (stay, leave):
            cache.upsert_podgroup(podgroup(p.metadata.name))
            cache.upsert_pod(p)
        metrics.update(cache)
        live = {
            f"default/{stay.metadata.name}": ("default", "g1", [[("GPU-1", 5000, 20)]]),
            f"default/{leave.metadata.name}": (
                "default",
                "g1",
                [[("GPU-1", 7000, 30)], [("GPU-2", 1000, 10)]],
            ),
        }
        assert exported(registry) == expected(nodes, live)
        values = exported(registry)
        assert values["volcano_vgpu_device_shared_number"][(("NodeName", "g1"), ("devID", "GPU-1"))] == 2

        if ending == "deleted":
            cache.delete_pod(leave)
        else:
            cache.upsert_pod(with_phase(leave, ending))
        metrics.update(cache)
        del live[f"default/{leave.metadata.name}"]
        assert exported(registry) == expected(nodes, live)
        assert not any(labels[2][1] == leave.metadata.name for labels in exported(registry)[POD_METRICS[0]])
        # the last sharer of GPU-2 left: its usage series are gone, its limit stays
        assert (("NodeName", "g1"), ("devID", "GPU-2")) not in exported(registry)[
            "volcano_vgpu_device_shared_number"
        ]

        cache.delete_pod(stay)
        metrics.update(cache)
        assert exported(registry) == expected(nodes, {})
    assert repairs(registry) == 0


def test_a_deleted_node_takes_all_its_device_series_with_it():
    nodes = {"g1": {"GPU-1": 16000}, "g2": {"GPU-9": 80000}}
    node_objs = [gpu_node(n, list(d.items())) for n, d in nodes.items()]
    cache = load(ClusterCache(), nodes=node_objs)
    registry = CollectorRegistry()
    metrics = DeviceMetrics(registry)
    p1 = bound_pod("a", "g1", [[("GPU-1", 4000, 50)]])
    p2 = bound_pod("b", "g2", [[("GPU-9", 4000, 50)]])
    for p in (p1, p2):
        cache.upsert_pod(p)
    metrics.update(cache)
    assert exported(registry) == expected(
        nodes,
        {
            "default/a": ("default", "g1", [[("GPU-1", 4000, 50)]]),
            "default/b": ("default", "g2", [[("GPU-9", 4000, 50)]]),
        },
    )
    cache.delete_node(node_objs[0])
    metrics.update(cache)
    after = exported(registry)
    assert after == expected({"g2": nodes["g2"]}, {"default/b": ("default", "g2", [[("GPU-9", 4000, 50)]])})
    assert not any(("NodeName", "g1") in labels for series in after.values() for labels in series)


def test_a_device_that_leaves_the_register_annotation_loses_its_series():
    cache = load(ClusterCache(), nodes=[gpu_node("g1", [("GPU-1", 16000), ("GPU-2", 16000)])])
    registry = CollectorRegistry()
    metrics = DeviceMetrics(registry)
    cache.upsert_pod(bound_pod("a", "g1", [[("GPU-2", 1000, 0)]]))
    metrics.update(cache)
    cache.upsert_node(gpu_node("g1", [("GPU-1", 16000)]))
    metrics.update(cache)
    assert exported(registry) == expected({"g1": {"GPU-1": 16000}}, {})


def test_a_thousand_random_create_delete_cycles_leave_exactly_the_truth():
    rng = random.Random(2024)
    nodes = {
        f"g{i}": {f"GPU-{i}-{d}": rng.choice([16000, 40000, 80000]) for d in range(rng.randint(1, 4))}
        for i in range(6)
    }
    node_objs = {n: gpu_node(n, list(d.items())) for n, d in nodes.items()}
    cache = load(ClusterCache(), nodes=node_objs.values())
    registry = CollectorRegistry()
    metrics = DeviceMetrics(registry)
    live_pods: dict[str, Pod] = {}
    truth: dict[str, tuple[str, str, list]] = {}
    gone_nodes: set[str] = set()
    for cycle in range(1000):
        op = rng.random()
        if op < 0.55 or not live_pods:
            node_name = rng.choice(sorted(nodes))
            uuids = sorted(nodes[node_name])
            grants = [
                [
                    (u, rng.randrange(100, 8000), rng.choice([0, 5, 10, 25]))
                    for u in rng.sample(uuids, rng.randint(1, len(uuids)))
                ]
                for _ in range(rng.choice([1, 1, 2]))
            ]
            namespace = rng.choice(["team-a", "team-b"])
            p = bound_pod(f"p{cycle}", node_name, grants, namespace=namespace)
            cache.upsert_pod(p)
            live_pods[f"{namespace}/p{cycle}"] = p
            truth[f"{namespace}/p{cycle}"] = (namespace, node_name, grants)
        elif op < 0.75:
            key = rng.choice(sorted(live_pods))
            cache.delete_pod(live_pods.pop(key))
            truth.pop(key)
        elif op < 0.95:
            key = rng.choice(sorted(live_pods))
            cache.upsert_pod(with_phase(live_pods.pop(key), rng.choice(["Succeeded", "Failed"])))
            truth.pop(key)
        elif op < 0.98 and len(gone_nodes) < 2:
            name = rng.choice(sorted(set(nodes) - gone_nodes))
            cache.delete_node(node_objs[name])
            gone_nodes.add(name)
        elif gone_nodes:
            name = gone_nodes.pop()
            cache.upsert_node(node_objs[name])  # the node is back, with the pods still bound to it
        if rng.random() < 0.3:  # updates after some events only: the rest is left to the reconciliation
            metrics.update(cache)
        if cycle % 100 == 99:
            metrics.reconcile(cache)
            present = {n: d for n, d in nodes.items() if n not in gone_nodes}
            assert exported(registry) == expected(present, truth)
    metrics.reconcile(cache)
    present = {n: d for n, d in nodes.items() if n not in gone_nodes}
    assert exported(registry) == expected(present, truth)
    # cards are never shown above their capacity in cores by more than the truth says
    for labels, value in exported(registry)["volcano_vgpu_device_allocated_memory"].items():
        assert value == expected(present, truth)["volcano_vgpu_device_allocated_memory"][labels]


def test_reconcile_repairs_tampered_missing_and_stale_series_and_counts_each():
    nodes = {"g1": {"GPU-1": 40000}}
    cache = load(ClusterCache(), nodes=[gpu_node("g1", [("GPU-1", 40000)])])
    cache.upsert_pod(bound_pod("a", "g1", [[("GPU-1", 3000, 10)]]))
    registry = CollectorRegistry()
    metrics = DeviceMetrics(registry)
    assert metrics.reconcile(cache) == 6  # a first reconcile creates every series: 4 device + 2 pod
    assert repairs(registry) == 6
    assert metrics.reconcile(cache) == 0  # nothing diverged since

    # divergence of the kinds Volcano produced: an Add'ed value, a series nobody cleaned, one lost
    metrics.gauges["volcano_vgpu_device_allocated_memory"].labels("GPU-1", "g1").inc(3000)
    metrics.gauges["volcano_vgpu_device_shared_number"].labels("GPU-gone", "old-node").set(3)
    metrics.gauges["volcano_vgpu_device_core_allocation_for_a_certain_pod"].remove(
        "GPU-1", "g1", "a", "default"
    )
    assert metrics.reconcile(cache) == 3
    assert repairs(registry) == 9
    assert exported(registry) == expected(nodes, {"default/a": ("default", "g1", [[("GPU-1", 3000, 10)]])})


async def test_the_periodic_loop_follows_the_cache_and_stops_when_told():
    nodes = {"g1": {"GPU-1": 40000}}
    cache = load(ClusterCache(), nodes=[gpu_node("g1", [("GPU-1", 40000)])])
    registry = CollectorRegistry()
    metrics = DeviceMetrics(registry)
    stop = asyncio.Event()
    runner = asyncio.create_task(metrics.run(cache, stop, period=0.05, refresh=0.01))
    try:
        p = bound_pod("a", "g1", [[("GPU-1", 3000, 10)]])
        cache.upsert_pod(p)
        for _ in range(100):
            await asyncio.sleep(0.01)
            if exported(registry) == expected(
                nodes, {"default/a": ("default", "g1", [[("GPU-1", 3000, 10)]])}
            ):
                break
        assert exported(registry) == expected(
            nodes, {"default/a": ("default", "g1", [[("GPU-1", 3000, 10)]])}
        )
        cache.delete_pod(p)
        for _ in range(100):
            await asyncio.sleep(0.01)
            if exported(registry) == expected(nodes, {}):
                break
        assert exported(registry) == expected(nodes, {})
    finally:
        stop.set()
        await asyncio.wait_for(runner, 2)
    assert runner.done() and runner.exception() is None


def test_a_pod_scheduled_by_the_loop_shows_on_the_device_it_was_given():
    from caldera.actions.allocate import AllocateAction
    from caldera.config.conf import parse_conf
    from caldera.framework.plugin import Registry
    from caldera.plugins.deviceshare import DeviceSharePlugin
    from caldera.plugins.gang import GangPlugin
    from caldera.plugins.predicates import PredicatesPlugin
    from caldera.scheduler.loop import RecordingBinder, SchedulerLoop

    nodes = {"g1": {"GPU-1": 40000, "GPU-2": 40000}}
    cache = load(ClusterCache(), nodes=[gpu_node("g1", list(nodes["g1"].items()))])
    registry = Registry()
    registry.register_action(AllocateAction)
    for plugin in (GangPlugin, PredicatesPlugin, DeviceSharePlugin):
        registry.register_plugin(plugin)
    conf = parse_conf(
        "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n  - name: deviceshare\n"
        "    arguments: {deviceshare.VGPUEnable: true, deviceshare.SchedulePolicy: spread}\n",
        registry,
    )
    binder = RecordingBinder()
    loop = SchedulerLoop(cache, lambda: conf, registry, binder)
    p = pod(
        "infer",
        group="infer",
        limits={
            "volcano.sh/vgpu-number": "2",
            "volcano.sh/vgpu-memory": "6000",
            "volcano.sh/vgpu-cores": "30",
        },
    )
    cache.upsert_podgroup(podgroup("infer"))
    cache.upsert_pod(p)
    loop.run_once()
    (placement,) = binder.placements
    # assumed by the scheduler, not yet bound on the API: no device usage shows
    registry_m = CollectorRegistry()
    metrics = DeviceMetrics(registry_m)
    metrics.update(cache)
    assert exported(registry_m) == expected(nodes, {})
    # what the binder writes and the watch brings back
    bound = msgspec.structs.replace(
        p,
        metadata=msgspec.structs.replace(
            p.metadata, annotations={**p.metadata.annotations, **placement.annotations}
        ),
        spec=msgspec.structs.replace(p.spec, node_name=placement.node),
        status=msgspec.structs.replace(p.status, phase="Running"),
    )
    cache.upsert_pod(bound)
    metrics.update(cache)
    grants = [[("GPU-1", 6000, 30), ("GPU-2", 6000, 30)]]
    assert exported(registry_m) == expected(nodes, {"default/infer": ("default", "g1", grants)})
    cache.delete_pod(bound)
    metrics.update(cache)
    assert exported(registry_m) == expected(nodes, {})


async def test_pods_that_finish_while_the_periodic_loop_is_held_up_are_gone_at_the_next_scrape():
    # The scheduler's /metrics, wired as the app wires it, over a cache where 50 vGPU pods run; the
    # periodic loop then stalls (a busy process: its next turn is an hour away) while 40 pods finish
    # and 5 are deleted. The very next scrape shows only the 5 still running.
    import aiohttp
    from prometheus_client.parser import text_string_to_metric_families

    from caldera.metrics import devices as device_metrics
    from caldera.scheduler.http import HttpServer

    cache = load(ClusterCache(), nodes=[gpu_node("g1", [("GPU-1", 80000)])])
    pods = [bound_pod(f"p{i}", "g1", [[("GPU-1", 100, 1)]]) for i in range(50)]
    for p in pods:
        cache.upsert_pod(p)
    metrics = device_metrics.shared()
    stop = asyncio.Event()
    runner = asyncio.create_task(metrics.run(cache, stop, period=3600, refresh=3600))
    server = HttpServer(
        "127.0.0.1:0",
        lambda: (True, "ok"),
        ui=False,
        before_scrape=functools.partial(metrics.refresh, cache),
    )
    await server.start()

    async def scraped_pods() -> set[str]:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{server.port}/metrics") as r:
                text = await r.text()
        return {
            s.labels["podName"]
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == POD_METRICS[0] and s.labels["NodeName"] == "g1"
        }

    try:
        await asyncio.sleep(0.05)  # the loop's first turn sets the series
        assert await scraped_pods() == {f"p{i}" for i in range(50)}
        for p in pods[:40]:
            cache.upsert_pod(with_phase(p, random.choice(["Succeeded", "Failed"])))
        for p in pods[40:45]:
            cache.delete_pod(p)
        assert await scraped_pods() == {f"p{i}" for i in range(45, 50)}
    finally:
        stop.set()
        await asyncio.wait_for(runner, 2)
        await server.stop()


async def test_the_periodic_reconciliation_counts_no_ordinary_change_as_a_repair():
    # Pods come and go between the loop's turns, every turn a reconciliation: what the cache changed
    # is set as such; only series that differ from the truth they were set from would be repairs.
    cache = load(ClusterCache(), nodes=[gpu_node("g1", [("GPU-1", 80000)])])
    registry = CollectorRegistry()
    metrics = DeviceMetrics(registry)
    stop = asyncio.Event()
    runner = asyncio.create_task(metrics.run(cache, stop, period=0.01, refresh=0.01))
    try:
        for i in range(30):
            cache.upsert_pod(bound_pod(f"p{i}", "g1", [[("GPU-1", 100, 1)]]))
            await asyncio.sleep(0.02)
    finally:
        stop.set()
        await asyncio.wait_for(runner, 2)
    assert repairs(registry) == 0
    live = {f"default/p{i}": ("default", "g1", [[("GPU-1", 100, 1)]]) for i in range(30)}
    assert exported(registry) == expected({"g1": {"GPU-1": 80000}}, live)
