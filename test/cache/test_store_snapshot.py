"""The in-memory cache: incremental updates, snapshots a session can change freely, and deletes
that never touch a newer object of the same name."""

from caldera.cache.store import ClusterCache
from caldera.framework.model import TaskStatus
from caldera.framework.session import Placement, SessionResult
from caldera.hack.scenario import gang, load, node, pod, podgroup, priority_class, queue


def test_snapshot_is_isolated_from_later_cache_changes_and_vice_versa():
    pg, pods = gang("job", 2, cpu="1")
    cache = load(ClusterCache(), nodes=[node("n1", cpu="4"), node("n2", cpu="4")], pods=pods, podgroups=[pg])
    snap = cache.snapshot()
    job = snap.jobs["default/job"]
    task = next(iter(job.tasks.values()))
    # the session changes its copy
    job.update_task_status(task, TaskStatus.ALLOCATED)
    snap.nodes["n1"].add_task(task)
    assert cache.nodes["n1"].idle.cpu == 4000
    assert cache.table.idle[cache.nodes["n1"].row, 0] == 4000
    assert cache.jobs["default/job"].count(TaskStatus.PENDING) == 2
    # the cache changes after the snapshot
    cache.upsert_pod(pod("other", cpu="2", scheduler="default-scheduler", node_name="n2", phase="Running"))
    cache.delete_node(node("n1"))
    assert snap.nodes["n2"].idle.cpu == 4000
    assert "n1" in snap.nodes
    assert snap.table.idle[snap.nodes["n2"].row, 0] == 4000


def test_pods_of_other_schedulers_consume_node_resources_but_are_not_tasks():
    cache = load(
        ClusterCache(),
        nodes=[node("n1", cpu="4")],
        pods=[
            pod("foreign", cpu="3", scheduler="default-scheduler", node_name="n1", phase="Running"),
            pod("done", cpu="3", scheduler="default-scheduler", node_name="n1", phase="Succeeded"),
            pod("unbound", cpu="3", scheduler="default-scheduler"),
        ],
    )
    snap = cache.snapshot()
    assert snap.nodes["n1"].idle.cpu == 1000
    assert snap.jobs == {}


def test_pod_without_its_podgroup_waits_until_the_podgroup_arrives():
    pg, pods = gang("late", 2)
    cache = load(ClusterCache(), nodes=[node("n1")], pods=pods)
    assert cache.snapshot().jobs == {}
    assert set(cache.waiting["default/late"]) == {p.metadata.uid for p in pods}
    cache.upsert_podgroup(pg)
    job = cache.snapshot().jobs["default/late"]
    assert job.count(TaskStatus.PENDING) == 2
    assert "default/late" not in cache.waiting


def test_delete_of_an_older_podgroup_never_drops_the_newer_one():
    old = podgroup("flip", uid="uid-old")
    new = podgroup("flip", uid="uid-new")
    cache = load(ClusterCache(), nodes=[node("n1")], podgroups=[old])
    cache.upsert_podgroup(new)  # re-created with the same name
    cache.upsert_pod(pod("flip-0", group="flip"))
    cache.delete_podgroup(old)  # a late event about the old object
    snap = cache.snapshot()
    assert "default/flip" in snap.jobs
    assert snap.jobs["default/flip"].podgroup.metadata.uid == "uid-new"
    cache.delete_podgroup(new)
    assert "default/flip" not in cache.snapshot().jobs
    assert "default/flip" in cache.waiting  # its pod still exists and waits


def test_unchanged_jobs_are_reused_between_snapshots_and_changed_ones_copied():
    pg1, pods1 = gang("a", 3)
    pg2, pods2 = gang("b", 3)
    cache = load(ClusterCache(), nodes=[node("n1")], pods=pods1 + pods2, podgroups=[pg1, pg2])
    first = cache.snapshot()
    second = cache.snapshot()
    assert second.jobs["default/a"] is first.jobs["default/a"]
    # a session touched b (even if it discarded): it is copied afresh
    b = second.jobs["default/b"]
    t = next(iter(b.tasks.values()))
    b.update_task_status(t, TaskStatus.ALLOCATED)
    b.update_task_status(t, TaskStatus.PENDING)
    # the cache changed a
    cache.upsert_pod(pod("a-3", group="a"))
    third = cache.snapshot()
    assert third.jobs["default/a"] is not second.jobs["default/a"]
    assert len(third.jobs["default/a"].tasks) == 4
    assert third.jobs["default/b"] is not b


def test_priority_from_priority_class_even_when_it_arrives_later():
    cache = load(ClusterCache(), nodes=[node("n1")])
    cache.upsert_podgroup(podgroup("vip", priority_class="high"))
    cache.upsert_pod(pod("vip-0", group="vip", priority_class="high"))
    assert cache.snapshot().jobs["default/vip"].priority == 0
    cache.upsert_priority_class(priority_class("high", 1000))
    snap = cache.snapshot()
    assert snap.jobs["default/vip"].priority == 1000
    assert next(iter(snap.jobs["default/vip"].tasks.values())).priority == 1000


def test_apply_assumes_placements_and_forget_releases_them():
    pg, pods = gang("job", 1, cpu="2")
    cache = load(ClusterCache(), nodes=[node("n1", cpu="4")], pods=pods, podgroups=[pg])
    snap = cache.snapshot()
    task = next(iter(snap.jobs["default/job"].tasks.values()))
    assumed = cache.apply(SessionResult(placements=[Placement(task, "n1")]))
    assert [t.uid for t in assumed] == [task.uid]
    assert cache.nodes["n1"].idle.cpu == 2000
    assert cache.snapshot().nodes["n1"].idle.cpu == 2000
    # applying the same placement again changes nothing (no double assumption)
    assert cache.apply(SessionResult(placements=[Placement(task, "n1")])) == []
    assert cache.forget_assumption(task.uid)
    assert cache.nodes["n1"].idle.cpu == 4000
    assert cache.tasks[task.uid].status == TaskStatus.PENDING


def test_watch_update_that_lags_a_bind_keeps_the_assumption():
    pg, pods = gang("job", 1, cpu="2")
    cache = load(ClusterCache(), nodes=[node("n1", cpu="4")], pods=pods, podgroups=[pg])
    task = next(iter(cache.snapshot().jobs["default/job"].tasks.values()))
    cache.apply(SessionResult(placements=[Placement(task, "n1")]))
    cache.upsert_pod(pods[0])  # an older, still-unbound view of the pod arrives
    assert cache.tasks[task.uid].status == TaskStatus.BINDING
    assert cache.nodes["n1"].idle.cpu == 2000


def test_node_arriving_after_its_pods_accounts_for_them():
    cache = load(
        ClusterCache(), pods=[pod("x", cpu="3", scheduler="other", node_name="late", phase="Running")]
    )
    cache.upsert_node(node("late", cpu="4"))
    assert cache.snapshot().nodes["late"].idle.cpu == 1000


def test_malformed_objects_are_skipped_and_counted():
    from caldera.framework.objects import Node, Pod, convert
    from caldera.hack.scenario import node_dict, pod_dict

    cache = ClusterCache()
    cache.upsert_node(convert(Node, node_dict("bad", cpu="many")))
    cache.upsert_pod(convert(Pod, pod_dict("bad", memory="1Gb")))
    assert cache.stats.skipped_objects == 2
    assert "bad" in cache.stats.errors[-1]
    assert cache.snapshot().nodes == {}


def test_node_rows_are_reused_and_snapshots_are_compact():
    cache = load(ClusterCache(), nodes=[node(f"n{i}") for i in range(5)])
    cache.delete_node(node("n2"))
    snap = cache.snapshot()
    assert snap.table.rows == 4
    assert sorted(snap.table.names) == ["n0", "n1", "n3", "n4"]
    assert all(snap.table.names[n.row] == n.name for n in snap.nodes.values())
    cache.upsert_node(node("n9", cpu="2"))
    assert cache.table.rows == 5
    snap = cache.snapshot()
    assert snap.nodes["n9"].idle.cpu == 2000
    assert snap.table.idle[snap.nodes["n9"].row, 0] == 2000


def test_queue_without_state_is_open_and_default_queue_is_implicit():
    cache = load(ClusterCache(), queues=[queue("q1", state="")])
    snap = cache.snapshot()
    assert snap.queues["q1"].is_open
    assert "default" in snap.queues


def test_assumed_placement_carries_its_annotations_until_the_watch_catches_up():
    pg, pods = gang("gpu", 1, cpu="1")
    cache = load(ClusterCache(), nodes=[node("n1", cpu="4")], pods=pods, podgroups=[pg])
    task = next(iter(cache.snapshot().jobs["default/gpu"].tasks.values()))
    cache.apply(SessionResult(placements=[Placement(task, "n1", {"volcano.sh/vgpu-node": "n1"})]))
    snap = cache.snapshot()
    on_node = snap.nodes["n1"].tasks[task.uid]
    assert on_node.pod.metadata.annotations["volcano.sh/vgpu-node"] == "n1"
    cache.upsert_pod(pods[0])  # the watch's lagging view lacks the annotation
    assert cache.tasks[task.uid].pod.metadata.annotations["volcano.sh/vgpu-node"] == "n1"
