"""gangpreempt and gangreclaim in whole sessions: a starving gang gets room for all its pods at
once, victim gangs are taken only whole or from their surplus, and nothing is evicted in vain."""

from volcano.port import build_node, build_pod, build_podgroup, build_queue, priority_classes, res, run

PCS = priority_classes(high=1000, low=10)


def conf(action, plugins=("priority", "gang", "conformance", "proportion"), arguments=""):
    lines = [f'actions: "{action}"', "tiers:", "- plugins:"]
    lines += [f"  - name: {p}" for p in plugins]
    if arguments:
        lines += ["configurations:", f"- name: {action}", "  arguments:", f"    {arguments}"]
    return "\n".join(lines) + "\n"


def two_gangs(victim_min=2, preemptor_prio="high", victim_queue="q1", queues=None):
    """Two 1-CPU nodes held by a 2-pod victim gang; a 2-pod gang of the same size is pending."""
    return dict(
        nodes=[build_node("n1", res("1", "1Gi")), build_node("n2", res("1", "1Gi"))],
        pods=[
            build_pod("ns", "v1", "n1", "Running", res("1"), "victim"),
            build_pod("ns", "v2", "n2", "Running", res("1"), "victim"),
            build_pod("ns", "p1", "", "Pending", res("1"), "preemptor"),
            build_pod("ns", "p2", "", "Pending", res("1"), "preemptor"),
        ],
        podgroups=[
            build_podgroup("victim", "ns", victim_queue, victim_min, None, "Running", "low"),
            build_podgroup("preemptor", "ns", "q1", 2, None, "Inqueue", preemptor_prio),
        ],
        queues=queues or [build_queue("q1")],
        pcs=PCS,
    )


def test_gangpreempt_takes_a_lower_priority_gang_whole_for_a_whole_gang():
    c = two_gangs()
    out = run(conf("gangpreempt"), **c)
    assert out.evicted == ["ns/v1", "ns/v2"]
    assert sorted(out.pipelined) == ["ns/p1", "ns/p2"]


def test_gangpreempt_without_whole_bundles_leaves_a_gang_at_its_minimum_alone():
    out = run(conf("gangpreempt", arguments="allowWholeBundle: false"), **two_gangs())
    assert out.evicted == []
    assert out.pipelined == {}


def test_gangpreempt_takes_the_surplus_of_a_gang_before_anything_else():
    # victim gang of min 1 with two pods: one is surplus (safe), but the preemptor needs both
    # nodes, so the second goes too (the victim gang's last pod is a whole bundle)
    out = run(conf("gangpreempt"), **two_gangs(victim_min=1))
    assert out.evicted == ["ns/v1", "ns/v2"]


def test_gangpreempt_does_not_take_from_a_job_of_equal_priority():
    out = run(conf("gangpreempt"), **two_gangs(preemptor_prio="low"))
    assert out.evicted == []


def test_gangpreempt_evicts_nothing_when_the_gang_still_would_not_fit():
    c = two_gangs()
    c["pods"].append(build_pod("ns", "p3", "", "Pending", res("1"), "preemptor"))
    c["podgroups"][1] = build_podgroup("preemptor", "ns", "q1", 3, None, "Inqueue", "high")
    out = run(conf("gangpreempt"), **c)
    assert out.evicted == []


def one_pod_reclaimer(victim_min):
    """q1's gang holds both nodes; q2 (same weight, so deserving one node) has a 1-pod job pending."""
    c = two_gangs(victim_min=victim_min, queues=[build_queue("q1"), build_queue("q2")])
    c["pods"] = [*c["pods"][:2], build_pod("ns", "r1", "", "Pending", res("1"), "reclaimer")]
    c["podgroups"] = [
        c["podgroups"][0],
        build_podgroup("reclaimer", "ns", "q2", 1, None, "Inqueue", "low"),
    ]
    return c


def test_gangreclaim_takes_only_the_surplus_of_a_gang_that_has_one():
    out = run(conf("gangreclaim"), **one_pod_reclaimer(victim_min=1))
    assert len(out.evicted) == 1
    assert list(out.pipelined) == ["ns/r1"]


def test_gangreclaim_takes_a_gang_at_its_minimum_whole():
    out = run(conf("gangreclaim"), **one_pod_reclaimer(victim_min=2))
    assert out.evicted == ["ns/v1", "ns/v2"]
    assert list(out.pipelined) == ["ns/r1"]


def test_gangreclaim_leaves_a_queue_that_is_not_reclaimable_alone():
    c = one_pod_reclaimer(victim_min=1)
    c["queues"] = [build_queue("q1", reclaimable=False), build_queue("q2")]
    out = run(conf("gangreclaim"), **c)
    assert out.evicted == []
