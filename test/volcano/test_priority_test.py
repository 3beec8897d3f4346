"""Volcano's pkg/scheduler/plugins/priority/priority_test.go, TestPreempt: allocate then preempt with
the priority plugin alone (task order, job order, starving, and preemptable/reclaimable on or off).
TestUnifiedEvictableFn_GangReclaimPermitsAll checks an internal callback of Volcano's gangpreempt
and gangreclaim actions that Caldera has no counterpart of (README: Differences from Volcano)."""

import pytest

from volcano.port import build_node, build_pod, build_podgroup, build_queue, priority_classes, res, run


def conf(evict):
    flag = "true" if evict else "false"
    return f"""
actions: "allocate, preempt"
tiers:
- plugins:
  - name: priority
    enablePreemptable: {flag}
    enableReclaimable: {flag}
    enableJobPipelined: false
"""


PCS = priority_classes(low_priority=100, high_priority=1000)
P = {"volcano.sh/preemptable": "true"}
NP = {"volcano.sh/preemptable": "false"}
PGS = [
    build_podgroup("pg1", "ns1", "q1", 1, {}, "Inqueue", "low-priority"),
    build_podgroup("pg2", "ns2", "q1", 1, {}, "Inqueue", "high-priority"),
]
Q = [build_queue("q1", 1, res("6", "6G"))]

CASES = {
    "enable preempt low priority: enablePreemptable:true": dict(
        evict=True,
        pods=[
            build_pod("ns1", "preemptee1", "node1", "Running", res("3", "3G"), "pg1", P),
            build_pod("ns1", "preemptee2", "node1", "Running", res("3", "3G"), "pg1", P, priority=1000),
            build_pod("ns2", "preemptor1", "", "Pending", res("3", "3G"), "pg2"),
        ],
        nodes=[
            build_node("node1", res("6", "6G", pods="10")),
            build_node("node2", res("2", "2G", pods="10")),
        ],
        evicted=["ns1/preemptee1"],
        pipelined={"ns2/preemptor1": "node1"},
    ),
    "disable preempt low priority: enablePreemptable:false": dict(
        evict=False,
        pods=[
            build_pod("ns1", "preemptee1", "node1", "Running", res("3", "3G"), "pg1", P),
            build_pod("ns1", "preemptee2", "node2", "Running", res("3", "3G"), "pg1", NP),
            build_pod("ns2", "preemptor1", "", "Pending", res("3", "3G"), "pg2"),
        ],
        nodes=[
            build_node("node1", res("3", "3G", pods="10")),
            build_node("node2", res("3", "3G", pods="10")),
        ],
        evicted=[],
        pipelined={},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_preempt(case):
    """priority TestPreempt: the case named by the parameter; ExpectEvicted and ExpectPipeLined."""
    c = CASES[case]
    out = run(conf(c["evict"]), c["nodes"], c["pods"], PGS, Q, PCS)
    assert out.evicted == c["evicted"]
    assert out.pipelined == c["pipelined"]
