"""Volcano's pkg/scheduler/actions/reclaim/reclaim_test.go, TestReclaim, case by case: the reclaim
action alone; one tier of the case's plugins among conformance, gang, proportion, capacity and
priority, with only the callbacks the Go test enables (the others switched off)."""

import pytest

from volcano.port import build_node, build_pod, build_podgroup, build_queue, priority_classes, res, run

SWITCHES = {
    "conformance": ["enablePreemptable: false"],
    "gang": [
        "enablePreemptable: false",
        "enableJobPipelined: false",
        "enableJobReady: false",
        "enableJobOrder: false",
    ],
    "proportion": ["enabledOverused: false", "enabledAllocatable: false", "enableJobEnqueued: false"],
    "capacity": ["enabledOverused: false", "enabledAllocatable: false", "enableJobEnqueued: false"],
    "priority": ["enablePreemptable: false", "enableJobPipelined: false", "enableJobStarving: false"],
}
ORDER = ["conformance", "gang", "proportion", "capacity", "priority"]


def conf(plugins):
    lines = ['actions: "reclaim"', "tiers:", "- plugins:"]
    for name in ORDER:
        if name in plugins:
            lines.append(f"  - name: {name}")
            lines.extend(f"    {s}" for s in SWITCHES[name])
    return "\n".join(lines) + "\n"


P = {"volcano.sh/preemptable": "true"}
NP = {"volcano.sh/preemptable": "false"}
CGP = ("conformance", "gang", "proportion")


def pg(name, queue, min_member, prio, phase="Inqueue"):
    return build_podgroup(name, "c1", queue, min_member, None, phase, prio)


def running(name, req, group, labels):
    return build_pod("c1", name, "n1", "Running", req, group, labels)


def pending(name, req, group, **kw):
    return build_pod("c1", name, "", "Pending", req, group, **kw)


THREE_OF_PG1 = [
    running("preemptee1", res("1", "1G"), "pg1", NP),
    running("preemptee2", res("1", "1G"), "pg1", P),
    running("preemptee3", res("1", "1G"), "pg1", NP),
    pending("preemptor1", res("1", "1G"), "pg2"),
]
LMH = priority_classes(low_priority=100, mid_priority=500, high_priority=1000)

CASES = {
    "Two Queue with one Queue overusing resource, should reclaim": dict(
        plugins=CGP,
        podgroups=[pg("pg1", "q1", 1, "low-priority"), pg("pg2", "q2", 1, "high-priority")],
        pods=THREE_OF_PG1,
        nodes=[build_node("n1", res("3", "3Gi", pods="10"))],
        queues=[build_queue("q1", 1), build_queue("q2", 1)],
        evicted=["c1/preemptee2"],
    ),
    "sort reclaimees when reclaiming from overusing queue": dict(
        plugins=(*CGP, "priority"),
        pcs=LMH,
        podgroups=[
            pg("pg1", "q1", 1, "mid-priority"),
            pg("pg2", "q2", 1, "low-priority"),
            pg("pg3", "q3", 1, "high-priority"),
        ],
        pods=[
            running("preemptee1-1", res("1", "1G"), "pg1", P),
            running("preemptee1-2", res("1", "1G"), "pg1", P),
            running("preemptee2-1", res("1", "1G"), "pg2", P),
            running("preemptee2-2", res("1", "1G"), "pg2", NP),
            pending("preemptor1", res("1", "1G"), "pg3"),
        ],
        nodes=[build_node("n1", res("4", "4Gi", pods="10"))],
        queues=[build_queue("q1", 1), build_queue("q2", 1), build_queue("q3", 1)],
        evicted=["c1/preemptee2-1"],
    ),
    "sort reclaimees when reclaiming from overusing queues with different queue priority": dict(
        plugins=CGP,
        podgroups=[
            pg("pg1", "q1", 1, "mid-priority"),
            pg("pg2", "q2", 1, "mid-priority"),
            pg("pg3", "q3", 1, "mid-priority"),
        ],
        pods=[
            running("preemptee1-1", res("1", "1G"), "pg1", P),
            running("preemptee1-2", res("1", "1G"), "pg1", NP),
            running("preemptee2-1", res("1", "1G"), "pg2", P),
            running("preemptee2-2", res("1", "1G"), "pg2", NP),
            pending("preemptor1", res("1", "1G"), "pg3"),
        ],
        nodes=[build_node("n1", res("4", "4Gi", pods="10"))],
        queues=[build_queue("q1", priority=5), build_queue("q2", priority=10), build_queue("q3", priority=1)],
        evicted=["c1/preemptee1-1"],
    ),
    "can not reclaim resources when task preemption policy is never": dict(
        plugins=CGP,
        pcs=priority_classes(low_priority=100, high_priority=1000),
        podgroups=[pg("pg1", "q1", 0, "low-priority"), pg("pg2", "q2", 0, "high-priority")],
        pods=[
            running("preemptee1", res("1", "1G"), "pg1", P),
            pending("preemptor1", res("1", "1G"), "pg2", preemption_policy="Never"),
        ],
        nodes=[build_node("n1", res("1", "1Gi", pods="1"))],
        queues=[build_queue("q1", 5), build_queue("q2", 10)],
        evicted=[],
    ),
    "can not reclaim resources when queue is not open(proportion plugin)": dict(
        plugins=CGP,
        podgroups=[pg("pg1", "q1", 1, "low-priority", "Running"), pg("pg2", "q2", 1, "high-priority")],
        pods=THREE_OF_PG1,
        nodes=[build_node("n1", res("3", "3Gi", pods="10"))],
        queues=[build_queue("q1", 1), build_queue("q2", 1, state="Closed")],
        evicted=[],
    ),
    "can not reclaim resources when queue is not open(capacity plugin)": dict(
        plugins=("conformance", "gang", "capacity"),
        podgroups=[pg("pg1", "q1", 1, "low-priority", "Running"), pg("pg2", "q2", 1, "high-priority")],
        pods=THREE_OF_PG1,
        nodes=[build_node("n1", res("3", "3Gi", pods="10"))],
        queues=[build_queue("q1", 1), build_queue("q2", 1, state="Closed")],
        evicted=[],
    ),
    "Node available resources should be included in reclaimed resources": dict(
        plugins=(*CGP, "priority"),
        pcs=LMH,
        podgroups=[
            pg("pg1", "q1", 0, "mid-priority", "Running"),
            pg("pg2", "q2", 0, "mid-priority", "Running"),
            pg("pg3", "q3", 1, "mid-priority"),
        ],
        pods=[
            running("preemptee1-1", res("1", "1G"), "pg1", P),
            running("preemptee2-1", res("1", "1G"), "pg2", P),
            pending("preemptor1", res("2", "1G"), "pg3"),
        ],
        nodes=[build_node("n1", res("10", "2Gi", pods="10"))],
        queues=[build_queue("q1", priority=1), build_queue("q2", priority=2), build_queue("q3", 3)],
        evicted=["c1/preemptee1-1"],
    ),
    "Reclaim succeeds for second task when first task has PreemptionPolicy=Never": dict(
        plugins=(*CGP, "priority"),
        pcs=priority_classes(low_priority=100, high_priority_no_preempt=1000, high_priority_can_preempt=900),
        podgroups=[
            pg("pg-victim", "q1", 1, "low-priority", "Running"),
            pg("pg-preemptor", "q2", 2, "high-priority-no-preempt"),
        ],
        pods=[
            running("victim-pod-no", res("1", "1G"), "pg-victim", NP),
            running("victim-pod", res("1", "1G"), "pg-victim", P),
            pending(
                "preemptor-task1-non-preemptable", res("1", "1G"), "pg-preemptor", preemption_policy="Never"
            ),
            pending("preemptor-task2-preemptable", res("1", "1G"), "pg-preemptor"),
        ],
        nodes=[build_node("n1", res("2", "2G", pods="10"))],
        queues=[build_queue("q1", 1), build_queue("q2", 1)],
        evicted=["c1/victim-pod"],
    ),
    "only commit evictions on the node where reclaim succeeds": dict(
        plugins=CGP,
        podgroups=[
            pg("pg-victim", "q1", 0, "low-priority", "Running"),
            pg("pg-preemptor", "q2", 1, "low-priority"),
        ],
        pods=[
            running("victim-n1", res("2", "2G"), "pg-victim", P),
            pending("preemptor1", res("3", "3G"), "pg-preemptor"),
        ],
        nodes=[build_node("n1", res("10", "10G", pods="10"))],
        queues=[build_queue("q1", 1), build_queue("q2", 9)],
        evicted=[],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_reclaim(case):
    """TestReclaim: the case named by the parameter; expected evictions as ExpectEvicted."""
    c = CASES[case]
    out = run(conf(c["plugins"]), c["nodes"], c["pods"], c["podgroups"], c["queues"], c.get("pcs"))
    assert out.evicted == sorted(c["evicted"])
