"""A running decision stays at most BINDS_AHEAD binds in front of the binder (scheduler/loop.py
``BindPacing``): it pauses while more wait for a binder worker, never past the cycle's budget, and
never for a binder that makes no progress; what it decides is the same, paused or not."""

import asyncio
import time

from prometheus_client import REGISTRY

from caldera.cache.store import ClusterCache
from caldera.config.conf import parse_conf
from caldera.framework.plugin import Plugin
from caldera.framework.session import DISPATCH_EVERY
from caldera.hack.scenario import gang, load, node
from caldera.scheduler.loop import BindPacing, SchedulerLoop
from caldera.scheduler.registry import builtin_registry


class FakeTime:
    """A clock that only moves when the pacing sleeps; each sleep lets the binder take ``drain`` binds."""

    def __init__(self, queue: list[int], drain: int = 0) -> None:
        self.now = 100.0
        self.queue = queue
        self.drain = drain
        self.sleeps = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        del self.queue[: self.drain]


def pacing(queue: list[int], t: FakeTime, ahead: int = 10, deadline: float | None = None) -> BindPacing:
    return BindPacing(
        lambda: len(queue), ahead, deadline, stall=0.1, step=0.002, clock=t.clock, sleep=t.sleep
    )


def test_a_decision_with_few_binds_waiting_goes_on_without_pausing():
    queue = list(range(10))
    t = FakeTime(queue)
    p = pacing(queue, t, ahead=10)
    p.wait()
    assert t.sleeps == 0 and p.paused == 0.0


def test_a_decision_far_ahead_of_the_binder_pauses_until_the_binder_has_taken_the_queue_down():
    queue = list(range(300))
    t = FakeTime(queue, drain=5)  # 5 binds taken per 2 ms
    p = pacing(queue, t, ahead=10)
    p.wait()
    assert len(queue) == 10  # 300 -> 10 in 58 steps of 5
    assert t.sleeps == 58
    assert abs(p.paused - 58 * 0.002) < 1e-9


def test_the_pause_ends_at_the_cycle_budget():
    queue = list(range(300))
    t = FakeTime(queue, drain=1)
    p = pacing(queue, t, ahead=10, deadline=100.019)
    p.wait()
    assert t.now >= 100.019 and len(queue) > 10
    assert t.sleeps == 10
    assert not p.gave_up  # the next batch, in another cycle's budget, would pause again


def test_a_binder_that_makes_no_progress_holds_no_decision_back_for_the_rest_of_the_cycle():
    queue = list(range(300))
    t = FakeTime(queue, drain=0)  # the API server is down: nothing is taken
    p = pacing(queue, t, ahead=10)
    p.wait()
    assert p.gave_up and 0.1 <= p.paused < 0.11
    sleeps = t.sleeps
    p.wait()  # the next batch goes on at once
    assert t.sleeps == sleeps


class SlowReadiness(Plugin):
    """A gang is ready when all its pods are placed, after a pause longer than the session's hand-over
    interval: each committed gang is handed to the binder on its own, as in a long cycle."""

    name = "slow-readiness"

    def on_session_open(self, ssn):
        def ready(job):
            time.sleep(DISPATCH_EVERY * 1.2)
            return job.ready_task_num() >= job.min_available

        ssn.add_job_ready_fn(self.name, ready)


class SlowBinder:
    """Takes one bind every 50 ms on the event loop, as a busy API server would answer them."""

    def __init__(self) -> None:
        self.waiting: list[str] = []
        self.most_waiting = 0

    def bind(self, placements):
        self.waiting.extend(p.task.key for p in placements)
        self.most_waiting = max(self.most_waiting, len(self.waiting))

    def evict(self, evictions):
        pass

    def queued(self) -> int:
        return len(self.waiting)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(0.05)
            if self.waiting:
                self.waiting.pop(0)


async def _cycle(binds_ahead: int):
    registry = builtin_registry()
    registry.register_plugin(SlowReadiness)
    conf = parse_conf(
        "actions: allocate\ntiers:\n- plugins:\n  - name: slow-readiness\n  - name: predicates\n", registry
    )
    gangs = [gang(f"job-{i}", 2, cpu="1") for i in range(8)]
    cache = load(
        ClusterCache(),
        nodes=[node(f"n{i}", cpu="3") for i in range(6)],
        pods=[p for _, pods in gangs for p in pods],
        podgroups=[pg for pg, _ in gangs],
    )
    binder = SlowBinder()
    loop = SchedulerLoop(cache, lambda: conf, registry, binder, period=0.01, binds_ahead=binds_ahead)
    loop.bind_stall = 5.0  # a busy test machine's late timer is not a stalled binder
    draining = asyncio.create_task(binder.run())
    try:
        result = await loop.cycle()
    finally:
        draining.cancel()
    return result, binder, loop


async def test_a_paced_cycle_decides_what_an_unpaced_one_does_with_the_binder_never_far_behind():
    unpaced, unpaced_binder, unpaced_loop = await _cycle(binds_ahead=0)
    before = _paused_total()
    paced, paced_binder, paced_loop = await _cycle(binds_ahead=2)
    assert [(p.task.key, p.node) for p in paced.placements] == [
        (p.task.key, p.node) for p in unpaced.placements
    ]
    assert len(paced.placements) == 16
    assert unpaced_loop.stats.paused_for_binds == 0.0
    assert paced_loop.stats.paused_for_binds > 0.0
    # and an operator sees it (caldera_decision_paused_for_binds_seconds_total)
    assert abs(_paused_total() - before - paced_loop.stats.paused_for_binds) < 1e-6
    # a gang (2 binds) handed over on top of at most 2 waiting
    assert paced_binder.most_waiting <= 4 < unpaced_binder.most_waiting


def _paused_total() -> float:
    return REGISTRY.get_sample_value("caldera_decision_paused_for_binds_seconds_total") or 0.0
