"""The cycle loop: every period, snapshot the cache, open a session, run the conf's actions, close
the session and hand committed placements to the binder. A failing plugin or action fails its
cycle (logged and counted), never the loop."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from caldera.framework.carry import CarryBook
from caldera.framework.model import TaskInfo
from caldera.framework.plugin import Arguments, Registry
from caldera.framework.result import Eviction, Placement, SessionResult
from caldera.framework.session import Session, close_session, open_session
from caldera.framework.snapshot import Snapshot
from caldera.framework.tiers import SchedulerConf
from caldera.metrics import scheduler as m
from caldera.scheduler.explain import REUSE_SECONDS, explain_session

log = logging.getLogger("caldera.loop")

#: the longest a quiet scheduler goes without a cycle (seconds), whatever the period
QUIET_RECHECK = 1.0
#: binds a running decision may leave waiting for a binder worker: beyond this many, the decision's
#: thread pauses (the GIL released) until the binder has taken them down to it (``BindPacing``)
BINDS_AHEAD = 256
#: a pause ends, and the cycle pauses no more, once the binds waiting have not gone down for this
#: long (seconds): a binder that makes no progress (an API server down or throttling) holds no
#: decision back
BIND_STALL = 0.1
#: how often a paused decision looks at the binder's queue again (seconds)
BIND_PAUSE_STEP = 0.002


class SnapshotSource(Protocol):
    def snapshot(self) -> Snapshot: ...

    def apply(self, result: SessionResult) -> list[TaskInfo] | None:
        """Assume the result; returns the tasks of the placements assumed (None: the source assumes
        nothing, every placement is bound)."""


class Binder(Protocol):
    def bind(self, placements: list[Placement]) -> None:
        """Take placements to bind; must not block (queue them)."""

    def evict(self, evictions: list[Eviction]) -> None:
        """Take evictions to carry out; must not block."""


class RecordingBinder:
    """A binder that only remembers what it was given (tests, in-process benchmarks, dry runs)."""

    def __init__(self) -> None:
        self.placements: list[Placement] = []
        self.evictions: list[Eviction] = []

    def bind(self, placements: list[Placement]) -> None:
        self.placements.extend(placements)

    def evict(self, evictions: list[Eviction]) -> None:
        self.evictions.extend(evictions)


@dataclass
class CycleStats:
    cycles: int = 0
    failed: int = 0
    last_error: str = ""
    #: cycles failed in a row (0 after a cycle that did not fail)
    failed_in_a_row: int = 0
    last_duration: float = 0.0
    bound: int = 0
    #: periods with no cycle: nothing had changed since a cycle that decided nothing
    skipped: int = 0
    #: seconds the last cycle spent explaining its pending jobs
    explain_seconds: float = 0.0
    #: seconds the last cycle's decision paused for the binder (``BindPacing``)
    paused_for_binds: float = 0.0


class BindPacing:
    """Keeps a running decision at most ``ahead`` binds in front of the binder.

    A cycle decides in a worker thread while the event loop binds what it has committed
    (``SchedulerLoop.cycle``); the two share one interpreter. On a backlog the decision commits gangs
    far faster than the API server takes their bindings, and every turn of the loop (sending a
    binding, reading its answer) waited for the GIL behind it: the binder's queue grew to thousands
    while the API server was underfed, and the placements decided ahead only waited. Paused, the
    decision leaves the interpreter to the loop until the binder has taken the queue back down to
    ``ahead``; each placement is decided as it would have been, only later, and the bindings go out
    sooner. Pausing ends at the cycle's ``deadline`` (its budget counts the pauses: a cycle they took
    to its budget leaves the jobs it did not reach to the next, as any budget does), and for the rest
    of the cycle once the queue has not gone down for ``stall`` seconds."""

    def __init__(
        self,
        queued: Callable[[], int],
        ahead: int = BINDS_AHEAD,
        deadline: float | None = None,
        stall: float = BIND_STALL,
        step: float = BIND_PAUSE_STEP,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.queued = queued
        self.ahead = ahead
        self.deadline = deadline
        self.stall = stall
        self.step = step
        self.clock = clock
        self.sleep = sleep
        #: seconds paused so far
        self.paused = 0.0
        self.gave_up = False

    def wait(self) -> None:
        """Called in the decision's thread after it hands the loop a batch of placements."""
        if self.gave_up:
            return
        waiting = self.queued()
        if waiting <= self.ahead:
            return
        began = lowest_at = self.clock()
        lowest = waiting
        try:
            while waiting > self.ahead:
                now = self.clock()
                if self.deadline is not None and now >= self.deadline:
                    return
                if waiting < lowest:
                    lowest, lowest_at = waiting, now
                elif now - lowest_at >= self.stall:
                    self.gave_up = True
                    return
                self.sleep(self.step)
                waiting = self.queued()
        finally:
            self.paused += self.clock() - began


class SchedulerLoop:
    def __init__(
        self,
        cache: SnapshotSource,
        conf: Callable[[], SchedulerConf],
        registry: Registry,
        binder: Binder,
        period: float = 1.0,
        ready: Callable[[], bool] = lambda: True,
        on_cycle: Callable[[SessionResult | None, float, BaseException | None], None] | None = None,
        between_steps: Callable[[], None] | None = None,
        cycle_budget: float | None = None,
        binds_ahead: int = BINDS_AHEAD,
    ) -> None:
        self.cache = cache
        self.conf = conf
        self.registry = registry
        self.binder = binder
        self.period = period
        self.ready = ready
        self.on_cycle = on_cycle
        #: called between the steps of a snapshot made on the event loop (the collector's freeze)
        self.between_steps = between_steps
        #: seconds from a cycle's start after which allocate takes no further job (None: no
        #: limit): a backlog of any size is placed over several cycles of bounded length, each
        #: handing its placements to the binder, instead of one cycle that holds them all
        self.cycle_budget = cycle_budget
        #: binds a running decision may leave waiting for the binder (``BindPacing``; 0: no pauses)
        self.binds_ahead = binds_ahead
        #: how long the binder may make no progress before a cycle pauses no more (``BindPacing``)
        self.bind_stall = BIND_STALL
        #: the jobs allocate has taken in the pass the budget last cut short (``Session.pass_taken``)
        self.pass_taken: frozenset[str] = frozenset()
        self.stats = CycleStats()
        #: (cache revision, conf) of the last cycle when it decided nothing, else None
        self._quiet: tuple[int, object] | None = None
        self._last_cycle_at = 0.0
        self._conf_used: object = None
        self._snapshot_revision = -1
        #: seconds a pending job's explanation is reused while its one-line reason does not change
        self.explain_reuse_seconds = REUSE_SECONDS
        #: what the last applied cycle kept for the next (``framework.carry``)
        self.carry = CarryBook()
        #: what plugins keep for the scheduler's life and decide by (``Session.standing``)
        self.standing: dict[object, Any] = {}

    def run_once(self) -> SessionResult | None:
        """One cycle, synchronously: decide, then hand over. Returns None when the cycle failed."""
        started = time.perf_counter()
        result, error = self.decide(started=started)
        self.hand_over(result, error, started)
        return result

    def decide(
        self,
        snapshot: Snapshot | None = None,
        started: float | None = None,
        dispatch: Callable[[list[Placement]], None] | None = None,
    ) -> tuple[SessionResult | None, BaseException | None]:
        """Open a session over ``snapshot`` (else one taken now), run the actions, close it. CPU
        only: safe in a worker thread, because a session reads nothing but its own snapshot.
        ``started``: the cycle's start (``time.perf_counter``), from which the cycle budget counts
        (default: now; a snapshot taken before, on the event loop, counts toward the budget)."""
        self.stats.cycles += 1
        conf = self.conf()
        self._conf_used = conf
        try:
            opened = time.perf_counter()
            if snapshot is None:
                snapshot = self.cache.snapshot()
            self._snapshot_revision = (
                snapshot.revision if snapshot.decision_revision is None else snapshot.decision_revision
            )
            deadline = self._deadline(started or opened)
            ssn = open_session(
                snapshot,
                conf.tiers,
                self.registry.plugins,
                conf.configurations,
                carry=self.carry.offer(),
                deadline=deadline,
                standing=self.standing,
                pass_taken=self.pass_taken,
            )
            ssn.dispatch = dispatch
            ssn.report.open_session_seconds = time.perf_counter() - opened
            ssn.report.node_list = ssn.node_list  # for /debug/nodes: the cycle's view of the nodes
            ssn.report.dra = ssn.snapshot.dra  # and of their devices
            try:
                timings = ssn.report.action_seconds
                for name in conf.actions:
                    action = self.registry.actions[name](
                        conf.configurations.get(name) or Arguments(f"action {name!r}")
                    )
                    t0 = time.perf_counter()
                    action.execute(ssn)
                    timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0
                self._explain(ssn)
            finally:
                result = close_session(ssn)
                ssn.release()  # the result holds what lives on
            self.stats.failed_in_a_row = 0
            return result, None
        except Exception as exc:
            # Nothing of a failed cycle is bound: its statements may have seen a plugin half-way.
            stats = self.stats
            error = f"{type(exc).__name__}: {exc}"
            again = stats.failed_in_a_row > 0 and error == stats.last_error
            stats.failed += 1
            stats.failed_in_a_row += 1
            stats.last_error = error
            if again:
                # the same state failing each cycle: the traceback once, then one line per cycle
                log.error(
                    "scheduling cycle %d failed as the %d before it did: %s",
                    stats.cycles,
                    stats.failed_in_a_row - 1,
                    error,
                )
            else:
                log.exception("scheduling cycle %d failed; the next cycle runs as usual", stats.cycles)
            return None, exc

    def _deadline(self, started: float) -> float | None:
        """When the budget of a cycle that began at ``started`` (``time.perf_counter``) runs out:
        the session's ``deadline``, and the end of its pauses for the binder."""
        return None if self.cycle_budget is None else started + self.cycle_budget

    async def cycle(self) -> SessionResult | None:
        """One cycle as the binary runs it: the snapshot made on the event loop in short steps, the
        decision in a worker thread (the loop keeps draining watches meanwhile), the hand-over back
        on the loop. Returns None when the cycle failed."""
        started = time.perf_counter()
        snapshot = await self._snapshot()
        dispatch: Callable[[list[Placement]], None] | None = None
        assume = getattr(self.cache, "assume_placements", None)
        pacing: BindPacing | None = None
        if assume is not None:
            loop = asyncio.get_running_loop()
            queued = getattr(self.binder, "queued", None)
            if queued is not None and self.binds_ahead:
                pacing = BindPacing(queued, self.binds_ahead, self._deadline(started), self.bind_stall)

            def to_loop(batch: list[Placement]) -> None:  # called in the decision's thread
                loop.call_soon_threadsafe(self._bind_early, assume, batch)
                # Give the GIL up at once: the loop, woken by the call above, binds the batch now
                # instead of after the rest of the switch interval (see GIL_SWITCH_INTERVAL in
                # scheduler/cli.py). `caldera-sim bench e2e --nodes 5000 --pods 10000 --shape
                # backlog`, eight runs each way interleaved: the last bind 3.93 -> 3.75 s on average
                # (6 of 8 sooner), the scheduler's CPU 3.56 -> 3.46 s.
                time.sleep(0)
                if pacing is not None:
                    pacing.wait()

            dispatch = to_loop
        result, error = await asyncio.to_thread(self.decide, snapshot, started, dispatch)
        self.stats.paused_for_binds = pacing.paused if pacing is not None else 0.0
        if self.stats.paused_for_binds:
            m.DECISION_PAUSED_FOR_BINDS.inc(self.stats.paused_for_binds)
        self.hand_over(result, error, started)
        return result

    def _bind_early(
        self, assume: Callable[[list[Placement]], list[TaskInfo]], placements: list[Placement]
    ) -> None:
        """Placements of statements a running session committed: assumed in the cache and given to
        the binder now (on the loop), while the session goes on in its thread. They come before the
        session's result (the loop runs callbacks in order), which then leaves them out."""
        taken = _assumed(placements, assume(placements))
        if taken:
            self.binder.bind(taken)

    async def _snapshot(self) -> Snapshot | None:
        """The cycle's snapshot, made here on the event loop in short steps when the source can
        (``ClusterCache.snapshot_async``): watch handlers, binds and lease renewals run between the
        steps instead of waiting for a whole copy. None: the decision takes it (in its thread)."""
        make = getattr(self.cache, "snapshot_async", None)
        if make is None:
            return None
        try:
            snapshot: Snapshot = await make(between=self.between_steps)
        except Exception:
            log.exception("taking cycle %d's snapshot on the event loop failed", self.stats.cycles + 1)
            return None
        return snapshot

    def _explain(self, ssn: Session) -> None:
        """Why each job left pending is pending (scheduler/explain.py); a failure here costs the
        explanations, never the cycle's placements."""
        started = time.perf_counter()
        try:
            explain_session(ssn, max_age=self.explain_reuse_seconds)
        except Exception:
            log.exception("explaining cycle %d's pending jobs failed", self.stats.cycles)
        self.stats.explain_seconds = time.perf_counter() - started

    def hand_over(self, result: SessionResult | None, error: BaseException | None, started: float) -> None:
        """Assume the placements in the cache and give them to the binder (on the event loop's thread)."""
        unreached = int(result.report.allocate_stats.get("unreached", 0)) if result is not None else 0
        if unreached:
            log.info(
                "cycle %d: the cycle budget (%.2fs) ran out with %d jobs not reached; the next cycle"
                " takes them before any job is taken again",
                self.stats.cycles,
                self.cycle_budget or 0.0,
                unreached,
            )
        # (a failed cycle's pass is given up: the next cycle begins one)
        self.pass_taken = (result.report.pass_taken if result is not None else None) or frozenset()
        # A job this cycle did not take (not reached, or left out as taken earlier in the pass it went
        # on with) is taken by a later cycle whatever changes in the cache meanwhile: no quiet spell.
        if (
            result is not None
            and not result.placements
            and not result.evictions
            and not result.report.unreached
        ):
            # The cache's revision its snapshot was taken at: later changes make the next cycle run.
            self._quiet = (self._snapshot_revision, self._conf_used)
        else:
            self._quiet = None
        if result is None:
            self.carry.drop()
        else:
            assumed = self.cache.apply(result)
            self.carry.commit(result.kept)
            if result.placements:
                if result.undispatched:
                    taken = _assumed(result.undispatched, assumed)
                    if taken:
                        self.binder.bind(taken)
                self.stats.bound += len(result.placements)
            if result.evictions:
                self.binder.evict(result.evictions)
        self.stats.last_duration = time.perf_counter() - started
        if self.on_cycle is not None:
            try:
                self.on_cycle(result, self.stats.last_duration, error)
            except Exception:
                log.exception("cycle observer failed")

    def unchanged(self, now: float) -> bool:
        """Nothing to decide: the last cycle decided nothing, and since then nothing in the cache
        changed that could change a decision (``decision_revision``: binds coming back and pods
        starting do not), the conf is the same, and less than QUIET_RECHECK seconds have passed
        (plugins that read the clock, such as sla, see time pass at least that often; a pod that
        started running becomes a possible preemption victim within that second too). Or the
        last cycle decided nothing and nothing is pending in the cache now (no pending pod, no
        Pending PodGroup): every action but shuffle starts from pending work, and shuffle's victims
        (rescheduling's) come on an interval of minutes, so a cycle at least every QUIET_RECHECK
        is soon enough for it. PodGroup statuses are then
        brought up to date by the cycle that runs at least every QUIET_RECHECK."""
        quiet = self._quiet
        if quiet is None or now - self._last_cycle_at >= QUIET_RECHECK:
            return False
        revision = getattr(self.cache, "decision_revision", None)
        if revision is None:
            revision = getattr(self.cache, "revision", None)
        conf = self.conf()
        if quiet == (revision, conf):
            return True
        # Whatever changed, with nothing pending no action has anything to do.
        pending = getattr(self.cache, "has_pending_work", None)
        return conf == quiet[1] and pending is not None and not pending()

    async def run(self, stop: asyncio.Event) -> None:
        """Cycle every period until ``stop`` is set. The CPU-bound decision runs in a worker thread so
        the event loop keeps draining watches meanwhile; the hand-over runs back on the loop. A period
        in which nothing can have changed since a cycle that decided nothing is skipped."""
        while not stop.is_set():
            started = time.monotonic()
            if self.ready() and self.unchanged(started):
                self.stats.skipped += 1
            elif self.ready():
                self._last_cycle_at = started
                await self.cycle()
            delay = max(0.0, self.period - (time.monotonic() - started))
            try:
                async with asyncio.timeout(delay):
                    await stop.wait()
            except TimeoutError:
                pass


def _assumed(placements: list[Placement], assumed: list[TaskInfo] | None) -> list[Placement]:
    """The placements the cache assumed (``assumed``: their tasks; None: all of them). The others
    are not bound: their node went away while the session decided (a node deleted mid-cycle still
    takes bindings, and its pods are then left to the pod garbage collector), or their pod was deleted
    or bound meanwhile; the next cycle places those still pending."""
    if assumed is None or len(assumed) == len(placements):
        return placements
    uids = {task.uid for task in assumed}
    taken = [p for p in placements if p.task.uid in uids]
    for p in placements:
        if p.task.uid not in uids:
            log.info(
                "not binding %s to %s: the node is gone or the pod no longer pending since the cycle's"
                " snapshot",
                p.task.key,
                p.node,
            )
    return taken
