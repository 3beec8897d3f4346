"""proportion: weighted shares between queues, and no crash whatever the guarantees or the nodes."""

import logging

from caldera.hack.scenario import InProcessCluster, cluster, node, pod, podgroup, queue, run_session


def two_queue_jobs(n=16):
    pgs = [podgroup("ja", min_member=1, queue="a"), podgroup("jb", min_member=1, queue="b")]
    pods = [pod(f"ja-{i}", cpu="1", memory="1Gi", group="ja") for i in range(n)]
    pods += [pod(f"jb-{i}", cpu="1", memory="1Gi", group="jb") for i in range(n)]
    return pgs, pods


def test_two_queues_with_weights_one_to_three_converge_to_one_to_three_shares():
    pgs, pods = two_queue_jobs()
    nodes = [node(f"n{i}", cpu="4", memory="64Gi") for i in range(4)]  # 16 cpu, 32 asked
    sim = InProcessCluster(
        nodes=nodes, queues=[queue("a", weight=1), queue("b", weight=3)], podgroups=pgs, pods=pods
    )
    for _ in range(3):
        sim.cycle()
    placed = sim.running_on()
    a = sum(1 for p in placed if p.startswith("ja-"))
    b = sum(1 for p in placed if p.startswith("jb-"))
    assert (a, b) == (4, 12)


def test_guarantees_summing_to_150_percent_are_scaled_and_scheduling_goes_on(caplog):
    pgs, pods = two_queue_jobs(8)
    queues = [queue("a", guarantee={"cpu": "6"}), queue("b", guarantee={"cpu": "6"})]  # 12 of 8 cpu
    snap = cluster(nodes=[node("n1", cpu="4"), node("n2", cpu="4")], queues=queues, podgroups=pgs, pods=pods)
    with caplog.at_level(logging.WARNING, logger="caldera.plugins.proportion"):
        ssn, result = run_session(snap)
    assert len(result.placements) == 8
    scaled = ssn.report.queue_guarantee_scaled
    assert set(scaled) == {"a", "b"}
    assert abs(scaled["a"]["cpu"] - 8 / 12) < 1e-9
    events = [e for e in ssn.report.events if e[2] == "GuaranteeScaled"]
    assert sorted(e[1] for e in events) == ["a", "b"]
    assert all(e[0] == "Queue" for e in events)
    assert any("guarantees exceed the cluster" in r.message for r in caplog.records)
    shares = ssn.report.queue_shares
    assert shares["a"].deserved["cpu"] <= 4000 + 1 and shares["b"].deserved["cpu"] <= 4000 + 1


def test_a_cluster_with_zero_nodes_gives_no_share_and_no_crash():
    pgs, pods = two_queue_jobs(2)
    snap = cluster(
        nodes=[], queues=[queue("a", guarantee={"cpu": "2"}), queue("b")], podgroups=pgs, pods=pods
    )
    ssn, result = run_session(snap)
    assert result.placements == []
    assert ssn.report.cluster_empty is True


def test_nodes_arriving_after_queues_are_used_as_soon_as_they_come():
    pgs, pods = two_queue_jobs(2)
    sim = InProcessCluster(
        queues=[queue("a", guarantee={"cpu": "3"}), queue("b", guarantee={"cpu": "3"})],
        podgroups=pgs,
        pods=pods,
    )
    for _ in range(2):
        assert sim.cycle() is not None  # the cycle runs, places nothing, raises nothing
    assert sim.loop.stats.failed == 0
    sim.add(nodes=[node("n1", cpu="2"), node("n2", cpu="2")])  # guarantees now 150% of the cluster
    sim.cycle()
    assert len(sim.running_on()) == 4
    assert sim.loop.stats.failed == 0


def test_nodes_not_ready_count_as_no_capacity():
    pgs, pods = two_queue_jobs(1)
    snap = cluster(nodes=[node("n1", ready=False)], queues=[queue("a"), queue("b")], podgroups=pgs, pods=pods)
    ssn, result = run_session(snap)
    assert result.placements == []
    assert ssn.report.cluster_empty is True


def test_queue_capability_caps_its_deserved_share():
    pgs, pods = two_queue_jobs(8)
    snap = cluster(
        nodes=[node("n1", cpu="8")],
        queues=[queue("a", capability={"cpu": "2"}), queue("b", weight=1)],
        podgroups=pgs,
        pods=pods,
    )
    _, result = run_session(snap)
    names = [p.task.name for p in result.placements]
    assert sum(1 for n in names if n.startswith("ja-")) == 2
    assert sum(1 for n in names if n.startswith("jb-")) == 6
