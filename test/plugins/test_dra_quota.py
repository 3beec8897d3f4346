"""Queue quota of DRA devices (capacity.DynamicResourceAllocationEnable, plugins/dra_quota.py): a
queue whose capability names ``deviceclass/<class>: 2`` holds at most two devices of that class."""

from __future__ import annotations

from caldera.hack.scenario import (
    InProcessCluster,
    claim_pod_spec,
    cluster,
    device_class,
    node,
    pod,
    podgroup,
    queue,
    resource_claim,
    resource_slice,
    run_session,
)
from caldera.plugins.dra_quota import claim_devices, device_class_quota

GPU = "gpu.example.com"

CAPACITY = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: predicates
  - name: capacity
    arguments:
      capacity.DynamicResourceAllocationEnable: {on}
  - name: nodeorder
"""


def claim_pods(
    n: int, queue_name: str = "team", phase: str = "Inqueue"
) -> tuple[list[object], list[object], list[object]]:
    pods = [pod(f"p{i}", group=f"p{i}", spec_extra=claim_pod_spec(f"c{i}")) for i in range(n)]
    # (Volcano's enqueue asks the plugins only about jobs with minResources)
    groups = [podgroup(f"p{i}", queue=queue_name, phase=phase, min_resources={"cpu": "1"}) for i in range(n)]
    return pods, groups, [resource_claim(f"c{i}", GPU) for i in range(n)]


def devices() -> list[object]:
    return [device_class(GPU), resource_slice("n1", GPU, [f"gpu-{i}" for i in range(4)])]


def team(**kw: object) -> object:
    return queue("team", capability={"cpu": "100", "memory": "100Gi", f"deviceclass/{GPU}": "2"}, **kw)  # type: ignore[arg-type]


def test_quota_keys_and_claim_counts_are_read_as_volcano_reads_them() -> None:
    assert device_class_quota(
        {f"deviceclass/{GPU}": "2", "cpu": "4", f"memory.deviceclass/{GPU}": "8Gi"}, consumable=False
    ) == {GPU: 2}
    assert device_class_quota({f"deviceclass/{GPU}": "2", f"memory.deviceclass/{GPU}": "8Gi"}) == {
        GPU: 2,
        f"memory.deviceclass/{GPU}": 8 * 2**30,
    }
    assert claim_devices(resource_claim("c", GPU, count=3)) == {GPU: 3}
    # the design's logical total: two devices with 8Gi each take 16Gi of the dimension
    assert claim_devices(resource_claim("c", GPU, count=2, capacity={"memory": "8Gi"}), consumable=True) == {
        GPU: 2,
        f"memory.deviceclass/{GPU}": 16 * 2**30,
    }


def test_a_queue_with_two_devices_of_quota_admits_two_pods_and_holds_the_third() -> None:
    # let in already (Inqueue): allocate stops at the quota
    pods, groups, claims = claim_pods(3)
    snap = cluster(
        nodes=[node("n1", cpu="16")], pods=pods, podgroups=groups, queues=[team()], dra=[*devices(), *claims]
    )
    _, result = run_session(snap, CAPACITY.format(on="true"))
    assert len(result.placements) == 2
    # still Pending: enqueue lets two in and holds the third, with the reason
    pods, groups, claims = claim_pods(3, phase="Pending")
    snap = cluster(
        nodes=[node("n1", cpu="16")], pods=pods, podgroups=groups, queues=[team()], dra=[*devices(), *claims]
    )
    ssn, result = run_session(snap, CAPACITY.format(on="true"))
    assert len(result.placements) == 2
    [held] = [j for j in ssn.jobs.values() if not any(p.task.job == j.uid for p in result.placements)]
    assert held.phase == "Pending"
    assert (
        held.job_fit_error
        == f"queue team device quota insufficient: deviceclass/{GPU} 2 in use + 1 requested > 2"
    )


def test_with_the_option_false_device_quota_is_not_enforced() -> None:
    pods, groups, claims = claim_pods(3)
    snap = cluster(
        nodes=[node("n1", cpu="16")], pods=pods, podgroups=groups, queues=[team()], dra=[*devices(), *claims]
    )
    _, result = run_session(snap, CAPACITY.format(on="false"))
    assert len(result.placements) == 3


def test_devices_held_by_running_pods_count_and_a_shared_claim_counts_once() -> None:
    running = pod("r", group="r", node_name="n1", phase="Running", spec_extra=claim_pod_spec("shared"))
    sharer = pod("s", group="s", spec_extra=claim_pod_spec("shared"))
    newcomer = pod("p", group="p", spec_extra=claim_pod_spec("c-new"))
    held = {
        "allocation": {
            "devices": {"results": [{"request": "req", "driver": GPU, "pool": "n1", "device": "gpu-0"}]}
        },
        "reservedFor": [{"resource": "pods", "name": "r", "uid": running.metadata.uid}],
    }
    snap = cluster(
        nodes=[node("n1", cpu="16")],
        pods=[running, sharer, newcomer],
        podgroups=[podgroup(n, queue="team") for n in ("r", "s", "p")],
        queues=[queue("team", capability={"cpu": "100", "memory": "100Gi", f"deviceclass/{GPU}": "1"})],
        dra=[*devices(), resource_claim("shared", GPU, status=held), resource_claim("c-new", GPU)],
    )
    _, result = run_session(snap, CAPACITY.format(on="true"))
    # the sharer adds nothing (its claim is held already); the newcomer's device would be the second
    assert [p.task.name for p in result.placements] == ["s"]


def test_the_quota_holds_across_cycles() -> None:
    pods, groups, claims = claim_pods(3)
    sim = InProcessCluster(
        CAPACITY.format(on="true"),
        nodes=[node("n1", cpu="16")],
        pods=pods,
        podgroups=groups,
        queues=[team()],
        dra=[*devices(), *claims],
    )
    sim.cycle()
    sim.cycle()
    assert len(sim.running_on()) == 2


def shared_gpus() -> list[object]:
    """One node with two GPUs of 100 cores each that several claims may share."""
    from caldera.framework.dra.objects import ResourceSlice
    from caldera.hack.scenario import convert

    slice_ = convert(
        ResourceSlice,
        {
            "metadata": {"name": "n1-gpu", "uid": "rs-n1"},
            "spec": {
                "driver": GPU,
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": f"gpu-{i}",
                        "allowMultipleAllocations": True,
                        "capacity": {"cores": {"value": "100"}},
                    }
                    for i in range(2)
                ],
            },
        },
    )
    return [device_class(GPU), slice_]


CONSUMABLE = CAPACITY.replace(
    "capacity.DynamicResourceAllocationEnable: {on}",
    "capacity.DynamicResourceAllocationEnable: true\n      capacity.DRAConsumableCapacityEnable: {on}",
)


def test_a_queue_with_100_cores_of_shared_gpus_admits_two_claims_of_40_and_holds_the_third() -> None:
    """Volcano's capacity-dra-support design, consumable-capacity quota: ``cores.deviceclass/<class>``
    caps the cores the queue's claims take; the GPUs themselves (shared) would fit all three."""

    def snapshot() -> object:
        pods = [pod(f"p{i}", group=f"p{i}", spec_extra=claim_pod_spec(f"c{i}")) for i in range(3)]
        groups = [
            podgroup(f"p{i}", queue="team", phase="Inqueue", min_resources={"cpu": "1"}) for i in range(3)
        ]
        claims = [resource_claim(f"c{i}", GPU, capacity={"cores": "40"}) for i in range(3)]
        team_q = queue(
            "team", capability={"cpu": "100", "memory": "100Gi", f"cores.deviceclass/{GPU}": "100"}
        )
        return cluster(
            nodes=[node("n1", cpu="16")],
            pods=pods,
            podgroups=groups,
            queues=[team_q],
            dra=[*shared_gpus(), *claims],
        )

    _, result = run_session(snapshot(), CONSUMABLE.format(on="true"))
    assert len(result.placements) == 2
    # the two placed claims share one GPU: 40 + 40 of its 100 cores
    shares = [ca.allocation.devices.results[0] for p in result.placements for ca in p.claims]
    assert {r.device for r in shares} == {"gpu-0"} and all(r.share_id for r in shares)
    _, result = run_session(snapshot(), CONSUMABLE.format(on="false"))
    assert len(result.placements) == 3
