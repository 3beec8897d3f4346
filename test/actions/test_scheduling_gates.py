"""Scheduling gates: a gated pod is never placed and takes no room; a gang that needs gated pods
waits whole and is reported as gated (not unschedulable); once the gates are gone, it is placed."""

import msgspec

from caldera.hack.scenario import InProcessCluster, gang, node, pod, podgroup

GATE = {"schedulingGates": [{"name": "example.com/quota"}, {"name": "example.com/data"}]}


def ungate(p):
    return msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, scheduling_gates=[]))


def test_gated_pod_beside_ordinary_pods_is_never_placed_and_takes_no_room():
    gated = pod("gated", cpu="3", group="g", spec_extra=GATE)
    others = [pod(f"other-{i}", cpu="1", group=f"o{i}") for i in range(4)]
    sim = InProcessCluster(
        nodes=[node("n1", cpu="4")],
        pods=[gated, *others],
        podgroups=[podgroup("g"), *(podgroup(f"o{i}") for i in range(4))],
    )
    sim.cycle()
    sim.cycle()
    placed = sim.running_on()
    assert "gated" not in placed
    # the gated pod reserved nothing: all four 1-cpu pods fit on the 4-cpu node
    assert sorted(placed) == ["other-0", "other-1", "other-2", "other-3"]


def test_gang_with_a_gated_member_waits_without_partial_placement_then_lands_when_ungated():
    pg, pods = gang("train", 3, cpu="1")
    pods[2] = pod("train-2", cpu="1", group="train", spec_extra=GATE)
    sim = InProcessCluster(nodes=[node("n1", cpu="8")], pods=pods, podgroups=[pg])
    result = sim.cycle()
    assert sim.running_on() == {}
    job = result.jobs["default/train"]
    assert job.waits_for_gates()
    assert "waiting for scheduling gates" in job.job_fit_error
    assert "train-2 (gates: example.com/quota, example.com/data)" in job.job_fit_error
    assert all(n.used.cpu == 0 for n in sim.loop.cache.snapshot().nodes.values())

    sim.add(pods=[ungate(sim.pods[pods[2].metadata.uid])])
    sim.cycle()
    assert sorted(sim.running_on()) == ["train-0", "train-1", "train-2"]


def test_elastic_gang_places_its_ungated_members_when_they_reach_the_minimum():
    pg = podgroup("elastic", min_member=2)
    pods = [
        pod("e-0", group="elastic"),
        pod("e-1", group="elastic"),
        pod("e-2", group="elastic", spec_extra=GATE),
    ]
    sim = InProcessCluster(nodes=[node("n1", cpu="8")], pods=pods, podgroups=[pg])
    sim.cycle()
    assert sorted(sim.running_on()) == ["e-0", "e-1"]


def test_gated_gang_is_explained_as_gated_naming_the_gates():
    pg, pods = gang("waits", 2, cpu="1", spec_extra=GATE)
    sim = InProcessCluster(nodes=[node("n1", cpu="8")], pods=pods, podgroups=[pg])
    result = sim.cycle()
    doc = result.report.explanations["default/waits"]
    assert doc["reason"].startswith("2/2 tasks in gang are waiting for scheduling gates")
    assert doc["gated"] == [
        {"pod": "waits-0", "gates": ["example.com/quota", "example.com/data"]},
        {"pod": "waits-1", "gates": ["example.com/quota", "example.com/data"]},
    ]
    assert "remove the scheduling gates" in doc["suggestion"]
    assert doc["roles"] == []


def test_preempt_makes_no_room_for_a_gated_gang():
    conf = (
        'actions: "enqueue, allocate, preempt"\n'
        "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n"
        "- plugins:\n  - name: predicates\n  - name: proportion\n  - name: nodeorder\n"
    )
    low = pod("low", cpu="4", group="low", priority=1, annotations={"volcano.sh/preemptable": "true"})
    high = pod("high", cpu="4", group="high", priority=1000, spec_extra=GATE)
    sim = InProcessCluster(
        conf,
        nodes=[node("n1", cpu="4")],
        pods=[low, high],
        podgroups=[podgroup("low"), podgroup("high")],
    )
    sim.cycle()
    assert sim.running_on() == {"low": "n1"}
    for _ in range(2):
        result = sim.cycle()
        assert not result.evictions
