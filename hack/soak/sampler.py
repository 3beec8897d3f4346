"""Time series of a soak, sampled every two seconds: throughput, pending pods, latency, the replicas' memory
and CPU, the leader's cycle time; and the memory judgement they allow at the end."""

from __future__ import annotations

import asyncio
import contextlib
import statistics

import aiohttp

from caldera.hack.soak.checker import Checker
from caldera.hack.soak.metric_checks import MetricChecks
from caldera.hack.soak.procs import cpu_seconds, rss_bytes
from caldera.hack.soak.report import Summary
from caldera.hack.soak.supervisor import Proc, Supervisor
from caldera.hack.soak.timeline import Timeline
from caldera.hack.stats import percentile
from caldera.hack.workload.client import Api, ApiError


class Sampler:
    def __init__(
        self, supervisor: Supervisor, checker: Checker, metric_checks: MetricChecks, timeline: Timeline
    ) -> None:
        self.supervisor = supervisor
        self.checker = checker
        self.metric_checks = metric_checks
        self.timeline = timeline
        self.samples: dict[str, list[float]] = {}  # series name -> one value per sample
        self.sample_t: list[float] = []  # seconds since the start, per sample

    async def run(self, api: Api, stop: asyncio.Event) -> None:
        """Every two seconds until `stop`: one point of each series, then the metric checks."""
        interval = 2.0
        last_t = self.timeline.now()
        last_latency = 0
        async with aiohttp.ClientSession() as http:
            while not stop.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), interval)
                t = self.timeline.now()
                c = self.checker
                dt = max(1e-6, t - last_t)
                window = [lat for _, lat in c.bound_latency[last_latency:]]
                last_latency = len(c.bound_latency)
                rss_total = 0.0
                cpu_total = 0.0
                for p in self.supervisor.procs:
                    if p.sched.alive:
                        rss = rss_bytes(p.sched.pid)
                        cpu = cpu_seconds(p.sched.pid)
                        if rss:
                            p.samples.append((t, rss, len(self.checker.pods.objects)))
                            rss_total += rss
                        if cpu is not None:
                            p.cpu_last = cpu
                    cpu_total += p.cpu_last - p.cpu_start
                leader = await self.supervisor.safe_leader(api)
                lrss = leader.samples[-1][1] if leader is not None and leader.samples else float("nan")
                self.sample_t.append(t)
                for k, v in {
                    "throughput": c.bound_by_window / dt,
                    "pending": float(c.pending_count()),
                    "latency_p50": percentile(window, 50) * 1000,
                    "latency_p99": percentile(window, 99) * 1000,
                    "rss_leader": lrss / 2**20,
                    "rss_total": rss_total / 2**20,
                    "cpu_total": cpu_total,
                    "cycle_ms": float("nan"),  # filled in by the metrics check below
                }.items():
                    self.samples.setdefault(k, []).append(v)
                c.bound_by_window = 0
                last_t = t
                try:
                    cycle_ms = await self.metric_checks.check(api, http)
                except (TimeoutError, aiohttp.ClientError, OSError, ApiError) as exc:
                    self.timeline.log(f"metrics check skipped this round: {exc!r}")
                else:
                    if cycle_ms is not None:
                        self.samples["cycle_ms"][-1] = cycle_ms

    def cpu_cores(self) -> list[float]:
        """CPU seconds per second between samples, from the cumulative CPU of all replicas."""
        t, total = self.sample_t, self.samples.get("cpu_total", [])
        out = [float("nan")] * min(1, len(total))
        for i in range(1, len(total)):
            dt = t[i] - t[i - 1]
            out.append(max(0.0, total[i] - total[i - 1]) / dt if dt > 0 else float("nan"))
        return out

    def judge_memory(self, summary: Summary) -> None:
        """Each replica that lived long enough: its RSS late in life against its RSS once warm, allowing
        ``RSS_PER_POD`` for each pod the API held at the most since then beyond what it held when warm
        (a replica mirrors every pod, and the memory a backlog took stays with the process once it
        drains: CPython's allocator seldom hands it back). Growth beyond that, with the pods the same,
        is a leak."""
        judge_rss(self.supervisor.procs, summary, self.checker)


#: What one more pod of the API may add to a replica's RSS under the soak's load: its object in the
#: cache and its copies in the cycle, its status writer's and binder's entries, events, and the
#: high-water mark of re-lists (the soak's faults make several). Measured: about 8 KiB per pending pod
#: for plain unschedulable gangs (20,000 of them on 50 nodes, RSS 61 -> 214 MiB); in `caldera-sim soak
#: --minutes 10 --seed 21 --dra --native-gang 0.3 --mix 'default*2'` RSS grew 21-45 KiB per pod the
#: API came to hold between warm and late (four replicas), within 1.5 x warm + 64 MiB + this.
RSS_PER_POD = 32 * 1024


def judge_rss(procs: list[Proc], summary: Summary, checker: Checker) -> None:
    """``Sampler.judge_memory`` over ``procs``."""
    for p in procs:
        s = p.samples
        if len(s) < 15:
            continue
        life = s[-1][0] - s[0][0]
        if life < 50:
            continue
        start = s[0][0]
        warm = [(r, n) for t, r, n in s if 0.25 * life <= t - start <= 0.45 * life]
        late = [r for t, r, _ in s if t - start >= 0.8 * life]
        if not warm or not late:
            continue
        w, lt = statistics.median(r for r, _ in warm), statistics.median(late)
        pods_warm = statistics.median(n for _, n in warm)
        pods_most = max(n for t, _, n in s if t - start >= 0.25 * life)
        allowance = RSS_PER_POD * max(0.0, pods_most - pods_warm)
        growth = (lt - w) / 2**20
        slope = growth / max(1e-6, (0.9 - 0.35) * life / 60)
        entry = {
            "replica": p.sched.name,
            "life_s": round(life, 1),
            "warm_mib": round(w / 2**20, 1),
            "late_mib": round(lt / 2**20, 1),
            "growth_mib_per_min": round(slope, 2),
            "pods_warm": round(pods_warm),
            "pods_most": pods_most,
        }
        summary.memory.append(entry)
        if lt > 1.5 * w + 64 * 2**20 + allowance:
            checker.violate(
                "memory",
                p.sched.name,
                f"RSS grew from {w / 2**20:.0f} MiB to {lt / 2**20:.0f} MiB while the API's pods went from"
                f" {pods_warm:.0f} to at most {pods_most} (allowed {allowance / 2**20:.0f} MiB for them)",
            )
