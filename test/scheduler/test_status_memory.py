"""The status updater's memory follows the live objects: what it keeps per pod and PodGroup (the
last wish sent, the last event, the memo of the last look, the Event series) goes when the object
goes, even when the writes it sent were never seen back on the watch."""

from __future__ import annotations

from typing import Any

from caldera.cache.informer import KindHandler, _pod_key
from caldera.cache.store import ClusterCache
from caldera.framework.objects import Pod, PodGroup
from caldera.framework.session import SessionResult
from caldera.hack.scenario import gang, load, node
from caldera.scheduler.status import OBSERVED_LEFTOVERS, StatusUpdater


class Api:
    """Accepts every write; what is written never comes back on a watch."""

    def __init__(self) -> None:
        self.writes = 0
        self.paths: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> bytes:
        self.writes += 1
        self.paths.append(path)
        return b"{}"


def sizes(status: StatusUpdater) -> dict[str, int]:
    """Every map the updater and its Event recorder keep keyed by object."""
    events = status.events
    return {
        "sent_pod": len(status._sent_pod),
        "sent_pg": len(status._sent_pg),
        "observed": len(status._observed),
        "podgroups": len(status._podgroups),
        "sent_events": len(status._sent_events),
        "series": len(events._series),
        "buckets": len(events._buckets),
        "by_object": len(events._by_object),
        "gone": len(events._gone),
        "pending": len(status._pending),
        "pod_written_at": len(status._pod_refresh.written_at),
        "deferred_pod": len(status._pod_refresh.held),
        "pg_written_at": len(status._pg_refresh.written_at),
        "deferred_pg": len(status._pg_refresh.held),
    }


def unschedulable(cache: ClusterCache) -> SessionResult:
    snap = cache.snapshot()
    for job in snap.jobs.values():
        job.job_fit_error = "0/1 nodes are available: 1 Insufficient cpu."
        for uid in job.tasks:
            job.fit_errors[uid] = "0/1 nodes are available: 1 Insufficient cpu."
    return SessionResult(jobs=snap.jobs)


def watched() -> tuple[ClusterCache, KindHandler[Pod], KindHandler[PodGroup], StatusUpdater]:
    """A cache fed by pod and PodGroup watch handlers, and a status updater subscribed to them as
    the binary subscribes it (scheduler/app.py)."""
    cache = ClusterCache()
    load(cache, nodes=[node("n1", cpu="8")])
    pods_handler: KindHandler[Pod] = KindHandler(cache.upsert_pod, cache.delete_pod, key=_pod_key)
    groups_handler: KindHandler[PodGroup] = KindHandler(cache.upsert_podgroup, cache.delete_podgroup)
    status = StatusUpdater(Api(), cache, per_pod_events=True)  # type: ignore[arg-type]
    gone = status.subscribers()
    pods_handler.subscribe(gone["pods"])
    groups_handler.subscribe(gone["podgroups"])
    return cache, pods_handler, groups_handler, status


def add_gang(
    pods: KindHandler[Pod], groups: KindHandler[PodGroup], name: str, size: int
) -> tuple[PodGroup, list[Pod]]:
    """A gang too big for the node, as its watch events bring it."""
    pg, members = gang(name, size, cpu="16")
    groups.upsert(pg)
    for pod in members:
        pods.upsert(pod)
    return pg, members


async def test_20000_pods_created_and_deleted_leave_the_maps_as_they_were() -> None:
    cache, pods_handler, groups_handler, status = watched()
    add_gang(pods_handler, groups_handler, "stays", 2)  # one that stays: the maps are not empty before
    status.observe(unschedulable(cache))
    await status.flush()
    before = sizes(status)
    assert before["sent_pod"] == 2 and before["sent_pg"] == 1

    def create(names: range) -> list[tuple[PodGroup, list[Pod]]]:
        made = [add_gang(pods_handler, groups_handler, f"g{i}", 10) for i in names]
        status.observe(unschedulable(cache))
        return made

    # 20,000 pods churned through in ten waves (the caps on events are not what brings them back).
    for wave in range(10):
        first = wave * 200
        written = create(range(first, first + 100))
        await status.flush()  # these wishes and Events are sent before their objects go...
        unsent = create(range(first + 100, first + 200))  # ...these are still waiting when theirs go
        during = sizes(status)
        assert during["sent_pod"] == 2002 and during["sent_pg"] == 201 and during["pending"] > 1000
        for pg, pods in written + unsent:
            for pod in pods:
                pods_handler.delete(pod)
            groups_handler.delete(pg)
        await status.flush()
        assert sizes(status) == before


async def test_objects_absent_from_a_relist_are_forgotten_too() -> None:
    cache, pods_handler, groups_handler, status = watched()
    before = sizes(status)
    add_gang(pods_handler, groups_handler, "g", 3)
    status.observe(unschedulable(cache))
    await status.flush()
    assert sizes(status) != before
    # Deleted while the watch was down: the re-list does not have them.
    pods_handler.replace([])
    groups_handler.replace([])
    assert sizes(status) == before


def test_native_podgroup_wishes_of_gone_groups_are_not_kept() -> None:
    """A native (scheduling.k8s.io) PodGroup's condition wish is kept until the watch shows it; a
    group deleted before that leaves it behind. Once such leftovers outnumber the live jobs by 100,
    an observation drops those of groups that are gone."""
    cache = ClusterCache()
    load(cache, nodes=[node("n1", cpu="8")])
    status = StatusUpdater(Api(), cache)  # type: ignore[arg-type]
    for i in range(300):
        status._sent_native[f"default/k8s:gone-{i}"] = ("PodGroupScheduled", "False", "Unschedulable", "")
    pg, pods = gang("live", 1, cpu="100")
    load(cache, podgroups=[pg], pods=pods)
    status.observe(unschedulable(cache))
    assert all(not key.startswith("default/k8s:gone-") for key in status._sent_native)


def test_memos_of_native_jobs_gone_are_dropped_once_a_few_have_gathered() -> None:
    """A native (scheduling.k8s.io) PodGroup's deletion does not reach the updater (that watch is not
    subscribed): the memo of its job stays until an observation finds more than OBSERVED_LEFTOVERS
    such memos, then every one goes. (A soak with native gangs held 299 for 239 live PodGroups.)"""
    cache = ClusterCache()
    load(cache, nodes=[node("n1", cpu="8")])
    status = StatusUpdater(Api(), cache)  # type: ignore[arg-type]
    pg, pods = gang("live", 1, cpu="100")
    load(cache, podgroups=[pg], pods=pods)
    status.observe(unschedulable(cache))
    for i in range(OBSERVED_LEFTOVERS + 1):
        status._observed[f"default/k8s:gone-{i}"] = status._observed["default/live"]
    status.observe(unschedulable(cache))
    assert list(status._observed) == ["default/live"]


async def test_pods_deleted_after_the_cycles_snapshot_are_not_remembered_by_its_result() -> None:
    """Churn: the cycle looked at pods that are deleted before its result is observed. Their
    deletion went by already; what the result wishes for them is not remembered (it stayed until
    the next re-list: thousands of entries in a soak of short-lived pods)."""
    cache, pods_handler, groups_handler, status = watched()
    add_gang(pods_handler, groups_handler, "stays", 2)
    _, short_lived = add_gang(pods_handler, groups_handler, "short", 3)
    result = unschedulable(cache)  # the cycle's snapshot has all five pods
    for pod in short_lived:
        pods_handler.delete(pod)  # deleted while the cycle ran
    status.observe(result)
    await status.flush()
    assert sizes(status)["sent_pod"] == 2  # the two that stay, not the three gone
    assert not [o for o in status._sent_events if "/short-" in o]


async def test_a_pod_deleted_before_its_condition_went_out_costs_no_write() -> None:
    """Churn: the cycle's wishes for three pending pods are queued, and the pods are deleted before
    the flush. Their writes are dropped with them (each would be answered 404), and what is kept of
    them goes too."""
    cache, pods_handler, groups_handler, status = watched()
    add_gang(pods_handler, groups_handler, "stays", 2)
    status.observe(unschedulable(cache))
    await status.flush()
    before = sizes(status)
    _, short_lived = add_gang(pods_handler, groups_handler, "short", 3)
    status.observe(unschedulable(cache))
    assert sizes(status)["pending"] > before["pending"]
    for pod in short_lived:
        pods_handler.delete(pod)
    api = status.client
    api.paths.clear()
    await status.flush()
    assert not [path for path in api.paths if "/pods/short-" in path]
    after = sizes(status)
    for kept in ("sent_pod", "pod_written_at", "deferred_pod", "pending"):
        assert after[kept] == before[kept], kept
