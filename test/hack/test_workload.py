"""Workload generators: reproducible by seed, shaped as the issue asks, and executed against a simulated
cluster so that the API holds what the plan says and finished pods turn over."""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest

from caldera.framework.model import GROUP_NAME_ANNOTATION
from caldera.hack.sim import SimCluster
from caldera.hack.sim.quantity import parse_quantity
from caldera.hack.workload.client import Api, pods_path
from caldera.hack.workload.executor import Executor
from caldera.hack.workload.generators import (
    DEFAULT_MIX,
    DRA_TEMPLATE,
    HIGH_PRIORITY_CLASS,
    BestEffort,
    Deployments,
    GangJobs,
    MixEntry,
    NodeChurn,
    OversubscribedQueues,
    make_generators,
    parse_mix,
)
from caldera.hack.workload.manifests import RUN_SECONDS
from caldera.hack.workload.plan import Action, ClusterShape, build_plan


def plan_of(mix: dict[str, MixEntry], seed: int, duration: float = 120.0) -> list[Action]:
    return build_plan(make_generators(mix, duration), seed)


def fingerprint(plan: list[Action]) -> list[tuple[float, str, str, tuple[str, ...], int]]:
    return [
        (round(a.at, 6), a.op, a.target, tuple(o["metadata"]["name"] for o in a.objects), a.value)
        for a in plan
    ]


def test_same_seed_same_plan_other_seed_other_plan() -> None:
    a, b, c = plan_of(DEFAULT_MIX, 7), plan_of(DEFAULT_MIX, 7), plan_of(DEFAULT_MIX, 8)
    assert fingerprint(a) == fingerprint(b)
    assert a[5].objects == b[5].objects
    assert fingerprint(a) != fingerprint(c)


def test_adding_a_generator_leaves_the_others_unchanged() -> None:
    alone = plan_of({"gang": 0.5}, 3)
    mixed = [x for x in plan_of({"gang": 0.5, "vgpu": 2.0}, 3) if x.workload == "gang"]
    assert fingerprint(alone) == fingerprint(mixed)


def test_every_generator_in_the_default_mix_produces_actions() -> None:
    plan = plan_of(DEFAULT_MIX, 1, duration=300)
    assert {a.workload for a in plan} == set(DEFAULT_MIX)
    assert plan == sorted(plan, key=lambda a: (a.at, a.workload))


def test_arrivals_follow_the_rate_and_stay_in_the_window() -> None:
    gen = BestEffort(rate=2.0, duration=500.0, start=10.0)
    times = list(gen.times(random.Random(1)))
    assert all(10.0 < t < 510.0 for t in times)
    assert 850 < len(times) < 1150  # Poisson, 1,000 expected


def test_gangs_have_min_member_2_to_256_and_every_pod_names_its_group() -> None:
    plan = GangJobs(rate=5.0, duration=200.0).plan(random.Random(2), ClusterShape())
    sizes, gpu = set(), 0
    for a in plan:
        (pg,) = [o for o in a.objects if o["kind"] == "PodGroup"]
        pods = a.pods()
        mm = pg["spec"]["minMember"]
        assert 2 <= mm <= 256 and len(pods) == mm
        sizes.add(mm)
        for p in pods:
            assert p["metadata"]["annotations"][GROUP_NAME_ANNOTATION] == pg["metadata"]["name"]
            assert float(p["metadata"]["annotations"][RUN_SECONDS]) > 0
        requests = pods[0]["spec"]["containers"][0]["resources"]["requests"]
        assert {"cpu", "memory"} <= set(requests)
        gpu += "nvidia.com/gpu" in requests
    assert min(sizes) == 2 and max(sizes) == 256
    assert 0 < gpu < len(plan)


def test_mpi_jobs_require_one_infiniband_group() -> None:
    plan = plan_of({"mpi": 1.0}, 4, duration=60)
    assert plan
    for a in plan:
        (pg,) = [o for o in a.objects if o["kind"] == "PodGroup"]
        assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
        assert pg["spec"]["minMember"] == len(a.pods())


def test_high_priority_jobs_use_a_high_priority_class() -> None:
    plan = plan_of({"preempt": 1.0}, 5, duration=30)
    setup = [a for a in plan if a.op == "setup"]
    assert setup[0].objects[0]["metadata"]["name"] == HIGH_PRIORITY_CLASS
    jobs = [a for a in plan if a.op == "submit"]
    assert jobs
    for a in jobs:
        assert all(p["spec"]["priorityClassName"] == HIGH_PRIORITY_CLASS for p in a.pods())


def test_deployments_flip_between_zero_and_one_quickly() -> None:
    plan = Deployments(rate=2.0, duration=100.0, flip_fraction=0.5).plan(random.Random(6), ClusterShape())
    scales = [a for a in plan if a.op == "scale"]
    flips = [
        (a, b)
        for a, b in itertools.pairwise(scales)
        if a.value == 0 and b.value == 1 and a.target == b.target and b.at - a.at < 0.31
    ]
    assert len(flips) > 10
    assert any(a.value > 1 for a in scales) and any(a.value == 0 for a in scales)


def test_vgpu_pods_ask_for_random_slices() -> None:
    plan = plan_of({"vgpu": 2.0}, 9, duration=60)
    memories = {
        a.pods()[0]["spec"]["containers"][0]["resources"]["limits"]["volcano.sh/vgpu-memory"] for a in plan
    }
    assert len(memories) >= 3


def test_queue_guarantees_exceed_the_cluster() -> None:
    shape = ClusterShape(nodes=40, cpu_per_node=32)
    gen = OversubscribedQueues(rate=0.5, duration=30.0)
    plan = gen.plan(random.Random(1), shape)
    queues = plan[0].objects
    total = sum(parse_quantity(q["spec"]["guarantee"]["resource"]["cpu"]) for q in queues)
    assert total > shape.nodes * shape.cpu_per_node
    used = {a.objects[0]["spec"]["queue"] for a in plan[1:]}
    assert used <= set(gen.queue_names()) and used


def test_node_churn_only_deletes_nodes_it_added() -> None:
    plan = NodeChurn(rate=3.0, duration=100.0).plan(random.Random(3), ClusterShape())
    added: set[str] = set()
    ops = {a.op for a in plan}
    assert {"add-node", "cordon", "delete-node"} <= ops
    for a in plan:
        if a.op == "add-node":
            added.add(a.target)
        elif a.op in ("cordon", "uncordon", "delete-node"):
            assert a.target in added
            if a.op == "delete-node":
                added.discard(a.target)


def test_parse_mix() -> None:
    assert parse_mix("default*2")["gang"] == DEFAULT_MIX["gang"] * 2
    assert parse_mix("gang=0.5,vgpu=1") == {"gang": 0.5, "vgpu": 1.0}
    assert parse_mix("churn=2@30+10") == {"churn": (2.0, 30.0, 10.0)}
    (churn,) = make_generators(parse_mix("churn=2@30+10"), 100.0)
    assert (churn.rate, churn.duration, churn.start) == (2.0, 30.0, 10.0)
    times = [a.at for a in churn.plan(random.Random(1), ClusterShape())]
    assert times and all(10.0 < t < 40.0 for t in times)
    with pytest.raises(ValueError, match="unknown generator"):
        make_generators({"nope": 1.0}, 10)


async def test_executor_creates_the_plan_and_the_cluster_turns_over() -> None:
    """Against a simulated cluster: every planned object shows up (PodGroups before their pods), scaling
    and node churn reach the API, and once pods are bound and run, the janitor deletes finished pods and
    the PodGroups they leave empty."""
    mix = {"gang": 1.0, "besteffort": 2.0, "deploy": 1.0, "churn": 1.0}
    plan = build_plan(make_generators(mix, 4.0), 11, ClusterShape(nodes=4))
    for a in plan:  # short jobs so that they finish during the test
        for o in a.pods():
            o["metadata"]["annotations"][RUN_SECONDS] = "0.3"
    async with SimCluster(
        nodes=4, node_cpu="512", node_memory="4Ti", node_pods=500, kubelet_delay=0.05
    ) as sim:
        async with Api(sim.url, sim.token) as api:
            ex = Executor(api, plan, "soak", janitor_interval=0.5)
            stop = asyncio.Event()
            binder = asyncio.create_task(bind_everything(api, stop))
            stats = await ex.run()
            planned_pods = [p["metadata"]["name"] for a in plan for p in a.pods()]
            assert stats.submitted_pods == len(planned_pods) and stats.errors == 0
            # turnover: everything the plan submitted is run, finished and deleted, groups with it
            for _ in range(100):
                await ex.janitor_pass()
                left = {p["metadata"]["name"] for p in sim.objects("pods", "soak")}
                if not left & set(planned_pods):
                    break
                await asyncio.sleep(0.1)
            stop.set()
            await binder
            assert not left & set(planned_pods)
            planned_groups = {
                o["metadata"]["name"] for a in plan for o in a.objects if o["kind"] == "PodGroup"
            }
            assert planned_groups
            groups_left = {
                g["metadata"]["name"] for g in sim.objects("podgroups", "soak", group="scheduling.volcano.sh")
            }
            assert not groups_left & planned_groups
            assert stats.deleted_pods >= len(planned_pods)
            # node churn reached the API
            added = {a.target for a in plan if a.op == "add-node"}
            deleted = {a.target for a in plan if a.op == "delete-node"}
            nodes = {n["metadata"]["name"] for n in sim.objects("nodes")}
            assert added - deleted <= nodes and not (deleted & nodes)
            # the last scale of each Deployment is its spec
            last = {a.target: a.value for a in plan if a.op == "scale"}
            for d in sim.objects("deployments", "soak", group="apps"):
                if d["metadata"]["name"] in last:
                    assert d["spec"]["replicas"] == last[d["metadata"]["name"]]


async def bind_everything(api: Api, stop: asyncio.Event) -> None:
    """A stand-in scheduler for the executor test: bind every pending pod to the first node."""
    while not stop.is_set():
        pods, _ = await api.list(pods_path("soak"), fieldSelector="spec.nodeName=")
        nodes, _ = await api.list("/api/v1/nodes")
        ready = [n["metadata"]["name"] for n in nodes if not (n.get("spec") or {}).get("unschedulable")]
        for p in pods:
            if ready and not p["metadata"].get("deletionTimestamp"):
                name = p["metadata"]["name"]
                await api.request(
                    "POST",
                    f"{pods_path('soak')}/{name}/binding",
                    {
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": name},
                        "target": {"kind": "Node", "name": "node-0"},
                    },
                )
        await asyncio.sleep(0.1)


def test_native_gang_fraction_emits_kubernetes_own_podgroups_and_leaves_plans_alone_at_zero() -> None:
    mix: dict[str, MixEntry] = {"gang": 1.0, "mpi": 0.5, "preempt": 0.2}
    assert fingerprint(build_plan(make_generators(mix, 60.0, native_fraction=0.0), 5)) == fingerprint(
        plan_of(mix, 5, duration=60.0)
    )
    plan = build_plan(make_generators(mix, 60.0, native_fraction=1.0), 5)
    submits = [a for a in plan if a.op == "submit"]
    assert submits
    for action in submits:
        (group,) = [o for o in action.objects if o["kind"] == "PodGroup"]
        assert group["apiVersion"] == "scheduling.k8s.io/v1alpha2"
        pods = action.pods()
        assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": len(pods)}}
        for p in pods:
            assert p["spec"]["schedulingGroup"] == {"podGroupName": group["metadata"]["name"]}
            assert GROUP_NAME_ANNOTATION not in p["metadata"]["annotations"]
        if action.workload == "mpi":  # one InfiniBand group: a topology key on the group
            assert group["spec"]["schedulingConstraints"] == {
                "topology": [{"key": "sim.caldera.io/ib-group"}]
            }
    with pytest.raises(ValueError, match=r"within 0\.\.1"):
        make_generators(mix, 10.0, native_fraction=1.5)


async def test_the_executor_creates_native_gangs_and_the_janitor_deletes_their_groups() -> None:
    plan = build_plan(make_generators({"gang": 2.0}, 2.0, native_fraction=1.0), 3, ClusterShape(nodes=2))
    for a in plan:
        for o in a.pods():
            o["metadata"]["annotations"][RUN_SECONDS] = "0.2"
    async with SimCluster(
        nodes=2, node_cpu="2048", node_memory="16Ti", node_pods=2000, kubelet_delay=0.05, native_gang=True
    ) as sim:
        async with Api(sim.url, sim.token) as api:
            ex = Executor(api, plan, "soak", janitor_interval=0.5)
            stop = asyncio.Event()
            binder = asyncio.create_task(bind_everything(api, stop))
            stats = await ex.run()
            assert stats.errors == 0
            planned = {o["metadata"]["name"] for a in plan for o in a.objects if o["kind"] == "PodGroup"}
            for _ in range(100):
                await ex.janitor_pass()
                left = {
                    g["metadata"]["name"] for g in sim.objects("podgroups", "soak", group="scheduling.k8s.io")
                }
                if not left & planned:
                    break
                await asyncio.sleep(0.1)
            stop.set()
            await binder
            assert planned and not left & planned
            assert stats.deleted_groups == len(planned)


def test_dra_jobs_publish_devices_and_claim_them() -> None:
    """The `dra` generator: a DeviceClass, one ResourceSlice of GPUs per DRA node of the cluster and the
    claim template first; then gangs whose every pod uses a claim, from the template or one the gang shares
    (submitted with it, before its pods)."""
    shape = ClusterShape(dra_nodes=("dra-0", "dra-1"), dra_devices=4)
    plan = build_plan(make_generators({"dra": 2.0}, 60.0), 5, shape)
    setup, *jobs = plan
    assert setup.op == "setup"
    kinds = [o["kind"] for o in setup.objects]
    assert kinds == ["DeviceClass", "ResourceSlice", "ResourceSlice", "ResourceClaimTemplate"]
    slices = [o for o in setup.objects if o["kind"] == "ResourceSlice"]
    assert [s["spec"]["nodeName"] for s in slices] == ["dra-0", "dra-1"]
    assert all(len(s["spec"]["devices"]) == 4 for s in slices)
    assert len(jobs) > 60 and all(a.op == "submit" for a in jobs)
    shared = templated = 0
    for a in jobs:
        claims = {o["metadata"]["name"] for o in a.objects if o["kind"] == "ResourceClaim"}
        if claims:
            assert [o["kind"] for o in a.objects][: len(claims) + 1] == ["ResourceClaim", "PodGroup"]
        for p in a.pods():
            (entry,) = p["spec"]["resourceClaims"]
            assert p["spec"]["containers"][0]["resources"]["claims"] == [{"name": entry["name"]}]
            if "resourceClaimName" in entry:
                assert entry["resourceClaimName"] in claims
                shared += 1
            else:
                assert entry["resourceClaimTemplateName"] == DRA_TEMPLATE
                templated += 1
    assert shared and templated


async def test_executor_creates_dra_objects_and_deletes_a_gangs_shared_claim_with_it() -> None:
    """Against a simulated cluster: the DRA objects are created, the resourceclaim controller makes a claim
    for each pod naming the template, and once a gang's pods are deleted the claim it shared goes too."""
    plan = build_plan(make_generators({"dra": 4.0}, 2.0), 3, ClusterShape(dra_nodes=("node-0",)))
    for a in plan:
        for o in a.pods():
            o["metadata"]["annotations"][RUN_SECONDS] = "0.2"
    shared = {o["metadata"]["name"] for a in plan for o in a.objects if o["kind"] == "ResourceClaim"}
    templated = sum("resourceClaimTemplateName" in str(p["spec"]) for a in plan for p in a.pods())
    assert shared and templated
    async with SimCluster(nodes=1, node_cpu="512", node_memory="4Ti", kubelet_delay=0.05) as sim:
        async with Api(sim.url, sim.token) as api:
            ex = Executor(api, plan, "soak", janitor_interval=0.3)
            stats = await ex.run()
            assert stats.errors == 0
            assert [
                s["spec"]["nodeName"] for s in sim.objects("resourceslices", group="resource.k8s.io")
            ] == ["node-0"]
            for _ in range(50):  # the controller works in the background
                made = [
                    c
                    for c in sim.objects("resourceclaims", "soak", group="resource.k8s.io")
                    if c["metadata"]["name"] not in shared
                ]
                if len(made) >= templated:
                    break
                await asyncio.sleep(0.1)
            assert len(made) == templated, "one claim per pod naming the template"
            stop = asyncio.Event()
            binder = asyncio.create_task(bind_everything(api, stop))
            for _ in range(100):
                await ex.janitor_pass()
                left = {
                    c["metadata"]["name"]
                    for c in sim.objects("resourceclaims", "soak", group="resource.k8s.io")
                }
                if not left & shared:
                    break
                await asyncio.sleep(0.1)
            stop.set()
            await binder
            assert not left & shared
