"""priority: higher PodGroup priority first; inside a job, higher pod priority first."""

from caldera.hack.scenario import cluster, node, pod, podgroup, priority_class, run_session


def test_jobs_go_by_priority_class_not_creation_order():
    pgs = [podgroup("old-low", priority_class="low"), podgroup("new-high", priority_class="high")]
    pods = [pod("old-low-0", cpu="2", group="old-low"), pod("new-high-0", cpu="2", group="new-high")]
    pcs = [priority_class("low", 1), priority_class("high", 100)]
    _, result = run_session(
        cluster(nodes=[node("n1", cpu="2")], pods=pods, podgroups=pgs, priority_classes=pcs)
    )
    assert [p.task.name for p in result.placements] == ["new-high-0"]


def test_tasks_go_by_pod_priority_inside_a_job():
    pg = podgroup("j", min_member=1)
    pods = [pod("j-low", cpu="2", group="j", priority=1), pod("j-high", cpu="2", group="j", priority=50)]
    _, result = run_session(cluster(nodes=[node("n1", cpu="2")], pods=pods, podgroups=[pg]))
    assert [p.task.name for p in result.placements] == ["j-high"]
