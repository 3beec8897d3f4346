"""Faults injected into a soak at run time: watch drops and resets, 429 and 500 storms, history compaction, a
graceful scheduler restart and a leader failover by SIGKILL, spread over the loaded part of the run."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from caldera.hack.soak.checker import Checker
from caldera.hack.soak.procs import SimProcess
from caldera.hack.soak.timeline import Timeline
from caldera.hack.workload.client import Api

if TYPE_CHECKING:
    from caldera.hack.soak.supervisor import Supervisor

FAULT_KINDS = ("drop-watches", "429-storm", "compact", "restart", "500-storm", "failover", "drop-abort")


def parse_faults(text: str) -> tuple[str, ...]:
    if text == "all":
        return FAULT_KINDS
    if text in ("", "none"):
        return ()
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown:
        raise SystemExit(f"unknown fault(s) {unknown}; known: {', '.join(FAULT_KINDS)}")
    return kinds


class FaultInjector:
    def __init__(
        self,
        kinds: tuple[str, ...],
        duration: float,
        load_fraction: float,
        storm_seconds: float,
        sim: SimProcess,
        supervisor: Supervisor,
        checker: Checker,
        timeline: Timeline,
    ) -> None:
        self.kinds = kinds
        self.duration = duration
        self.load_fraction = load_fraction
        self.storm_seconds = storm_seconds
        self.sim = sim
        self.supervisor = supervisor
        self.checker = checker
        self.timeline = timeline
        self.faults: list[dict[str, Any]] = []  # what was injected, when, for the summary
        self.marks: list[tuple[float, str]] = []  # (start, kind), for the charts

    def schedule(self) -> list[tuple[float, str]]:
        """The faults evenly spread from 12% of the run to the end of the load less one storm."""
        kinds = [k for k in self.kinds if k]
        if not kinds:
            return []
        lo, hi = 0.12 * self.duration, self.load_fraction * self.duration - self.storm_seconds
        step = (hi - lo) / max(1, len(kinds))
        return [(lo + i * step, k) for i, k in enumerate(kinds)]

    async def run(self, api: Api, stop: asyncio.Event) -> None:
        """Inject each fault at its time in the schedule (until `stop`)."""
        storm = self.storm_seconds
        for at, kind in self.schedule():
            delay = at - self.timeline.now()
            if delay > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                return
            start = self.timeline.now()
            end = start + 1.0
            detail = ""
            if kind == "drop-watches":
                self.sim.command("drop_watches", abort=False)
            elif kind == "drop-abort":
                self.sim.command("drop_watches", abort=True)
            elif kind == "compact":
                self.sim.command("compact")
                self.sim.command(
                    "drop_watches", abort=False
                )  # so clients must resume from a forgotten version
            elif kind in ("429-storm", "500-storm"):
                rate = 0.3
                self.checker.add_fault(kind, start, start + storm)
                self.sim.command(
                    "faults", **{"error_429_rate" if kind == "429-storm" else "error_500_rate": rate}
                )
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), storm)
                self.sim.command("clear")
                end = self.timeline.now()
                detail = f"{int(rate * 100)}% of requests for {storm:g}s"
            elif kind in ("restart", "failover"):
                target = await self.supervisor.leader(api)
                if target is None:
                    live = self.supervisor.live()
                    target = live[0] if live else None
                # Known to the checker from its start: a graceful stop on a busy machine takes seconds, and
                # the invariants are checked meanwhile.
                window = self.checker.add_fault(kind, start, start + 5.0)
                if target is not None:
                    target.expected_exit = True
                    if kind == "restart":
                        await asyncio.to_thread(target.sched.stop)
                    else:
                        target.sched.kill()
                    detail = f"{target.sched.name} (pid {target.sched.pid}) {'SIGTERM' if kind == 'restart' else 'SIGKILL'}"
                # The lease duration from the moment the leader is gone: the standby may wait for expiry.
                end = window.end = max(window.end, self.timeline.now() + 5.0)
            if kind not in ("429-storm", "500-storm", "restart", "failover"):
                self.checker.add_fault(kind, start, end)
            self.faults.append(
                {"kind": kind, "start": round(start, 1), "end": round(end, 1), "detail": detail}
            )
            self.marks.append((start, kind))
            self.timeline.log(f"fault {kind} {detail}".rstrip())
