"""Status writes: coalesced, sent only on change, events per PodGroup and not repeated."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.cache.store import ClusterCache
from caldera.framework.objects import PodGroup
from caldera.framework.result import SessionResult
from caldera.hack.scenario import gang, load, node, podgroup_dict
from caldera.scheduler.status import StatusUpdater


def unschedulable_cycle(cache: ClusterCache) -> SessionResult:
    snap = cache.snapshot()
    job = snap.jobs["default/big"]
    job.job_fit_error = "0/1 nodes are available: 1 Insufficient cpu."
    for uid in job.tasks:
        job.fit_errors[uid] = "0/1 nodes are available: 1 Insufficient cpu."
    return SessionResult(jobs=snap.jobs)


async def test_unchanged_wishes_are_written_once_and_coalesced(recorder) -> None:
    rec, client = recorder
    cache = ClusterCache()
    pg, pods = gang("big", 2, cpu="16")
    load(cache, nodes=[node("n1", cpu="8")], podgroups=[pg], pods=pods)
    status = StatusUpdater(client, cache, component="caldera")
    for _ in range(5):  # a busy scheduler: five cycles with the same verdict
        status.observe(unschedulable_cycle(cache))
    await status.flush()
    patches = rec.of("PATCH", "/podgroups/big")
    assert len(patches) == 1
    cond = patches[0]["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Unschedulable", "True", "NotEnoughResources")
    assert "2/2 tasks in gang unschedulable" in cond["message"]
    pod_patches = rec.of("PATCH", "/status")
    assert len(pod_patches) == 2
    assert pod_patches[0]["status"]["conditions"][0]["reason"] == "Unschedulable"
    events = rec.of("POST", "/events")
    assert len(events) == 1 and events[0]["reason"] == "FailedScheduling"
    assert events[0]["involvedObject"]["kind"] == "PodGroup"

    # The watch brings the written status back: nothing more to send, however many cycles run.
    written = podgroup_dict("big", min_member=2)
    written["metadata"]["uid"] = pg.metadata.uid
    written["status"] = patches[0]["status"]
    cache.upsert_podgroup(msgspec.convert(written, PodGroup))
    rec.requests.clear()
    for _ in range(3):
        status.observe(unschedulable_cycle(cache))
    await status.flush()
    assert rec.of("PATCH", "/podgroups/") == [] and rec.of("POST", "/events") == []


async def test_per_pod_events_only_behind_the_flag(recorder) -> None:
    rec, client = recorder
    cache = ClusterCache()
    pg, pods = gang("big", 3, cpu="16")
    load(cache, nodes=[node("n1", cpu="8")], podgroups=[pg], pods=pods)
    status = StatusUpdater(client, cache, per_pod_events=True)
    status.observe(unschedulable_cycle(cache))
    await status.flush()
    kinds = sorted(e["involvedObject"]["kind"] for e in rec.of("POST", "/events"))
    assert kinds == ["Pod", "Pod", "Pod", "PodGroup"]


async def test_a_plugins_queue_event_reaches_the_api_once(recorder) -> None:
    """Proportion reports a queue whose guarantee it scaled down; the binary publishes it on the Queue,
    and the same message in the next cycles is not sent again."""
    from caldera.framework.result import SessionReport

    rec, client = recorder
    cache = ClusterCache()
    status = StatusUpdater(client, cache, component="caldera")
    message = (
        "guarantees of all queues exceed the cluster's capacity; guarantee scaled down: cpu to 4 (x0.500)"
    )
    for _ in range(3):
        report = SessionReport(events=[("Queue", "team-a", "GuaranteeScaled", message)])
        status.observe(SessionResult(report=report))
    await status.flush()
    events = rec.of("POST", "/events")
    assert len(events) == 1
    assert events[0]["involvedObject"]["kind"] == "Queue" and events[0]["involvedObject"]["name"] == "team-a"
    assert (events[0]["type"], events[0]["reason"], events[0]["message"]) == (
        "Warning",
        "GuaranteeScaled",
        message,
    )


async def test_a_bad_claim_selector_gives_one_event_on_the_claim(recorder) -> None:
    """The DRA part reports a selector that fails each cycle it meets it; one Event reaches the API,
    on the ResourceClaim in its namespace."""
    from caldera.framework.result import SessionReport

    rec, client = recorder
    status = StatusUpdater(client, ClusterCache(), component="caldera")
    message = "selector 'device.driver ==' cannot be evaluated (compile error): Syntax error"
    for _ in range(3):
        report = SessionReport(events=[("ResourceClaim", "team/c0", "FailedResourceClaimSelector", message)])
        status.observe(SessionResult(report=report))
    await status.flush()
    [event] = rec.of("POST", "/events")
    assert event["involvedObject"] == {
        "kind": "ResourceClaim",
        "name": "c0",
        "namespace": "team",
        "apiVersion": "resource.k8s.io/v1",
    }
    assert event["metadata"]["namespace"] == "team" and event["message"] == message


async def test_evicted_pods_and_their_podgroup_are_told_why_as_volcano_tells_them(recorder) -> None:
    """Volcano (pkg/scheduler/cache/cache.go): ``defaultEvictor.Evict`` records a Warning ``Evict``
    on the pod, "Pod is evicted, because of <reason>", and ``SchedulerCache.Evict`` a Normal
    ``Evict`` on its PodGroup with the reason. A pod shuffle already told why gets no second one."""
    from caldera.framework.result import Eviction, SessionReport

    rec, client = recorder
    cache = ClusterCache()
    pg, pods = gang("sweep", 2, node_name="n1", phase="Running")
    other_pg, other = gang("web", 1, node_name="n1", phase="Running")
    load(cache, nodes=[node("n1", cpu="8")], podgroups=[pg, other_pg], pods=pods + other)
    status = StatusUpdater(client, cache, component="caldera")
    snap = cache.snapshot()
    tasks = sorted(snap.jobs["default/sweep"].tasks.values(), key=lambda t: t.name)
    [web] = snap.jobs["default/web"].tasks.values()
    report = SessionReport(events=[("Pod", "default/web-0", "Evict", "Evicted by shuffle: node n1 is hot")])
    evictions = [Eviction(tasks[0], "preempt"), Eviction(tasks[1], "preempt"), Eviction(web, "shuffle")]
    status.observe(SessionResult(jobs=snap.jobs, evictions=evictions, report=report))
    await status.flush()
    told = sorted(
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"], e["message"])
        for e in rec.of("POST", "/events")
        if e["reason"] == "Evict"
    )
    assert told == [
        ("Pod", "sweep-0", "Warning", "Pod is evicted, because of preempt"),
        ("Pod", "sweep-1", "Warning", "Pod is evicted, because of preempt"),
        ("Pod", "web-0", "Warning", "Evicted by shuffle: node n1 is hot"),
        ("PodGroup", "sweep", "Normal", "preempt"),
        ("PodGroup", "web", "Normal", "shuffle"),
    ]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_repeated_bind_failures_update_one_event_instead_of_creating_many(recorder) -> None:
    """The symptom of issue 15: a pod refused every cycle made 132 Events in six seconds."""
    rec, client = recorder
    cache = ClusterCache()
    pg, pods = gang("refused", 1, cpu="1")
    load(cache, nodes=[node("n1", cpu="8")], podgroups=[pg], pods=pods)
    clock = Clock()
    status = StatusUpdater(client, cache, clock=clock)
    task = cache.snapshot().jobs["default/refused"].tasks[pods[0].metadata.uid]
    for second in range(60):  # a bind refused every cycle, one cycle a second, for a minute
        clock.now = 1000.0 + second
        status.bind_failed(task, "n1", "409 Conflict: pod has non-empty .spec.schedulingGates")
        await status.flush()
    created = rec.of("POST", "/events")
    updates = [b for m, path, b in rec.requests if m == "PATCH" and "/events/" in path]
    assert len(created) == 1
    assert created[0]["reason"] == "FailedScheduling" and created[0]["count"] == 1
    name = created[0]["metadata"]["name"]
    assert all(path.endswith(f"/events/{name}") for m, path, _ in rec.requests if "/events/" in path)
    # coalesced: one update per ten seconds at most, each carrying the count reached so far
    assert 4 <= len(updates) <= 6
    assert [u["count"] for u in updates] == sorted(u["count"] for u in updates)
    assert updates[-1]["count"] >= 50


async def test_a_different_reason_is_its_own_event_and_creations_per_object_are_capped(recorder) -> None:
    rec, client = recorder
    cache = ClusterCache()
    pg, pods = gang("noisy", 1, cpu="1")
    load(cache, nodes=[node("n1", cpu="8")], podgroups=[pg], pods=pods)
    clock = Clock()
    status = StatusUpdater(client, cache, clock=clock)
    pgo = cache.podgroup("default/noisy")
    for i in range(20):  # twenty distinct reasons about one object within a second
        status.event_for_podgroup(pgo, "Warning", f"Reason{i}", "something")
    await status.flush()
    assert len(rec.of("POST", "/events")) == 5
    assert status.events.dropped == 15
    clock.now += 60.0  # a minute later the budget is back
    status.event_for_podgroup(pgo, "Warning", "Later", "something")
    await status.flush()
    assert len(rec.of("POST", "/events")) == 6


async def test_gated_gang_gets_a_gated_condition_and_no_failed_scheduling(recorder) -> None:
    from caldera.hack.scenario import InProcessCluster, pod

    rec, client = recorder
    gate = {"schedulingGates": [{"name": "example.com/wait"}]}
    pg, pods = gang("gated", 2, cpu="1")
    pods[1] = pod("gated-1", cpu="1", group="gated", spec_extra=gate)
    sim = InProcessCluster(nodes=[node("n1", cpu="8")], podgroups=[pg], pods=pods)
    status = StatusUpdater(client, sim.cache)
    for _ in range(3):
        status.observe(sim.cycle())
    await status.flush()
    assert rec.of("POST", "/events") == []
    assert rec.of("PATCH", "/pods/") == []
    patches = rec.of("PATCH", "/podgroups/gated")
    assert len(patches) == 1
    conds = {c["type"]: c for c in patches[0]["status"]["conditions"]}
    assert conds["SchedulingGated"]["status"] == "True"
    assert "gated-1 (gates: example.com/wait)" in conds["SchedulingGated"]["message"]
    assert "Unschedulable" not in conds


async def test_a_podgroup_without_pods_of_ours_is_left_to_its_own_scheduler(recorder) -> None:
    """Beside Volcano: a Volcano job's PodGroup (4 running pods, none of them ours) keeps the status
    Volcano writes; writing ``running: 0`` from our empty view would undo it every cycle."""
    rec, client = recorder
    theirs = podgroup_dict("volcano-job", min_member=4, phase="Running")
    theirs["status"] = {"phase": "Running", "running": 4}
    cache = load(ClusterCache(), nodes=[node("n1")])
    cache.upsert_podgroup(msgspec.convert(theirs, PodGroup))
    status = StatusUpdater(client, cache, component="caldera")
    for _ in range(3):
        status.observe(SessionResult(jobs=cache.snapshot().jobs))
    await status.flush()
    assert rec.requests == []


def _watched_web_gang() -> tuple[ClusterCache, list[Any], StatusUpdater, list[Any]]:
    """A gang "web" of two in a cache, and a status updater that notes each job it looks at
    (the job itself) before looking at it as usual."""
    cache = ClusterCache()
    pg, pods = gang("web", 2, cpu="1")
    load(cache, nodes=[node("n1", cpu="4")], podgroups=[pg], pods=pods)
    status = StatusUpdater(ApiClient(ClusterConfig(host="http://127.0.0.1:9")), cache)
    return cache, pods, status, spy_on_looks(status)


def spy_on_looks(status: StatusUpdater) -> list[Any]:
    """Each job the updater looks at from now on (the job itself), in order; it looks as usual."""
    looked: list[Any] = []
    real = status._observe_job

    def spy(key: str, job: Any) -> None:
        looked.append(job)
        real(key, job)

    status._observe_job = spy  # type: ignore[method-assign]
    return looked


def test_a_job_is_looked_at_again_only_when_its_state_changed() -> None:
    # Every cycle hands over a copy of every job; unchanged copies (of the same cache job, at the
    # same version) are not recomputed, whichever of the cache's two sets of copies they come from.
    cache, pods, status, jobs = _watched_web_gang()
    for _ in range(3):
        status.observe(SessionResult(jobs=cache.snapshot().jobs))
    assert [job.uid for job in jobs] == ["default/web"]
    cache.delete_pod(pods[0])
    for _ in range(2):
        status.observe(SessionResult(jobs=cache.snapshot().jobs))
    assert [job.uid for job in jobs] == ["default/web", "default/web"]


def test_a_job_enqueued_by_a_later_session_is_looked_at_again() -> None:
    # Nothing of the job changed but the phase the enqueue action set on the session's copy.
    cache, _, status, jobs = _watched_web_gang()
    first = cache.snapshot().jobs
    first["default/web"].phase = "Pending"
    status.observe(SessionResult(jobs=first))
    later = cache.snapshot().jobs
    later["default/web"].phase = "Inqueue"
    status.observe(SessionResult(jobs=later))
    assert [job.phase for job in jobs] == ["Pending", "Inqueue"]


async def _written_within(rec: Any, seconds: float) -> bool:
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        if rec.of("PATCH", "/podgroups/big"):
            return True
        await asyncio.sleep(0.01)
    return False


async def test_status_writes_wait_while_binds_are_queued_and_go_once_the_queue_drains(recorder) -> None:
    rec, client = recorder
    cache = ClusterCache()
    pg, pods = gang("big", 2, cpu="16")
    load(cache, nodes=[node("n1", cpu="8")], podgroups=[pg], pods=pods)
    binds_queued = [True]
    status = StatusUpdater(
        client, cache, flush_interval=0.02, max_defer=30.0, binds_waiting=lambda: binds_queued[0]
    )
    status.start()
    try:
        status.observe(unschedulable_cycle(cache))
        # a burst of binds is queued: the PodGroup's status and its Event give way to them
        assert not await _written_within(rec, 0.3)
        assert rec.of("POST", "/events") == []
        binds_queued[0] = False
        assert await _written_within(rec, 5.0)
        assert len(rec.of("PATCH", "/podgroups/big")) == 1
    finally:
        await status.stop(flush=False)


async def test_status_writes_wait_for_binds_no_longer_than_max_defer(recorder) -> None:
    rec, client = recorder
    cache = ClusterCache()
    pg, pods = gang("big", 2, cpu="16")
    load(cache, nodes=[node("n1", cpu="8")], podgroups=[pg], pods=pods)
    status = StatusUpdater(client, cache, flush_interval=0.02, max_defer=0.2, binds_waiting=lambda: True)
    status.start()
    try:
        status.observe(unschedulable_cycle(cache))
        # binds never stop coming: the status goes out anyway once it has waited max_defer
        assert await _written_within(rec, 5.0)
    finally:
        await status.stop(flush=False)
