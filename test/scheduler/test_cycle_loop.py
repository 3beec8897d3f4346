"""The cycle loop: a failing plugin fails its cycle, never the loop."""

import asyncio
import threading

import numpy as np

from caldera.cache.store import ClusterCache
from caldera.config.conf import parse_conf
from caldera.framework.model import TaskStatus
from caldera.framework.plugin import Action, Plugin, Registry
from caldera.hack.scenario import gang, load, node
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop


class PlaceEachTask(Action):
    """A minimal allocate: each pending task on its best feasible node, one statement per job."""

    name = "allocate"

    def execute(self, ssn):
        for job in sorted(ssn.jobs.values(), key=ssn.job_key):
            stmt = ssn.statement()
            for task in sorted(job.tasks_in(TaskStatus.PENDING), key=ssn.task_key):
                rows = ssn.feasible_rows(task)
                if len(rows):
                    stmt.allocate(
                        task, ssn.node_list[ssn.best_row(task, rows, ssn.node_scores(task, rows))].name
                    )
            if ssn.job_ready(job):
                stmt.commit()
            else:
                stmt.discard()


class FlakyPlugin(Plugin):
    name = "flaky"
    fail_next = 0

    def on_session_open(self, ssn):
        def fits(task, rows):
            if FlakyPlugin.fail_next:
                FlakyPlugin.fail_next -= 1
                raise RuntimeError("plugin bug")
            idle = ssn.table.idle[rows]
            return (idle[:, 0] >= task.resreq.cpu) & (idle[:, 1] >= task.resreq.memory)

        ssn.add_bulk_predicate_fn("flaky", fits)
        ssn.add_job_ready_fn("flaky", lambda job: job.ready_task_num() >= job.min_available)


def make_loop(cache):
    registry = Registry()
    registry.register_action(PlaceEachTask)
    registry.register_plugin(FlakyPlugin)
    conf = parse_conf("actions: allocate\ntiers:\n- plugins:\n  - name: flaky\n", registry)
    binder = RecordingBinder()
    return SchedulerLoop(cache, lambda: conf, registry, binder, period=0.01), binder


def test_a_plugin_that_raises_fails_one_cycle_and_the_next_cycle_runs():
    pg, pods = gang("job", 2, cpu="1")
    cache = load(ClusterCache(), nodes=[node("n1", cpu="4")], pods=pods, podgroups=[pg])
    loop, binder = make_loop(cache)
    FlakyPlugin.fail_next = 1
    assert loop.run_once() is None
    assert loop.stats.failed == 1
    assert "plugin bug" in loop.stats.last_error
    assert binder.placements == []
    result = loop.run_once()
    assert result is not None
    assert sorted(p.task.name for p in binder.placements) == ["job-0", "job-1"]
    assert loop.stats.cycles == 2
    # the cache assumed them: the next cycle binds nothing twice
    loop.run_once()
    assert len(binder.placements) == 2
    assert all(cache.task(p.task.uid).status == TaskStatus.BINDING for p in binder.placements)


def test_gang_that_does_not_fit_is_not_bound():
    pg, pods = gang("big", 5, cpu="1")
    cache = load(ClusterCache(), nodes=[node("n1", cpu="4")], pods=pods, podgroups=[pg])
    loop, binder = make_loop(cache)
    loop.run_once()
    assert binder.placements == []
    assert np.isclose(cache.node_infos()["n1"].idle.cpu, 4000)


async def test_async_loop_keeps_running_through_failures_until_stopped():
    pg, pods = gang("job", 1)
    cache = load(ClusterCache(), nodes=[node("n1")], pods=pods, podgroups=[pg])
    loop, binder = make_loop(cache)
    FlakyPlugin.fail_next = 3
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    for _ in range(200):
        if binder.placements:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 2)
    assert loop.stats.failed == 3
    assert [p.task.name for p in binder.placements] == ["job-0"]


async def test_loop_waits_until_ready():
    pg, pods = gang("job", 1)
    cache = load(ClusterCache(), nodes=[node("n1")], pods=pods, podgroups=[pg])
    loop, binder = make_loop(cache)
    ready = {"v": False}
    loop.ready = lambda: ready["v"]
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    await asyncio.sleep(0.05)
    assert loop.stats.cycles == 0
    ready["v"] = True
    for _ in range(100):
        if binder.placements:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 2)
    assert binder.placements


async def test_periods_are_skipped_while_nothing_changed_since_a_cycle_that_decided_nothing():
    # "big" needs 5 cpu on a 4-cpu node: every cycle decides nothing, so nothing changes in the cache.
    pg, pods = gang("big", 5, cpu="1")
    cache = load(ClusterCache(), nodes=[node("n1", cpu="4")], pods=pods, podgroups=[pg])
    loop, binder = make_loop(cache)
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    for _ in range(300):
        if loop.stats.skipped >= 5:
            break
        await asyncio.sleep(0.01)
    assert loop.stats.skipped >= 5
    cycles = loop.stats.cycles
    assert cycles < loop.stats.skipped  # one quiet cycle, then skipped periods
    # a second node arrives: the next period runs a cycle, which places the gang
    cache.upsert_node(node("n2", cpu="4"))
    for _ in range(300):
        if binder.placements:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 2)
    assert loop.stats.cycles > cycles
    assert sorted(p.task.name for p in binder.placements) == [f"big-{i}" for i in range(5)]


class CallRecordingBinder(RecordingBinder):
    """Remembers each call to ``bind`` (which runs on the event loop) and signals the first."""

    def __init__(self):
        super().__init__()
        self.calls = []
        self.first_call = threading.Event()

    def bind(self, placements):
        super().bind(placements)
        self.calls.append(sorted(p.task.name for p in placements))
        self.first_call.set()


class PlaceJobsInTurn(PlaceEachTask):
    """Allocate, one statement per job; after the first job's commit it waits (in the decision's
    thread) up to 5 s for the binder to have been given that job, remembering whether it was; then
    ``fail_after_first`` makes the action raise, as a plugin bug half-way through a cycle would."""

    binder: CallRecordingBinder | None = None
    bound_while_deciding: bool | None = None
    fail_after_first = False

    def execute(self, ssn):
        for i, job in enumerate(sorted(ssn.jobs.values(), key=ssn.job_key)):
            stmt = ssn.statement()
            for task in sorted(job.tasks_in(TaskStatus.PENDING), key=ssn.task_key):
                rows = ssn.feasible_rows(task)
                stmt.allocate(task, ssn.node_list[ssn.best_row(task, rows, ssn.node_scores(task, rows))].name)
            stmt.commit()
            if i == 0:
                PlaceJobsInTurn.bound_while_deciding = PlaceJobsInTurn.binder.first_call.wait(5)
                if PlaceJobsInTurn.fail_after_first:
                    raise RuntimeError("plugin bug after the first gang")


def loop_binding_in_turn(fail_after_first=False):
    pg_a, pods_a = gang("a", 2, cpu="1")
    pg_b, pods_b = gang("b", 2, cpu="1")
    cache = load(ClusterCache(), nodes=[node("n1", cpu="8")], pods=pods_a + pods_b, podgroups=[pg_a, pg_b])
    registry = Registry()
    registry.register_action(PlaceJobsInTurn)
    conf = parse_conf("actions: allocate\ntiers: []\n", registry)
    binder = CallRecordingBinder()
    PlaceJobsInTurn.binder = binder
    PlaceJobsInTurn.bound_while_deciding = None
    PlaceJobsInTurn.fail_after_first = fail_after_first
    return SchedulerLoop(cache, lambda: conf, registry, binder), binder, cache


async def test_a_committed_gang_is_bound_while_the_cycle_still_runs():
    loop, binder, cache = loop_binding_in_turn()
    result = await loop.cycle()
    # gang a went to the binder before the session went on to gang b; b came with the result
    assert PlaceJobsInTurn.bound_while_deciding is True
    assert binder.calls == [["a-0", "a-1"], ["b-0", "b-1"]]
    assert result.dispatched == 2 and len(result.placements) == 4
    assert all(cache.task(p.task.uid).status == TaskStatus.BINDING for p in binder.placements)
    # assumed once, bound once: the next cycle has nothing left to place
    await loop.cycle()
    assert len(binder.placements) == 4


async def test_a_gang_bound_before_its_cycle_failed_stays_bound_and_assumed():
    loop, binder, cache = loop_binding_in_turn(fail_after_first=True)
    assert await loop.cycle() is None
    assert loop.stats.failed == 1
    assert binder.calls == [["a-0", "a-1"]]
    assert {t.name: t.status for t in cache.tasks.values()} == {
        "a-0": TaskStatus.BINDING,
        "a-1": TaskStatus.BINDING,
        "b-0": TaskStatus.PENDING,
        "b-1": TaskStatus.PENDING,
    }


def test_a_cycle_run_synchronously_hands_everything_over_at_its_end():
    loop, binder, _ = loop_binding_in_turn()
    PlaceJobsInTurn.binder = CallRecordingBinder()  # never called: the wait times out at once
    PlaceJobsInTurn.binder.first_call.set()
    result = loop.run_once()
    assert binder.calls == [["a-0", "a-1", "b-0", "b-1"]]
    assert result.dispatched == 0


def test_a_cycle_failing_as_the_one_before_logs_one_line_without_the_traceback_again(caplog):
    pg, pods = gang("job", 2, cpu="1")
    cache = load(ClusterCache(), nodes=[node("n1", cpu="4")], pods=pods, podgroups=[pg])
    loop, _ = make_loop(cache)
    FlakyPlugin.fail_next = 3
    with caplog.at_level("ERROR", logger="caldera.loop"):
        for _ in range(3):
            assert loop.run_once() is None
    failures = [r for r in caplog.records if r.name == "caldera.loop"]
    assert [r.exc_info is not None for r in failures] == [True, False, False]
    assert (
        failures[2].getMessage()
        == "scheduling cycle 3 failed as the 2 before it did: RuntimeError: plugin bug"
    )
    assert loop.stats.failed_in_a_row == 3
    assert loop.run_once() is not None
    assert loop.stats.failed_in_a_row == 0 and loop.stats.failed == 3


def _one_node_cluster():
    pg, pods = gang("a", 2, cpu="1")
    cache = load(ClusterCache(), nodes=[node("n1", cpu="4")], pods=pods, podgroups=[pg])
    loop, binder = make_loop(cache)
    return loop, binder, cache


def test_a_node_deleted_while_the_cycle_decided_gets_none_of_its_placements():
    # The cycle's snapshot has n1 and places the gang there; the node is deleted before the hand-over
    # (an autoscaler's scale-down). The API server would take bindings to it anyway (and the pod
    # garbage collector delete those pods later): nothing is bound, the pods stay pending, and a
    # later cycle places them on a node that exists.
    loop, binder, cache = _one_node_cluster()
    result, error = loop.decide()
    assert error is None and [p.node for p in result.placements] == ["n1", "n1"]
    cache.delete_node(node("n1"))
    loop.hand_over(result, error, 0.0)
    assert binder.placements == []
    assert {t.status for t in cache.tasks.values()} == {TaskStatus.PENDING}
    cache.upsert_node(node("n2", cpu="4"))
    loop.run_once()
    assert sorted(p.node for p in binder.placements) == ["n2", "n2"]


async def test_a_node_deleted_after_the_snapshot_gets_none_of_the_placements_handed_over_early():
    # As the binary runs a cycle: the watch event deleting n1 is applied on the event loop between
    # the snapshot and the decision, whose committed gang is handed over while it runs.
    loop, binder, cache = _one_node_cluster()
    loop.between_steps = lambda: cache.delete_node(node("n1"))
    result = await loop.cycle()
    assert [p.node for p in result.placements] == ["n1", "n1"]
    assert binder.placements == []
    assert {t.status for t in cache.tasks.values()} == {TaskStatus.PENDING}
