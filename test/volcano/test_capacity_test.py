"""Volcano's pkg/scheduler/plugins/capacity/capacity_test.go, Test_capacityPlugin_OnSessionOpenWithoutHierarchy:
allocate then reclaim, one tier of capacity (allocatable, preemptive, reclaimable, queue order),
predicates and gang (job starving only). Queues are BuildQueueWithResourcesQuantity(name, deserved,
capability). Test_updateQueueAttrShare (the queue share, exported as volcano_queue_share) is ported
below; the hierarchical, DRA and other internal-helper tests of that file are not (README)."""

import pytest

from caldera.framework.resource import Resource
from caldera.plugins.capacity import capacity_share
from volcano.port import build_node, build_pod, build_podgroup, build_queue, registry_with_rejecter, res, run

CONF = """
actions: "allocate, reclaim"
tiers:
- plugins:
  - name: capacity
    enabledOverused: false
    enableJobEnqueued: false
  - name: predicates
  - name: gang
    enableJobOrder: false
    enableJobReady: false
    enableJobPipelined: false
    enablePreemptable: false
    enableReclaimable: false
"""
NP = {"volcano.sh/preemptable": "false"}
GPU = "nvidia.com/gpu"
A100 = "nvidia.com/A100"


def node(name, alloc, labels=None):
    return build_node(name, {**alloc, "pods": "10"}, labels)


N1 = node("n1", res("2", "4Gi"), {"selector": "worker"})
N2 = node("n2", res("2", "4Gi"))


def running(name, node_name, req, group, labels=None):
    return build_pod("ns1", name, node_name, "Running", req, group, labels)


def pending(name, req, group, selector=None):
    return build_pod("ns1", name, "", "Pending", req, group, None, selector)


def pg(name, queue, phase):
    return build_podgroup(name, "ns1", queue, 1, None, phase)


def q(name, deserved=None, capability=None, priority=0):
    return build_queue(name, deserved=deserved, capability=capability, priority=priority)


CASES = {
    "case0: Pod allocatable when queue has not exceed capability": dict(
        pods=[
            running("p1", "n1", res("1", "1Gi"), "pg1"),
            pending("p2", res("1", "1Gi"), "pg2", {"selector": "worker"}),
        ],
        nodes=[N1, N2],
        podgroups=[pg("pg1", "q1", "Running"), pg("pg2", "q1", "Inqueue")],
        queues=[q("q1", None, res("2", "2Gi"))],
        bound={"ns1/p2": "n1"},
    ),
    "case1: Pod not allocatable when queue exceed queue capability": dict(
        pods=[running("p3", "n1", res("1", "1Gi"), "pg3"), pending("p4", res("1", "1Gi"), "pg4")],
        nodes=[N1, N2],
        podgroups=[pg("pg3", "q2", "Running"), pg("pg4", "q2", "Inqueue")],
        queues=[q("q2", None, res("1.5", "1.5Gi"))],
    ),
    "case2: Can reclaim from other queues when allocated < deserved": dict(
        pods=[
            running("p5", "n1", res("2", "4Gi"), "pg5", NP),
            running("p6", "n2", res("2", "4Gi"), "pg5"),
            pending("p7", res("2", "4Gi"), "pg6"),
        ],
        nodes=[N1, N2],
        podgroups=[pg("pg5", "q3", "Running"), pg("pg6", "q4", "Inqueue")],
        queues=[q("q3", res("2", "4Gi")), q("q4", res("2", "4Gi"))],
        pipelined={"ns1/p7": "n2"},
        evicted=["ns1/p6"],
    ),
    "case3: CPU & Memory are overused, scalar resource is not overused, but candidate pod has not request CPU & Memory, reclaim should happen": dict(
        pods=[
            running("p8", "n3", res("0", "0Gi", **{A100: "10"}), "pg7", NP),
            running("p9", "n4", res("0", "0Gi", **{A100: "10"}), "pg7"),
            running("p10", "n3", res("2", "4Gi"), "pg8"),
            running("p11", "n4", res("2", "4Gi"), "pg8"),
            pending("p12", res("0", "0Gi", **{A100: "10"}), "pg9"),
        ],
        nodes=[
            node("n3", res("2", "4Gi", **{A100: "10"}), {"selector": "worker"}),
            node("n4", res("2", "4Gi", **{A100: "10"})),
        ],
        podgroups=[pg("pg7", "q5", "Running"), pg("pg8", "q6", "Running"), pg("pg9", "q6", "Inqueue")],
        queues=[q("q5", res("2", "4Gi", **{A100: "10"})), q("q6", res("2", "4Gi", **{A100: "10"}))],
        pipelined={"ns1/p12": "n4"},
        evicted=["ns1/p9"],
    ),
    "case4: Pods are assigned according to the order of Queue Priority in which PGs are placed": dict(
        pods=[
            running("p13", "n5", res("2", "4Gi"), "pg10"),
            pending("p14", res("2", "4Gi"), "pg11"),
            pending("p15", res("2", "4Gi"), "pg12"),
        ],
        nodes=[node("n5", res("2", "4Gi")), node("n6", res("2", "4Gi"))],
        podgroups=[pg("pg10", "q7", "Running"), pg("pg11", "q8", "Inqueue"), pg("pg12", "q9", "Inqueue")],
        queues=[
            q("q7", None, res("2", "4Gi"), priority=5),
            q("q8", None, res("2", "4Gi"), priority=1),
            q("q9", None, res("2", "4Gi"), priority=10),
        ],
        bound={"ns1/p15": "n6"},
    ),
    "case5: Can reclaim from other queues when allocated + req <= deserved on one dimension": dict(
        pods=[
            running("p16", "n1", res("1", "3Gi"), "pg16"),
            pending("p17", res("1", "1Gi"), "pg17"),
            running("p18", "n1", res("1", "1Gi"), "pg18"),
        ],
        nodes=[N1],
        podgroups=[pg("pg16", "q10", "Running"), pg("pg17", "q10", "Inqueue"), pg("pg18", "q11", "Running")],
        queues=[q("q10", res("2", "2Gi"), res("4", "4Gi")), q("q11", res("0", "0Gi"), res("2", "2Gi"))],
        pipelined={"ns1/p17": "n1"},
        evicted=["ns1/p18"],
    ),
    "case6: Can not reclaim from other queues when allocated + req > deserved": dict(
        pods=[
            running("p19", "n1", res("1", "1Gi"), "pg19"),
            pending("p20", res("1", "2Gi"), "pg20"),
            running("p21", "n1", res("1", "1Gi"), "pg21"),
        ],
        nodes=[N1],
        podgroups=[pg("pg19", "q12", "Running"), pg("pg20", "q12", "Inqueue"), pg("pg21", "q13", "Running")],
        queues=[q("q12", res("1", "2Gi"), res("4", "4Gi")), q("q13", res("0", "0Gi"), res("2", "2Gi"))],
    ),
    "case7: allocated does not contain scalar dimension (GPU), deserved does; should not reclaim": dict(
        pods=[
            running("p22", "n7", res("2", "4Gi"), "pg22"),
            running("p23", "n7", res("0", "0Gi", **{GPU: "1"}), "pg23"),
            running("p24", "n7", res("2", "1Gi", **{GPU: "1"}), "pg24"),
            pending("p25", res("2", "3Gi", **{GPU: "1"}), "pg25"),
        ],
        nodes=[node("n7", res("4", "8Gi", **{GPU: "4"}))],
        podgroups=[
            pg("pg22", "queue14", "Running"),
            pg("pg23", "queue15", "Running"),
            pg("pg24", "queue16", "Running"),
            pg("pg25", "queue16", "Inqueue"),
        ],
        queues=[
            q("queue14", res("2", "4Gi", **{GPU: "2"})),
            q("queue15"),
            q("queue16", res("2", "4Gi", **{GPU: "2"})),
        ],
    ),
    "case8: reclaimer dimensions are considered properly while evicting reclaimees": dict(
        pods=[
            running("p26", "n8", res("0", "4Gi"), "pg26"),
            running("p27", "n8", res("1", "0Gi"), "pg27"),
            running("p28", "n8", res("0", "0Gi", **{GPU: "1"}), "pg28"),
            running("p29", "n8", res("2", "4Gi"), "pg29"),
            pending("p30", res("1", "0Gi", **{GPU: "1"}), "pg30"),
        ],
        nodes=[node("n8", res("4", "8Gi", **{GPU: "1"}))],
        podgroups=[
            pg("pg26", "queue17", "Running"),
            pg("pg27", "queue17", "Running"),
            pg("pg28", "queue17", "Running"),
            pg("pg29", "queue18", "Running"),
            pg("pg30", "queue18", "Inqueue"),
        ],
        queues=[q("queue17", res("2", "2Gi")), q("queue18", res("2", "4Gi", **{GPU: "1"}))],
        pipelined={"ns1/p30": "n8"},
        evicted=["ns1/p28"],
    ),
    "case9: reclaimee has intersecting scalar dimensions with deserved shouldn't be reclaimed on cpu/memory": dict(
        pods=[
            running("p31", "n8", res("4", "4Gi", **{GPU: "1"}), "pg31"),
            pending("p32", res("1", "1Gi"), "pg32"),
        ],
        nodes=[node("n8", res("4", "8Gi", **{GPU: "1"}))],
        podgroups=[pg("pg31", "queue19", "Running"), pg("pg32", "queue20", "Inqueue")],
        queues=[q("queue19", {GPU: "1"}), q("queue20", res("2", "2Gi"))],
    ),
    "case10: PreemptiveFn respects capability — no reclaim when futureUsed would exceed capability": dict(
        pods=[
            running("p33", "n9", res("7", "90Gi"), "pg33"),
            pending("p34", res("2", "5Gi"), "pg34"),
            running("p35", "n10", res("2", "5Gi"), "pg35"),
        ],
        nodes=[node("n9", res("8", "100Gi")), node("n10", res("8", "100Gi"))],
        podgroups=[
            pg("pg33", "queue21", "Running"),
            pg("pg34", "queue21", "Inqueue"),
            pg("pg35", "queue22", "Running"),
        ],
        queues=[q("queue21", res("8", "100Gi"), res("8", "100Gi")), q("queue22", None, res("2", "5Gi"))],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_capacity_without_hierarchy(case):
    """Test_capacityPlugin_OnSessionOpenWithoutHierarchy: ExpectBindMap, ExpectPipeLined, ExpectEvicted."""
    c = CASES[case]
    out = run(CONF, c["nodes"], c["pods"], c["podgroups"], c["queues"])
    assert out.bound == c.get("bound", {})
    assert out.pipelined == c.get("pipelined", {})
    assert out.evicted == sorted(c.get("evicted", []))


ENQ_CONF = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: capacity
    enableQueueOrder: false
    enableReclaimable: false
"""
R1C3G, R3C1G, R1C0G, R0C1G, R1C1G = (
    res("1", "3G"),
    res("3", "1G"),
    res("1", "0G"),
    res("0", "1G"),
    res("1", "1G"),
)
ENQ_PODS = {
    "pod1": ("n1", "Running", R1C3G, "pg1"),
    "pod2": ("n2", "Running", R3C1G, "pg2"),
    "pod3": ("", "Pending", R1C0G, "pg3"),
    "pod4": ("", "Pending", R0C1G, "pg4"),
    "pod5": ("", "Pending", R1C1G, "pg5"),
    "pod6": ("", "Pending", R1C1G, "pg6"),
}
ENQ_PGS = {
    "pg1": ("q1", "Running", R1C3G),
    "pg2": ("q2", "Running", R3C1G),
    "pg3": ("q1", "Pending", R1C0G),
    "pg4": ("q2", "Pending", R0C1G),
    "pg5": ("q1", "Pending", R1C1G),
    "pg6": ("q3", "Pending", R1C1G),
}
Q12 = [q("q1", res("2", "2G"), res("2", "2G")), q("q2", res("2", "2G"), res("3", "3G"))]
ENQ_CASES = {
    "case0: memory exceed derserved, job only request cpu can be enqueued and allocated": (
        ["pod1", "pod2", "pod3"],
        Q12,
        {"ns1/pod3": "n1"},
    ),
    "case1: cpu exceed derserved, job only request memory can be enqueued and allocated": (
        ["pod1", "pod2", "pod4"],
        Q12,
        {"ns1/pod4": "n2"},
    ),
    "case2: exceed capacity, can not enqueue": (["pod1", "pod2", "pod5"], Q12, {}),
    "case4: queue with non-open state, can not enqueue": (
        ["pod6"],
        [build_queue("q3", 1, res("3", "3G"), state="Closed")],
        {},
    ),
}


@pytest.mark.parametrize("case", list(ENQ_CASES))
def test_enqueue_and_allocatable(case):
    """capacity TestEnqueueAndAllocatable: the case named by the parameter; ExpectBindMap."""
    names, queues, bound = ENQ_CASES[case]
    pods = [build_pod("ns1", n, *ENQ_PODS[n]) for n in names]
    groups = {ENQ_PODS[n][3] for n in names} | ({"pg1", "pg2"} if "pod1" in names else set())
    pgs = [
        build_podgroup(g, "ns1", ENQ_PGS[g][0], 1, None, ENQ_PGS[g][1], min_resources=ENQ_PGS[g][2])
        for g in sorted(groups)
    ]
    nodes = [node("n1", res("3", "3G")), node("n2", res("3", "3G"))]
    assert run(ENQ_CONF, nodes, pods, pgs, queues).bound == bound


def test_no_double_counting_for_inqueue_job_with_binding_tasks():
    """capacity TestNoDoubleCountingForInqueueJobWithBindingTasks, second cycle: pgA's pods are bound,
    pgA still Inqueue; queue capability 4 cpu; pgB (1 cpu) must be let in and bound."""
    text = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: capacity
    enableQueueOrder: false
    enableReclaimable: false
    enablePreemptive: false
"""
    pods = [build_pod("ns1", f"pA{i}", "n1", "Pending", res("1", "1Gi"), "pgA") for i in (1, 2, 3)]
    pods.append(build_pod("ns1", "pB1", "", "Pending", res("1", "1Gi"), "pgB"))
    pgs = [
        build_podgroup("pgA", "ns1", "q1", 3, None, "Inqueue", min_resources=res("3", "3Gi")),
        build_podgroup("pgB", "ns1", "q1", 1, None, "Pending", min_resources=res("1", "1Gi")),
    ]
    out = run(text, [node("n1", res("4", "8Gi"))], pods, pgs, [q("q1", None, res("4", "8Gi"))])
    assert out.bound == {"ns1/pB1": "n1"}


def test_job_enqueued_on_other_plugins_reject():
    """capacity TestJobEnqueuedOnOtherPluginsReject: another plugin rejects pgA; capacity keeps no
    phantom reservation for it, so pgB is let in (queue deserved = capability = 1 cpu)."""
    registry = registry_with_rejecter("pgA")
    text = 'actions: "enqueue"\ntiers:\n- plugins:\n  - name: capacity\n  - name: test-rejecter\n'
    pods = [
        build_pod("ns1", n, "", "Pending", res("1", "1G"), g) for n, g in (("podA", "pgA"), ("podB", "pgB"))
    ]
    pgs = [
        build_podgroup(g, "ns1", "q1", 1, None, "Pending", min_resources=res("1", "1G"))
        for g in ("pgA", "pgB")
    ]
    out = run(
        text,
        [node("n1", res("4", "4G"))],
        pods,
        pgs,
        [q("q1", res("1", "4G"), res("1", "4G"))],
        registry=registry,
    )
    assert out.phases["ns1/pgB"] == "Inqueue"


def _r(cpu: str, memory: str) -> Resource:
    return Resource.from_resource_list(res(cpu, memory))


EMPTY = Resource()
# name: (deserved, allocated, want); Volcano's cases also give a request, which never counts
SHARE_CASES = {
    "best-effort queue with allocated resources": (EMPTY, _r("1", "1Gi"), 1.0),
    "best-effort queue with pending requests only (no allocated)": (EMPTY, EMPTY, 1.0),
    "best-effort queue with both allocated and request": (EMPTY, _r("1", "1Gi"), 1.0),
    "best-effort queue completely idle": (EMPTY, EMPTY, 1.0),
    "queue with deserved but no allocated": (_r("2", "2Gi"), EMPTY, 0.0),
    "queue with deserved, allocated < deserved (CPU dimension)": (_r("2", "2Gi"), _r("1", "1Gi"), 0.5),
    "queue with deserved, allocated = deserved": (_r("2", "2Gi"), _r("2", "2Gi"), 1.0),
    "queue with deserved, allocated > deserved (CPU dimension)": (_r("2", "2Gi"), _r("3", "2Gi"), 1.5),
    "queue with deserved, memory is dominant resource": (_r("2", "4Gi"), _r("1", "3Gi"), 0.75),
    "queue with deserved, CPU is dominant resource": (_r("2", "4Gi"), _r("1.5", "2Gi"), 0.75),
    "queue with deserved, allocated exceeds on both dimensions": (_r("2", "2Gi"), _r("3", "3Gi"), 1.5),
    "queue with deserved, request should not affect share calculation": (_r("2", "2Gi"), _r("1", "1Gi"), 0.5),
    "queue with deserved but zero values": (_r("0", "0Gi"), _r("1", "1Gi"), 1.0),
    "queue with deserved, allocated is zero": (_r("2", "2Gi"), _r("0", "0Gi"), 0.0),
    "best-effort queue with only CPU allocated": (EMPTY, _r("1", "0Gi"), 1.0),
    "best-effort queue with only memory allocated": (EMPTY, _r("0", "1Gi"), 1.0),
    "best-effort queue with only CPU request (no allocated)": (EMPTY, EMPTY, 1.0),
}


@pytest.mark.parametrize("case", list(SHARE_CASES))
def test_update_queue_attr_share(case):
    """capacity Test_updateQueueAttrShare: the queue's share from its deserved and allocated."""
    deserved, allocated, want = SHARE_CASES[case]
    assert capacity_share(allocated, deserved) == want
