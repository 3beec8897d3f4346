"""Each snapshot names the jobs changed since the one before it (``Snapshot.changed_jobs``): the
session's plugins redo only those and keep their figures for every other job; and the jobs with
pending work (``Snapshot.pending_jobs``), which the actions start from."""

from __future__ import annotations

from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.model import TaskStatus
from caldera.hack.scenario import gang, load, node, pod, priority_class
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry

REGISTRY = builtin_registry()
CONF = parse_conf(DEFAULT_CONF, REGISTRY)

GONE = gang("gone", 1)


def cluster() -> ClusterCache:
    cache = ClusterCache()
    running, idle = gang("running", 2), gang("idle", 1)
    load(
        cache,
        nodes=[node("n1", cpu="8", memory="16Gi")],
        podgroups=[running[0], idle[0], GONE[0]],
        pods=running[1] + idle[1] + GONE[1],
    )
    return cache


def test_a_snapshot_names_the_jobs_changed_added_and_removed_since_the_last_one():
    cache = cluster()
    first = cache.snapshot()
    assert first.changed_jobs == {"default/running", "default/idle", "default/gone"}

    pg, pods = gang("new", 1)
    load(cache, podgroups=[pg], pods=pods)  # added
    load(cache, pods=[pod("running-2", group="running")])  # a pod more for "running"
    cache.delete_pod(GONE[1][0])
    cache.delete_podgroup(GONE[0])  # removed
    second = cache.snapshot()
    assert second.seq == first.seq + 1
    assert second.changed_jobs == {"default/new", "default/running", "default/gone"}
    assert "default/gone" not in second.jobs

    third = cache.snapshot()
    assert third.changed_jobs == set()  # nothing since
    assert third.jobs["default/idle"].generation == second.jobs["default/idle"].generation


def test_a_priority_class_change_leaves_no_job_unchanged():
    cache = cluster()
    cache.snapshot()
    load(cache, priority_classes=[priority_class("high", 1000)])
    assert cache.snapshot().changed_jobs is None  # every job's priority may differ: not known
    assert cache.snapshot().changed_jobs == set()


def pending_by_count(snapshot) -> set[str]:
    return {
        uid for uid, job in snapshot.jobs.items() if job.phase == "Pending" or job.count(TaskStatus.PENDING)
    }


def test_a_snapshot_names_exactly_the_jobs_with_pending_work_as_they_come_bind_and_go():
    """``Snapshot.pending_jobs`` (what the actions start from instead of counting every job's pending
    tasks) is, at every step, the set of jobs with a pending task or in phase Pending."""
    cache = ClusterCache()
    load(cache, nodes=[node("n1", cpu="8", memory="16Gi")])
    binder = RecordingBinder()
    loop = SchedulerLoop(cache, lambda: CONF, REGISTRY, binder)
    steps = 0
    for c in range(6):
        pg, pods = gang(f"g{c}", 2, cpu="1")
        load(cache, podgroups=[pg], pods=pods[:1])  # half a gang: pending, not placeable
        snap = cache.snapshot()
        assert snap.pending_jobs == pending_by_count(snap)
        load(cache, pods=pods[1:])
        loop.run_once()
        for p in binder.placements[steps:]:
            cache.confirm_bound(p.task.uid)
        steps = len(binder.placements)
        snap = cache.snapshot()
        assert snap.pending_jobs == pending_by_count(snap)
        if c >= 2:
            cache.delete_podgroup(pg)  # a PodGroup gone while its pods stay
            snap = cache.snapshot()
            assert snap.pending_jobs == pending_by_count(snap)
    assert steps >= 4  # gangs were placed and bound on the way


def test_a_cache_that_takes_no_snapshot_for_long_keeps_no_growing_list_of_changes():
    """A standby replica never snapshots: the names of jobs changed (and gone) since would pile up with
    every job ever created. Past twice the jobs it holds (plus 1,000) they are dropped for "everything
    may have changed", and the next snapshot copies every job afresh, as after a priority change."""
    cache = cluster()
    cache.snapshot()
    for i in range(1100):  # jobs come and go; three stay
        pg, pods = gang(f"short-{i}", 1)
        load(cache, podgroups=[pg], pods=pods)
        cache.delete_pod(pods[0])
        cache.delete_podgroup(pg)
    assert len(cache.jobs) == 3
    assert all(len(slot.dirty_jobs) <= 2 * 3 + 1000 for slot in cache._slots)
    snap = cache.snapshot()
    assert snap.changed_jobs is None  # not known: every job is compared by its token
    assert set(snap.jobs) == {"default/running", "default/idle", "default/gone"}
    assert cache.snapshot().changed_jobs == set()
