"""The cache's decision revision moves with every change that could change what a cycle decides,
and stands still while placed pods only settle (binds coming back, pods starting)."""

import asyncio

import msgspec

from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.hack.scenario import gang, load, node, pod
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry


def _bound(p, node_name, phase="Pending"):
    """The pod as the watch shows it after its binding (and, with phase Running, once started)."""
    return msgspec.structs.replace(
        p,
        spec=msgspec.structs.replace(p.spec, node_name=node_name),
        status=msgspec.structs.replace(p.status, phase=phase),
    )


def _placed_gang():
    """A gang of two, placed by a cycle and handed to the binder."""
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    pg, pods = gang("train", 2)
    cache = load(ClusterCache(), nodes=[node("n1"), node("n2")], pods=pods, podgroups=[pg])
    binder = RecordingBinder()
    loop = SchedulerLoop(cache, lambda: conf, registry, binder, period=0.01)
    loop.run_once()
    placed = {p.task.name: p.node for p in binder.placements}
    assert sorted(placed) == ["train-0", "train-1"]
    return cache, loop, binder, pods, placed


def test_binds_coming_back_and_pods_starting_change_no_decision():
    cache, _, _, pods, placed = _placed_gang()
    before, revision = cache.decision_revision, cache.revision
    for p in pods:
        cache.confirm_bound(p.metadata.uid)  # the binder's answer
        cache.upsert_pod(_bound(p, placed[p.metadata.name]))  # the watch: bound
        cache.upsert_pod(_bound(p, placed[p.metadata.name], "Running"))  # the kubelet: running
    assert cache.revision > revision
    assert cache.decision_revision == before


def test_changes_that_can_change_a_decision_move_it():
    cache, _, _, pods, placed = _placed_gang()
    for p in pods:
        cache.upsert_pod(_bound(p, placed[p.metadata.name], "Running"))
    steps = {
        "a new pending pod": lambda: cache.upsert_pod(pod("web", group="train")),
        "a running pod relabelled": lambda: cache.upsert_pod(
            msgspec.structs.replace(
                _bound(pods[0], placed["train-0"], "Running"),
                metadata=msgspec.structs.replace(pods[0].metadata, labels={"tier": "x"}),
            )
        ),
        "a pod finishing": lambda: cache.upsert_pod(_bound(pods[1], placed["train-1"], "Succeeded")),
        "a pod deleted": lambda: cache.delete_pod(pods[0]),
        "a node relabelled": lambda: cache.upsert_node(node("n2", labels={"gpu": "yes"})),
        "a node added": lambda: cache.upsert_node(node("n3")),
    }
    for what, change in steps.items():
        before = cache.decision_revision
        change()
        assert cache.decision_revision > before, what


async def test_the_loop_skips_periods_while_placed_pods_only_settle():
    cache, loop, binder, pods, placed = _placed_gang()
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    for _ in range(200):  # a cycle that decides nothing (all placed), then quiet periods
        if loop.stats.skipped:
            break
        await asyncio.sleep(0.01)
    cycles = loop.stats.cycles
    for p in pods:
        cache.confirm_bound(p.metadata.uid)
        cache.upsert_pod(_bound(p, placed[p.metadata.name]))
        await asyncio.sleep(0.02)
        cache.upsert_pod(_bound(p, placed[p.metadata.name], "Running"))
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)
    assert loop.stats.cycles == cycles
    assert loop.stats.skipped >= 5
    # a new gang arrives: the next period runs a cycle and places it
    pg, more = gang("eval", 1)
    load(cache, podgroups=[pg], pods=more)
    for _ in range(200):
        if len(binder.placements) == 3:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 2)
    assert [p.task.name for p in binder.placements[2:]] == ["eval-0"]


def test_podgroup_status_counts_change_no_decision_but_its_phase_does():
    cache, _, _, _, _ = _placed_gang()
    pg = cache.podgroups["default/train"]

    def with_status(**fields):
        return msgspec.structs.replace(pg, status=msgspec.structs.replace(pg.status, **fields))

    before = cache.decision_revision
    cache.upsert_podgroup(with_status(running=2))
    assert cache.decision_revision == before
    cache.upsert_podgroup(with_status(running=2, phase="Running"))
    assert cache.decision_revision > before
    before = cache.decision_revision
    cache.upsert_podgroup(msgspec.structs.replace(pg, spec=msgspec.structs.replace(pg.spec, min_member=1)))
    assert cache.decision_revision > before


def test_pending_work_is_tracked_as_jobs_change():
    cache = _placed_gang()[0]
    assert not cache.has_pending_work()  # the gang is assumed placed
    pg, more = gang("eval", 1)
    cache.upsert_podgroup(
        msgspec.structs.replace(pg, status=msgspec.structs.replace(pg.status, phase="Pending"))
    )
    assert cache.has_pending_work()  # a PodGroup waiting to be enqueued
    cache.upsert_podgroup(pg)  # Inqueue, no pods yet
    assert not cache.has_pending_work()
    cache.upsert_pod(more[0])
    assert cache.has_pending_work()
    cache.delete_pod(more[0])
    assert not cache.has_pending_work()


async def test_with_nothing_pending_the_loop_skips_periods_whatever_changes():
    """PodGroup phases moving to Running (which could matter to jobs waiting to be enqueued) do not
    make the loop run cycles while nothing at all is pending."""
    cache, loop = _placed_gang()[:2]
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    for _ in range(200):
        if loop.stats.skipped:
            break
        await asyncio.sleep(0.01)
    cycles = loop.stats.cycles
    pg = cache.podgroups["default/train"]
    cache.upsert_podgroup(
        msgspec.structs.replace(pg, status=msgspec.structs.replace(pg.status, phase="Running", running=2))
    )
    await asyncio.sleep(0.1)
    assert loop.stats.cycles == cycles
    stop.set()
    await asyncio.wait_for(task, 2)
