"""Volcano's pkg/scheduler/plugins/capacity/capacity_test.go, Test_capacityPlugin_OnSessionOpenWithHierarchy:
enqueue, reclaim, allocate; capacity with enableHierarchy (allocatable, preemptive, reclaimable,
queue order, job enqueued), predicates, gang (job starving only). Queues are
buildQueueWithParents(name, parent, deserved, capability)."""

import pytest

from volcano.port import build_node, build_pod, build_podgroup, build_queue, res, run

CONF = """
actions: "enqueue, reclaim, allocate"
tiers:
- plugins:
  - name: capacity
    enableHierarchy: true
  - name: predicates
  - name: gang
    enableJobOrder: false
    enableJobReady: false
    enableJobPipelined: false
    enablePreemptable: false
    enableReclaimable: false
"""
NP = {"volcano.sh/preemptable": "false"}
GPU, A100 = "nvidia.com/gpu", "nvidia.com/a100"


def qp(name, parent, deserved=None, capability=None, guarantee=None):
    d = build_queue(name, deserved=deserved, capability=capability, guarantee=guarantee)
    if not parent:
        return d
    import msgspec

    return msgspec.structs.replace(d, spec=msgspec.structs.replace(d.spec, parent=parent))


def pend(name, req, group):
    return build_pod("ns1", name, "", "Pending", req, group)


def runp(name, node, req, group, labels=None):
    return build_pod("ns1", name, node, "Running", req, group, labels)


def pg(name, queue, phase, min_member=1, min_resources=None):
    return build_podgroup(name, "ns1", queue, min_member, None, phase, min_resources=min_resources)


N1 = build_node("n1", res("8", "8Gi", pods="11"))
N2 = build_node("n2", res("8", "8Gi", pods="10", **{GPU: "8", "hugepages-1Gi": "0"}))
ROOT = qp("root", "")
Q1, Q2 = qp("q1", "root", None, res("4", "4Gi")), qp("q2", "root", None, res("4", "4Gi"))
Q11, Q12 = qp("q11", "q1", None, res("1", "1Gi")), qp("q12", "q1", None, res("3", "3Gi"))
Q3 = qp("q3", "root", res("4", "4Gi", pods="10"), res("4", "4Gi", pods="10"))
Q4 = qp("q4", "root", res("2", "2Gi", pods="1"), res("4", "4Gi", pods="4"))
Q31 = qp("q31", "q3", res("2", "2Gi", pods="2"), res("4", "4Gi", pods="4"))
Q32 = qp("q32", "q3", res("2", "2Gi", pods="2"), res("4", "4Gi", pods="4"))
Q33 = qp("q33", "q3", res("0", "0Gi", pods="2"), res("4", "4Gi", pods="4"))
P6 = runp("p6", "n1", res("2", "2Gi"), "pg5", NP)
PG5 = pg("pg5", "q31", "Running")

CASES = {
    "case0: Pod allocatable when queue is leaf queue": dict(
        pods=[pend("p1", res("1", "1Gi"), "pg1")],
        nodes=[N1],
        podgroups=[pg("pg1", "q11", "Inqueue")],
        queues=[ROOT, Q1, Q2, Q11, Q12],
        bound={"ns1/p1": "n1"},
    ),
    "case1: Pod not allocatable when queue is not leaf queue": dict(
        pods=[pend("p2", res("1", "1Gi"), "pg2")],
        nodes=[N1],
        podgroups=[pg("pg2", "q1", "Pending")],
        queues=[ROOT, Q1, Q2, Q11, Q12],
    ),
    "case2: Pod allocatable when queue has not exceed capability": dict(
        pods=[pend("p3", res("2", "2Gi"), "pg3"), pend("p4", res("2", "2Gi"), "pg3")],
        nodes=[N1],
        podgroups=[pg("pg3", "q31", "Inqueue", 2)],
        queues=[ROOT, Q3, Q4, Q31, Q32],
        bound={"ns1/p3": "n1", "ns1/p4": "n1"},
    ),
    "case3: Can reclaim from other queues when allocated < deserved": dict(
        pods=[
            runp("p5", "n1", res("4", "4Gi"), "pg4"),
            P6,
            runp("p7", "n1", res("2", "2Gi"), "pg5"),
            pend("p8", res("2", "2Gi"), "pg6"),
        ],
        nodes=[N1],
        podgroups=[pg("pg4", "q4", "Running"), PG5, pg("pg6", "q32", "Inqueue")],
        queues=[ROOT, Q3, Q31, Q32, Q4],
        pipelined={"ns1/p8": "n1"},
        evicted=["ns1/p7"],
    ),
    "case4: Pod is not allocatable when ancestor queue's real capability not enough": dict(
        pods=[P6, runp("p9", "n1", res("2", "2Gi"), "pg7"), pend("p10", res("3", "3Gi"), "pg8")],
        nodes=[N1],
        podgroups=[PG5, pg("pg7", "q32", "Running"), pg("pg8", "q33", "Inqueue")],
        queues=[ROOT, Q3, Q31, Q32, Q33],
    ),
    "case5: If the capability cpu or memory is not specified, the value should be inherited from parent queue": dict(
        pods=[pend("p11", res("1"), "pg9")],
        nodes=[N1],
        podgroups=[pg("pg9", "q51", "Running")],
        queues=[ROOT, qp("q5", "root", None, res(None, "4Gi")), qp("q51", "q5", None, res(None, "2Gi"))],
        bound={"ns1/p11": "n1"},
    ),
    "case6: podgroup can't be enqueued when any ancestor queue's capability is not enough": dict(
        pods=[],
        nodes=[N1],
        podgroups=[
            pg("pg10", "q61", "Pending", min_resources=res("2", "4Gi")),
            pg("pg11", "q62", "Pending", min_resources=res("2", "4Gi")),
        ],
        queues=[ROOT, qp("q6", "root", None, res("2", "4Gi")), qp("q61", "q6"), qp("q62", "q6")],
        phases={"ns1/pg10": "Inqueue", "ns1/pg11": "Pending"},
    ),
    "case7: the sum of sub queue 71 and 72's guarantee exceeds the capacity of queue7, but should not panic": dict(
        pods=[],
        nodes=[N1],
        podgroups=[],
        queues=[
            ROOT,
            qp("q7", "root", None, res("6", "4Gi")),
            qp("q71", "q7", None, res("6", "4Gi"), res("4", "3Gi")),
            qp("q72", "q7", None, res("6", "4Gi"), res("4", "3Gi")),
        ],
    ),
    "case8: When the queue's deserved value has a scalar resource set, the check can pass": dict(
        pods=[pend("p12", res("2", "2Gi", **{GPU: "1"}), "pg12")],
        nodes=[build_node("n-gpu", res("8", "8Gi", pods="10", **{GPU: "8"}))],
        podgroups=[pg("pg12", "q81", "Inqueue")],
        queues=[
            ROOT,
            qp("q8", "root", res("4", "4Gi", **{GPU: "8"})),
            qp("q81", "q8", res("2", "2Gi", **{GPU: "4"})),
            qp("q82", "q8", res("2", "2Gi", **{GPU: "4"})),
        ],
        bound={"ns1/p12": "n-gpu"},
    ),
    "case9: When some scalar resources are 0 in deserved, the check can still pass": dict(
        pods=[pend("p13", res("2", "2Gi", **{GPU: "1"}), "pg13")],
        nodes=[N2],
        podgroups=[pg("pg13", "q91", "Inqueue")],
        queues=[
            ROOT,
            qp("q9", "root", res("2", "2Gi", **{GPU: "8", "hugepages-1Gi": "0"})),
            qp("q91", "q9", res("2", "2Gi", **{GPU: "4", "hugepages-1Gi": "0"})),
        ],
        bound={"ns1/p13": "n2"},
    ),
    "case10: root queue's capability > cluster total resource, but should not panic": dict(
        pods=[],
        nodes=[N1],
        podgroups=[],
        queues=[qp("root", "", None, res("16", "16Gi")), qp("q10", "root", None, res("10", "4Gi"))],
    ),
    "case11: If the capability scalar resources is not specified, the value should be inherited from parent queue": dict(
        pods=[
            pend("p14", res("1", "1Gi", **{GPU: "4"}), "pg14"),
            pend("p15", res("1", "1Gi", **{GPU: "4"}), "pg15"),
        ],
        nodes=[N2],
        podgroups=[pg("pg14", "case11_queue11", "Inqueue"), pg("pg15", "case11_queue12", "Inqueue")],
        queues=[
            ROOT,
            qp("case11_queue1", "root"),
            qp("case11_queue11", "case11_queue1", None, res("4", "4Gi", **{GPU: "4"})),
            qp("case11_queue12", "case11_queue1", None, res("4", "4Gi", **{GPU: "4"})),
        ],
        bound={"ns1/p14": "n2", "ns1/p15": "n2"},
    ),
    "case12: Can reclaim from other queues when allocated <= deserved on a single scalar dimension": dict(
        pods=[
            pend("p16", res("1", "1Gi", **{A100: "2", "rdma/hca": "1"}), "pg16"),
            runp("p17", "n3", res("1", "1Gi", **{A100: "2", "rdma/hca": "1"}), "pg17"),
            runp("p18", "n3", res("1", "1Gi", **{A100: "2", "rdma/hca": "1"}), "pg18", NP),
        ],
        nodes=[build_node("n3", res("16", "16Gi", pods="11", **{A100: "5", "rdma/hca": "1001"}))],
        podgroups=[
            pg("pg16", "case12_queue11", "Inqueue"),
            pg("pg17", "case12_queue12", "Running"),
            pg("pg18", "case12_queue12", "Running"),
        ],
        queues=[
            qp("root", "", res("16", "16Gi", **{A100: "4", "rdma": "1000"})),
            qp("case12_queue1", "root", {A100: "2"}),
            qp("case12_queue11", "case12_queue1", {A100: "2"}),
            qp("case12_queue12", "case12_queue1"),
        ],
        pipelined={"ns1/p16": "n3"},
        evicted=["ns1/p17"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_capacity_with_hierarchy(case):
    """Test_capacityPlugin_OnSessionOpenWithHierarchy: ExpectBindMap, ExpectPipeLined, ExpectEvicted, ExpectStatus."""
    c = CASES[case]
    out = run(CONF, c["nodes"], c["pods"], c["podgroups"], c["queues"])
    assert out.bound == c.get("bound", {})
    assert out.pipelined == c.get("pipelined", {})
    assert out.evicted == sorted(c.get("evicted", []))
    for uid, phase in c.get("phases", {}).items():
        assert out.phases[uid] == phase
