"""Preempt, reclaim, gangpreempt and gangreclaim with DRA devices: an eviction frees a victim's devices
only as its claims would be released (a claim is deallocated when no pod reserves it any more), and a
preemptor needing devices evicts only victims whose devices it can use (issue 24 item 6)."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.framework.model import GROUP_NAME_ANNOTATION
from caldera.hack.scenario import (
    claim_pod_spec,
    cluster,
    device_class,
    node,
    pod,
    podgroup,
    priority_class,
    queue,
    resource_claim,
    resource_slice,
    run_session,
)
from caldera.plugins import dra as dra_part

GPU = "gpu.example.com"
PREEMPTABLE = {"volcano.sh/preemptable": "true"}
KEEP = {"volcano.sh/preemptable": "false"}

PREEMPT = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""

RECLAIM = PREEMPT.replace("preempt", "reclaim")

GANG_PREEMPT = """
actions: "enqueue, allocate, gangpreempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def holding(claim: str, device: str, *pod_uids: str, node_name: str = "n1", **kw: Any) -> Any:
    """A claim allocated ``device`` of ``node_name`` and reserved for these pods."""
    status = {
        "allocation": {
            "devices": {"results": [{"request": "req", "driver": GPU, "pool": node_name, "device": device}]},
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": u, "uid": u} for u in pod_uids],
    }
    return resource_claim(claim, GPU, status=status, **kw)


def one_gpu(held: Any) -> list[Any]:
    """The GPU class, n1's only GPU (gpu-0) allocated to ``held``, and the preemptor's claim c-high."""
    return [device_class(GPU), resource_slice("n1", GPU, ["gpu-0"]), held, resource_claim("c-high", GPU)]


def running(
    name: str, *claims: str, group: str = "", annotations: dict[str, str] = PREEMPTABLE, **kw: Any
) -> Any:
    """A running pod on n1 (uid = its name), low priority, using these claims."""
    return pod(
        name,
        uid=name,
        group=group or name,
        node_name=kw.pop("node_name", "n1"),
        phase="Running",
        cpu=kw.pop("cpu", "1"),
        priority_class=kw.pop("priority_class", "low"),
        annotations=annotations,
        spec_extra=claim_pod_spec(*claims) if claims else None,
        **kw,
    )


def wanting(name: str, claim: str, **kw: Any) -> Any:
    """A pending high-priority pod needing one GPU through ``claim``."""
    return pod(
        name,
        uid=name,
        group=kw.pop("group", name),
        cpu="1",
        priority_class="high",
        spec_extra=claim_pod_spec(claim),
        **kw,
    )


def world(pods: list[Any], dra: list[Any], **kw: Any) -> Any:
    """n1 (the devices) and n2 (none); each running pod's job gets a spare running pod on n2, so the
    gang plugin lets the pod on n1 go (a job at its minimum is never a victim of preempt)."""
    pods = list(pods)
    groups = {p.metadata.annotations[GROUP_NAME_ANNOTATION] for p in pods}
    podgroups = {pg.metadata.name: pg for pg in kw.pop("podgroups", [])}
    queue_of = kw.pop("queue_of", {})
    for g in sorted(groups - set(podgroups)):
        mine = [p for p in pods if p.metadata.annotations[GROUP_NAME_ANNOTATION] == g]
        is_running = any(p.status.phase == "Running" for p in mine)
        if is_running and len(mine) == 1:
            pods.append(running(f"{g}-spare", group=g, node_name="n2"))
        podgroups[g] = podgroup(
            g,
            phase="Running" if is_running else "Inqueue",
            priority_class="" if is_running else "high",
            queue=queue_of.get(g, "default"),
        )
    return cluster(
        nodes=kw.pop("nodes", [node("n1", cpu="8"), node("n2", cpu="8")]),
        pods=pods,
        podgroups=list(podgroups.values()),
        dra=dra,
        priority_classes=[
            priority_class("high", 1000),
            priority_class("low", 10),
            priority_class("lowest", 1),
        ],
        **kw,
    )


def keeper_and_low(*dra: Any) -> Any:
    """A pod that may not be preempted ("keeper", claim c-keep) and a preemptable one ("low", c-low)
    running on n1; "high" wants a GPU through c-high. ``dra``: the objects besides the GPU class."""
    return world(
        pods=[
            running("keeper", "c-keep", annotations=KEEP),
            running("low", "c-low"),
            wanting("high", "c-high"),
        ],
        dra=[device_class(GPU), *dra],
    )


def dra_of(ssn: Any) -> dra_part.DraPart:
    """The session's DRA part (of the predicates plugin)."""
    (part,) = [v for p in ssn.plugins.values() for v in vars(p).values() if isinstance(v, dra_part.DraPart)]
    return part


def evicted(result: Any) -> list[str]:
    return sorted(e.task.name for e in result.evictions)


def pipelined(ssn: Any) -> dict[str, str]:
    from caldera.framework.model import TaskStatus

    return {
        t.name: t.node_name
        for j in ssn.jobs.values()
        for t in j.tasks.values()
        if t.status == TaskStatus.PIPELINED
    }


def test_a_high_priority_pod_needing_a_gpu_preempts_the_pod_holding_the_only_gpu() -> None:
    snap = world(
        pods=[running("low", "c-low"), wanting("high", "c-high")],
        dra=one_gpu(holding("c-low", "gpu-0", "low")),
    )
    ssn, result = run_session(snap, PREEMPT)
    assert evicted(result) == ["low"]
    assert pipelined(ssn) == {"high": "n1"}


def test_a_preemptor_whose_claim_the_counts_answer_gets_the_gpu_the_eviction_frees(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # n1's gpu-0 is held by a pod that may not be preempted, gpu-1 by a preemptable one. The
    # preemptor's claim (one GPU of the class) is one the free-device counts answer for; allocate
    # counted n1 full before preempt ran, so the eviction's release must reach the counts: the
    # preemptor lands on n1 with gpu-1, as it does with the full allocator alone.
    def scenario() -> tuple[Any, Any]:
        snap = keeper_and_low(
            resource_slice("n1", GPU, ["gpu-0", "gpu-1"]),
            holding("c-keep", "gpu-0", "keeper"),
            holding("c-low", "gpu-1", "low"),
            resource_claim("c-high", GPU),
        )
        return run_session(snap, PREEMPT)

    def devices_of(ssn: Any, uid: str) -> list[str]:
        return [r.device for ca in ssn.task_claims[uid] for r in ca.allocation.devices.results]

    ssn, result = scenario()
    assert dra_of(ssn)._fast["default/c-high"] is not None  # the counts answered for the preemptor's claim
    assert evicted(result) == ["low"]
    assert pipelined(ssn) == {"high": "n1"}
    assert devices_of(ssn, "high") == ["gpu-1"]

    monkeypatch.setattr(dra_part, "simple_shape", lambda *args: None)
    ssn_full, result_full = scenario()
    assert not any(index is not None for index in dra_of(ssn_full)._indexes.values())
    assert evicted(result_full) == ["low"]
    assert pipelined(ssn_full) == {"high": "n1"}
    assert devices_of(ssn_full, "high") == ["gpu-1"]


def test_a_pod_without_devices_is_spared_when_only_the_gpu_is_short() -> None:
    # One job runs a pod without claims (lowest priority: first in victim order) and the pod holding
    # the GPU; the node has cpu enough: evicting the first would give the preemptor no device, so it
    # is spared.
    snap = world(
        pods=[
            running("cpu-only", group="batch", priority_class="lowest"),
            running("low", "c-low", group="batch"),
            running("batch-spare", group="batch", node_name="n2"),
            wanting("high", "c-high"),
        ],
        dra=one_gpu(holding("c-low", "gpu-0", "low")),
    )
    _, result = run_session(snap, PREEMPT)
    assert evicted(result) == ["low"]


def test_a_pod_holding_no_device_the_preemptor_can_use_is_not_preempted() -> None:
    # n1's a100 is held by a pod that may not be preempted; the preemptable pod holds a t4, which
    # the preemptor's selector rules out: nothing it may evict gives it a device.
    def gpus() -> Any:
        return resource_slice(
            "n1", GPU, {"a100": {"model": {"string": "a100"}}, "t4": {"model": {"string": "t4"}}}
        )

    snap = keeper_and_low(
        gpus(),
        holding("c-keep", "a100", "keeper"),
        holding("c-low", "t4", "low"),
        resource_claim("c-high", GPU, selector='device.attributes["gpu.example.com"].model == "a100"'),
    )
    ssn, result = run_session(snap, PREEMPT)
    assert evicted(result) == []
    assert pipelined(ssn) == {}


def test_a_pod_holding_a_device_of_another_class_is_not_preempted() -> None:
    FPGA = "fpga.example.com"
    fpga_claim = resource_claim(
        "c-low",
        FPGA,
        status={
            "allocation": {
                "devices": {"results": [{"request": "req", "driver": FPGA, "pool": "n1", "device": "f0"}]}
            },
            "reservedFor": [{"resource": "pods", "name": "low", "uid": "low"}],
        },
    )
    snap = world(
        pods=[running("low", "c-low"), wanting("high", "c-high")],
        dra=[
            device_class(GPU),
            device_class(FPGA),
            resource_slice("n1", FPGA, ["f0"]),
            fpga_claim,
            resource_claim("c-high", GPU),
        ],
    )
    _, result = run_session(snap, PREEMPT)
    assert evicted(result) == []


def test_a_shared_claim_keeps_its_devices_while_one_of_its_pods_stays() -> None:
    # The only GPU is held by a claim shared by a preemptable pod and one that may not be preempted:
    # evicting the first would not deallocate the claim, so nothing is evicted.
    snap = world(
        pods=[
            running("low", "shared"),
            running("keeper", "shared", annotations=KEEP),
            wanting("high", "c-high"),
        ],
        dra=one_gpu(holding("shared", "gpu-0", "low", "keeper")),
    )
    ssn, result = run_session(snap, PREEMPT)
    assert evicted(result) == []
    assert pipelined(ssn) == {}


def test_a_shared_claim_is_released_when_every_pod_reserving_it_is_evicted() -> None:
    snap = world(
        pods=[running("low-a", "shared"), running("low-b", "shared"), wanting("high", "c-high")],
        dra=one_gpu(holding("shared", "gpu-0", "low-a", "low-b")),
    )
    ssn, result = run_session(snap, PREEMPT)
    assert evicted(result) == ["low-a", "low-b"]
    assert pipelined(ssn) == {"high": "n1"}


def test_a_claim_reserved_by_a_consumer_that_is_not_a_pod_of_the_session_stays_allocated() -> None:
    snap = world(
        pods=[running("low", "c-low"), wanting("high", "c-high")],
        dra=one_gpu(holding("c-low", "gpu-0", "low", "some-other-consumer")),
    )
    _, result = run_session(snap, PREEMPT)
    assert evicted(result) == []


def test_a_gang_preemptor_that_cannot_get_all_its_gpus_evicts_nothing() -> None:
    # Two high pods of one gang each need a GPU; evicting the one pod holding n1's only GPU frees one.
    hp = podgroup("hi", min_member=2, priority_class="high")
    snap = world(
        pods=[running("low", "c-low"), wanting("hi-0", "c0", group="hi"), wanting("hi-1", "c1", group="hi")],
        dra=[
            device_class(GPU),
            resource_slice("n1", GPU, ["gpu-0"]),
            holding("c-low", "gpu-0", "low"),
            resource_claim("c0", GPU),
            resource_claim("c1", GPU),
        ],
        podgroups=[hp],
    )
    ssn, result = run_session(snap, PREEMPT)
    assert evicted(result) == []
    assert pipelined(ssn) == {}


def test_reclaim_takes_the_gpu_of_an_overused_queue_for_a_queue_that_needs_one() -> None:
    # Queue a holds both GPUs of the cluster (n1, n2) and runs cpu-only pods too; queue b's pod needs
    # one GPU: reclaim evicts one GPU holder, not the cpu-only pods.
    nodes = [node("n1", cpu="4"), node("n2", cpu="4")]
    pods = [
        running("hog-0", "c0", node_name="n1", cpu="3", priority_class="lowest"),
        running("hog-1", "c1", node_name="n2", cpu="3", priority_class="lowest"),
        running("cpu-0", node_name="n1", cpu="1", priority_class="lowest"),
        running("cpu-1", node_name="n2", cpu="1", priority_class="lowest"),
        wanting("new", "c-new"),
    ]
    snap = world(
        pods=pods,
        nodes=nodes,
        queues=[queue("a", weight=1), queue("b", weight=1)],
        queue_of={"hog-0": "a", "hog-1": "a", "cpu-0": "a", "cpu-1": "a", "new": "b"},
        dra=[
            device_class(GPU),
            resource_slice("n1", GPU, ["gpu-0"]),
            resource_slice("n2", GPU, ["gpu-0"]),
            holding("c0", "gpu-0", "hog-0", node_name="n1"),
            holding("c1", "gpu-0", "hog-1", node_name="n2"),
            resource_claim("c-new", GPU),
        ],
    )
    ssn, result = run_session(snap, RECLAIM)
    victims = evicted(result)
    assert len(victims) == 1 and victims[0].startswith("hog-"), victims
    assert {e.reason for e in result.evictions} == {"reclaim"}
    assert list(pipelined(ssn)) == ["new"]


def test_gangpreempt_frees_the_gpu_and_spares_the_gang_holding_none() -> None:
    # Two victim jobs on n1: "plain" (lowest priority, no devices) and "low" holding the only GPU.
    # The cpu is plenty: only the GPU holder is evicted.
    snap = world(
        pods=[
            running("plain", priority_class="lowest"),
            running("low", "c-low"),
            wanting("high", "c-high"),
        ],
        dra=one_gpu(holding("c-low", "gpu-0", "low")),
    )
    ssn, result = run_session(snap, GANG_PREEMPT)
    assert evicted(result) == ["low"]
    assert pipelined(ssn) == {"high": "n1"}


def test_gangpreempt_evicts_nothing_for_a_gpu_no_victim_holds() -> None:
    snap = world(
        pods=[running("keeper", "c-keep", annotations=KEEP), running("plain"), wanting("high", "c-high")],
        dra=one_gpu(holding("c-keep", "gpu-0", "keeper")),
    )
    ssn, result = run_session(snap, GANG_PREEMPT)
    assert evicted(result) == []
    assert pipelined(ssn) == {}


# --- queue quota of devices in reclaim (capacity: deviceclass/<class> deserved and guarantee) -------
# gang's votes off and no conformance, so capacity's reclaimable decides the victims (the first tier
# whose plugins vote decides: Volcano's Session.Reclaimable)
CAPACITY_RECLAIM = """
actions: "enqueue, allocate, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
    enableReclaimable: false
- plugins:
  - name: drf
  - name: predicates
  - name: capacity
  - name: nodeorder
"""


def two_teams(a: dict[str, str], b: dict[str, str]) -> Any:
    """Queue a runs two pods holding the cluster's two GPUs (one on n1, one on n2; its job can spare
    one); queue b's pod needs one GPU. ``a`` and ``b``: each queue's deserved and guarantee keys, as
    ``deserved:<key>`` / ``guarantee:<key>``."""

    def spec(keys: dict[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = {"deserved": {"cpu": "8", "memory": "16Gi"}, "guarantee": {}}
        for k, v in keys.items():
            field, name = k.split(":", 1)
            out[field][name] = v
        return {f: v for f, v in out.items() if v}

    pods = [
        running("a-0", "c0", group="hog", node_name="n1"),
        running("a-1", "c1", group="hog", node_name="n2"),
        running("a-2", group="hog", node_name="n2"),
        wanting("b-0", "c-new"),
    ]
    return world(
        pods=pods,
        queues=[queue("a", **spec(a)), queue("b", **spec(b))],
        podgroups=[
            podgroup("hog", queue="a", phase="Running"),
            podgroup("b-0", queue="b", priority_class="high"),
        ],
        dra=[
            device_class(GPU),
            resource_slice("n1", GPU, ["gpu-0"]),
            resource_slice("n2", GPU, ["gpu-0"]),
            holding("c0", "gpu-0", "a-0", node_name="n1"),
            holding("c1", "gpu-0", "a-1", node_name="n2"),
            resource_claim("c-new", GPU),
        ],
    )


def test_reclaim_takes_a_gpu_from_a_queue_over_its_deserved_devices() -> None:
    snap = two_teams({f"deserved:deviceclass/{GPU}": "1"}, {f"deserved:deviceclass/{GPU}": "1"})
    ssn, result = run_session(snap, CAPACITY_RECLAIM)
    victims = evicted(result)
    assert len(victims) == 1 and victims[0] in ("a-0", "a-1"), victims
    assert list(pipelined(ssn)) == ["b-0"]


def test_reclaim_leaves_a_queue_within_its_deserved_devices_alone() -> None:
    # queue a deserves both GPUs it holds (and is within its cpu): nothing of it is a victim
    snap = two_teams({f"deserved:deviceclass/{GPU}": "2"}, {f"deserved:deviceclass/{GPU}": "1"})
    _, result = run_session(snap, CAPACITY_RECLAIM)
    assert evicted(result) == []


def test_reclaim_never_takes_a_queue_below_its_device_guarantee() -> None:
    snap = two_teams(
        {f"deserved:deviceclass/{GPU}": "1", f"guarantee:deviceclass/{GPU}": "2"},
        {f"deserved:deviceclass/{GPU}": "1"},
    )
    _, result = run_session(snap, CAPACITY_RECLAIM)
    assert evicted(result) == []


def test_a_queue_reclaims_for_a_gpu_pod_only_within_its_own_deserved_devices() -> None:
    # queue b deserves no cpu or memory: only its deserved GPUs let it reclaim (a dimension within
    # deserved, as capacity's PreemptiveFn asks for)
    a = {f"deserved:deviceclass/{GPU}": "1"}
    no_cpu = {"deserved:cpu": "0", "deserved:memory": "0"}
    _, result = run_session(two_teams(a, {**no_cpu, f"deserved:deviceclass/{GPU}": "1"}), CAPACITY_RECLAIM)
    assert len(evicted(result)) == 1
    _, result = run_session(two_teams(a, no_cpu), CAPACITY_RECLAIM)
    assert evicted(result) == []


def test_preempt_within_a_queue_at_its_device_capability_frees_the_quota_with_the_device() -> None:
    # queue team may hold one GPU and holds it; its high-priority pod takes it from its low one (two
    # free GPUs on n2 are out of the queue's reach by quota, not by devices)
    conf = CAPACITY_RECLAIM.replace("reclaim", "preempt").replace("enablePreemptable: false", "")
    team = queue("team", capability={"cpu": "100", "memory": "100Gi", f"deviceclass/{GPU}": "1"})
    snap = world(
        pods=[running("low", "c-low"), wanting("high", "c-high")],
        queues=[team],
        queue_of={"low": "team", "high": "team"},
        dra=[
            device_class(GPU),
            resource_slice("n1", GPU, ["gpu-0"]),
            resource_slice("n2", GPU, ["gpu-0", "gpu-1"]),
            holding("c-low", "gpu-0", "low"),
            resource_claim("c-high", GPU),
        ],
    )
    ssn, result = run_session(snap, conf)
    assert evicted(result) == ["low"]
    assert pipelined(ssn) == {"high": "n1"}
