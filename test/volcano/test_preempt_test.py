"""Volcano's pkg/scheduler/actions/preempt/preempt_test.go, TestPreempt, case by case: the preempt
action alone, one tier of conformance, gang, priority and proportion (switches as the Go test
enables them), priority classes high-priority=100000 and low-priority=10."""

import pytest

from volcano.port import build_node, build_pod, build_podgroup, build_queue, priority_classes, res, run

CONF = """
actions: "preempt"
tiers:
- plugins:
  - name: conformance
  - name: gang
    enableJobOrder: false
  - name: priority
  - name: proportion
    enableReclaimable: false
    enableJobEnqueued: false
"""
PCS = priority_classes(high_priority=100000, low_priority=10)
P = {"volcano.sh/preemptable": "true"}
NP = {"volcano.sh/preemptable": "false"}


def pg(name, queue, min_member, tmm, prio=""):
    return build_podgroup(name, "c1", queue, min_member, tmm, "Inqueue", prio)


def running(name, node, req, group, labels=None, **kw):
    return build_pod("c1", name, node, "Running", req, group, labels, **kw)


def pending(name, req, group, **kw):
    return build_pod("c1", name, "", "Pending", req, group, **kw)


CASES = {
    "do not preempt if there are enough idle resources": dict(
        podgroups=[pg("pg1", "q1", 3, {"": 3})],
        pods=[
            running("preemptee1", "n1", res("1", "1G"), "pg1"),
            running("preemptee2", "n1", res("1", "1G"), "pg1"),
            pending("preemptor1", res("1", "1G"), "pg1"),
        ],
        nodes=[build_node("n1", res("10", "10G", pods="10"))],
        queues=[build_queue("q1", 1)],
        evicted=[],
    ),
    "do not preempt if job is pipelined": dict(
        podgroups=[pg("pg1", "q1", 1, {"": 2}), pg("pg2", "q1", 1, {"": 2})],
        pods=[
            running("preemptee1", "n1", res("1", "1G"), "pg1"),
            running("preemptee2", "n1", res("1", "1G"), "pg1"),
            running("preemptee3", "n1", res("1", "1G"), "pg2"),
            pending("preemptor2", res("1", "1G"), "pg2"),
        ],
        nodes=[build_node("n1", res("3", "3G", pods="10"))],
        queues=[build_queue("q1", 1)],
        evicted=[],
    ),
    "preempt one task of different job to fit both jobs on one node": dict(
        podgroups=[pg("pg1", "q1", 1, {"": 2}, "low-priority"), pg("pg2", "q1", 1, {"": 2}, "high-priority")],
        pods=[
            running("preemptee1", "n1", res("1", "1G"), "pg1", P),
            running("preemptee2", "n1", res("1", "1G"), "pg1", NP),
            pending("preemptor1", res("1", "1G"), "pg2"),
            pending("preemptor2", res("1", "1G"), "pg2"),
        ],
        nodes=[build_node("n1", res("2", "2G", pods="10"))],
        queues=[build_queue("q1", 1)],
        evicted=["c1/preemptee1"],
    ),
    "preempt enough tasks to fit large task of different job": dict(
        podgroups=[pg("pg1", "q1", 1, {"": 3}, "low-priority"), pg("pg2", "q1", 1, {"": 1}, "high-priority")],
        pods=[
            running("preemptee1", "n1", res("1", "1G"), "pg1", P),
            running("preemptee2", "n1", res("1", "1G"), "pg1", P),
            running("preemptee3", "n1", res("1", "1G"), "pg1", NP),
            pending("preemptor1", res("5", "5G"), "pg2"),
        ],
        nodes=[build_node("n1", res("6", "6G", pods="10"))],
        queues=[build_queue("q1", 1)],
        evicted=["c1/preemptee1", "c1/preemptee2"],
    ),
    "preempt low priority job in same queue": dict(
        podgroups=[pg("pg1", "q1", 0, {}, "low-priority"), pg("pg2", "q1", 1, {"": 1}, "high-priority")],
        pods=[
            running("preemptee1", "n1", res("3", "3G"), "pg1", P),
            pending("preemptor1", res("3", "3G"), "pg2"),
        ],
        nodes=[build_node("n1", res("12", "12G", pods="10"))],
        queues=[build_queue("q1", 1, res("4", "4G"))],
        evicted=["c1/preemptee1"],
    ),
    "preempt low priority job in same queue: allocatable and has enough resource, don't preempt": dict(
        podgroups=[pg("pg1", "q1", 1, {}, "low-priority"), pg("pg2", "q1", 1, {"": 1}, "high-priority")],
        pods=[
            running("preemptee1", "n1", res("3", "3G"), "pg1", P),
            pending("preemptor1", res("3", "3G"), "pg2"),
        ],
        nodes=[build_node("n1", res("12", "12G", pods="10"))],
        queues=[build_queue("q1", 1, res("6", "6G"))],
        evicted=[],
    ),
    "preempt low priority job in same queue but not pod with preemptable=false or higher priority": dict(
        podgroups=[pg("pg1", "q1", 1, {}, "low-priority"), pg("pg2", "q1", 1, {"": 1}, "high-priority")],
        pods=[
            running("preemptee1", "n1", res("1", "1G"), "pg1", NP),
            running("preemptee2", "n1", res("1", "1G"), "pg1", P),
            running("preemptee3", "n1", res("1", "1G"), "pg1", P, priority=100000),
            pending("preemptor1", res("1", "1G"), "pg2"),
        ],
        nodes=[build_node("n1", res("12", "12G", pods="10"))],
        queues=[build_queue("q1", 1, res("3", "3G"))],
        evicted=["c1/preemptee2"],
    ),
    "unBestEffort high-priority pod preempt BestEffort low-priority pod in same queue": dict(
        podgroups=[pg("pg1", "q1", 0, {}, "low-priority"), pg("pg2", "q1", 1, {"": 1}, "high-priority")],
        pods=[running("preemptee1", "n1", {}, "pg1", P), pending("preemptor1", res("3", "3G"), "pg2")],
        nodes=[build_node("n1", res("12", "12G", pods="1"))],
        queues=[build_queue("q1", 1, res("6", "6G"))],
        evicted=["c1/preemptee1"],
    ),
    "BestEffort high-priority pod preempt BestEffort low-priority pod in same queue": dict(
        podgroups=[pg("pg1", "q1", 0, {}, "low-priority"), pg("pg2", "q1", 1, {"": 1}, "high-priority")],
        pods=[running("preemptee1", "n1", {}, "pg1", P), pending("preemptor1", {}, "pg2")],
        nodes=[build_node("n1", res("12", "12G", pods="1"))],
        queues=[build_queue("q1", 1, res("6", "6G"))],
        evicted=["c1/preemptee1"],
    ),
    "can not preempt resources when task preemption policy is never": dict(
        podgroups=[pg("pg1", "q1", 0, None, "low-priority"), pg("pg2", "q1", 1, None, "high-priority")],
        pods=[
            running("preemptee1", "n1", res("1", "1G"), "pg1", P),
            pending("preemptor1", res("1", "1G"), "pg2", preemption_policy="Never"),
        ],
        nodes=[build_node("n1", res("1", "1Gi", pods="1"))],
        queues=[build_queue("q1", 1)],
        evicted=[],
    ),
    "rollback evictions when preemptor exceeds queue capacity after evicting victims": dict(
        podgroups=[pg("pg1", "q1", 1, {"": 2}, "low-priority"), pg("pg2", "q1", 1, {"": 1}, "high-priority")],
        pods=[
            running("preemptee1", "n1", res("1", "1G"), "pg1", P),
            running("preemptee2", "n1", res("1", "1G"), "pg1", P),
            pending("preemptor1", res("4", "4G"), "pg2"),
        ],
        nodes=[build_node("n1", res("10", "10G", pods="10"))],
        queues=[build_queue("q1", 1, res("3", "3G"))],
        evicted=[],
    ),
    "only commit evictions on the node where preemption succeeds": dict(
        podgroups=[
            pg("pg1", "q1", 0, {}, "low-priority"),
            pg("pg2", "q1", 1, {"": 1}, "high-priority"),
            pg("pg3", "q1", 0, {}, "low-priority"),
        ],
        pods=[
            running("preemptee1", "n1", res("1", "1G"), "pg1", P),
            running("preemptee2", "n2", res("4", "4G"), "pg3", P),
            pending("preemptor1", res("3", "3G"), "pg2"),
        ],
        nodes=[build_node("n1", res("3", "3G", pods="10")), build_node("n2", res("4", "4G", pods="10"))],
        queues=[build_queue("q1", 1, res("6", "6G"))],
        evicted=["c1/preemptee2"],
    ),
    "multi-queue: preemptorTasks must not be overwritten by intra-job preemption of another queue": dict(
        podgroups=[
            build_podgroup("pg1", "c1", "q1", 1, {"": 1}, "Inqueue"),
            pg("pg2", "q2", 0, {}, "low-priority"),
            pg("pg3", "q2", 1, {"": 1}, "high-priority"),
        ],
        pods=[
            running("q1-runner1", "n1", res("1", "1G"), "pg1"),
            running("q2-preemptee1", "n1", res("1", "1G"), "pg2", P),
            pending("q2-preemptor1", res("1", "1G"), "pg3"),
        ],
        nodes=[build_node("n1", res("2", "2G", pods="10"))],
        queues=[build_queue("q1", 1), build_queue("q2", 1, res("4", "4G"))],
        evicted=["c1/q2-preemptee1"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_preempt(case):
    """TestPreempt: the case named by the parameter; expected evictions as ExpectEvicted/ExpectEvictNum."""
    c = CASES[case]
    out = run(CONF, c["nodes"], c["pods"], c["podgroups"], c["queues"], PCS)
    assert out.evicted == sorted(c["evicted"])
