"""Volcano's pkg/scheduler/actions/allocate/allocate_test.go, TestAllocate, case by case: the
allocate action alone; one tier of gang, drf, proportion, predicates and nodeorder with the
callbacks the Go test enables. Roles (volcano.sh/task-spec) are pod labels there, as here."""

import pytest

from volcano.port import build_node, build_pod, build_podgroup, build_queue, res, run

CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: gang
    enablePreemptable: false
    enableReclaimable: false
  - name: drf
  - name: proportion
    enabledOverused: false
    enableJobEnqueued: false
  - name: predicates
  - name: nodeorder
"""


def role_pod(name, role, selector, req=None):
    return build_pod(
        "c1",
        name,
        "",
        "Pending",
        req or res("1", "1G"),
        "pg1",
        {"volcano.sh/task-spec": role},
        {"nodeRole": selector},
    )


def plain(ns, name, group, req=None):
    return build_pod(ns, name, "", "Pending", req or res("1", "1G"), group)


CASES = {
    "prepredicate failed: node selector does not match": dict(
        podgroups=[build_podgroup("pg1", "c1", "c1", 1, None, "Inqueue")],
        pods=[role_pod("p1", "master", "master"), role_pod("p2", "worker", "worker")],
        nodes=[build_node("n1", res("2", "4Gi", pods="10"), {"nodeRole": "worker"})],
        queues=[build_queue("c1", 1)],
        bound={"c1/p2": "n1"},
    ),
    "prepredicate failed and tasks are not used up, continue on until min member meet": dict(
        podgroups=[build_podgroup("pg1", "c1", "c1", 2, {"master": 1, "worker": 1}, "Inqueue")],
        pods=[
            role_pod("p0", "master", "master"),
            role_pod("p1", "master", "master"),
            role_pod("p2", "worker", "worker"),
            role_pod("p3", "worker", "worker"),
        ],
        nodes=[
            build_node("n1", res("1", "2Gi", pods="10"), {"nodeRole": "master"}),
            build_node("n2", res("1", "2Gi", pods="10"), {"nodeRole": "worker"}),
        ],
        queues=[build_queue("c1", 1)],
        bound={"c1/p0": "n1", "c1/p2": "n2"},
    ),
    "master's min member can not be allocated, break from allocating": dict(
        podgroups=[build_podgroup("pg1", "c1", "c1", 2, {"master": 2, "worker": 0}, "Inqueue")],
        pods=[
            role_pod("p0", "master", "master"),
            role_pod("p1", "master", "master"),
            role_pod("p2", "worker", "worker"),
            role_pod("p3", "worker", "worker"),
        ],
        nodes=[
            build_node("n1", res("1", "2Gi", pods="10"), {"nodeRole": "master"}),
            build_node("n2", res("2", "2Gi", pods="10"), {"nodeRole": "worker"}),
        ],
        queues=[build_queue("c1", 1)],
        bound={},
    ),
    "one Job with two Pods on one node": dict(
        podgroups=[build_podgroup("pg1", "c1", "c1", 0, None, "Inqueue")],
        pods=[plain("c1", "p1", "pg1"), plain("c1", "p2", "pg1")],
        nodes=[build_node("n1", res("2", "4Gi", pods="10"))],
        queues=[build_queue("c1", 1)],
        bound={"c1/p1": "n1", "c1/p2": "n1"},
    ),
    "two Jobs on one node": dict(
        podgroups=[
            build_podgroup("pg1", "c1", "c1", 0, None, "Inqueue"),
            build_podgroup("pg2", "c2", "c2", 0, None, "Inqueue"),
        ],
        pods=[
            plain("c1", "pg1-p-1", "pg1"),
            plain("c1", "pg1-p-2", "pg1"),
            plain("c2", "pg2-p-1", "pg2"),
            plain("c2", "pg2-p-2", "pg2"),
        ],
        nodes=[build_node("n1", res("2", "4G", pods="10"))],
        queues=[build_queue("c1", 1), build_queue("c2", 1)],
        bound={"c2/pg2-p-1": "n1", "c1/pg1-p-1": "n1"},
    ),
    "high priority queue should not block others": dict(
        podgroups=[
            build_podgroup("pg1", "c1", "c1", 0, None, "Inqueue"),
            build_podgroup("pg2", "c1", "c2", 0, None, "Inqueue"),
        ],
        pods=[plain("c1", "p1", "pg1", res("3", "1G")), plain("c1", "p2", "pg2")],
        nodes=[build_node("n1", res("2", "4G", pods="10"))],
        queues=[build_queue("c1", 1), build_queue("c2", 1)],
        bound={"c1/p2": "n1"},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_allocate(case):
    """TestAllocate: the case named by the parameter; expected binds as ExpectBindMap/ExpectBindsNum."""
    c = CASES[case]
    out = run(CONF, c["nodes"], c["pods"], c["podgroups"], c["queues"])
    assert out.bound == c["bound"]
