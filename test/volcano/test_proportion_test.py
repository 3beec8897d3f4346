"""Volcano's pkg/scheduler/plugins/proportion/proportion_test.go: TestEnqueueAndAllocable (enqueue
then allocate, proportion alone with the switches of each case) and TestAllocate (allocate then
reclaim, proportion with its queue order only)."""

import pytest

from volcano.port import build_node, build_pod, build_podgroup, build_queue, registry_with_rejecter, res, run


def conf(actions, allocatable, overused, enqueued, queue_order=False):
    def b(v):
        return "true" if v else "false"

    return f"""
actions: "{actions}"
tiers:
- plugins:
  - name: proportion
    enabledAllocatable: {b(allocatable)}
    enabledOverused: {b(overused)}
    enableJobEnqueued: {b(enqueued)}
    enableQueueOrder: {b(queue_order)}
    enableReclaimable: false
    enablePreemptive: false
"""


ALL = conf("enqueue, allocate", True, True, True)
ENQUEUEABLE = conf("enqueue, allocate", False, False, True)
ALLOCATABLE = conf("enqueue, allocate", True, False, False)

R1C2G, R2C1G, R1C0G, R0C1G, R1C1G = (
    res("1", "2G"),
    res("2", "1G"),
    res("1", "0G"),
    res("0", "1G"),
    res("1", "1G"),
)
NODES = [build_node("n1", res("2", "2G", pods="10")), build_node("n2", res("2", "2G", pods="10"))]


def pods(*names):
    table = {
        "pod1": ("n1", "Running", R1C2G, "pg1"),
        "pod2": ("n2", "Running", R2C1G, "pg2"),
        "pod3": ("", "Pending", R1C0G, "pg3"),
        "pod4": ("", "Pending", R0C1G, "pg4"),
        "pod5": ("", "Pending", R1C1G, "pg5"),
        "pod6": ("", "Pending", R1C1G, "pg6"),
    }
    return [build_pod("ns1", n, *table[n]) for n in names]


def pgs(*names):
    table = {
        "pg1": ("q1", "Running", R1C2G),
        "pg2": ("q2", "Running", R2C1G),
        "pg3": ("q1", "Pending", R1C0G),
        "pg4": ("q2", "Pending", R0C1G),
        "pg5": ("q1", "Pending", R1C1G),
        "pg6": ("q3", "Pending", R1C1G),
    }
    return [
        build_podgroup(n, "ns1", table[n][0], 1, None, table[n][1], min_resources=table[n][2]) for n in names
    ]


Q12 = [build_queue("q1", 1, res("2", "2G")), build_queue("q2", 1, res("3", "3G"))]

CASES = {
    "case0: memory exceed derserved, job only request cpu can be enqueued and allocated": (
        ALL,
        pods("pod1", "pod2", "pod3"),
        pgs("pg1", "pg2", "pg3"),
        Q12,
        {"ns1/pod3": "n1"},
    ),
    "case1: cpu exceed derserved, job only request memory can be enqueued and allocated": (
        ALL,
        pods("pod1", "pod2", "pod4"),
        pgs("pg1", "pg2", "pg4"),
        Q12,
        {"ns1/pod4": "n2"},
    ),
    "case2: exceed capacity, can not enqueue": (
        ENQUEUEABLE,
        pods("pod1", "pod2", "pod5"),
        pgs("pg1", "pg2", "pg5"),
        Q12,
        {},
    ),
    "case3: exceed deserved, can not allocate": (
        ALLOCATABLE,
        pods("pod1", "pod2", "pod5"),
        pgs("pg1", "pg2", "pg5"),
        Q12,
        {},
    ),
    "case4: queue with  non-open state, can not enqueue": (
        ENQUEUEABLE,
        pods("pod6"),
        pgs("pg6"),
        [build_queue("q3", 1, res("3", "3G"), state="Closed")],
        {},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_enqueue_and_allocable(case):
    """TestEnqueueAndAllocable: the case named by the parameter; expected binds as ExpectBindMap."""
    text, pod_list, pg_list, queues, bound = CASES[case]
    assert run(text, NODES, pod_list, pg_list, queues).bound == bound


def test_allocate_in_queue_priority_order():
    """TestAllocate/case0: Pods are assigned according to the order of Queue Priority in which PGs are placed."""
    nodes = [build_node("n1", res("2", "4Gi", pods="10")), build_node("n2", res("2", "4Gi", pods="10"))]
    pod_list = [
        build_pod("ns1", "p1", "n1", "Running", res("2", "4Gi"), "pg1"),
        build_pod("ns1", "p2", "", "Pending", res("2", "4Gi"), "pg2"),
        build_pod("ns1", "p3", "", "Pending", res("2", "4Gi"), "pg3"),
    ]
    pg_list = [
        build_podgroup("pg1", "ns1", "q1", 1, None, "Running"),
        build_podgroup("pg2", "ns1", "q2", 1, None, "Inqueue"),
        build_podgroup("pg3", "ns1", "q3", 1, None, "Inqueue"),
    ]
    queues = [
        build_queue("q1", priority=5, capability=res("2", "4Gi")),
        build_queue("q2", priority=1, capability=res("2", "4Gi")),
        build_queue("q3", priority=10, capability=res("2", "4Gi")),
    ]
    text = conf("allocate, reclaim", False, False, False, queue_order=True)
    assert run(text, nodes, pod_list, pg_list, queues).bound == {"ns1/p3": "n2"}


def test_no_double_counting_for_inqueue_job_with_binding_tasks():
    """TestNoDoubleCountingForInqueueJobWithBindingTasks, second cycle: pgA's three pods are bound
    (not yet running) while pgA is still Inqueue; its minResources must not count twice, so pgB
    (1 cpu) is let in and bound on the 4-cpu node (queue capability 4 cpu)."""
    nodes = [build_node("n1", res("4", "8Gi", pods="10"))]
    pods_ = [build_pod("ns1", f"pA{i}", "n1", "Pending", res("1", "1Gi"), "pgA") for i in (1, 2, 3)]
    pods_.append(build_pod("ns1", "pB1", "", "Pending", res("1", "1Gi"), "pgB"))
    pgs_ = [
        build_podgroup("pgA", "ns1", "q1", 3, None, "Inqueue", min_resources=res("3", "3Gi")),
        build_podgroup("pgB", "ns1", "q1", 1, None, "Pending", min_resources=res("1", "1Gi")),
    ]
    out = run(ALL, nodes, pods_, pgs_, [build_queue("q1", 1, res("4", "8Gi"))])
    assert out.bound == {"ns1/pB1": "n1"}


def test_job_enqueued_on_other_plugins_reject():
    """TestJobEnqueuedOnOtherPluginsReject: another plugin rejects pgA; proportion must not keep a
    phantom reservation for it, so pgB (queue capability 1 cpu) is still let in."""
    registry = registry_with_rejecter("pgA")
    text = """
actions: "enqueue"
tiers:
- plugins:
  - name: proportion
    enabledAllocatable: false
    enabledOverused: false
    enableQueueOrder: false
  - name: test-rejecter
"""
    pods_ = [
        build_pod("ns1", n, "", "Pending", res("1", "1G"), g) for n, g in (("podA", "pgA"), ("podB", "pgB"))
    ]
    pgs_ = [
        build_podgroup(g, "ns1", "q1", 1, None, "Pending", min_resources=res("1", "1G"))
        for g in ("pgA", "pgB")
    ]
    out = run(
        text,
        [build_node("n1", res("4", "4G", pods="10"))],
        pods_,
        pgs_,
        [build_queue("q1", 1, res("1", "4G"))],
        registry=registry,
    )
    assert out.phases["ns1/pgB"] == "Inqueue"
