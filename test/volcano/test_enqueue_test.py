"""Volcano's pkg/scheduler/actions/enqueue/enqueue_test.go, TestEnqueue, case by case: the enqueue
action alone, one tier of drf, proportion, sla (sla-waiting-time 3m) and gang with the callbacks
the Go test enables, and no nodes at all."""

import pytest

from volcano.port import build_pod, build_podgroup, build_queue, res, run

CONF = """
actions: "enqueue"
tiers:
- plugins:
  - name: drf
    enablePreemptable: false
  - name: proportion
    enabledOverused: false
    enabledAllocatable: false
    enableReclaimable: false
  - name: sla
    arguments:
      sla-waiting-time: 3m
  - name: gang
    enableJobPipelined: false
    enableJobReady: false
    enablePreemptable: false
    enableReclaimable: false
"""


def pod(name, phase, req, group):
    return build_pod("c1", name, "", phase, req, group)


CASES = {
    "when podgroup status is inqueue": dict(
        podgroups=[build_podgroup("pg1", "c1", "c1", 2, None, "Inqueue")],
        pods=[pod("p1", "Pending", res("1", "1G"), "pg1"), pod("p2", "Pending", res("1", "1G"), "pg1")],
        queues=[build_queue("c1", 1, res("4", "4G")), build_queue("c2", 1, res("4", "4G"))],
        expect={"c1/pg1": "Inqueue"},
    ),
    "when podgroup status is pending": dict(
        podgroups=[
            build_podgroup("pg1", "c1", "c1", 1, None, "Pending"),
            build_podgroup("pg2", "c1", "c2", 1, None, "Pending"),
        ],
        pods=[pod("p1", "Pending", res("3", "1G"), "pg1"), pod("p2", "Pending", res("1", "1G"), "pg2")],
        queues=[build_queue("c1", 1, res("4", "4G")), build_queue("c2", 1, res("4", "4G"))],
        expect={"c1/pg1": "Inqueue", "c1/pg2": "Inqueue"},
    ),
    "when podgroup status is running": dict(
        podgroups=[build_podgroup("pg1", "c1", "c1", 2, None, "Running")],
        pods=[pod("p1", "Running", res("1", "1G"), "pg1"), pod("p2", "Running", res("1", "1G"), "pg1")],
        queues=[build_queue("c1", 1, res("4", "4G"))],
        expect={"c1/pg1": "Running"},
    ),
    "pggroup cannot enqueue because the specified queue is c1, but there is only c2": dict(
        podgroups=[build_podgroup("pg1", "c1", "c1", 0, None, "Pending")],
        pods=[],
        queues=[build_queue("c2", 1, res("4", "4G"))],
        # Volcano drops the job from the session (ExpectStatus {}); Caldera keeps it, still Pending
        expect={"c1/pg1": "Pending"},
    ),
    "pggroup cannot enqueue because queue resources are less than podgroup MinResources": dict(
        podgroups=[build_podgroup("pg1", "c1", "c1", 1, None, "Pending", min_resources=res("8", "8G"))],
        pods=[],
        queues=[build_queue("c1", 1, res("1", "1G"))],
        expect={"c1/pg1": "Pending"},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_enqueue(case):
    """TestEnqueue: the case named by the parameter; expected PodGroup phases as ExpectStatus."""
    c = CASES[case]
    out = run(CONF, [], c["pods"], c["podgroups"], c["queues"])
    assert {k: v for k, v in out.phases.items() if k in c["expect"]} == c["expect"]
