"""Volcano's pkg/scheduler/actions/backfill/backfill_test.go, TestPickUpPendingTasks ("test"):
best-effort tasks are taken job by job in job order (higher job priority first) and, inside a job,
in task order (higher pod priority first). Volcano checks the order of its internal
pickUpPendingTasks, with half of the tasks pipelined beforehand; Caldera has no such helper, so the
same pods all start pending and the order of backfill's bindings is checked instead."""

from volcano.port import build_node, build_pod, build_podgroup, build_queue, priority_classes, res, run

CONF = """
actions: "backfill"
tiers:
- plugins:
  - name: priority
  - name: drf
"""


def test_pick_up_pending_tasks_order():
    """TestPickUpPendingTasks/test: expectedResult pg2-besteffort-task-4 ... pg1-besteffort-task-1."""
    pods = []
    for g in ("pg1", "pg2"):
        for i in (1, 2, 3, 4):
            pods.append(build_pod("default", f"{g}-besteffort-task-{i}", "", "Pending", {}, g, priority=i))
            pods.append(
                build_pod(
                    "default", f"{g}-unbesteffort-task-{i}", "", "Pending", {"cpu": "500m"}, g, priority=i
                )
            )
    out = run(
        CONF,
        [build_node("node1", res("4", "4G", pods="100"))],
        pods,
        [
            build_podgroup("pg1", "default", "q1", 1, {"": 3}, "Inqueue", "job-priority-1"),
            build_podgroup("pg2", "default", "q1", 1, {"": 3}, "Inqueue", "job-priority-2"),
        ],
        [build_queue("q1", 1)],
        priority_classes(job_priority_1=1, job_priority_2=2),
    )
    assert [name.split("/")[1] for name in out.bound] == [
        "pg2-besteffort-task-4",
        "pg2-besteffort-task-3",
        "pg2-besteffort-task-2",
        "pg2-besteffort-task-1",
        "pg1-besteffort-task-4",
        "pg1-besteffort-task-3",
        "pg1-besteffort-task-2",
        "pg1-besteffort-task-1",
    ]
