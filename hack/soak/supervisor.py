"""Supervision of the scheduler replicas: started, kept at the asked number like a Deployment would, the
leader found from the Lease, and stopped at the end."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from caldera.hack.soak.checker import Checker
from caldera.hack.soak.hardening import FAULT_DIR_ENV
from caldera.hack.soak.options import Options
from caldera.hack.soak.procs import SchedulerProcess, cpu_seconds
from caldera.hack.soak.scrape import debug_queues
from caldera.hack.soak.timeline import Timeline
from caldera.hack.workload.client import Api

LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/caldera"


@dataclass
class Proc:
    sched: SchedulerProcess
    #: (t, RSS in bytes, pods the API held then)
    samples: list[tuple[float, int, int]] = field(default_factory=list)
    cpu_start: float = 0.0
    cpu_last: float = 0.0
    expected_exit: bool = False
    metrics: dict[str, float] = field(default_factory=dict)


class Supervisor:
    def __init__(
        self,
        opts: Options,
        workdir: Path,
        conf_path: Path,
        kubeconfig: str | Path,
        timeline: Timeline,
        fault_dir: Path | None = None,
    ) -> None:
        self.opts = opts
        #: where the node handler fault is armed per replica (hack/soak/hardening.py); None: no fault
        self.fault_dir = fault_dir
        self.workdir = workdir
        self.conf_path = conf_path
        self.kubeconfig = kubeconfig
        self.timeline = timeline
        self.procs: list[Proc] = []
        self.replica_seq = 0

    def start_replica(self) -> Proc:
        self.replica_seq += 1
        sched = SchedulerProcess.start(
            f"replica-{self.replica_seq}",
            self.kubeconfig,
            period=self.opts.period,
            conf=str(self.conf_path),
            leader_elect=self.opts.replicas > 1,
            log_path=self.workdir / f"scheduler-{self.replica_seq}.log",
            launcher="caldera.hack.soak.hardening",
            env={FAULT_DIR_ENV: str(self.fault_dir)} if self.fault_dir is not None else None,
        )
        proc = Proc(sched, cpu_start=cpu_seconds(sched.pid) or 0.0)
        self.procs.append(proc)
        self.timeline.log(f"started {sched.name} (pid {sched.pid})")
        return proc

    def live(self) -> list[Proc]:
        return [p for p in self.procs if p.sched.alive]

    async def leader(self, api: Api) -> Proc | None:
        status, raw = await api.request("GET", LEASE_PATH)
        if status != 200:
            live = self.live()
            return live[0] if live and self.opts.replicas == 1 else None
        holder = (json.loads(raw).get("spec") or {}).get("holderIdentity") or ""
        for p in self.live():
            if holder.endswith(f"_{p.sched.pid}"):
                return p
        return None

    async def safe_leader(self, api: Api) -> Proc | None:
        try:
            return await self.leader(api)
        except Exception:
            return None

    async def leader_explains(self, api: Api, pod: str) -> str:
        """The leader's why-pending for ``pod`` ("namespace/name") now: its ``/debug/pods`` page."""
        leader = await self.safe_leader(api)
        if leader is None:
            return "no leader to ask"
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{leader.sched.base}/debug/pods/{pod}", timeout=aiohttp.ClientTimeout(total=2)) as r,
        ):
            if r.status != 200:
                return f"/debug/pods answered {r.status}"
            return pod_explanation(await r.json())

    async def leader_queue_figures(self, api: Api) -> dict[str, dict[str, Any]] | None:
        """The leader's queues as its last cycle left them (``/debug/queues``), by name; None when
        there is no leader, it does not answer, or it has run no cycle yet (a replica that just took
        the lease): no figures to judge by."""
        leader = await self.safe_leader(api)
        if leader is None:
            return None
        async with aiohttp.ClientSession() as http:
            cycle, queues = await debug_queues(http, leader.sched.base)
        return queues if cycle else None  # cycle 0: none run yet

    async def supervise(self, stop: asyncio.Event, checker: Checker) -> None:
        """Like a Deployment: keep `replicas` running; an unexpected exit other than a lost lease is a violation."""
        while not stop.is_set():
            for p in self.procs:
                code = p.sched.proc.poll()
                if code is not None and not p.expected_exit:
                    p.expected_exit = True
                    if code == 1:
                        # A leader starved of CPU misses its renew deadline and exits (as it must); a standby
                        # takes over within the lease duration: a failover the soak did not inject, excused the
                        # same way (it was seen up to a poll late).
                        now = self.timeline.now()
                        checker.add_fault("failover", now - 0.5, now + 5.0)
                        self.timeline.log(f"{p.sched.name} exited 1 (lost its lease): replaced")
                    else:
                        checker.violate("scheduler-exit", p.sched.name, f"exited with code {code}")
            while len(self.live()) < self.opts.replicas and not stop.is_set():
                self.start_replica()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)

    def stop_all(self) -> None:
        for p in self.procs:
            p.expected_exit = True
            p.sched.stop()


def pod_explanation(doc: dict[str, Any]) -> str:
    """One line of a scheduler's ``/debug/pods/NAMESPACE/NAME`` document: the pod's state in its last
    cycle and why it is there (the pod's own problem or fit error, its job's reason)."""
    parts = [f"cycle {doc.get('cycle', '?')}: {doc.get('status') or 'not in the cycle'}"]
    if doc.get("node"):
        parts.append(f"on {doc['node']}")
    for field_name in ("problem", "reason"):
        if doc.get(field_name):
            parts.append(str(doc[field_name]))
    if doc.get("job_reason"):
        parts.append(f"job {doc.get('job') or '?'}: {doc['job_reason']}")
    return "; ".join(parts)
