"""The in-memory cache: incremental updates, snapshots a session can change freely, and deletes
that never touch a newer object of the same name."""

from caldera.cache.store import ClusterCache
from caldera.framework.model import TaskStatus
from caldera.framework.result import Placement, SessionResult
from caldera.framework.session import Session
from caldera.hack.scenario import gang, load, node, pod, podgroup, priority_class, queue, run_session


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


def _session(cache: ClusterCache) -> Session:
    """A session over a fresh snapshot (its result is handed back with ``cache.apply``)."""
    return Session(cache.snapshot(), [])


def test_consecutive_snapshots_share_no_object_and_unchanged_copies_return_a_cycle_later():
    pg1, pods1 = gang("a", 3)
    pg2, pods2 = gang("b", 3)
    cache = load(ClusterCache(), nodes=[node("n1"), node("n2")], pods=pods1 + pods2, podgroups=[pg1, pg2])
    s1 = _session(cache)
    first = s1.snapshot
    cache.apply(s1.result())
    s2 = _session(cache)
    second = s2.snapshot
    # the next session never shares an object with the one before (whose result may still be read)
    assert not _objects(first) & _objects(second)
    # a session touched b (even if it discarded) and node n1
    b = second.jobs["default/b"]
    t = next(iter(b.tasks.values()))
    b.update_task_status(t, TaskStatus.ALLOCATED)
    b.update_task_status(t, TaskStatus.PENDING)
    second.nodes["n1"].add_task(t)
    second.nodes["n1"].remove_task(t)
    cache.apply(s2.result())  # its result says what it touched
    # the cache changed a
    cache.upsert_pod(pod("a-3", group="a"))
    s3 = _session(cache)  # first's slot again: a changed in the cache, n1 and n2 untouched
    third = s3.snapshot
    assert third.jobs["default/a"] is not first.jobs["default/a"]
    assert len(third.jobs["default/a"].tasks) == 4
    assert third.jobs["default/b"] is first.jobs["default/b"]
    assert third.nodes["n1"] is first.nodes["n1"] and third.nodes["n2"] is first.nodes["n2"]
    cache.apply(s3.result())
    fourth = cache.snapshot()  # second's slot again: what its session touched is copied afresh
    assert fourth.jobs["default/b"] is not b
    assert fourth.jobs["default/b"].count(TaskStatus.PENDING) == 3
    assert fourth.nodes["n1"] is not second.nodes["n1"]
    assert fourth.nodes["n2"] is second.nodes["n2"]
    assert not _objects(third) & _objects(fourth)


def test_the_copies_of_a_session_that_never_came_back_are_not_used_again():
    """A failed cycle hands no result back: whatever its session changed is unknown, so its slot's
    copies are all made afresh the next time (none of them is used again)."""
    pg, pods = gang("a", 2)
    cache = load(ClusterCache(), nodes=[node("n1"), node("n2")], pods=pods, podgroups=[pg])
    failed = cache.snapshot()  # never applied
    job = failed.jobs["default/a"]
    task = next(iter(job.tasks.values()))
    job.update_task_status(task, TaskStatus.ALLOCATED)
    failed.nodes["n1"].add_task(task)
    ssn = _session(cache)
    cache.apply(ssn.result())
    again = cache.snapshot()  # the failed snapshot's slot
    assert not _objects(failed) & _objects(again)
    assert again.jobs["default/a"].count(TaskStatus.PENDING) == 2
    assert again.nodes["n1"].idle.cpu == cache.nodes["n1"].idle.cpu


def test_what_a_session_writes_on_its_copies_never_reaches_a_later_session():
    pg = podgroup("job", min_member=2, phase="Pending")
    pods = [pod(f"job-{i}", cpu="1", group="job") for i in range(2)]
    cache = load(ClusterCache(), nodes=[node("n1", cpu="4")], pods=pods, podgroups=[pg])
    s1 = _session(cache)
    first = s1.snapshot
    job = first.jobs["default/job"]
    job.fit_errors["x"] = "0/1 nodes are available"
    job.job_fit_error = "gang unschedulable"
    job.phase = "Inqueue"
    assert len(first.nodes["n1"].tasks) == 0  # loads the node's tasks (this session's copies)
    result = s1.result()
    assert "n1" in result.touched_nodes
    job.phase = "Pending"  # (not assumed Inqueue by the cache: what is checked is the copy's reset)
    cache.apply(result)
    s2 = _session(cache)
    cache.apply(s2.result())
    third = cache.snapshot()  # first's slot again
    again = third.jobs["default/job"]
    assert (again.fit_errors, again.job_fit_error, again.phase) == ({}, "", "Pending")
    assert third.nodes["n1"] is not first.nodes["n1"]


def test_a_node_added_or_removed_between_snapshots_moves_rows_consistently():
    cache = load(ClusterCache(), nodes=[node("n1", cpu="1"), node("n2", cpu="2")])
    cache.snapshot()
    cache.snapshot()
    cache.delete_node(node("n1"))
    cache.upsert_node(node("n3", cpu="3"))
    for _ in range(3):
        snap = cache.snapshot()
        assert {n.name: snap.table.idle[n.row, 0] for n in snap.node_list} == {"n3": 3000, "n2": 2000}
        assert [n.row for n in snap.node_list] == [0, 1]
        assert snap.table.names == [n.name for n in snap.node_list]


def _objects(snap) -> set[int]:
    """Ids of every mutable object a session can write: jobs, tasks, nodes and their usage."""
    out: set[int] = set()
    for job in snap.jobs.values():
        out |= {id(job), id(job.allocated), id(job.fit_errors), id(job.by_status)}
        out |= {id(t) for t in job.tasks.values()}
    for n in snap.nodes.values():
        out |= {id(n), id(n.idle), id(n.used), id(n.releasing), id(n.pipelined)}
        if n._tasks is not None:  # without loading them (loading marks the node as written)
            out |= {id(n._tasks)} | {id(t) for t in n._tasks.values()}
    out |= {id(snap.table), id(snap.table.idle), id(snap.table.future)}
    return out


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


def test_the_table_a_snapshot_copies_holds_every_usage_change_since_the_last_one():
    # Node usage rows are written once per snapshot, not per change: a burst of placements, a pod
    # that leaves, and a node deleted (its row then reused by a new node) between two snapshots.
    pg, pods = gang("job", 6, cpu="1")
    cache = load(ClusterCache(), nodes=[node("n1", cpu="8"), node("n2", cpu="8")], pods=pods, podgroups=[pg])
    cache.snapshot()
    placements = [Placement(cache.tasks[p.metadata.uid], "n1" if i < 4 else "n2") for i, p in enumerate(pods)]
    cache.apply(SessionResult(placements=placements))
    cache.delete_pod(pods[0])
    cache.delete_node(node("n2"))
    cache.upsert_node(node("n3", cpu="16"))
    snap = cache.snapshot()
    assert snap.table.idle[snap.nodes["n1"].row, 0] == 5000  # 3 of the 4 placed there remain
    assert snap.table.used[snap.nodes["n1"].row, 0] == 3000
    assert snap.table.idle[snap.nodes["n3"].row, 0] == 16000  # n2's row reused: none of n2's usage
    assert sorted(snap.nodes) == ["n1", "n3"]
    cache.sync_table()
    assert cache.table.idle[cache.nodes["n1"].row, 0] == 5000


def test_a_node_whose_pods_asked_more_than_it_has_frees_only_what_it_really_has_again():
    # Another scheduler (or a user, by nodeName) binds pods past a node's allocatable: 3 + 2 CPUs on a
    # node of 4. Idle stays at zero meanwhile. When the 2-CPU pod finishes, one CPU is free, not two:
    # a gang of one 2-CPU pod does not fit there, one of a 1-CPU pod does.
    cache = load(
        ClusterCache(),
        nodes=[node("n1", cpu="4")],
        pods=[
            pod("big", cpu="3", scheduler="other", node_name="n1", phase="Running"),
            pod("extra", cpu="2", scheduler="other", node_name="n1", phase="Running", uid="extra"),
        ],
    )
    assert cache.snapshot().nodes["n1"].idle.cpu == 0
    cache.upsert_pod(pod("extra", cpu="2", scheduler="other", node_name="n1", phase="Succeeded", uid="extra"))
    snap = cache.snapshot()
    assert (snap.nodes["n1"].used.cpu, snap.nodes["n1"].idle.cpu) == (3000, 1000)
    assert snap.table.idle[snap.nodes["n1"].row, 0] == 1000
    two_pg, two = gang("two", 1, cpu="2")
    one_pg, one = gang("one", 1, cpu="1")
    load(cache, pods=two + one, podgroups=[two_pg, one_pg])
    _, result = run_session(cache.snapshot())
    assert [p.task.name for p in result.placements] == ["one-0"]
