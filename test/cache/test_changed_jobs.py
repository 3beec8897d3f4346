"""Each snapshot names the jobs changed since the one before it (``Snapshot.changed_jobs``): the
session's plugins redo only those and keep their figures for every other job."""

from __future__ import annotations

from caldera.cache.store import ClusterCache
from caldera.hack.scenario import gang, load, node, pod, priority_class

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
    assert third.jobs["default/idle"].origin == second.jobs["default/idle"].origin


def test_a_priority_class_change_leaves_no_job_unchanged():
    cache = cluster()
    cache.snapshot()
    load(cache, priority_classes=[priority_class("high", 1000)])
    assert cache.snapshot().changed_jobs is None  # every job's priority may differ: not known
    assert cache.snapshot().changed_jobs == set()
