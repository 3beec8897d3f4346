"""Faults injected into a soak at run time: watch drops and resets, 429 and 500 storms, history compaction, a
graceful scheduler restart and a leader failover by SIGKILL, the scheduler's token rotated with the old one
revoked, a watch handler that fails on a node event (hack/soak/hardening.py), and the Lease endpoint stalled
past the leader's renew deadline (hack/soak/leadership.py), spread over the loaded part of the run; and pods
churned through the whole load (``churn``, hack/soak/churn.py). After each fault the leader's node
accounting is compared with the API's (hack/soak/accounting.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

from caldera.hack.soak.accounting import check_accounting
from caldera.hack.soak.checker import Checker
from caldera.hack.soak.hardening import Credentials, arm, node_unschedulable, trigger_path
from caldera.hack.soak.leadership import judge_stall, read_log
from caldera.hack.soak.procs import LEASE_DURATION, RENEW_DEADLINE, SimProcess
from caldera.hack.soak.scrape import scrape, value
from caldera.hack.soak.timeline import Timeline
from caldera.hack.workload.client import Api

if TYPE_CHECKING:
    from caldera.hack.soak.supervisor import Supervisor

FAULT_KINDS = (
    "drop-watches",
    "429-storm",
    "compact",
    "restart",
    "500-storm",
    "failover",
    "drop-abort",
    "rotate-token",
    "watch-fault",
    "lease-stall",
    "churn",
)
#: kinds that last the whole load rather than happen at one time in the schedule
THROUGHOUT = ("churn",)
#: the watch handler fault cordons the first node whose name starts so (hack/soak/cluster.py)
FAULT_NODE_PREFIX = "cpu-ib0-"
#: how long a rotation may take to settle (each replica's next request answered 401, then retried)
ROTATION_SETTLE = 5.0


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
        #: the replicas' token (rotate-token), and where the node fault is armed (watch-fault)
        self.credentials: Credentials | None = None
        self.fault_dir: Path | None = None
        #: per replica pid, its 401 count once the last rotation settled (no storm: it stays so)
        self.auth_settled: dict[int, float] = {}
        #: where the simulator logs the replicas' writes (lease-stall), and how long past the renew
        #: deadline the Lease endpoint stays silent
        self.write_log: Path | None = None
        self.lease_stall = 1.0
        #: the node accounting checks running after faults (awaited at the end of ``run``), and what
        #: each found
        self._accounting: list[asyncio.Task[None]] = []
        self.accounting: list[dict[str, Any]] = []

    def schedule(self) -> list[tuple[float, str]]:
        """The faults evenly spread from 12% of the run to the end of the load less one storm."""
        kinds = [k for k in self.kinds if k and k not in THROUGHOUT]
        if not kinds:
            return []
        lo, hi = 0.12 * self.duration, self.load_fraction * self.duration - self.storm_seconds
        step = (hi - lo) / max(1, len(kinds))
        return [(lo + i * step, k) for i, k in enumerate(kinds)]

    async def run(self, api: Api, stop: asyncio.Event) -> None:
        """Inject each fault at its time in the schedule (until `stop`)."""
        async with aiohttp.ClientSession() as http:
            try:
                await self._run(api, stop, http)
            finally:
                await asyncio.gather(*self._accounting, return_exceptions=True)
                # each check finishes when a leader answers, not in the faults' order: reported in it
                order = {kind: i for i, (_, kind) in enumerate(self.schedule())}
                self.accounting.sort(key=lambda a: order.get(a["after"], len(order)))

    async def _run(self, api: Api, stop: asyncio.Event, http: aiohttp.ClientSession) -> None:
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
            elif kind == "rotate-token" and self.credentials is not None:
                window = self.checker.add_fault(kind, start, start + ROTATION_SETTLE + 1.0)
                await self.credentials.rotate()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), ROTATION_SETTLE)
                counts = await self._auth_failures(http)
                self.auth_settled = counts
                end = window.end = self.timeline.now()
                detail = f"old token revoked; 401s answered per replica: {sorted(counts.values())}"
            elif kind == "watch-fault" and self.fault_dir is not None:
                window = self.checker.add_fault(kind, start, start + storm + 2.0)
                detail = await self._watch_fault(api, http, stop, storm)
                end = window.end = self.timeline.now()
            elif kind == "lease-stall" and self.write_log is not None:
                seconds = RENEW_DEADLINE + self.lease_stall
                # The leader gives the lease up; a standby takes it once the endpoint answers again.
                window = self.checker.add_fault(kind, start, start + seconds + LEASE_DURATION + 2.0)
                detail = await self._lease_stall(stop, seconds)
                end = self.timeline.now()
            if kind not in (
                "429-storm",
                "500-storm",
                "restart",
                "failover",
                "rotate-token",
                "watch-fault",
                "lease-stall",
            ):
                self.checker.add_fault(kind, start, end)
            self._accounting.append(asyncio.create_task(self._check_accounting(api, http, kind, stop)))
            self.faults.append(
                {"kind": kind, "start": round(start, 1), "end": round(end, 1), "detail": detail}
            )
            self.marks.append((start, kind))
            self.timeline.log(f"fault {kind} {detail}".rstrip())

    async def _lease_stall(self, stop: asyncio.Event, seconds: float) -> str:
        """Hold the Lease endpoint silent for ``seconds``; then judge the writes the simulator saw."""
        assert self.write_log is not None
        self.sim.command("lease_stall", seconds=seconds)
        # Until the stall is over and a replica has had time to write the Lease again (and the
        # simulator to flush its log).
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds + LEASE_DURATION + 1.0)
        records = read_log(self.write_log)
        stalls = [r for r in records if "stall" in r]
        if not stalls:
            self.checker.violate("lease-stall", "simulator", "the stall was not injected (no record of it)")
            return "not injected"
        verdict = judge_stall(records, stalls[-1]["t"], RENEW_DEADLINE, stalls[-1]["t"] + seconds)
        if verdict.offending:
            first = verdict.offending[0]
            self.checker.violate(
                "lease",
                f"stall at {stalls[-1]['t']:.1f}",
                f"{len(verdict.offending)} writes arrived after the renew deadline of the last renewal "
                f"+ {RENEW_DEADLINE:g}s, before the Lease was written again (no replica could prove it "
                f"leads), the first {first['m']} {first['p']} {first['t'] - (verdict.renewed or 0):.2f}s "
                "after that renewal",
            )
        return f"Lease silent {seconds:g}s; " + verdict.describe(RENEW_DEADLINE)

    async def _check_accounting(
        self, api: Api, http: aiohttp.ClientSession, kind: str, stop: asyncio.Event
    ) -> None:
        """The leader's node accounting against the API's, once a leader answers after the fault."""
        for _ in range(40):
            leader = await self.supervisor.safe_leader(api)
            if leader is not None or stop.is_set():
                break
            await asyncio.sleep(0.5)
        if leader is None:
            self.timeline.log(f"node accounting after {kind}: no leader to compare")
            return
        result = await check_accounting(self.checker, http, leader.sched.base, kind)
        self.timeline.log(f"after {kind}: {result.describe()}")
        self.accounting.append(
            {
                "after": kind,
                "compared": result.compared,
                "equal": result.equal,
                "not_compared": result.not_compared,
            }
        )

    async def _auth_failures(self, http: aiohttp.ClientSession) -> dict[int, float]:
        counts: dict[int, float] = {}
        for p in self.supervisor.live():
            m = await scrape(http, p.sched.base)
            got = value(m, "caldera_api_auth_failures_total") if m is not None else None
            if got is not None:
                counts[p.sched.pid] = got
        return counts

    async def _watch_fault(
        self, api: Api, http: aiohttp.ClientSession, stop: asyncio.Event, seconds: float
    ) -> str:
        """Arm the node handler fault on the leader and cordon a node: the leader's watch fails to apply
        that event, and must count it, re-list and hold the node cordoned within ``seconds``."""
        assert self.fault_dir is not None
        target = await self.supervisor.leader(api)
        if target is None:
            return "no leader to inject into"
        pid = target.sched.pid
        status, raw = await api.request("GET", "/api/v1/nodes")
        names = sorted(n["metadata"]["name"] for n in json.loads(raw)["items"]) if status == 200 else []
        node = next((n for n in names if n.startswith(FAULT_NODE_PREFIX)), "")
        if not node:
            return f"no node named {FAULT_NODE_PREFIX}* to cordon (GET nodes: {status})"
        arm(self.fault_dir, pid)
        patch = "application/merge-patch+json"
        node_path = f"/api/v1/nodes/{node}"
        status, raw = await api.request(
            "PATCH", node_path, {"spec": {"unschedulable": True}}, content_type=patch
        )
        if status != 200:
            trigger_path(self.fault_dir, pid).unlink(missing_ok=True)
            return f"could not cordon {node}: {status} {raw[:120]!r}"
        seen = False
        deadline = self.timeline.now() + seconds
        try:
            while self.timeline.now() < deadline:
                if stop.is_set() or not target.sched.alive:
                    break
                if not trigger_path(self.fault_dir, pid).exists() and await node_unschedulable(
                    http, target.sched.base, node
                ):
                    seen = True
                    break
                await asyncio.sleep(0.25)
            m = await scrape(http, target.sched.base)
            errors = value(m, "caldera_watch_apply_errors_total", kind="nodes") if m is not None else None
        finally:
            trigger_path(self.fault_dir, pid).unlink(missing_ok=True)
            await api.request("PATCH", node_path, {"spec": {"unschedulable": False}}, content_type=patch)
        if not target.sched.alive or stop.is_set():
            return f"{target.sched.name}: ended before the check"
        if not seen:
            self.checker.violate(
                "watch-fault",
                node,
                f"{target.sched.name} still holds {node} schedulable {seconds:g}s after it was cordoned "
                f"and its watch failed to apply that event (apply errors counted: {errors})",
            )
        elif errors == 0:  # (None: the replica did not answer /metrics in time)
            self.checker.violate(
                "watch-fault",
                target.sched.name,
                "the failed node event was not counted in caldera_watch_apply_errors_total",
            )
        return f"{target.sched.name}: node event failed to apply ({errors} counted); {node} reconciled"

    async def check_no_auth_storm(self) -> None:
        """After the run: no replica answered 401 again once the last rotation had settled."""
        if not self.auth_settled:
            return
        async with aiohttp.ClientSession() as http:
            now = await self._auth_failures(http)
        for pid, settled in self.auth_settled.items():
            if pid in now and now[pid] > settled:
                self.checker.violate(
                    "auth",
                    f"pid {pid}",
                    f"{now[pid] - settled:g} more 401s after the token rotation had settled (a 401 storm)",
                )
