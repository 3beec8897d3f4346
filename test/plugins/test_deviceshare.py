"""deviceshare: vGPU devices in Volcano's wire format, fitted per container, scored by policy, decided
in statements and carried to the binder on the placement."""

from __future__ import annotations

import logging
import random

import pytest

from caldera.cache.store import ClusterCache
from caldera.config.conf import parse_conf
from caldera.framework.devices import (
    ASSIGNED_IDS,
    ASSIGNED_NODE,
    ASSIGNED_TIME,
    BIND_PHASE,
    DEVICES_TO_ALLOCATE,
    NODE_REGISTER,
    ContainerRequest,
    Grant,
    format_assignment,
    parse_assignment,
    parse_register,
    pod_requests,
)
from caldera.framework.model import TaskStatus
from caldera.framework.plugin import Action, Arguments, Plugin, Registry
from caldera.framework.session import close_session, open_session
from caldera.hack.scenario import load, node, pod, podgroup
from caldera.plugins.deviceshare import DeviceSharePlugin
from caldera.plugins.predicates import PredicatesPlugin
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop

try:  # the real allocate action, once it has landed
    from caldera.actions.allocate import AllocateAction as _Allocate
except ImportError:  # pragma: no cover - fallback while actions/ is being written
    _Allocate = None


class PlaceEachTask(Action):
    """A minimal allocate: each pending task on its best feasible node, one statement per job."""

    name = "allocate"

    def execute(self, ssn):
        for job in sorted(ssn.jobs.values(), key=ssn.job_key):
            stmt = ssn.statement()
            for task in sorted(job.tasks_in(TaskStatus.PENDING), key=ssn.task_key):
                rows = ssn.feasible_rows(task)
                if len(rows):
                    best = ssn.best_row(task, rows, ssn.node_scores(task, rows))
                    stmt.allocate(task, ssn.node_list[best].name)
            if job.ready_task_num() >= job.min_available:
                stmt.commit()
            else:
                stmt.discard()


AllocateAction = _Allocate or PlaceEachTask


class GangReady(Plugin):
    """Only the gang rule this file needs: a job is ready once min_available of its tasks are placed."""

    name = "gangready"

    def on_session_open(self, ssn):
        ssn.add_job_ready_fn(self.name, lambda job: job.ready_task_num() >= job.min_available)
        ssn.add_job_pipelined_fn(self.name, lambda job: 1 if job.is_pipelined() else -1)


# --- builders ------------------------------------------------------------------------------------


def register(devices):
    """``devices``: (uuid, count, memory, type, healthy, mode) tuples → the node annotation."""
    return (
        ":".join(f"{u},{c},{m},{t},{'true' if h else 'false'},{mode}" for u, c, m, t, h, mode in devices)
        + ":"
    )


def gpu_node(name, devices, **kw):
    """A vGPU node: each device (uuid, count, memory[, type[, healthy]])."""
    full = [
        (d[0], d[1], d[2], d[3] if len(d) > 3 else "NVIDIA-A100", d[4] if len(d) > 4 else True, "hami-core")
        for d in devices
    ]
    extra = {
        "volcano.sh/vgpu-number": str(sum(d[1] for d in full)),
        "volcano.sh/vgpu-memory": str(sum(d[2] for d in full) * 10),
        "volcano.sh/vgpu-cores": str(100 * len(full) * 10),
    }
    return node(name, extra=extra, annotations={NODE_REGISTER: register(full)}, **kw)


def vgpu_pod(name, number=1, memory=None, cores=None, percentage=None, annotations=None, containers=1, **kw):
    limits = {"volcano.sh/vgpu-number": str(number)}
    if memory is not None:
        limits["volcano.sh/vgpu-memory"] = str(memory)
    if cores is not None:
        limits["volcano.sh/vgpu-cores"] = str(cores)
    if percentage is not None:
        limits["volcano.sh/vgpu-memory-percentage"] = str(percentage)
    p = pod(name, group=name, limits=limits, annotations=annotations, **kw)
    if containers > 1:
        spec = p.spec
        import msgspec

        p = msgspec.structs.replace(
            p, spec=msgspec.structs.replace(spec, containers=[spec.containers[0]] * containers)
        )
    return p


def conf_text(policy="binpack", enable=True):
    return (
        "actions: allocate\n"
        "tiers:\n"
        "- plugins:\n"
        "  - name: gangready\n"
        "  - name: predicates\n"
        "  - name: deviceshare\n"
        "    arguments:\n"
        f"      deviceshare.VGPUEnable: {'true' if enable else 'false'}\n"
        f"      deviceshare.SchedulePolicy: {policy}\n"
    )


def make_registry():
    registry = Registry()
    registry.register_action(AllocateAction)
    registry.register_plugin(GangReady)
    registry.register_plugin(PredicatesPlugin)
    registry.register_plugin(DeviceSharePlugin)
    return registry


def make_loop(cache, policy="binpack", enable=True):
    registry = make_registry()
    conf = parse_conf(conf_text(policy, enable), registry)
    binder = RecordingBinder()
    return SchedulerLoop(cache, lambda: conf, registry, binder, period=0.01), binder


def submit(cache, *pods):
    for p in pods:
        cache.upsert_podgroup(podgroup(p.metadata.annotations["scheduling.k8s.io/group-name"], min_member=1))
        cache.upsert_pod(p)


def bind_like_the_binder(cache, placement, phase="Running"):
    """What the binder and the kubelet do: the annotations, then the node, then the phase, back through the watch."""
    import msgspec

    p = placement.task.pod
    meta = msgspec.structs.replace(
        p.metadata, annotations={**p.metadata.annotations, **placement.annotations}
    )
    spec = msgspec.structs.replace(p.spec, node_name=placement.node)
    status = msgspec.structs.replace(p.status, phase=phase)
    bound = msgspec.structs.replace(p, metadata=meta, spec=spec, status=status)
    cache.upsert_pod(bound)
    return bound


def device_table(nodes):
    """Independent of the plugin: node → uuid → (count, memory, healthy, type) from the builders' input."""
    return {
        n.metadata.name: {
            e.split(",")[0]: (
                int(e.split(",")[1]),
                int(e.split(",")[2]),
                e.split(",")[4] == "true",
                e.split(",")[3],
            )
            for e in n.metadata.annotations[NODE_REGISTER].split(":")
            if e
        }
        for n in nodes
    }


def grants_of(annotation):
    """Independent decoder of the assignment annotation: per container, [(uuid, type, mem, cores)]."""
    out = []
    for container in annotation.split(";"):
        out.append([tuple(e.split(",")) for e in container.split(":") if e])
    return [[(u, t, int(m), int(c)) for u, t, m, c in container] for container in out]


# --- the wire format -------------------------------------------------------------------------------


def test_register_annotation_is_parsed_in_order():
    text = "GPU-a,10,40960,NVIDIA-A100,true,hami-core:GPU-b,4,16384,NVIDIA-T4,false,mig:"
    devices = parse_register("n1", text)
    assert [(d.uuid, d.count, d.memory, d.type, d.healthy, d.mode) for d in devices] == [
        ("GPU-a", 10, 40960, "NVIDIA-A100", True, "hami-core"),
        ("GPU-b", 4, 16384, "NVIDIA-T4", False, "mig"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "GPU-a,10,40960,NVIDIA,true:",  # five fields
        "GPU-a,ten,40960,NVIDIA,true,hami-core:",  # count not a number
        "GPU-a,10,40960,NVIDIA,maybe,hami-core:",  # health not a boolean
        "GPU-a,10,40960,NVIDIA,true,hami-core:GPU-a,10,40960,NVIDIA,true,hami-core:",  # duplicate
        ",10,40960,NVIDIA,true,hami-core:",  # no uuid
    ],
)
def test_a_malformed_register_annotation_gives_the_node_no_devices_and_a_log_line(text, caplog):
    with caplog.at_level(logging.WARNING, logger="caldera.plugins.deviceshare"):
        assert parse_register("bad-node", text) == ()
    assert any("bad-node" in r.getMessage() for r in caplog.records)


def test_assignment_format_round_trips_and_matches_volcano_layout():
    rng = random.Random(7)
    for _ in range(200):
        assignment = tuple(
            tuple(
                Grant(f"GPU-{rng.randrange(1000)}", "NVIDIA", rng.randrange(0, 80000), rng.randrange(0, 101))
                for _ in range(rng.randrange(1, 4))
            )
            for _ in range(rng.randrange(1, 4))
        )
        text = format_assignment(assignment)
        assert parse_assignment(text) == assignment
        expected = ";".join(
            "".join(f"{g.uuid},{g.type},{g.memory},{g.cores}:" for g in c) for c in assignment
        )
        assert text == expected
        assert grants_of(text) == [[(g.uuid, g.type, g.memory, g.cores) for g in c] for c in assignment]


def test_pod_requests_read_container_limits():
    p = vgpu_pod("p", number=2, memory=3000, cores=30)
    assert pod_requests(p) == (ContainerRequest(number=2, memory=3000, percentage=None, cores=30),)
    assert pod_requests(vgpu_pod("q", percentage=50)) == (ContainerRequest(1, 0, 50, 0),)
    assert pod_requests(pod("plain", extra={"nvidia.com/gpu": "1"})) == ()


# --- scheduling ------------------------------------------------------------------------------------


def test_a_vgpu_pod_gets_devices_written_on_its_placement():
    nodes = [node("plain"), gpu_node("g1", [("GPU-1", 10, 40000), ("GPU-2", 10, 40000)])]
    cache = load(ClusterCache(), nodes=nodes)
    p = vgpu_pod("p", number=2, memory=8000, cores=25)
    submit(cache, p)
    loop, binder = make_loop(cache)
    loop.run_once()
    assert len(binder.placements) == 1
    placement = binder.placements[0]
    assert placement.node == "g1"
    ann = placement.annotations
    assert ann[ASSIGNED_IDS] == ann[DEVICES_TO_ALLOCATE]
    assert ann[ASSIGNED_NODE] == "g1"
    assert ann[BIND_PHASE] == "allocating"
    assert ann[ASSIGNED_TIME].isdigit()
    (container,) = grants_of(ann[ASSIGNED_IDS])
    assert sorted(g[0] for g in container) == ["GPU-1", "GPU-2"]  # two distinct devices
    assert all(g[1:] == ("NVIDIA", 8000, 25) for g in container)


def test_a_pod_without_vgpu_is_untouched_and_plain_gpus_still_work():
    nodes = [
        node("cpu-only"),
        node("gpus", extra={"nvidia.com/gpu": "4"}),
        gpu_node("g1", [("GPU-1", 10, 40000)]),
    ]
    cache = load(ClusterCache(), nodes=nodes)
    submit(cache, pod("train", group="train", extra={"nvidia.com/gpu": "2"}, limits={"nvidia.com/gpu": "2"}))
    loop, binder = make_loop(cache)
    loop.run_once()
    assert [(p.task.name, p.node, p.annotations) for p in binder.placements] == [("train", "gpus", {})]


def test_a_vgpu_pod_fits_nowhere_without_devices_and_the_plugin_off_places_nothing_vgpu():
    cache = load(ClusterCache(), nodes=[node("plain", extra={"volcano.sh/vgpu-number": "10"})])
    submit(cache, vgpu_pod("p", memory=1000))
    loop, binder = make_loop(cache)
    loop.run_once()
    assert binder.placements == []


def test_a_malformed_node_is_skipped_not_fatal():
    bad = node("bad", extra={"volcano.sh/vgpu-number": "10"}, annotations={NODE_REGISTER: "GPU-x,1:"})
    good = gpu_node("good", [("GPU-1", 10, 40000)])
    cache = load(ClusterCache(), nodes=[bad, good])
    submit(cache, vgpu_pod("p", memory=1000))
    loop, binder = make_loop(cache)
    loop.run_once()
    assert loop.stats.failed == 0
    assert [p.node for p in binder.placements] == ["good"]


def test_unhealthy_devices_type_and_uuid_filters_are_honoured():
    nodes = [
        gpu_node(
            "g1",
            [
                ("GPU-sick", 10, 40000, "NVIDIA-A100", False),
                ("GPU-t4", 10, 16000, "NVIDIA-T4"),
                ("GPU-a100", 10, 40000, "NVIDIA-A100"),
                ("GPU-h100", 10, 80000, "NVIDIA-H100"),
            ],
        )
    ]
    cases = {
        "any": ({}, {"GPU-t4", "GPU-a100", "GPU-h100"}),
        "t4-only": ({"nvidia.com/use-gputype": "t4"}, {"GPU-t4"}),
        "no-a100": ({"nvidia.com/nouse-gputype": "A100,H100"}, {"GPU-t4"}),
        "by-uuid": ({"volcano.sh/vgpu-use-gpuuuid": "GPU-sick,GPU-h100"}, {"GPU-h100"}),
        "not-uuid": ({"volcano.sh/vgpu-nouse-gpuuuid": "GPU-t4,GPU-a100"}, {"GPU-h100"}),
    }
    for name, (filters, allowed) in cases.items():
        cache = load(ClusterCache(), nodes=nodes)
        submit(cache, vgpu_pod(name, memory=1000, annotations=filters))
        loop, binder = make_loop(cache)
        loop.run_once()
        (placement,) = binder.placements
        (container,) = grants_of(placement.annotations[ASSIGNED_IDS])
        assert {g[0] for g in container} <= allowed, name
    # asking for more matching devices than exist fits nowhere
    cache = load(ClusterCache(), nodes=nodes)
    submit(cache, vgpu_pod("two-t4", number=2, memory=1000, annotations={"nvidia.com/use-gputype": "T4"}))
    loop, binder = make_loop(cache)
    loop.run_once()
    assert binder.placements == []


def _check_capacity(devices, holders):
    """Independent capacity check: per device, memory and cores within the card, grants within count,
    and distinct devices within each container."""
    per_dev: dict[tuple[str, str], list[int]] = {}
    for node_name, annotation in holders:
        for container in grants_of(annotation):
            uuids = [g[0] for g in container]
            assert len(uuids) == len(set(uuids)), "a container got the same device twice"
            for uuid, _, mem, cores in container:
                acc = per_dev.setdefault((node_name, uuid), [0, 0, 0])
                acc[0] += mem
                acc[1] += cores
                acc[2] += 1
    for (node_name, uuid), (mem, cores, grants) in per_dev.items():
        count, memory, healthy, _ = devices[node_name][uuid]
        assert healthy
        assert mem <= memory, (node_name, uuid, mem, memory)
        assert cores <= 100, (node_name, uuid, cores)
        assert grants <= count
    return per_dev


def test_pods_never_exceed_a_cards_memory_or_cores_in_one_cycle_or_across_cycles():
    rng = random.Random(11)
    nodes = [
        gpu_node(
            f"g{i}", [(f"GPU-{i}-{d}", rng.choice([2, 4, 10]), rng.choice([16000, 40000])) for d in range(3)]
        )
        for i in range(3)
    ]
    devices = device_table(nodes)
    cache = load(ClusterCache(), nodes=nodes)
    loop, binder = make_loop(cache, policy=rng.choice(["binpack", "spread"]))
    holders = []
    for cycle in range(6):
        batch = [
            vgpu_pod(
                f"c{cycle}-p{i}",
                number=rng.choice([1, 1, 2]),
                memory=rng.choice([2000, 7000, 15000]) if rng.random() < 0.9 else None,
                percentage=None,
                cores=rng.choice([None, 10, 30, 50, 100]),
                containers=rng.choice([1, 1, 2]),
            )
            for i in range(12)
        ]
        submit(cache, *batch)
        before = len(binder.placements)
        loop.run_once()
        new = binder.placements[before:]
        # half of the cycles' binds come back through the watch before the next cycle, half do not yet
        for placement in new:
            holders.append((placement.node, placement.annotations[ASSIGNED_IDS]))
            if cycle % 2 == 0:
                bind_like_the_binder(cache, placement)
        per_dev = _check_capacity(devices, holders)
    assert len(holders) > 12  # the cluster took a good part of the load
    assert max(grants for _, _, grants in per_dev.values()) >= 3  # and cards really were shared


def test_binpack_fills_a_used_card_and_spread_takes_an_empty_one():
    used = vgpu_pod("old", memory=20000, node_name="g1", phase="Running")
    import msgspec

    annotation = "GPU-1,NVIDIA,20000,0:"
    used = msgspec.structs.replace(
        used,
        metadata=msgspec.structs.replace(
            used.metadata, annotations={**used.metadata.annotations, ASSIGNED_IDS: annotation}
        ),
    )
    nodes = [
        gpu_node("g1", [("GPU-1", 10, 40000), ("GPU-2", 10, 40000)]),
        gpu_node("g2", [("GPU-3", 10, 40000)]),
    ]
    for policy, expect in (("binpack", ("g1", "GPU-1")), ("spread", None)):
        cache = load(ClusterCache(), nodes=nodes)
        submit(cache, used)
        submit(cache, vgpu_pod("new", memory=5000))
        loop, binder = make_loop(cache, policy=policy)
        loop.run_once()
        (placement,) = binder.placements
        (container,) = grants_of(placement.annotations[ASSIGNED_IDS])
        if expect is not None:
            assert (placement.node, container[0][0]) == expect
        else:
            assert container[0][0] != "GPU-1"  # spread: an empty card


def test_a_discarded_gang_gives_its_devices_back_and_drops_its_annotations():
    nodes = [gpu_node("g1", [("GPU-1", 10, 10000)])]
    cache = load(ClusterCache(), nodes=nodes)
    # a gang of 3 pods needing 4000 MiB each: only two fit, so the gang is discarded
    cache.upsert_podgroup(podgroup("gang", min_member=3))
    gang_pods = [
        pod(
            f"gang-{i}",
            group="gang",
            limits={"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "4000"},
        )
        for i in range(3)
    ]
    for p in gang_pods:
        cache.upsert_pod(p)
    solo = vgpu_pod("solo", memory=10000)  # needs the whole card: fits only if the gang gave it back
    submit(cache, solo)
    registry = make_registry()
    conf = parse_conf(conf_text(), registry)
    ssn = open_session(cache.snapshot(), conf.tiers, registry.plugins, conf.configurations)
    registry.actions["allocate"](Arguments("allocate")).execute(ssn)
    result = close_session(ssn)
    assert [p.task.name for p in result.placements] == ["solo"]
    assert not any(uid != result.placements[0].task.uid for uid in ssn.task_annotations)
    plugin = ssn.plugins["deviceshare"]
    usage = plugin.states["g1"].usage["GPU-1"]
    assert (usage.memory, usage.grants) == (10000, 1)


def test_a_restarted_scheduler_rebuilds_device_usage_from_the_pods_annotations():
    rng = random.Random(5)
    nodes = [gpu_node(f"g{i}", [(f"GPU-{i}-{d}", 10, 40000) for d in range(2)]) for i in range(2)]
    cache = load(ClusterCache(), nodes=nodes)
    loop, binder = make_loop(cache)
    for i in range(8):
        submit(cache, vgpu_pod(f"p{i}", memory=rng.choice([3000, 9000]), cores=rng.choice([5, 20])))
    loop.run_once()
    bound = [bind_like_the_binder(cache, p) for p in binder.placements]
    assert len(bound) == 8

    # a new process: a fresh cache listing the same objects
    fresh = load(ClusterCache(), nodes=nodes)
    for p in bound:
        submit(fresh, p)
    registry = make_registry()
    conf = parse_conf(conf_text(), registry)
    ssn = open_session(fresh.snapshot(), conf.tiers, registry.plugins, conf.configurations)
    plugin = ssn.plugins["deviceshare"]
    expected: dict[tuple[str, str], list[int]] = {}
    for p in bound:
        for container in grants_of(p.metadata.annotations[ASSIGNED_IDS]):
            for uuid, _, mem, cores in container:
                acc = expected.setdefault((p.spec.node_name, uuid), [0, 0, 0])
                acc[0] += mem
                acc[1] += cores
                acc[2] += 1
    for node_name, state in plugin.states.items():
        for uuid, usage in state.usage.items():
            assert [usage.memory, usage.cores, usage.grants] == expected.get((node_name, uuid), [0, 0, 0])
    close_session(ssn)


def test_pods_that_ended_free_their_devices():
    nodes = [gpu_node("g1", [("GPU-1", 10, 10000)])]
    cache = load(ClusterCache(), nodes=nodes)
    loop, binder = make_loop(cache)
    submit(cache, vgpu_pod("first", memory=10000))
    loop.run_once()
    (placement,) = binder.placements
    bind_like_the_binder(cache, placement, phase="Succeeded")
    submit(cache, vgpu_pod("second", memory=10000))
    loop.run_once()
    assert [p.task.name for p in binder.placements] == ["first", "second"]


def test_an_eviction_frees_the_victims_devices_in_the_session_and_undoing_it_takes_them_back():
    nodes = [gpu_node("g1", [("GPU-1", 10, 10000)])]
    cache = load(ClusterCache(), nodes=nodes)
    loop, binder = make_loop(cache)
    submit(cache, vgpu_pod("victim", memory=8000, cores=40))
    loop.run_once()
    bind_like_the_binder(cache, binder.placements[0])
    registry = make_registry()
    conf = parse_conf(conf_text(), registry)
    ssn = open_session(cache.snapshot(), conf.tiers, registry.plugins, conf.configurations)
    plugin = ssn.plugins["deviceshare"]
    usage = plugin.states["g1"].usage["GPU-1"]
    assert (usage.memory, usage.cores, usage.grants) == (8000, 40, 1)
    victim = next(t for j in ssn.jobs.values() for t in j.tasks.values() if t.name == "victim")
    stmt = ssn.statement()
    stmt.evict(victim, "preempted")
    assert (usage.memory, usage.cores, usage.grants) == (0, 0, 0)
    stmt.discard()
    assert (usage.memory, usage.cores, usage.grants) == (8000, 40, 1)
    close_session(ssn)
