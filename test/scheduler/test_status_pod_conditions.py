"""A pending pod's PodScheduled condition and a pending PodGroup's Unschedulable condition as the
status updater writes them: at once when they first say why (or when the status, reason, phase or
counts move), then, while only the message moves, no more than once per refresh period, the newest
message when the period ends, and all such refreshes within one rate; nothing held back is written
for a pod placed or deleted meanwhile or a PodGroup deleted, and a pod that is gone never makes
every job be looked at again."""

from __future__ import annotations

from typing import Any

import msgspec

from caldera.cache.store import ClusterCache
from caldera.framework.model import native_job_key
from caldera.framework.objects import NativePodGroup, convert
from caldera.framework.result import SessionResult
from caldera.hack.scenario import gang, load, native_member, native_podgroup_dict, node
from caldera.scheduler.status import CONDITION_MESSAGE_REFRESH, StatusUpdater

from .test_status import spy_on_looks


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def verdict(cache: ClusterCache, why: str) -> SessionResult:
    """A cycle that found no room for the gang "big", worded ``why``."""
    snap = cache.snapshot()
    job = snap.jobs["default/big"]
    job.job_fit_error = why
    for uid in job.tasks:
        job.fit_errors[uid] = why
    return SessionResult(jobs=snap.jobs)


def condition_writes(rec: Any) -> list[tuple[str, str]]:
    """Each pod status write, as (pod, message)."""
    return [
        (path.split("/")[-2], body["status"]["conditions"][0]["message"])
        for method, path, body in rec.requests
        if method == "PATCH" and path.startswith("/api/v1/") and path.endswith("/status")
    ]


def podgroup_writes(rec: Any) -> list[str]:
    """Each write of the PodGroup's status, as its Unschedulable condition's message."""
    return [
        next(c["message"] for c in body["status"]["conditions"] if c["type"] == "Unschedulable")
        for method, path, body in rec.requests
        if method == "PATCH" and "/podgroups/" in path
    ]


def pending_gang(
    rec_client: Any, clock: Clock, size: int = 2, **updater: Any
) -> tuple[ClusterCache, list[Any], StatusUpdater]:
    """A gang "big" of ``size`` that fits nowhere, and a status updater on the clock."""
    _, client = rec_client
    cache = ClusterCache()
    pg, pods = gang("big", size, cpu="16")
    load(cache, nodes=[node("n1", cpu="8")], podgroups=[pg], pods=pods)
    return cache, pods, StatusUpdater(client, cache, clock=clock, **updater)


async def message_moved(
    recorder: Any, size: int = 2, **updater: Any
) -> tuple[Clock, ClusterCache, list[Any], StatusUpdater]:
    """A pending gang whose conditions were written saying "no room (cycle 0)"; a second later a
    cycle words it "no room (cycle 1)" (observed, not flushed)."""
    clock = Clock()
    cache, pods, status = pending_gang(recorder, clock, size, **updater)
    status.observe(verdict(cache, "no room (cycle 0)"))
    await status.flush()
    clock.now += 1
    status.observe(verdict(cache, "no room (cycle 1)"))
    return clock, cache, pods, status


async def test_a_message_that_moves_every_cycle_is_written_once_per_refresh_period(recorder) -> None:
    rec, _ = recorder
    clock = Clock()
    cache, _, status = pending_gang(recorder, clock)
    status.observe(verdict(cache, "0/1 nodes are available: 1 Insufficient cpu (cycle 0)."))
    await status.flush()
    assert len(condition_writes(rec)) == 2  # the first word on each pod goes at once

    # A busy cluster: each second's cycle words the reason anew (the node counts moved).
    for cycle in range(1, int(CONDITION_MESSAGE_REFRESH)):
        clock.now += 1
        status.observe(verdict(cache, f"0/1 nodes are available: 1 Insufficient cpu (cycle {cycle})."))
        await status.flush()
    assert len(condition_writes(rec)) == 2

    clock.now += 1  # the period is over: each pod's newest message goes, once
    await status.flush()
    later = condition_writes(rec)[2:]
    assert sorted(pod for pod, _ in later) == ["big-0", "big-1"]
    assert all("(cycle 9)" in message for _, message in later)

    clock.now += 3 * CONDITION_MESSAGE_REFRESH  # nothing new to say: nothing more is written
    await status.flush()
    assert len(condition_writes(rec)) == 4


async def test_refreshes_of_many_objects_stay_within_the_rate(recorder) -> None:
    """However many pending pods and PodGroups have a new message, their refreshes add no more than
    the rate: with one refresh a tenth of a second allowed, the gang's PodGroup and its first pod are
    refreshed 10 s after their last write, the second pod after 20 s, the third after 30 s."""
    rec, _ = recorder
    clock = Clock()
    cache, _, status = pending_gang(recorder, clock, 3, message_refresh=10.0, message_rate=0.1)
    status.observe(verdict(cache, "no room (cycle 0)"))
    await status.flush()
    assert len(condition_writes(rec)) == 3 and len(podgroup_writes(rec)) == 1
    clock.now += 1
    status.observe(verdict(cache, "no room (cycle 1)"))
    clock.now += 9
    await status.flush()
    assert condition_writes(rec)[3:] == [("big-0", "no room (cycle 1)")]
    assert len(podgroup_writes(rec)) == 2 and "no room (cycle 1)" in podgroup_writes(rec)[1]
    clock.now += 10
    await status.flush()
    assert condition_writes(rec)[4:] == [("big-1", "no room (cycle 1)")]
    clock.now += 10
    await status.flush()
    assert condition_writes(rec)[5:] == [("big-2", "no room (cycle 1)")]


async def test_a_message_held_back_is_not_written_for_a_pod_placed_meanwhile(recorder) -> None:
    rec, _ = recorder
    clock, cache, pods, status = await message_moved(recorder)
    await status.flush()
    # big-0 is bound by the time the period ends (its watch event came): the API server set its
    # PodScheduled condition True, which a late False must not undo.
    bound = msgspec.structs.replace(
        pods[0],
        spec=msgspec.structs.replace(pods[0].spec, node_name="n1"),
        metadata=msgspec.structs.replace(pods[0].metadata, resource_version="99"),
    )
    cache.upsert_pod(bound)
    clock.now += CONDITION_MESSAGE_REFRESH
    await status.flush()
    assert condition_writes(rec)[2:] == [("big-1", "no room (cycle 1)")]


async def test_a_message_back_to_what_was_written_is_not_written_again(recorder) -> None:
    rec, _ = recorder
    clock = Clock()
    cache, _, status = pending_gang(recorder, clock)
    status.observe(verdict(cache, "no room"))
    await status.flush()
    clock.now += 1
    status.observe(verdict(cache, "no room on n1 this time"))
    clock.now += 1
    status.observe(verdict(cache, "no room"))  # what the pods already say
    clock.now += CONDITION_MESSAGE_REFRESH
    await status.flush()
    assert [message for _, message in condition_writes(rec)] == ["no room", "no room"]


async def test_a_pod_whose_write_is_answered_not_found_leaves_the_other_jobs_alone(recorder) -> None:
    """A pod deleted just before its condition went out: the 404 drops that write, and the next
    cycle's observation does not look again at every job for it (it did, once per such pod: under a
    churn of short-lived pending pods, every job at every cycle)."""
    rec, client = recorder
    rec.codes["/status"] = 404
    cache = ClusterCache()
    pg, pods = gang("big", 2, cpu="16")
    other, others = gang("other", 1, cpu="16")
    load(cache, nodes=[node("n1", cpu="8")], podgroups=[pg, other], pods=[*pods, *others])
    status = StatusUpdater(client, cache)
    looked = spy_on_looks(status)
    result = verdict(cache, "no room")
    status.observe(result)
    await status.flush()
    assert len(condition_writes(rec)) == 2  # answered 404 each
    looked.clear()
    status.observe(SessionResult(jobs=result.jobs, seq=result.seq))
    assert looked == []


async def test_a_podgroup_message_that_moves_every_cycle_is_written_once_per_refresh_period(
    recorder,
) -> None:
    """The gang's Unschedulable condition says the same as its pods' (the node counts of a busy
    cluster): written at once the first time, then at most once per refresh period with the newest
    message; Volcano writes every change (pkg/scheduler/framework/job_updater.go,
    ``isPodGroupConditionsUpdated`` compares the message too)."""
    rec, _ = recorder
    clock = Clock()
    cache, _, status = pending_gang(recorder, clock)
    status.observe(verdict(cache, "no room (cycle 0)"))
    await status.flush()
    for cycle in range(1, int(CONDITION_MESSAGE_REFRESH)):
        clock.now += 1
        status.observe(verdict(cache, f"no room (cycle {cycle})"))
        await status.flush()
    assert len(podgroup_writes(rec)) == 1
    clock.now += 1
    await status.flush()
    assert len(podgroup_writes(rec)) == 2 and "(cycle 9)" in podgroup_writes(rec)[1]


async def test_a_podgroup_whose_counts_move_is_written_at_once(recorder) -> None:
    """Only a new message waits: a member running changes the counts (and the phase), which go at
    once, newest message included, even within the refresh period."""
    rec, _ = recorder
    clock, cache, pods, status = await message_moved(recorder, 3)
    await status.flush()
    assert len(podgroup_writes(rec)) == 1
    clock.now += 1
    cache.upsert_pod(
        msgspec.structs.replace(
            pods[0],
            spec=msgspec.structs.replace(pods[0].spec, node_name="n1"),
            status=msgspec.structs.replace(pods[0].status, phase="Running"),
            metadata=msgspec.structs.replace(pods[0].metadata, resource_version="99"),
        )
    )
    status.observe(verdict(cache, "no room (cycle 2)"))
    await status.flush()
    (_, _, body) = [r for r in rec.requests if "/podgroups/" in r[1]][-1]
    assert len(podgroup_writes(rec)) == 2
    assert body["status"]["running"] == 1 and "(cycle 2)" in podgroup_writes(rec)[1]


async def test_a_podgroup_message_held_back_is_not_written_once_the_podgroup_is_gone(recorder) -> None:
    rec, _ = recorder
    clock, cache, _, status = await message_moved(recorder)
    pg = cache.podgroup("default/big")
    assert pg is not None
    cache.delete_podgroup(pg)
    status.podgroup_gone(pg)
    clock.now += CONDITION_MESSAGE_REFRESH
    await status.flush()
    assert len(podgroup_writes(rec)) == 1


async def test_a_native_podgroup_message_that_moves_every_cycle_is_written_once_per_refresh_period(
    recorder,
) -> None:
    rec, client = recorder
    clock = Clock()
    cache = load(ClusterCache(), nodes=[node("n1", cpu="8")])
    manifest = native_podgroup_dict("wide", min_count=2, uid="pg-wide")
    cache.upsert_native_podgroup(convert(NativePodGroup, manifest))
    for i in range(2):
        cache.upsert_pod(native_member(f"wide-{i}", "wide", uid=f"wide-{i}", cpu="16"))
    status = StatusUpdater(client, cache, clock=clock)
    key = native_job_key("default", "wide")

    def cycle(why: str) -> SessionResult:
        snap = cache.snapshot()
        job = snap.jobs[key]
        job.job_fit_error = why
        for uid in job.tasks:
            job.fit_errors[uid] = why
        return SessionResult(jobs=snap.jobs)

    def written() -> list[str]:
        return [
            c["message"]
            for body in rec.of("PATCH", "/podgroups/wide/status")
            for c in body["status"]["conditions"]
            if c["type"] == "PodGroupScheduled"
        ]

    status.observe(cycle("no room (cycle 0)"))
    await status.flush()
    for n in range(1, int(CONDITION_MESSAGE_REFRESH)):
        clock.now += 1
        status.observe(cycle(f"no room (cycle {n})"))
        await status.flush()
    assert len(written()) == 1
    clock.now += 1
    await status.flush()
    assert len(written()) == 2 and "(cycle 9)" in written()[1]
